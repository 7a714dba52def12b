"""Test doubles for code built on dagwright: a fake Anthropic Messages API to point the real
SDK at (:mod:`dagwright.testing.fake_anthropic`), scripted with
:mod:`dagwright.testing.fake_anthropic_script`; and ``ScriptedLLM``, an in-process LLM for
unit tests of agent code without HTTP (:mod:`dagwright.testing.scripted`).

The server module is imported on first use rather than here, so that
``python -m dagwright.testing.fake_anthropic`` does not find it already imported (runpy
warns, and the module would run twice).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dagwright.testing.fake_anthropic_script import Script, ScriptEntry
from dagwright.testing.scripted import ScriptedLLM

if TYPE_CHECKING:
    from dagwright.testing.fake_anthropic import FakeAnthropicServer, LoggedRequest

__all__ = ["FakeAnthropicServer", "LoggedRequest", "Script", "ScriptEntry", "ScriptedLLM"]

_FROM_SERVER_MODULE = frozenset({"FakeAnthropicServer", "LoggedRequest"})


def __getattr__(name: str) -> Any:
    if name in _FROM_SERVER_MODULE:
        return getattr(importlib.import_module("dagwright.testing.fake_anthropic"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
