"""What tests declare: functions, and an agent type. Every test process's settings name
this module (``imports``, as ``--import tests.support.functions`` does for worker
subprocesses), so each registry built from them has these."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from functools import cache
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded

import dagwright
from dagwright import AgentSpec, NodeContext, PermanentError, RetryableError
from dagwright.connection import connect
from dagwright.keys import Keys
from dagwright.telemetry.spans import TOOL_CALL
from dagwright.workers.tools.policy import PolicyAction, PolicyRule, ToolPolicy

GATEKEEPER = "You are the gatekeeper"
gatekeeper = AgentSpec(
    name="gatekeeper",
    description="Writes to the workspace, each write approved by a person.",
    system_prompt=GATEKEEPER,
    tools=("workspace_write",),
    policy=ToolPolicy(
        rules=[PolicyRule(tool="workspace_write", action=PolicyAction.REQUIRE_APPROVAL)]
    ),
)


@cache
def _redis(url: str) -> redis.Redis:
    return connect(url)  # a cluster URL too (tests/test_cluster.py)


def executions_key(run_id: str) -> str:
    return f"test:executions:{{{run_id}}}"


@dagwright.function
def count(ctx: NodeContext, seconds: float = 0.0) -> str:
    """Record one execution of this node (per run), optionally sleeping first."""
    if seconds:
        time.sleep(seconds)  # a node that takes time: what the callers test
    _redis(ctx.settings.redis.url or "").hincrby(executions_key(ctx.run_id), ctx.node_id, 1)
    return ctx.node_id


@dagwright.function
def flaky(ctx: NodeContext, fail_times: int = 1, permanent: bool = False) -> int:
    """Fail the first ``fail_times`` attempts, then return the attempt number."""
    if ctx.attempt <= fail_times:
        error = PermanentError if permanent else RetryableError
        raise error(f"attempt {ctx.attempt} fails on purpose")
    return ctx.attempt


@dagwright.function
def checkpointed(ctx: NodeContext) -> int:
    """Save a checkpoint, then return the fence it was saved under."""
    ctx.checkpoint({"saved": True})
    return ctx.fence


@dagwright.function
def unserializable() -> object:
    """Return something that is not JSON."""
    return object()


@dagwright.function
def echo_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """Return the inputs as received."""
    return inputs


def fixed_key(run_id: str) -> str:
    return f"test:fixed:{{{run_id}}}"


@dagwright.function
def broken_until_fixed(ctx: NodeContext) -> str:
    """Fail for good until the test sets :func:`fixed_key` (the cause being fixed)."""
    client = _redis(ctx.settings.redis.url or "")
    client.hincrby(executions_key(ctx.run_id), ctx.node_id, 1)
    if not client.exists(fixed_key(ctx.run_id)):
        raise PermanentError(f"the input of {ctx.node_id} is wrong (on purpose)")
    return "fixed"


def release_key(run_id: str) -> str:
    return f"test:release:{{{run_id}}}"


@dagwright.function
def held_until_released(ctx: NodeContext, seconds: float = 30.0) -> str:
    """Run until the test sets :func:`release_key` (at most ``seconds``): a dependency
    that is provably still running while the test looks at what started meanwhile. It
    stops when its run is cancelled, as a long function should (``ctx.sleep``): else it
    held a thread of the session's worker for 30 s after its test ended."""
    client = _redis(ctx.settings.redis.url or "")
    deadline = time.monotonic() + seconds
    while not client.exists(release_key(ctx.run_id)):
        if time.monotonic() > deadline:
            raise PermanentError(f"{ctx.node_id} was not released within {seconds}s")
        if ctx.sleep(0.02):  # a poll of the test's gate, cut short by a cancel
            return "stopped"
    return "released"


@dagwright.function
def kill_my_process(ctx: NodeContext) -> None:
    """A poison message: SIGKILL the process running it, every time."""
    _redis(ctx.settings.redis.url or "").hincrby(executions_key(ctx.run_id), ctx.node_id, 1)
    os.kill(os.getpid(), signal.SIGKILL)


def overlap_key(group: str) -> str:
    return f"test:overlap:{{{group}}}"


# Counts the function's executions in flight in a group, keeping the most seen at once.
_ENTER = """
local now = redis.call('HINCRBY', KEYS[1], 'now', 1)
if now > tonumber(redis.call('HGET', KEYS[1], 'max') or 0) then
  redis.call('HSET', KEYS[1], 'max', now)
end
return now
"""


@dagwright.function
def overlap(ctx: NodeContext, seconds: float = 0.2, group: str = "") -> str:
    """Run for ``seconds``, counting how many of ``group`` (default: the run) overlap."""
    client = _redis(ctx.settings.redis.url or "")
    key = overlap_key(group or ctx.run_id)
    client.eval(_ENTER, 1, key)
    try:
        time.sleep(seconds)  # the node's run time, over which overlaps are counted
    finally:
        client.hincrby(key, "now", -1)
    return ctx.node_id


@dagwright.function
def stubborn(ctx: NodeContext, seconds: float = 3.0) -> str:
    """Sleep without looking at ``ctx.stop`` (as careless code does), then record one
    execution: a node that cannot be stopped early."""
    time.sleep(seconds)  # deliberately blind to ctx.stop
    _redis(ctx.settings.redis.url or "").hincrby(executions_key(ctx.run_id), ctx.node_id, 1)
    return "late"


@dagwright.function
def outlasts_its_soft_limit(ctx: NodeContext, seconds: float = 30.0) -> str:
    """Sleep ``seconds``, swallowing Celery's soft time limit (as code that catches every
    exception does): only the pool's hard time limit ends it early."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            time.sleep(left)
        except SoftTimeLimitExceeded:
            continue
    _redis(ctx.settings.redis.url or "").hincrby(executions_key(ctx.run_id), ctx.node_id, 1)
    return "outlasted"


@dagwright.function
def record_tool_span(ctx: NodeContext, tool: str = "lookup", seconds: float = 0.05) -> str:
    """Record one tool-call span around a sleep, through the path tools use (ctx.span)."""
    with ctx.span(TOOL_CALL, tool=tool):
        time.sleep(seconds)  # a tool call that takes time, for the span to time
    return tool


# -- secrets and tool policies (tests/test_secret_redaction.py, test_policy_refusals.py) --

LEAKY = "You are the leaky agent"
LEAKED_REDIS_PASSWORD = "hunter2-cache-pw"


@dagwright.tool
def fetch_report(ctx: NodeContext, report: str) -> str:
    """Fetch a report by name. In tests it fails as careless code does: its message
    quotes the deployment's API key and a Redis URL with its password.

    Args:
        report: The report's name.
    """
    key = ctx.settings.llm.api_key
    secret = key.get_secret_value() if key is not None else ""
    raise RuntimeError(
        f"the gateway refused key {secret} while caching {report!r} in "
        f"redis://:{LEAKED_REDIS_PASSWORD}@cache:6379/0"
    )


leaky = AgentSpec(
    name="leaky",
    description="Fetches reports with a tool whose errors quote credentials.",
    system_prompt=LEAKY,
    tools=("fetch_report",),
    policy=ToolPolicy.allowing("fetch_report"),
    max_tool_errors=2,
)

OPERATOR = "You are the operator"


def commands_key(run_id: str) -> str:
    return f"test:commands:{{{run_id}}}"


@dagwright.tool
def run_command(ctx: NodeContext, command: str) -> str:
    """Run a shell command. In tests it only records the command it was given.

    Args:
        command: The command line.
    """
    _redis(ctx.settings.redis.url or "").rpush(commands_key(ctx.run_id), command)
    return f"ran {command}"


operator = AgentSpec(
    name="operator",
    description="Runs commands a person approves; never deletions.",
    system_prompt=OPERATOR,
    tools=("run_command",),
    policy=ToolPolicy(
        rules=[
            PolicyRule(
                tool="run_command",
                action=PolicyAction.DENY,
                when={"command": "rm *"},
                reason="no deletions",
            ),
            PolicyRule(tool="run_command", action=PolicyAction.REQUIRE_APPROVAL),
        ]
    ),
)


@dagwright.function
def log_a_library_failure(ctx: NodeContext) -> str:
    """Logs, as a library would, a traceback whose message quotes this process's API key
    and a password in a URL: what a worker's log must never show."""
    key = ctx.settings.llm.api_key
    secret = key.get_secret_value() if key is not None else ""
    try:
        raise ConnectionError(f"auth failed with {secret} at redis://app:hunter2hunter2@db:6379")
    except ConnectionError:
        logging.getLogger("somelibrary.pool").exception("connection pool failed")
    return "logged"


@dagwright.function
def run_inputs_of(run_inputs: dict[str, Any], name: str | None = None) -> Any:
    """The run's inputs as a function node reads them (``run_inputs``), or the one ``name``d."""
    return run_inputs if name is None else run_inputs.get(name)


WEBHOOK_SECRET_VARIABLE = "DAGWRIGHT_WEBHOOK_SECRET_PAGER"


@dagwright.function
def quote_the_webhook_secret() -> str:
    """Fails as careless code does, quoting the key that signs a webhook (it is in this
    worker's environment: the worker sends webhooks). Never retried: it fails for good."""
    raise PermanentError(f"pager refused signature key {os.environ[WEBHOOK_SECRET_VARIABLE]}")


@dagwright.function
def write_file(ctx: NodeContext, path: str, chars: int) -> int:
    """Write ``chars`` characters of numbered lines to ``path`` in the run's workspace."""
    lines = (f"line {n:05d}: the quick brown fox jumps over the lazy dog" for n in range(10**5))
    text = "\n".join(lines)[:chars]
    return ctx.workspace().write(path, text)


REREADER = "You are the rereader"
rereader = AgentSpec(
    name="rereader",
    description="Reads one workspace file again every turn (a long agent).",
    system_prompt=REREADER,
    tools=("workspace_read",),
    policy=ToolPolicy.allowing("workspace_read"),
    max_turns=70,
)


# -- evals (tests/test_evals.py): a scorer function, registered as function nodes are --


@dagwright.function
def words_at_most(
    output: Any, limit: int = 3, case: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Grade a text by its length: passes at ``limit`` words or fewer."""
    words = len(str(output).split())
    return {"score": 1.0 if words <= limit else 0.0, "reason": f"{words} words of {limit}"}


ORDER_KEY = "test:order"


@dagwright.function
def record_order(ctx: NodeContext, seconds: float = 0.0) -> str:
    """Append ``<run>/<node>`` to :data:`ORDER_KEY` (after ``seconds``): the order in
    which nodes ran, across runs, exactly."""
    if seconds:
        time.sleep(seconds)  # a node that takes time: what the callers test
    _redis(ctx.settings.redis.url or "").rpush(ORDER_KEY, f"{ctx.run_id}/{ctx.node_id}")
    return ctx.node_id


RATE_STARTED_RATE = "2/s"


def rate_starts_key(group: str) -> str:
    return f"test:rate-starts:{{{group}}}"


@dagwright.function(rate_limit=RATE_STARTED_RATE)
def rate_started(ctx: NodeContext, group: str = "") -> float:
    """Record when this node took its start of its rate limit (the server's ms, as the
    rate's window holds it): what a test checks the rate against, free of the time
    between the take and this body running."""
    client = _redis(ctx.settings.redis.url or "")
    window = Keys(ctx.settings.redis.key_prefix).rate_window("function:rate_started")
    taken = client.zscore(window, f"{ctx.run_id}/{ctx.node_id}@{ctx.fence}")
    if taken is None:
        raise PermanentError("no start of the rate limit recorded for this node")
    client.rpush(rate_starts_key(group or ctx.run_id), taken)
    return taken


@dagwright.function
def companies(count: int, prefix: str = "co") -> dict[str, Any]:
    """``{"companies": [prefix0, prefix1, ...]}``: a list for a mapped node to spread."""
    return {"companies": [f"{prefix}{index}" for index in range(count)]}


@dagwright.function
def fails_on_until_fixed(ctx: NodeContext, item: str, bad: str) -> str:
    """``item`` researched; fails for good on ``bad`` until the test sets
    :func:`fixed_key` (a map child whose item needs a fix, then a replay)."""
    client = _redis(ctx.settings.redis.url or "")
    client.hincrby(executions_key(ctx.run_id), ctx.node_id, 1)
    if item == bad and not client.exists(fixed_key(ctx.run_id)):
        raise PermanentError(f"cannot research {item} (on purpose)")
    return f"researched {item}"


ARCHIVIST = "You are the archivist"
archivist = AgentSpec(
    name="archivist",
    description="Keeps notes in its memory; never deletes them.",
    system_prompt=ARCHIVIST,
    tools=("memory",),
    policy=ToolPolicy(
        rules=[
            PolicyRule(
                tool="memory",
                action=PolicyAction.DENY,
                when={"command": "delete"},
                reason="the archive keeps everything",
            ),
            PolicyRule(tool="memory", action=PolicyAction.ALLOW),
        ]
    ),
)


chatter_log = logging.getLogger("tests.chatter")


@dagwright.function
def chatter(
    ctx: NodeContext, lines: int = 1, secret: str = "", fail_times: int = 0, held: bool = False
) -> int:
    """Print ``lines`` lines to stdout, one to stderr, log a warning (with ``secret`` in
    it, if given); fail the first ``fail_times`` attempts (retryable). ``held``: after its
    first line, wait until the test sets :func:`release_key` (a node to follow while it
    provably runs)."""
    print(f"hello from {ctx.node_id} attempt {ctx.attempt}")
    if held:
        held_until_released(ctx, 60.0)
    for i in range(1, lines):
        print(f"line {i} of {ctx.node_id}")
    print(f"to stderr from {ctx.node_id}", file=sys.stderr)
    chatter_log.info("working on %s", ctx.node_id)
    chatter_log.warning("logged by %s%s", ctx.node_id, f" with api_key={secret}" if secret else "")
    if ctx.attempt <= fail_times:
        raise RetryableError(f"attempt {ctx.attempt} fails on purpose")
    return ctx.attempt
