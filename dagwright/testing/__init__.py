"""What users test their worker types, functions, tools and agents with:

- ``MemoryServices`` (:mod:`dagwright.workers.memory_services`: production code, as
  ``dagwright plan`` runs the planner with it; exported here): the services a node asks of
  dagwright (checkpoints, usage, budget, workspace, breakers, approvals, spans), kept in
  memory. ``MemoryServices(llm, tmp_path).context(inputs=...)`` is a ``NodeContext`` to
  call a worker type's function or ``run_agent`` with, in a plain test: no Redis, no
  broker, no worker; what the node did is read back from its lists. ``dagwright plan``
  plans with it too.
- ``ScriptedLLM`` (:mod:`dagwright.testing.scripted`): an in-process LLM that plays a list
  of replies, for unit tests of agent code without HTTP.
- ``FakeAnthropicServer`` (:mod:`dagwright.testing.fake_anthropic`): a strict fake of the
  Anthropic Messages API on loopback to point the real SDK at, scripted with
  :mod:`dagwright.testing.fake_anthropic_script`.

The server module and ``MemoryServices`` are imported on first use rather than here: so
that ``python -m dagwright.testing.fake_anthropic`` does not find the server already
imported (runpy warns, and the module would run twice), and so that the CLI's fake-llm
command does not load the worker machinery ``MemoryServices`` stands on.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dagwright.testing.fake_anthropic_script import Script, ScriptEntry
from dagwright.testing.scripted import ScriptedLLM

if TYPE_CHECKING:
    from dagwright.testing.fake_anthropic import FakeAnthropicServer, LoggedRequest
    from dagwright.workers.memory_services import MemoryServices

__all__ = [
    "FakeAnthropicServer",
    "LoggedRequest",
    "MemoryServices",
    "Script",
    "ScriptEntry",
    "ScriptedLLM",
]

_LAZY = {
    "FakeAnthropicServer": "dagwright.testing.fake_anthropic",
    "LoggedRequest": "dagwright.testing.fake_anthropic",
    "MemoryServices": "dagwright.workers.memory_services",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
