"""The ``run_python`` tool: the coder agent runs a program in the sandbox and reads what it
printed. Failing code is an answer the model can act on, not a failed tool call."""

from __future__ import annotations

from dagwright.sandbox.environment import describe_sandbox
from dagwright.settings import Settings
from dagwright.workers.context import NodeContext
from dagwright.workers.sandboxed import run_code

# The sandbox enforces the program's own time limit; this only bounds the tool call
# (a container start included) so a wedged backend cannot hold the agent forever.
RUN_PYTHON_TIMEOUT_S = 300.0
RUN_PYTHON_MAX_CHARS = 20_000


def run_python(ctx: NodeContext, code: str, stdin: str = "") -> str:
    """Run a Python 3 program in an isolated sandbox (no network, no host files, bounded
    time and memory) with ``stdin`` as its standard input; returns its exit status,
    stdout and stderr. Failing code is an answer to read and fix, not a failed call.
    Only the packages listed below can be imported: nothing can be installed.

    Args:
        code: The whole program, as the source of one Python 3 file; print what you want
            to read back.
        stdin: Text given to the program as its standard input (empty: none).
    """
    result = run_code(ctx, code, input_json=stdin)
    if result.exit_code is None or result.oom:  # killed: say why, not "exit code None"
        status = result.describe_failure()
    else:
        status = f"exit code {result.exit_code}"
    parts = [status + (" (output truncated)" if result.truncated else "")]
    if result.stdout:
        parts.append(f"stdout:\n{result.stdout}")
    if result.stderr:
        parts.append(f"stderr:\n{result.stderr}")
    return "\n".join(parts)


def sandbox_note(settings: Settings) -> str:
    """What the sandbox has installed, added to the description where it is offered."""
    return describe_sandbox(settings.sandbox)
