"""Agent memory: the Messages API's memory tool (``memory_20250818``), stored in Redis.

- ``paths.py``: the path rules (only under ``/memories``, no ``..``, normalised).
- ``commands.py``: the six commands (view, create, str_replace, insert, delete, rename) as
  pure functions over a namespace's files, with the tool result texts the API documents.
- ``store.py``: a namespace in Redis (its files, its limits, its retention), and the
  fenced, exactly-once apply of a write (``lua/apply.lua``).
- ``namespaces.py``: which namespace a node's calls use (named, per schedule, per run).
"""
