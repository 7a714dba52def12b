"""The ``python`` worker type: a node's ``code`` run in the sandbox.

The program reads its dependencies' outputs as one JSON object on stdin, keyed by node
id (``json.load(sys.stdin)``), and its output is the JSON it prints, or its stdout as
text. A non-zero exit or the memory limit fails the node for good (CodeExecutionError,
with the end of its stderr): the same code would fail again. So does running past its
``timeout_s`` (NodeTimeoutError, recorded by the worker's lease keeper, which kills the
program), unless the node's own retry policy says otherwise.
"""

from __future__ import annotations

import json
from typing import Any

from dagwright.errors import CodeExecutionError
from dagwright.models import Node, RetryPolicy
from dagwright.sandbox import ExecutionResult
from dagwright.telemetry.node_logs import write_node_output
from dagwright.workers.context import NodeContext
from dagwright.workers.registry import WorkerType
from dagwright.workers.sandboxed import output_of, run_code

PYTHON_TYPE = "python"
MAX_CODE_CHARS = 1_000_000
STDERR_TAIL_CHARS = 2_000
# Only the sandbox backend breaking is retried (SandboxFailedError); code errors are final,
# and so is running out of time: the same code would again.
PYTHON_RETRY = RetryPolicy(
    max_attempts=3, backoff_s=2, backoff_max_s=60, non_retryable=["NodeTimeoutError"]
)
# The node's deadline stops the program first; the sandbox's own wall time, this much
# later, is the backstop should that fail.
SANDBOX_WALL_TIME_MARGIN_S = 5.0


def check_python_node(node: Node) -> list[str]:
    if not node.code or not node.code.strip():
        return ["a python node needs `code:` (a Python program; its inputs arrive on stdin)"]
    if len(node.code) > MAX_CODE_CHARS:
        return [f"`code` is {len(node.code):,} characters; the limit is {MAX_CODE_CHARS:,}"]
    return []


def run_python_node(ctx: NodeContext, node: Node) -> Any:
    result = run_code(
        ctx,
        node.code or "",
        input_json=json.dumps(ctx.inputs, ensure_ascii=False),
        wall_time_s=node.timeout_s + SANDBOX_WALL_TIME_MARGIN_S if node.timeout_s else None,
    )
    write_node_output("stderr", result.stderr)  # the program's own log: the node's logs
    # First: the sandbox stops a program whose output passes the cap, so it is not ok too.
    if result.truncated:
        limit = ctx.settings.sandbox.output_bytes
        raise CodeExecutionError(
            f"the code printed more than {limit:,} bytes (DAGWRIGHT_SANDBOX_OUTPUT_BYTES): "
            "print less, or keep large data in the workspace"
        )
    if not result.ok:
        raise CodeExecutionError(failure_message(result))
    return output_of(result.stdout)


def failure_message(result: ExecutionResult) -> str:
    stderr = result.stderr.strip()
    tail = stderr[-STDERR_TAIL_CHARS:]
    return result.describe_failure() + (f"\n{tail}" if tail else "")


def python_worker_type() -> WorkerType:
    return WorkerType(
        name=PYTHON_TYPE,
        kind="python",
        description="Runs the node's Python code in the sandbox; inputs as JSON on stdin, "
        "the printed JSON (or text) is the output.",
        run=run_python_node,
        check_node=check_python_node,
        default_retry=PYTHON_RETRY,
    )
