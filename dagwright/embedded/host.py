"""The stack host: owns the embedded stack of ``dagwright run``s while any holds a lease.

``python -m dagwright.embedded.host`` is started (detached, in a session of its own) by
the first ``run`` that finds no stack; later ``run``s take leases on the same stack, and
the host stops it once no lease is held, so no run loses the stack another started.

Rejected: the first ``run`` owning the stack itself (as ``up`` does); it would have to
outlive its own run while others use the stack, or pull it from under them.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from dagwright.embedded.leases import attach_lock, live_leases
from dagwright.embedded.stack import EmbeddedStack
from dagwright.errors import DagwrightError
from dagwright.settings import Settings
from dagwright.stackfile import remove_stack

POLL_S = 0.2
WAIT_FOR_OLD_STACK_S = 60.0  # a stack that is stopping holds the lock until it has


def serve_while_leased(stack: EmbeddedStack) -> str:
    """Return why the stack should stop: no lease is held, or its worker died."""
    while True:
        time.sleep(POLL_S)
        if stack.worker_exit_code() is not None:
            return stack.describe_worker_death()
        with attach_lock(stack.data_dir):
            if not live_leases(stack.data_dir):
                # Gone from the stack file under the lock: a run arriving now starts a
                # new stack, which waits for this one to have stopped.
                remove_stack(stack.data_dir, os.getpid())
                return "no run uses it any more"


def main() -> int:
    """Our stdout and stderr are the worker log (the run that started us opened it)."""
    settings = Settings()
    stack = EmbeddedStack(
        settings,
        owner="run",
        wait_for_lock_s=WAIT_FOR_OLD_STACK_S,
        shown_log=settings.process.data_dir / "logs" / "worker.log",
    )
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _raise_interrupt)
    try:
        stack.start()
    except (KeyboardInterrupt, DagwrightError) as exc:
        print(f"the embedded stack did not start: {exc or 'signalled'}", file=sys.stderr)
        return 1
    try:
        reason = serve_while_leased(stack)
    except KeyboardInterrupt:
        reason = "signalled"
    finally:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)  # a stop half done would leave orphans
        stack.stop()
    print(f"the embedded stack stopped: {reason}", file=sys.stderr, flush=True)
    return 0


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
