"""Running model-written code through the sandbox, behind its circuit breaker: what the
``python`` worker type and the ``run_python`` tool share."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from dagwright.errors import NodeLostError, SandboxFailedError
from dagwright.sandbox import ExecutionResult, Limits, Sandbox
from dagwright.sandbox.choice import choose_sandbox
from dagwright.telemetry.counters import sandbox_execution
from dagwright.telemetry.spans import SANDBOX_EXEC, AttributeValue
from dagwright.workers.context import NodeContext


def run_code(
    ctx: NodeContext, code: str, *, input_json: str, wall_time_s: float | None = None
) -> ExecutionResult:
    """Run ``code`` in this host's sandbox (SandboxUnavailableError if there is none).

    Only the backend breaking counts against the ``sandbox:<backend>`` breaker; code that
    fails, loops or bombs is the code's business, reported in the result. The program is
    killed as soon as the node must stop (``ctx.stop``: cancel, timeout, lost lease):
    then NodeLostError, since nothing of this execution is recorded any more.
    """
    sandbox_settings = ctx.settings.sandbox
    sandbox = choose_sandbox(sandbox_settings)
    limits = Limits.from_settings(sandbox_settings)
    if wall_time_s is not None:
        limits = limits_with_wall_time(limits, wall_time_s)
    result = ctx.guard(
        f"sandbox:{sandbox.name}",
        lambda: run_observed(ctx, sandbox, code, input_json, limits),
        is_failure=lambda exc: isinstance(exc, SandboxFailedError),
    )
    if result.cancelled:
        why = "ran out of time" if ctx.timed_out else "was cancelled or lost its lease"
        raise NodeLostError(f"the code was killed after {result.duration_s:.1f}s: its node {why}")
    return result


def run_observed(
    ctx: NodeContext, sandbox: Sandbox, code: str, input_json: str, limits: Limits
) -> ExecutionResult:
    """``sandbox.run``, recorded as a span of the node (what happened, not the output) and
    counted in the metrics. Inside the breaker's guard: the failure that opens the breaker
    reaches the guard as BreakerOpenError, and must still count as the backend's error."""
    with ctx.span(SANDBOX_EXEC, backend=sandbox.name) as span:
        try:
            result = sandbox.run(code, input_json=input_json, limits=limits, cancel=ctx.stop)
        except SandboxFailedError:
            ctx.count(sandbox_execution(sandbox.name, "error"))
            raise
        ctx.count(sandbox_execution(sandbox.name, result.outcome))
        span.attributes.update(execution_attributes(result))
        span.status = "ok" if result.ok else "error"
    return result


def execution_attributes(result: ExecutionResult) -> dict[str, AttributeValue | None]:
    return {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "oom": result.oom,
        "truncated": result.truncated,
        "cancelled": result.cancelled,
        "duration_s": round(result.duration_s, 3),
    }


def limits_with_wall_time(limits: Limits, wall_time_s: float) -> Limits:
    return replace(limits, wall_time_s=wall_time_s, cpu_time_s=min(limits.cpu_time_s, wall_time_s))


def output_of(stdout: str) -> Any:
    """A program's output: the JSON it printed, else its stdout as text."""
    text = stdout.strip()
    try:
        return json.loads(text)
    except ValueError:
        return text
