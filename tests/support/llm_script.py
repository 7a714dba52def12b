"""Script entries for the fake Messages API, shared by the tests of agents."""

from __future__ import annotations

from typing import Any

RESEARCHER = "You are the researcher"  # what the researcher's system prompt contains
# A model id the session's fake API knows and dagwright's price table does not.
UNPRICED_MODEL = "claude-unpriced-9"


def turn(
    role: str,
    messages: int,
    *blocks: dict[str, Any],
    tokens: tuple[int, int] = (100, 20),
    **entry: Any,
) -> dict[str, Any]:
    """A script entry answering agent ``role`` when the request has ``messages`` messages."""
    return {
        "match": {"system_contains": role, "messages_count": messages},
        "reply": {
            "content": list(blocks),
            "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
        },
        **entry,
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": arguments}


def write(path: str, content: str = "x") -> dict[str, Any]:
    """A workspace_write call."""
    return call("workspace_write", path=path, content=content)


PLANNER = "You are the planner"


def planned(*nodes: dict[str, Any], output: str | None = None) -> dict[str, Any]:
    """A script entry: the planner answers with ``submit_plan``."""
    plan: dict[str, Any] = {"goal": "g", "nodes": list(nodes)}
    if output:
        plan["output"] = output
    return {
        "match": {"system_contains": PLANNER},
        "reply": {"content": [{"type": "tool_use", "name": "submit_plan", "input": plan}]},
    }


def answers(role: str, says: str, when: str) -> dict[str, Any]:
    """A script entry: an agent of ``role`` whose task contains ``when`` says ``says``."""
    return {
        "match": {"system_contains": f"You are the {role}", "last_user_contains": when},
        "reply": {"content": [text(says)]},
    }


def agent_node(node_id: str, type_: str, instruction: str, *deps: str) -> dict[str, Any]:
    """A plan's agent node, as a dict."""
    return {"id": node_id, "type": type_, "instruction": instruction, "depends_on": list(deps)}
