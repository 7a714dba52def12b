"""The embedded local stack: Valkey plus a worker for every queue, on one machine.

``dagwright up`` owns one in the foreground (stack.py); ``dagwright run`` with no Redis
configured shares one with the other runs of the moment, owned by a stack host that stops
it after the last (shared.py, host.py, leases.py). Its processes die with their owner
(children.py), and what a dead owner left behind is reclaimed at the next start
(reclaim.py).
"""

from dagwright.embedded.shared import SharedStack, shared_stack
from dagwright.embedded.stack import EmbeddedStack
from dagwright.embedded.valkey import EmbeddedStackError

__all__ = ["EmbeddedStack", "EmbeddedStackError", "SharedStack", "shared_stack"]
