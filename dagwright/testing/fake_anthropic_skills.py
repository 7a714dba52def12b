"""The fake Anthropic API playing scripted calls of dagwright's skill tools
(``load_skill``, ``read_skill_file``, ``run_skill_script``).

To the API they are ordinary client tools (name, description, input schema): the fake
plays a scripted call of one as it plays any ``tool_use``. It checks what a model could
not do: call a skill tool the request does not offer (a node whose type has no skill,
or whose plan narrowed them away), or give it an input its schema refuses (a missing
``skill``, a number for ``path``): such a script is broken, answered 400 so the test
fails where it lies, not where dagwright answers the impossible call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SKILL_TOOL_NAMES = frozenset({"load_skill", "read_skill_file", "run_skill_script"})


def misplayed_skill_call(
    calls: Iterable[tuple[str, Mapping[str, Any]]], body: Mapping[str, Any]
) -> str | None:
    """Why one of the scripted ``calls`` (name, input) of a skill tool is one the model
    could not make with request ``body``; None if each could."""
    offered = {
        tool.get("name"): tool
        for tool in body.get("tools") or []
        if isinstance(tool, Mapping) and "input_schema" in tool
    }
    for name, arguments in calls:
        if name not in SKILL_TOOL_NAMES:
            continue
        from jsonschema import Draft202012Validator  # only a script playing a skill call

        if name not in offered:
            return f"the script plays a {name} call, but the request does not offer {name}"
        errors = Draft202012Validator(offered[name]["input_schema"]).iter_errors(arguments)
        problem = next(iter(sorted(errors, key=lambda e: list(e.path))), None)
        if problem is not None:
            return f"the script plays a {name} call its input schema refuses: {problem.message}"
    return None
