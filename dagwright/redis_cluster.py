"""Redis Cluster clients that wait out a failover or a reshard, as long as a setting allows.

redis-py's cluster client sends a command again after a connection error, a timeout,
CLUSTERDOWN or an uncovered slot, re-reading the slot map first, but only a few times
(3) and, after a connection error, without a pause: a killed primary's commands fail
within milliseconds, while the other primaries elect its replica only after the cluster's
node timeout (``cluster-node-timeout``, 15 s by default) and a vote. Until then every
caller would meet the outage: a worker's completion, a client's wait, the reconciler.
A slot being resharded refuses a run script for as long as its keys are moving (below).
These subclasses send such a command again after a pause (an exponential backoff up to
1 s), for ``redis_cluster_failover_wait_s`` after its first failure, logging the wait
once; past that the error reaches the caller as before. A command sent to a node the
caller names (``target_nodes``) is the caller's to send again: ``send_to_slot_of`` does
(orchestrator/runstate/cluster_routing.py), with the same ``FailoverWait``.

As with redis-py's own retries, a command that timed out may have run, and runs again:
the run scripts are fenced.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
from redis.exceptions import ClusterError, TryAgainError

log = logging.getLogger(__name__)

# The errors redis-py itself sends a command again after (the exact classes, as it checks:
# an AuthenticationError is a ConnectionError that no wait mends), and those of a slot
# being resharded: a script's keys there are on two nodes, or some not created yet (a run
# script names all of its run's keys), which both nodes answer with TRYAGAIN until the
# slot has moved; redis-py tries again for under half a second, then gives up with
# ClusterError "TTL exhausted". Once the slot has moved, MOVED is followed.
FAILOVER_ERRORS: tuple[type[Exception], ...] = (
    *RedisCluster.ERRORS_ALLOW_RETRY,
    TryAgainError,
    ClusterError,
)
PAUSES = ExponentialBackoff(cap=1.0, base=0.05)


class FailoverWait:
    """The pauses between one command's tries while the cluster fails over."""

    def __init__(self, wait_s: float, *, at_least: int = 0) -> None:
        self.wait_s = wait_s
        self.at_least = at_least  # tries made whatever the time (a caller's own count)
        self.failures = 0
        self.first_failure = 0.0

    def pause_after(self, error: Exception) -> float:
        """How long to pause before the next try; raises ``error`` when it is not a
        failover's, or once the wait is over."""
        if type(error) not in FAILOVER_ERRORS:
            raise error
        now = time.monotonic()
        if self.failures == 0:
            self.first_failure = now
        self.failures += 1
        waited = now - self.first_failure
        if self.failures > self.at_least and waited >= self.wait_s:
            raise error
        if self.failures == 1 and self.wait_s > 0:
            log.warning(
                "Redis Cluster unreachable, failing over or resharding (%s); "
                "trying again for up to %gs",
                type(error).__name__,
                self.wait_s,
            )
        return min(PAUSES.compute(self.failures), max(self.wait_s - waited, 0.0))


class FailoverPatience:
    """A cluster client's failover wait, which a thread may set aside for a while: a batch
    over many runs (a reconciler's pass, lease renewals) fails the calls to an unreachable
    primary at once, the next batch trying again, rather than wait for each of them."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self._impatient = threading.local()

    def current_s(self) -> float:
        return 0.0 if getattr(self._impatient, "on", False) else self.wait_s

    @contextmanager
    def set_aside(self) -> Iterator[None]:
        before = getattr(self._impatient, "on", False)
        self._impatient.on = True
        try:
            yield
        finally:
            self._impatient.on = before


class PatientRedisCluster(RedisCluster):
    """redis-py's cluster client, its commands sent again across a failover."""

    def __init__(self, *args: Any, failover_wait_s: float, **kwargs: Any) -> None:
        # first: the parent's __init__ sends commands
        self.failover_patience = FailoverPatience(failover_wait_s)
        super().__init__(*args, **kwargs)

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("target_nodes") is not None:
            return super().execute_command(*args, **kwargs)
        wait = FailoverWait(self.failover_patience.current_s())
        while True:
            try:
                return super().execute_command(*args, **kwargs)
            except FAILOVER_ERRORS as error:
                time.sleep(wait.pause_after(error))
                # A command whose keys move with its arguments (XREAD, FCALL) has them
                # found by the default node (COMMAND GETKEYS); redis-py keeps a dead one
                # as the default when that lookup is what failed, for good.
                self.replace_default_node()  # type: ignore[attr-defined]  # old stubs


class PatientAsyncRedisCluster(AsyncRedisCluster):
    """``PatientRedisCluster``'s asyncio twin."""

    def __init__(self, *args: Any, failover_wait_s: float, **kwargs: Any) -> None:
        self.failover_patience = FailoverPatience(failover_wait_s)
        super().__init__(*args, **kwargs)

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("target_nodes") is not None:
            return await super().execute_command(*args, **kwargs)
        wait = FailoverWait(self.failover_patience.current_s())
        while True:
            try:
                return await super().execute_command(*args, **kwargs)
            except FAILOVER_ERRORS as error:
                await asyncio.sleep(wait.pause_after(error))
                self._ask_another_node_for_keys()

    def _ask_another_node_for_keys(self) -> None:
        """As the sync client's ``replace_default_node``: the asyncio client finds a
        command's moving keys with one node it chose at start, kept however dead."""
        parser: Any = self.commands_parser  # its ``node`` is not in the stubs
        others = [node for node in self.get_primaries() if node is not parser.node]
        if others:
            parser.node = random.choice(others)


def failover_wait_of(client: Any) -> float:
    """The failover wait of ``client`` now (0 for a cluster client made elsewhere, or
    while this thread set it aside)."""
    patience = getattr(client, "failover_patience", None)
    return patience.current_s() if patience is not None else 0.0


def without_failover_wait(client: Any) -> AbstractContextManager[None]:
    """While in it, this thread's commands on ``client`` do not wait out a failover."""
    patience = getattr(client, "failover_patience", None)
    return patience.set_aside() if patience is not None else nullcontext()
