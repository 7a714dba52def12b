"""The agent loop's checkpoint (``AgentState``) and the edits of its conversation.

Every field added since checkpoints were first written has a default, so a node resumed
from an older checkpoint goes on where it stopped. The conversation holds only what the
API accepts back: no message with empty content, no empty text block (the API answers
400 to both), thinking blocks exactly as they came (their signature covers them).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from dagwright.llm.batches import PendingBatch
from dagwright.models import Usage

log = logging.getLogger(__name__)


class AgentState(BaseModel):
    """The checkpoint: everything needed to resume the loop where it stopped."""

    messages: list[dict[str, Any]]
    turn: int = 0
    usage: Usage = Field(default_factory=Usage)
    tool_errors_in_a_row: int = 0
    pending: list[dict[str, Any]] = Field(default_factory=list)
    """tool_use blocks of the last response still to answer."""
    results: list[dict[str, Any]] = Field(default_factory=list)
    """tool_result blocks already answered, in the order of ``pending``."""
    done: bool = False
    output: Any = None
    last_call_tokens: int = 0
    """Input + output tokens of the last call: the next one reads all of them again."""
    max_tokens: int | None = None
    """``max_tokens`` of the next call, once raised after a cut answer (None: the type's)."""
    cut_retried: bool = False
    """Whether the turn being made is the one retry of a turn cut at ``max_tokens``."""
    continuations: int = 0
    """How many times a text answer cut at ``max_tokens`` was continued."""
    cut_text: str = ""
    """The text of cut answers continued since the last tool call: the final answer
    starts with it."""
    cut_output_tokens: int = 0
    """Output tokens of the answers cut at ``max_tokens`` (shown when the node fails)."""
    model: str | None = None
    """The model of the next call, once a refusal switched to the fallback (None: the
    type's)."""
    nudged: bool = False
    """Whether an empty answer was already answered with a nudge (only one is given)."""
    batch: PendingBatch | None = None
    """The call waiting in a Message Batch (``llm/batches.py``): a resumed node polls it
    instead of sending the call again (None: no call is waiting)."""
    summaries: int = 0
    """How many times older turns were replaced by a summary (``agent_context.py``)."""
    data_fence: str = ""
    """The token of the tags of the node's untrusted data (``workers/untrusted.py``), so
    that tool results after a resume come in the tags the first message announced ("":
    a checkpoint from before fences)."""
    skills: dict[str, str] = Field(default_factory=dict)
    """The content hash of each skill the node was given, by name, as its first call saw
    them: a resumed node whose skill changed since is refused (``agent_skills.py``)."""
    run_system: str | None = None
    """The system block the node's calls send after its type's prompt (today's date, the
    run's goal and context), as the first call sent it: a resumed node sends the same
    prompt (None: a checkpoint from before it, whose first message holds the goal)."""


def resume_state(checkpoint: Any) -> AgentState | None:
    if checkpoint is None:
        return None
    try:
        return AgentState.model_validate(checkpoint)
    except ValidationError:
        log.warning("the checkpoint is not an agent state; starting the conversation over")
        return None


def sendable(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``content`` without the blocks the API refuses in a request (empty text)."""
    return [block for block in content if not is_empty_text(block)]


def is_empty_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


def add_assistant_turn(state: AgentState, content: list[dict[str, Any]]) -> None:
    """Append the assistant's ``content`` (never empty); after a paused turn, the
    continuation joins the paused message, as one assistant turn."""
    assert content, "an assistant turn with no content would be refused by the API"
    last = state.messages[-1] if state.messages else {}
    if last.get("role") == "assistant" and isinstance(last.get("content"), list):
        last["content"] = [*last["content"], *content]
    else:
        state.messages.append({"role": "assistant", "content": list(content)})


def add_user_text(state: AgentState, text: str) -> None:
    """Tell the model ``text``: as a block of the last user message if the conversation
    ends with one (tool results; the API would merge two user turns anyway), else as a
    new user message."""
    last = state.messages[-1] if state.messages else {}
    if last.get("role") != "user":
        state.messages.append({"role": "user", "content": text})
    elif isinstance(last.get("content"), list):
        last["content"] = [*last["content"], {"type": "text", "text": text}]
    else:
        last["content"] = f"{last.get('content', '')}\n\n{text}".strip()
