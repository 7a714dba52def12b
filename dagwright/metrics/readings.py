"""What the metrics show, read from Redis at scrape time in a few pipelined round trips.

Nothing here is kept between scrapes: every number is read from the state store (and the
broker) when Prometheus asks, so any process can serve the metrics and they are the
whole deployment's. A scrape costs the same whatever the state store retains: ended runs
are counted by the sizes of their sets (``keys.ended_runs``, kept by forget.lua and
replay.lua), dead letters by the stream's length less those replayed
(``DeadLetterStore.depth``), workers by the capabilities hash (one entry per worker);
only the open runs' statuses are read one by one. Rejected: reading every retained run's
status and every dead letter at each scrape (what this did until issue 31: 10,000
retained runs were 10,000 HGETs and a SCAN over some 130,000 keys per scrape).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from dagwright.brokers import open_queue_reader
from dagwright.connection import connect
from dagwright.dlq import DeadLetterStore
from dagwright.keys import ORCHESTRATOR_QUEUE, Keys
from dagwright.models import RunStatus
from dagwright.orchestrator.execution.backlog import ReadyBacklog, read_pooled, ready_backlogs
from dagwright.resilience.breakers import Breakers, BreakerStatus
from dagwright.settings import RedisSettings, Settings
from dagwright.telemetry import counters
from dagwright.workers import WorkerRegistry
from dagwright.workers.capabilities import WorkerCapabilities

log = logging.getLogger(__name__)

# A scrape must answer within Prometheus' timeout (10 s by default), Redis up or not: no
# retries, short timeouts.
CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 5.0
COMMANDS_PER_PIPELINE = 5000  # bounds a pipeline's memory on both ends
ENDED_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
COUNTER_FAMILIES = (
    counters.LLM_CALLS,
    counters.LLM_TOKENS,
    counters.LLM_COST_USD,
    counters.LLM_UNPRICED_TOKENS,
    counters.NODE_DURATION,
    counters.SANDBOX_EXECUTIONS,
)


@dataclass(frozen=True)
class Readings:
    runs: dict[str, int]  # run status -> retained runs
    counters: dict[str, dict[tuple[str, ...], float]]  # family -> label values -> total
    queue_depths: dict[str, int] | None  # queue -> messages waiting (None: a broker not read)
    breakers: list[BreakerStatus]
    dlq_depth: int
    workers_online: int
    # queue -> nodes waiting in the runs' pools (pulled fan-outs): the ready backlog's other half
    pooled: dict[str, int] = field(default_factory=dict)


def metrics_client(
    url: str, access: RedisSettings, *, decode_responses: bool = True
) -> redis.Redis:
    return connect(
        url,
        access,
        decode_responses=decode_responses,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=READ_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )


class MetricsReader:
    """Reads the deployment's numbers from the state store and the broker."""

    def __init__(
        self, settings: Settings, redis_url: str, broker_url: str, registry: WorkerRegistry
    ) -> None:
        self.keys = Keys(settings.redis.key_prefix)
        access = settings.redis
        self.client = metrics_client(redis_url, access)
        self.broker_url = broker_url
        self.access = access
        self.queues = queues_of(registry)
        self.buckets = settings.dispatch.reconciler_buckets  # the pooled totals' on a Cluster
        self.breakers = Breakers(
            metrics_client(redis_url, access, decode_responses=False),
            self.keys,
            fail_max=settings.breakers.fail_max,
            reset_timeout_s=settings.breakers.reset_timeout_s,
            max_probes=settings.breakers.max_probes,
        )
        self.dead_letters = DeadLetterStore(
            self.client, self.keys, retention_s=settings.retention.dlq_retention_s
        )

    def read(self) -> Readings:
        """Everything, or the Redis error that stopped it."""
        ended, active, families = self._read_indexes()
        pooled = self._pooled()
        return Readings(
            runs={**self._open_runs_by_status(active), **ended},
            counters=families,
            queue_depths=self._queue_depths(),
            pooled={queue: pooled.get(queue, 0) for queue in self.queues},
            breakers=self.breakers.statuses(),
            dlq_depth=self.dead_letters.depth(),
            workers_online=self._workers_online(),
        )

    def _read_indexes(
        self,
    ) -> tuple[dict[str, int], set[str], dict[str, dict[tuple[str, ...], float]]]:
        """How many retained runs ended with each final status, the open runs' ids and
        every counter family: one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for status in ENDED_STATUSES:
            pipe.zcard(self.keys.ended_runs(status.value))
        pipe.smembers(self.keys.active_runs)
        for family in COUNTER_FAMILIES:
            pipe.hgetall(self.keys.metrics(family))
        replies = pipe.execute()
        ended = dict(zip((s.value for s in ENDED_STATUSES), map(int, replies), strict=False))
        active = replies[len(ENDED_STATUSES)]
        raw = replies[len(ENDED_STATUSES) + 1 :]
        families = {
            family: counters.decode_counters(values)
            for family, values in zip(COUNTER_FAMILIES, raw, strict=True)
        }
        return ended, set(active), families

    def _pooled(self) -> dict[str, int]:
        """The pooled nodes per queue (the counter; on a Cluster, the buckets' totals)."""
        return read_pooled(self.client, self.keys, buckets=self.buckets)

    def backlogs(self) -> list[ReadyBacklog]:
        """Each measured queue's ready backlog (messages waiting + pooled nodes), for an
        autoscaler: two round trips, whatever the number of runs."""
        depths = self._queue_depths()
        waiting = (lambda queue: None) if depths is None else depths.get
        return ready_backlogs(self.queues, waiting, self._pooled())

    def _open_runs_by_status(self, run_ids: set[str]) -> dict[str, int]:
        """The open runs by status (planning, running), read anew at every scrape. An
        entry of the active set whose run has ended (until it is forgotten) is counted
        with the ended runs once it is."""
        statuses = self._pipelined(
            [("hget", self.keys.run_key(run_id, "run"), "status") for run_id in run_ids]
        )
        found = Counter(status for status in statuses if status is not None)
        return {
            status.value: found.get(status.value, 0) for status in RunStatus if not status.is_final
        }

    def _pipelined(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        replies: list[Any] = []
        for start in range(0, len(commands), COMMANDS_PER_PIPELINE):
            pipe = self.client.pipeline(transaction=False)
            for name, *args in commands[start : start + COMMANDS_PER_PIPELINE]:
                getattr(pipe, name)(*args)
            replies += pipe.execute()
        return replies

    def _queue_depths(self) -> dict[str, int] | None:
        """Each queue's waiting messages, as the broker tells them (``dagwright.brokers``:
        a Redis queue's lists of every priority step summed, a RabbitMQ queue's ready
        messages), on a connection of this scrape's own. None if it cannot be read: the
        other numbers are still shown (the state store's errors end the scrape)."""
        try:
            with open_queue_reader(
                self.broker_url, self.access, timeout_s=CONNECT_TIMEOUT_S
            ) as reader:
                return None if reader is None else reader.depths(self.queues)
        except Exception:
            log.warning("cannot read the queue depths of the broker", exc_info=True)
            return None

    def _workers_online(self) -> int:
        """Workers whose presence has not lapsed: the entries of the capabilities hash (one
        per worker, refreshed every few seconds) not past their ``expires_at``."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hvals(self.keys.worker_capabilities)
        pipe.time()
        entries, (seconds, micros) = pipe.execute()
        now = int(seconds) + int(micros) / 1e6
        return sum(1 for entry in entries if WorkerCapabilities.from_json(entry)[1] > now)


def queues_of(registry: WorkerRegistry) -> list[str]:
    """The orchestrator's queue and the queue of every registered worker type."""
    return sorted({ORCHESTRATOR_QUEUE, *registry.served_queues().values()})
