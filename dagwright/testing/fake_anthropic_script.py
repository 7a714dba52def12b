"""The script a fake Anthropic API plays: which answer goes to which request, and its bytes.

A script is data (YAML or JSON) checked by pydantic models with ``extra="forbid"``, so a
misspelt field is an error when the script loads rather than an entry that silently never
matches. The server that plays it is :mod:`dagwright.testing.fake_anthropic`.

Matching works on :class:`RequestFacts`, a few facts read once from the request body, so
that each condition of a :class:`Match` is a one-line comparison and the same facts can
describe a request nobody scripted an answer for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dagwright.errors import ConfigurationError
from dagwright.testing.fake_anthropic_stream import StreamPlay

__all__ = [
    "FaultInjection",
    "Match",
    "Reply",
    "RequestFacts",
    "Script",
    "ScriptEntry",
    "ScriptedCitation",
    "ScriptedRedactedThinking",
    "ScriptedSearchResult",
    "ScriptedServerError",
    "ScriptedServerToolUse",
    "ScriptedText",
    "ScriptedThinking",
    "ScriptedToolUse",
    "ScriptedUsage",
    "ScriptedWebFetchResult",
    "ScriptedWebSearchResult",
]

StopReason = Literal[
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]


class _StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedCitation(_StrictModel):
    """A ``web_search_result_location`` citation of a text block (what web search cites)."""

    type: Literal["web_search_result_location"] = "web_search_result_location"
    url: str
    """The cited page."""
    title: str | None = None
    """The page's title."""
    cited_text: str = ""
    """The quoted passage."""
    encrypted_index: str = "fake-index"
    """Opaque: the API checks it when the block comes back."""


class ScriptedText(_StrictModel):
    """A ``text`` content block of a scripted reply."""

    type: Literal["text"] = "text"
    text: str
    """The text the model "says"."""
    citations: list[ScriptedCitation] | None = None
    """Sources of the text, as a reply after a web search cites them."""


ServerToolName = Literal["web_search", "web_fetch"]


class ScriptedServerToolUse(_StrictModel):
    """A ``server_tool_use`` block: the model asks the API to run a server tool (web
    search or fetch); the API's result block follows it in the same content."""

    type: Literal["server_tool_use"] = "server_tool_use"
    name: ServerToolName
    """The server tool, as the request's ``tools`` names it (the request must offer it)."""
    input: dict[str, Any] = Field(default_factory=dict)
    """Its input, e.g. ``{query: ...}`` or ``{url: ...}``."""
    id: str | None = None
    """The block's id; ``srvtoolu_<counter>`` when not given."""


class ScriptedSearchResult(_StrictModel):
    """One hit of a scripted web search (``web_search_result``)."""

    type: Literal["web_search_result"] = "web_search_result"
    url: str
    title: str
    encrypted_content: str = "fake-encrypted-content"
    """Opaque page content the model reads (and the client sends back unchanged)."""
    page_age: str | None = None


class ScriptedServerError(_StrictModel):
    """A server tool that failed: its error code, as the API reports it in the result."""

    error_code: str
    """E.g. ``max_uses_exceeded``, ``unavailable``, ``url_not_accessible``."""


class ScriptedWebSearchResult(_StrictModel):
    """A ``web_search_tool_result`` block: what the API's search found."""

    type: Literal["web_search_tool_result"] = "web_search_tool_result"
    tool_use_id: str | None = None
    """The ``server_tool_use`` it answers; default: the last one before it."""
    results: list[ScriptedSearchResult] = Field(default_factory=list)
    """The hits (ignored when ``error`` is given)."""
    error: ScriptedServerError | None = None
    """A failed search (``web_search_tool_result_error``)."""


class ScriptedWebFetchResult(_StrictModel):
    """A ``web_fetch_tool_result`` block: the page the API's fetch read."""

    type: Literal["web_fetch_tool_result"] = "web_fetch_tool_result"
    tool_use_id: str | None = None
    """The ``server_tool_use`` it answers; default: the last one before it."""
    url: str = ""
    """The page's URL (default: the ``url`` input of the call it answers)."""
    text: str = ""
    """The page's text (a plain-text document)."""
    title: str | None = None
    error: ScriptedServerError | None = None
    """A failed fetch (``web_fetch_tool_result_error``)."""


class ScriptedToolUse(_StrictModel):
    """A ``tool_use`` content block of a scripted reply: the model calls a tool."""

    type: Literal["tool_use"] = "tool_use"
    name: str
    """The tool's name, as the request's ``tools`` list names it."""
    input: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments."""
    id: str | None = None
    """The ``tool_use`` id; ``toolu_<counter>`` when not given."""


class ScriptedThinking(_StrictModel):
    """A ``thinking`` content block: the model's summarized reasoning, signed."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    """The reasoning text."""
    signature: str | None = None
    """The signature the client must send back unchanged; ``sig_<counter>`` when not given."""


class ScriptedRedactedThinking(_StrictModel):
    """A ``redacted_thinking`` content block: reasoning the API encrypted."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str = "redacted"
    """The opaque, encrypted reasoning."""


ScriptedBlock = Annotated[
    ScriptedText
    | ScriptedToolUse
    | ScriptedThinking
    | ScriptedRedactedThinking
    | ScriptedServerToolUse
    | ScriptedWebSearchResult
    | ScriptedWebFetchResult,
    Field(discriminator="type"),
]


class ScriptedUsage(_StrictModel):
    """Token counts to report; a count left out is what the fake's accounting gives
    (:mod:`dagwright.testing.fake_anthropic_tokens`)."""

    input_tokens: int | None = Field(default=None, ge=0)
    """Reported ``usage.input_tokens``; default: the uncached rest of system, tools and
    messages, their JSON // 4."""
    output_tokens: int | None = Field(default=None, ge=0)
    """Reported ``usage.output_tokens``; default: the reply's text // 4, or the request's
    ``max_tokens`` when the reply stops at ``max_tokens``."""
    cache_creation_input_tokens: int | None = Field(default=None, ge=0)
    """Reported ``usage.cache_creation_input_tokens``; default: from the prompt cache."""
    cache_read_input_tokens: int | None = Field(default=None, ge=0)
    """Reported ``usage.cache_read_input_tokens``; default: from the prompt cache."""
    web_search_requests: int | None = Field(default=None, ge=0)
    """Reported ``usage.server_tool_use.web_search_requests``; default: the reply's
    ``web_search_tool_result`` blocks that are no error."""
    web_fetch_requests: int | None = Field(default=None, ge=0)
    """Reported ``usage.server_tool_use.web_fetch_requests``; default: the reply's
    ``web_fetch_tool_result`` blocks that are no error."""


class Reply(_StrictModel):
    """A successful (HTTP 200) ``message`` answer."""

    content: list[ScriptedBlock]
    """The assistant's content blocks, in order; ``[]`` plays an empty answer."""
    stop_reason: StopReason | None = None
    """Default: ``tool_use`` when the content calls a tool, else ``end_turn``. With a
    ``tool_use`` block last, ``max_tokens`` plays a call cut off mid-way."""
    stop_sequence: str | None = None
    """Reported ``stop_sequence`` (the real API sets it with ``stop_reason: stop_sequence``)."""
    usage: ScriptedUsage = Field(default_factory=ScriptedUsage)
    """Token counts to report (estimated when left out)."""
    model: str | None = None
    """Reported ``model``; default: the request's model."""

    @model_validator(mode="after")
    def _stop_reason_fits_content(self) -> Reply:
        calls_tool = any(block.type == "tool_use" for block in self.content)
        if self.stop_reason == "tool_use" and not calls_tool:
            raise ValueError("stop_reason tool_use needs a tool_use block in content")
        if self.stop_reason == "stop_sequence" and self.stop_sequence is None:
            raise ValueError("stop_reason stop_sequence needs the stop_sequence it stopped at")
        return self


@dataclass(frozen=True)
class RequestFacts:
    """What a :class:`Match` can test, read once from a request body."""

    model: str
    system_text: str
    last_user_text: str
    tools_answered: frozenset[str]
    messages_count: int
    has_tools: bool

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> RequestFacts:
        """Read the facts from a request body; shapes the API would reject count as empty."""
        messages = _messages(body)
        last_user_at = _last_index(messages, "user")
        last_user = messages[last_user_at] if last_user_at is not None else {}
        return cls(
            model=str(body.get("model", "")),
            system_text=text_of(body.get("system", "")),
            last_user_text=text_of(last_user.get("content", "")),
            tools_answered=_tools_answered(messages, last_user_at),
            messages_count=len(messages),
            has_tools=bool(body.get("tools")),
        )

    def describe(self) -> str:
        """One line that says what a script entry would have to match to answer this."""
        return (
            f"model={self.model!r}, messages_count={self.messages_count}, "
            f"has_tools={self.has_tools}, system={_shorten(self.system_text)!r}, "
            f"last_user={_shorten(self.last_user_text)!r}, "
            f"tool_result_for={sorted(self.tools_answered)}"
        )


_CONDITIONS: dict[str, Callable[[RequestFacts, Any], bool]] = {
    "model": lambda facts, wanted: facts.model == wanted,
    "system_contains": lambda facts, wanted: wanted in facts.system_text,
    "last_user_contains": lambda facts, wanted: wanted in facts.last_user_text,
    "tool_result_for": lambda facts, wanted: wanted in facts.tools_answered,
    "messages_count": lambda facts, wanted: facts.messages_count == wanted,
    "has_tools": lambda facts, wanted: facts.has_tools == wanted,
}


class Match(_StrictModel):
    """Conditions on a request; an entry answers only if every condition given holds."""

    model: str | None = None
    """The request's ``model``, exactly."""
    system_contains: str | None = None
    """A substring of the system prompt (a string or a list of text blocks)."""
    last_user_contains: str | None = None
    """A substring of the last user message's text (text blocks and tool_result contents)."""
    tool_result_for: str | None = None
    """A tool name: the last user message answers a ``tool_use`` of this tool made in the
    assistant message before it."""
    messages_count: int | None = Field(default=None, ge=0)
    """The number of messages in the request, exactly."""
    has_tools: bool | None = None
    """Whether the request offers any ``tools``."""

    def holds(self, facts: RequestFacts) -> bool:
        """Whether every condition given holds for the request (no conditions: always)."""
        wanted = self.model_dump(exclude_none=True)
        return all(_CONDITIONS[name](facts, value) for name, value in wanted.items())


class ScriptEntry(_StrictModel):
    """One scripted answer: a reply, an HTTP error or a malformed body, for matching requests."""

    match: Match = Field(default_factory=Match)
    """Which requests this entry may answer (default: any)."""
    reply: Reply | None = None
    """A successful ``message`` answer."""
    status: int | None = Field(default=None, ge=400, le=599)
    """An HTTP error status to answer with, with the API's error body for it."""
    malformed: Literal["json", "schema"] | None = None
    """A broken 200 answer: ``json`` is not JSON, ``schema`` lacks ``content`` and more."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra response headers, e.g. ``retry-after`` (a 429 sends ``retry-after: 0`` unless
    given)."""
    delay_s: float = Field(default=0.0, ge=0)
    """Seconds to wait before answering, to provoke client timeouts."""
    times: int = 1
    """How many requests this entry may answer; ``-1`` means any number."""
    stream: StreamPlay | None = None
    """How a reply is streamed to a request that asks for a stream (slowly, stalling, or
    cut by an error event); such requests are streamed at full speed without it."""

    @model_validator(mode="after")
    def _one_kind_of_answer(self) -> ScriptEntry:
        given = [name for name in ("reply", "status", "malformed") if getattr(self, name)]
        if len(given) != 1:
            raise ValueError(
                f"an entry needs exactly one of reply, status or malformed (got {given or 'none'})"
            )
        if self.times < 1 and self.times != -1:
            raise ValueError(f"times must be at least 1, or -1 for unlimited (got {self.times})")
        return self


class FaultInjection(_StrictModel):
    """Random HTTP errors answered instead of the script, without using up any entry."""

    rate: float = Field(ge=0.0, le=1.0)
    """Probability that a request gets a fault instead of its scripted answer."""
    statuses: tuple[int, ...] = Field(default=(429, 500, 529), min_length=1)
    """The statuses to pick from, uniformly."""
    seed: int | None = None
    """Seed of the random choices, for a reproducible sequence of faults."""


class Script(_StrictModel):
    """Ordered entries, an optional default and optional random faults.

    A request gets the first entry, in order, that still has uses left and whose ``match``
    holds; failing that the ``default`` (which never runs out); failing that an HTTP 400
    that says no entry matched and describes the request (a 400, not a 500: a client
    would retry a 500, and a breaker open, for what is a gap in the script).
    """

    entries: list[ScriptEntry] = Field(default_factory=list)
    """The scripted answers, tried in order."""
    default: ScriptEntry | None = None
    """The answer when no entry matches; it cannot have ``match`` or ``times``."""
    faults: FaultInjection | None = None
    """Random faults injected before any entry is chosen."""
    models: list[str] = Field(default_factory=list)
    """Model ids to accept besides those the installed ``anthropic`` SDK knows (any other
    gets the real API's 404)."""

    @model_validator(mode="after")
    def _default_matches_everything(self) -> Script:
        if self.default is not None and self.default.model_fields_set & {"match", "times"}:
            raise ValueError(
                "the default entry answers any request any number of times: "
                "remove its match and times"
            )
        return self

    @classmethod
    def load(cls, path: str | Path) -> Script:
        """Read a script from a ``.json`` file, or from YAML for any other suffix.

        Raises:
            ConfigurationError: the file cannot be read, parsed or validated.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"cannot read script {path}: {exc.strerror}") from exc
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise ConfigurationError(f"script {path} cannot be parsed: {exc}") from exc
        try:
            return cls.model_validate(data or {})
        except ValidationError as exc:
            raise ConfigurationError(f"script {path} is invalid: {exc}") from exc


def text_of(content: object) -> str:
    """The text of message content: text blocks and tool_result contents, one per line."""
    parts: list[str] = []
    for block in content_blocks(content):
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            parts.append(text_of(block.get("content", "")))
    return "\n".join(parts)


def content_blocks(content: object) -> list[dict[str, Any]]:
    """Content as a list of blocks (the API takes a bare string as one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    return [message for message in messages if isinstance(message, dict)]


def _last_index(messages: list[dict[str, Any]], role: str, before: int | None = None) -> int | None:
    end = len(messages) if before is None else before
    return next((i for i in range(end - 1, -1, -1) if messages[i].get("role") == role), None)


def _tools_answered(messages: list[dict[str, Any]], last_user_at: int | None) -> frozenset[str]:
    """Names of the tools whose calls, in the assistant message before the last user
    message, that user message answers with a ``tool_result``."""
    if last_user_at is None:
        return frozenset()
    assistant_at = _last_index(messages, "assistant", before=last_user_at)
    if assistant_at is None:
        return frozenset()
    calls = _blocks_of_type(messages[assistant_at], "tool_use")
    names_by_id = {call.get("id"): str(call.get("name")) for call in calls}
    results = _blocks_of_type(messages[last_user_at], "tool_result")
    answered_ids = {result.get("tool_use_id") for result in results}
    return frozenset(names_by_id[id_] for id_ in answered_ids if id_ in names_by_id)


def _blocks_of_type(message: Mapping[str, Any], block_type: str) -> list[dict[str, Any]]:
    blocks = content_blocks(message.get("content", ""))
    return [block for block in blocks if block.get("type") == block_type]


def _shorten(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
