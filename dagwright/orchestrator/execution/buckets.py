"""Several reconcilers share the active runs, by bucket.

Before issue 31 one reconciler held a lock and made one round trip per active run each
pass: a ceiling of a few thousand active runs per lease period, on one process. Now the
active runs fall in ``reconciler_buckets`` buckets (``bucket_of``: a CRC32 of the run
id, the same in every process and version of Python), each leased by one reconciler at
a time (``keys.reconciler_bucket_lease``, a key of its own per bucket, tagged by it).
Each pass a reconciler

1. says it is alive (``keys.reconcilers``, server time) and learns how many are;
2. keeps its share, ``ceil(buckets / live)``: renews the leases it holds, gives back
   those past its share (a reconciler that just started takes them at its next pass),
   and takes free ones up to its share (those of a reconciler that stopped cleanly, or
   whose lease expired: it died);
3. visits the runs of its buckets (reconciler.py), pipelined.

So any number of reconcilers split the runs evenly within a pass or two of one joining
or leaving, and a dead one's buckets are taken over once its lease has expired
(``3 x reconcile_interval_s``). The deployment-wide chores (overdue approvals, the run
index, concurrency waiters, trace exports, webhooks, the backlog recount) go to the
holder of bucket 0, so exactly one reconciler does each at a time.

Rejected: one lock per reconciler over a fixed slice (``index / count`` of the set)
needs every process told the count, and a dead one's slice waits for an operator;
consistent hashing over live reconcilers moves runs between reconcilers on every change
without a lease saying who has them now. Two reconcilers visiting one run at once is
harmless (every transition is fenced) but wasted: the leases prevent it in the steady
state.
"""

from __future__ import annotations

import math
import zlib

import redis

from dagwright.keys import Keys
from dagwright.redis_scripts import is_cluster_client, load_script, named_reply

PACKAGE = "dagwright.orchestrator.execution"
CHORES_BUCKET = 0  # whoever holds it also does the deployment-wide chores


def bucket_of(run_id: str, buckets: int) -> int:
    """The bucket of ``run_id`` among ``buckets``: stable across processes and hosts."""
    return zlib.crc32(run_id.encode()) % buckets


class BucketLeases:
    """The buckets one reconciler (``token``) holds, kept to its share each pass."""

    def __init__(
        self, client: redis.Redis, keys: Keys, token: str, *, buckets: int, lease_ms: int
    ) -> None:
        self.client = client
        self.keys = keys
        self.token = token
        self.buckets = buckets
        self.lease_ms = lease_ms
        self.held: set[int] = set()
        self._lease = load_script(client, PACKAGE, "reconciler_lease")
        self._presence = load_script(client, PACKAGE, "reconciler_presence")

    def refresh(self) -> set[int]:
        """Announce this reconciler, then hold its share of the buckets: the ones held now."""
        share = math.ceil(self.buckets / max(self._live(), 1))
        self.held = self._renewed()
        for bucket in sorted(self.held, reverse=True)[: max(len(self.held) - share, 0)]:
            self._act(bucket, "release")
            self.held.discard(bucket)
        if len(self.held) < share:
            self.held |= self._taken(share - len(self.held))
        return set(self.held)

    def renew(self) -> set[int]:
        """Renew the leases held, mid-pass (a pass longer than a lease would otherwise lose
        them under it); the buckets still held."""
        self.held = self._renewed()
        return set(self.held)

    def release_all(self) -> int:
        """Give every bucket back and leave (a clean stop), so that the others take them
        at their next pass instead of after the lease; how many were held."""
        count = len(self.held)
        for bucket in sorted(self.held):
            self._act(bucket, "release")
        self.held = set()
        self._presence(keys=[self.keys.reconcilers], args=[self.token, self.lease_ms, "1"])
        return count

    def _live(self) -> int:
        reply = self._presence(keys=[self.keys.reconcilers], args=[self.token, self.lease_ms, ""])
        return int(named_reply(reply)["live"])

    def _renewed(self) -> set[int]:
        """The held buckets whose lease is still this reconciler's, renewed (one round trip)."""
        order = sorted(self.held)
        return {
            bucket
            for bucket, held in zip(order, self._pipelined(order, "renew"), strict=True)
            if held
        }

    def _taken(self, wanted: int) -> set[int]:
        """Up to ``wanted`` free buckets (two round trips), looked for from a place of this
        token's own, so that reconcilers starting together do not race for the same ones."""
        start = zlib.crc32(self.token.encode()) % self.buckets
        others = [(start + i) % self.buckets for i in range(self.buckets)]
        others = [bucket for bucket in others if bucket not in self.held]
        pipe = self.client.pipeline(transaction=False)
        for bucket in others:
            pipe.exists(self.keys.reconciler_bucket_lease(bucket))
        busy = pipe.execute()
        free = [bucket for bucket, held in zip(others, busy, strict=True) if not held][:wanted]
        taken = self._pipelined(free, "take")
        return {bucket for bucket, held in zip(free, taken, strict=True) if held}

    def _pipelined(self, buckets: list[int], action: str) -> list[bool]:
        """``action`` on each bucket's lease in one round trip; on a Cluster one call each
        (redis-py's cluster pipeline refuses scripts)."""
        if is_cluster_client(self.client):
            return [self._act(bucket, action) for bucket in buckets]
        pipe = self.client.pipeline(transaction=False)
        for bucket in buckets:
            self._call(bucket, action, pipe)
        return [bool(int(named_reply(reply)["held"])) for reply in pipe.execute()]

    def _act(self, bucket: int, action: str) -> bool:
        return bool(int(named_reply(self._call(bucket, action))["held"]))

    def _call(self, bucket: int, action: str, client: object = None) -> object:
        key = self.keys.reconciler_bucket_lease(bucket)
        return self._lease(keys=[key], args=[self.token, self.lease_ms, action], client=client)
