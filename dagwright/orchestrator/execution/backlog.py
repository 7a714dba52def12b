"""A queue's ready backlog: the nodes that would start now if its workers had free slots.

They wait in two places. Messages wait in the broker (``dw.<type>``); the nodes of a big
fan-out past the idle slots wait unpublished in their run's pool (pool.py), pulled by the
workers as they finish nodes. An autoscaler that reads only the broker's list sees a
10,000-node fan-out on two workers as about two messages and never scales out, so the
backlog is the sum of both:

- **messages waiting**: whatever the broker says (``Broker.queue_depth``, or the metrics
  reader's pipelined reading), kept behind one function per reader so that another broker
  only has to answer that;
- **pooled nodes**: the hash ``keys.pooled_nodes`` (queue -> count), kept by the run-state
  scripts in the very step that changes a pool (prelude.lua ``pool_add``, ``pool_remove``,
  ``pool_clear``), so it is exact under cancel, run timeout, replay and a worker killed
  at any point (a script runs whole or not at all). Reading it is one HGETALL, never a
  scan of the runs. It also counts the dependents a fan-out released in chunks has yet
  to count (the run's ``settling``: 9,800 of a 10,000-node fan-out whose pool holds a
  chunk of 200), all on the queue of the first of them: exact for a fan-out of one type
  (a map), approximate for one mixing types, and a dependent still waiting for another
  dependency counts as ready until its chunk decides it.

A node is in neither for a moment: pulled from a pool (its worker claims it next), or
released from ``settling`` into the outbox before its worker pools or publishes it (the
same script or the next). So the number can read low by about the workers' slots, never
high for long.

Rejected: counting the pools at read time (a scan of every active run's pool per
scrape, every 15 s per ScaledObject); a counter kept by the Python callers of the scripts
(a worker killed between the script and its INCRBY leaves it wrong until a recount).
What can still drift it (a run's keys deleted by hand, a restore from an old snapshot) is
repaired by ``recount_pooled`` (backlog_recount.lua), which the reconciler holding
bucket 0 runs every ``backlog_recount_interval_s``.

On a Redis Cluster that one key is in another slot than any run's: the scripts keep the
same count per run in the run's slot, and the reconcilers total it by bucket
(bucket_backlog.py), which ``read_pooled`` sums: as exact, a reconcile interval later.
backlog_recount.lua (it reads every run's keys) runs on one server only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import redis

from dagwright.keys import Keys
from dagwright.orchestrator.execution.bucket_backlog import decode_counts, read_bucket_totals
from dagwright.redis_scripts import is_cluster_client, load_script, named_reply


@dataclass(frozen=True)
class ReadyBacklog:
    """One queue's ready nodes: ``waiting`` messages in the broker (None: the broker
    cannot tell) and ``pooled`` nodes in the runs' pools."""

    queue: str
    waiting: int | None
    pooled: int

    @property
    def ready(self) -> int:
        """Nodes ready to run on ``queue``: messages waiting plus pooled nodes."""
        return (self.waiting or 0) + self.pooled


def read_pooled(client: redis.Redis, keys: Keys, *, buckets: int) -> dict[str, int]:
    """Nodes waiting in the runs' pools, per queue: one HGETALL of the counter; on a
    Cluster the reconciler ``buckets``' totals summed (one pipeline)."""
    if is_cluster_client(client):
        return read_bucket_totals(client, keys, buckets)
    return decode_counts(client.hgetall(keys.pooled_nodes))


def ready_backlogs(
    queues: Iterable[str], waiting: Callable[[str], int | None], pooled: Mapping[str, int]
) -> list[ReadyBacklog]:
    """Each of ``queues`` with its messages waiting (``waiting(queue)``) and its pooled
    nodes, in the order given."""
    return [ReadyBacklog(queue, waiting(queue), pooled.get(queue, 0)) for queue in queues]


@dataclass(frozen=True)
class Recount:
    """What a recount found: queue -> (counted before, found in the pools)."""

    drift: dict[str, tuple[int, int]]
    runs: int


class PooledRecount:
    """Counts every active run's pool again and puts the counter right, in one script:
    the repair for what the scripts' own bookkeeping cannot see (keys deleted by hand, a
    restore). O(active runs + pooled nodes) of Valkey time, so it runs rarely."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.keys = keys
        self._script = load_script(client, "dagwright.orchestrator.execution", "backlog_recount")

    def run(self) -> Recount:
        keys = [self.keys.active_runs, self.keys.pooled_nodes]
        prefix, _, pool = self.keys.run_key("RUN", "pool").partition("RUN")
        settling = self.keys.run_key("RUN", "settling").partition("RUN")[2]
        fields = named_reply(self._script(keys=keys, args=[prefix, pool, settling]))
        drift = fields.get("drift") or []
        found = {
            _text(drift[i]): (int(drift[i + 1]), int(drift[i + 2])) for i in range(0, len(drift), 3)
        }
        return Recount(drift=found, runs=int(fields["runs"]))


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
