"""Tools an agent may call: typed arguments, a timeout, truncated output.

A tool is a function whose keyword parameters are its arguments (checked by a pydantic
model built from the signature, whose JSON schema is what the model sees); a ``ctx``
parameter receives the NodeContext. Its whole docstring is the tool's description, and
each ``Args:`` entry (or ``Annotated[..., Field(description=...)]``) the description of
its argument (``dagwright.workers.docstrings``). It returns a string or anything JSON, or raises
ToolError (any other exception counts as a failed call too). What it returns or raises
leaves it redacted (``dagwright.redaction``): the model, the checkpoint and the audit
stream see no secret of the settings, whatever the tool quoted.

Each tool runs behind its circuit breaker (``tool:<name>``). A ToolError is the tool
refusing (a bad path, a domain not allowed): the model's business, so it does not count;
a timeout or an unexpected exception is the tool failing, and does.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from dagwright.errors import (
    BreakerOpenError,
    ConfigurationError,
    NodeError,
    NodeLostError,
    ToolError,
    ToolTimeoutError,
)
from dagwright.redaction import known_secrets, redact
from dagwright.settings import Settings
from dagwright.workers.context import NodeContext
from dagwright.workers.docstrings import argument_descriptions, tool_description
from dagwright.workers.signatures import (
    accepts,
    describe_validation_error,
    params_model,
    qualified_name,
    run_to_completion,
    validated_kwargs,
)

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_OUTPUT_CHARS = 20_000


@dataclass(frozen=True)
class ToolOutcome:
    """What a call produced, as the text given back to the model."""

    text: str
    is_error: bool = False
    refused_by_policy: bool = False
    """Refused before it ran: by the policy, or by the person asked to approve it."""
    refused_by_tool: bool = False
    """The tool refused it (a ToolError: a path outside the workspace, a domain not
    allowed; arguments not matching its schema), as opposed to failing (an exception,
    a timeout)."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    func: Callable[..., Any]
    args_model: type[BaseModel]
    wants_ctx: bool
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    carries_outside_content: bool = False
    """Whether what it returns comes from outside the agent (a web page, a file, another
    node's output, an MCP server's answer): its results then reach the model as delimited
    untrusted data (``workers/untrusted.py``), like the agent's inputs."""
    offered_when: Callable[[Settings], bool] | None = None
    """Whether the deployment's settings let the tool do anything (None: always): a
    tool that would refuse every call (``http_get`` with no allowed domain) is not
    offered to the model, nor listed in the planner's catalog."""
    settings_note: Callable[[Settings], str] | None = None
    """A sentence added to the description where it is offered, from the deployment
    (``run_python``: what the sandbox has installed)."""
    api_definition: dict[str, Any] | None = None
    """The Messages API ``tools`` entry of a tool the API defines, which it describes to
    the model itself (``{"type": "memory_20250818", "name": "memory"}``): sent as it is,
    with no description or input schema of ours (the API refuses them there)."""

    def offered(self, settings: Settings) -> bool:
        return self.offered_when is None or self.offered_when(settings)

    def schema(self) -> dict[str, Any]:
        """The Messages API tool definition."""
        if self.api_definition is not None:
            return dict(self.api_definition)
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return {"name": self.name, "description": self.description, "input_schema": schema}

    def call(self, ctx: NodeContext, args: dict[str, Any]) -> ToolOutcome:
        """Run the tool under its timeout and breaker; its outcome (error included)
        redacted and cut at ``max_output_chars``. Raises only BreakerOpenError (the node
        then waits for the tool to come back, without spending an attempt) and
        NodeLostError (the node must stop: cancelled, timed out, taken over)."""
        outcome = self._outcome(ctx, args)
        # One exit for every kind of tool (built-in, function, MCP) and every outcome,
        # error or not: an error's text (an MCP server's isError content, an exception's
        # message) may be as big as any output, and is cut at the same limit.
        text = redacted_output(outcome.text, self.max_output_chars, known_secrets(ctx.settings))
        return dataclasses.replace(outcome, text=text)

    def _outcome(self, ctx: NodeContext, args: dict[str, Any]) -> ToolOutcome:
        """What the call gave, as text, neither redacted nor cut (``call`` does both)."""
        try:
            kwargs = validated_kwargs(self.args_model, args)
        except ValidationError as exc:
            refusal = f"invalid arguments: {describe_validation_error(exc, 'input')}"
            return ToolOutcome(refusal, is_error=True, refused_by_tool=True)
        if self.wants_ctx:
            kwargs["ctx"] = ctx
        try:
            value = self._guarded_call(ctx, kwargs)
        except (BreakerOpenError, NodeLostError):  # the node waits, or must stop
            raise
        except ToolError as exc:
            refused = not isinstance(exc, ToolTimeoutError)  # a timeout is the tool failing
            return ToolOutcome(str(exc), is_error=True, refused_by_tool=refused)
        except Exception as exc:  # a tool's own message may quote anything: keys, URLs
            return ToolOutcome(f"{type(exc).__name__}: {exc}", is_error=True)
        return ToolOutcome(as_text(value))

    def _guarded_call(self, ctx: NodeContext, kwargs: dict[str, Any]) -> Any:
        return ctx.guard(
            f"tool:{self.name}",
            lambda: call_with_timeout(
                lambda: run_to_completion(self.func(**kwargs)), self.timeout_s
            ),
            is_failure=is_tool_failure,
        )


def call_with_timeout(call: Callable[[], Any], timeout_s: float) -> Any:
    """Run ``call`` in a daemon thread; ToolError if it takes longer than ``timeout_s``.

    The thread cannot be killed: a tool that ignores its own timeouts keeps running in
    the background, but the agent moves on (tools doing I/O set their own timeouts).
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="dagwright-tool", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise ToolTimeoutError(f"the tool did not finish within {timeout_s:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def is_tool_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says the tool itself is failing (see the module's docstring)."""
    if isinstance(exc, ToolTimeoutError):
        return True
    return not isinstance(exc, (ToolError, NodeError))


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


# Longer than any secret: one that straddles the cut is masked whole, not left half there.
REDACTION_MARGIN_CHARS = 1_000


def redacted_output(text: str, limit: int, secrets: tuple[str, ...]) -> str:
    """``text`` with its secrets masked, cut at ``limit`` characters. Masked before the
    cut (a secret cut in half would no longer be recognised), and only what is kept is
    scanned, with a margin: an output may be megabytes."""
    if len(text) <= limit:
        return redact(text, secrets)
    kept = redact(text[: limit + REDACTION_MARGIN_CHARS], secrets)[:limit]
    return kept + f"\n[... truncated {len(text) - limit} characters]"


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated {len(text) - limit} characters]"


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        carries_outside_content: bool = False,
        offered_when: Callable[[Settings], bool] | None = None,
        settings_note: Callable[[Settings], str] | None = None,
        api_definition: dict[str, Any] | None = None,
    ) -> Tool:
        name = name or func.__name__
        if name in self._tools and self._tools[name].func is not func:
            raise ConfigurationError(
                f"two tools are named {name!r} ({qualified_name(self._tools[name].func)} and "
                f"{qualified_name(func)}): rename one with @dagwright.tool(name=...)"
            )
        tool = Tool(
            name=name,
            description=tool_description(func) or name,
            func=func,
            args_model=params_model(
                func, f"{name}_args", reserved={"ctx"}, descriptions=argument_descriptions(func)
            ),
            wants_ctx=accepts(func, "ctx"),
            timeout_s=timeout_s,
            max_output_chars=max_output_chars,
            carries_outside_content=carries_outside_content,
            offered_when=offered_when,
            settings_note=settings_note,
            api_definition=api_definition,
        )
        self._tools[name] = tool
        return tool

    def extended(self, tools: list[Tool]) -> ToolRegistry:
        """A new registry: these tools and ``tools`` (the MCP tools of an agent type)."""
        extended = ToolRegistry()
        extended._tools = {**self._tools, **{tool.name: tool for tool in tools}}
        return extended

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)
