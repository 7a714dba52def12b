"""The ready backlog's pooled half on a Redis Cluster: each run's count, totalled by bucket.

On one server the run-state scripts keep one counter for the deployment
(``keys.pooled_nodes``) in the step that changes a pool (backlog.py). On a Cluster that
key is in another slot than any run's, so the same scripts keep the same count per run
instead, in the run's slot (``keys.run_pooled``: prelude.lua ``POOLED``), still exact
under cancel, timeout, replay and a worker killed anywhere. Reading a deployment's count
is then a sum over runs, which no reader should pay per scrape; the reconcilers already
visit every active run by bucket (buckets.py), so each one, at every pass, reads the
counts of the runs it visited (one pipelined HGETALL each, in the batches of its visit)
and writes one total per bucket it holds (``keys.pooled_bucket``: a key of its own,
tagged by the bucket, with a TTL of a few leases so a bucket nobody holds stops
counting). A reader sums the buckets: ``reconciler_buckets`` GETs in one pipeline.

Freshness: a total is at most one reconcile interval old (plus the pass), when the
buckets' runs fit in one pass (``reconcile_max_runs_per_pass``); past that, a run's count
is as old as the window's turn over it. An autoscaler polling every 15-30 s (KEDA) sees
the same numbers, a pass later. Without a live reconciler the totals expire: the backlog
is then the broker's messages only.

Rejected: a per-bucket counter changed by the run scripts (a second slot in their step);
reading every active run's count at each scrape (a scan per scrape per ScaledObject);
the sum written by a chore of one reconciler (a pass over every run by one process).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from dagwright.keys import Keys
from dagwright.orchestrator.execution.buckets import bucket_of

LEASES_KEPT = 3  # a bucket's total outlives its holder's lease by this many leases


class PooledTotals:
    """One reconciler's totals of its buckets' pooled nodes (a Cluster only)."""

    def __init__(self, client: Any, keys: Keys, *, buckets: int, lease_ms: int) -> None:
        self.client = client
        self.keys = keys
        self.buckets = buckets
        self.ttl_ms = lease_ms * LEASES_KEPT
        self._by_run: dict[str, dict[str, int]] = {}  # run -> queue -> pooled, as last read

    def read(self, run_ids: list[str]) -> None:
        """The counts of ``run_ids`` (just visited), one round trip."""
        if not run_ids:
            return
        pipe = self.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hgetall(self.keys.run_pooled(run_id))
        for run_id, raw in zip(run_ids, pipe.execute(), strict=True):
            self._by_run[run_id] = decode_counts(raw)

    def publish(self, held: Iterable[int], active: Iterable[str]) -> dict[int, dict[str, int]]:
        """Write the total of each ``held`` bucket over its ``active`` runs (those of the
        held buckets still active: the others are forgotten); the totals written."""
        still = set(active)
        self._by_run = {run: counts for run, counts in self._by_run.items() if run in still}
        totals: dict[int, Counter[str]] = defaultdict(Counter)
        for run_id, counts in self._by_run.items():
            totals[bucket_of(run_id, self.buckets)].update(counts)
        written = {bucket: dict(totals[bucket]) for bucket in sorted(held)}
        pipe = self.client.pipeline(transaction=False)
        for bucket, total in written.items():
            pipe.set(self.keys.pooled_bucket(bucket), json.dumps(total), px=self.ttl_ms)
        pipe.execute()
        return written


def read_bucket_totals(client: Any, keys: Keys, buckets: int) -> dict[str, int]:
    """Nodes pooled per queue over the whole deployment: the buckets' totals summed (one
    round trip). A bucket whose total expired (no reconciler) counts none."""
    pipe = client.pipeline(transaction=False)
    for bucket in range(buckets):
        pipe.get(keys.pooled_bucket(bucket))
    found: Counter[str] = Counter()
    for raw in pipe.execute():
        if raw:
            found.update(decode_counts(json.loads(raw)))
    return {queue: count for queue, count in found.items() if count > 0}


def decode_counts(raw: Mapping[Any, Any]) -> dict[str, int]:
    """queue -> count from a hash or JSON reply (bytes or text); a negative count (drift)
    reads as 0."""
    return {_text(queue): max(int(count), 0) for queue, count in raw.items()}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
