"""Agent Skills (the open SKILL.md format, agentskills.io/specification): folders of
instructions, scripts and resources an agent discovers from a short catalog and loads on
demand (progressive disclosure).

- ``manifest.py``: ``SKILL.md``'s front matter and body, checked as the specification
  says (name, description, license, compatibility, metadata, allowed-tools; nothing else).
- ``folder.py``: a skill folder read whole into memory (bounded), its content hash, and
  the path rules of its resources (no ``..``, no link out of the folder).
- ``library.py``: the skills of ``settings.skills.dirs``, read once when a process builds
  its registry: a malformed one is refused there, with one line.
- ``scripts.py``: the program that runs one of a skill's scripts in the sandbox.

Layer: beside ``llm | dlq | sandbox | memory``; imports settings and errors only.
"""
