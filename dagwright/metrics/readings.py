"""What the metrics show, read from Redis at scrape time in a few pipelined round trips.

Nothing here is kept between scrapes: every number is read from the state store (and the
broker) when Prometheus asks, so any process can serve the metrics and they are the
whole deployment's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from dagwright.app import KOMBU_PRIORITY_STEPS, priority_lists
from dagwright.connection import connect
from dagwright.dlq import DeadLetterStore
from dagwright.keys import ORCHESTRATOR_QUEUE, Keys
from dagwright.models import RunStatus
from dagwright.orchestrator.execution.backlog import ReadyBacklog, decode_pooled, ready_backlogs
from dagwright.resilience.breakers import Breakers, BreakerStatus
from dagwright.settings import RedisAccess, Settings
from dagwright.telemetry import counters
from dagwright.workers import WorkerRegistry

# A scrape must answer within Prometheus' timeout (10 s by default), Redis up or not: no
# retries, short timeouts.
CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 5.0
COMMANDS_PER_PIPELINE = 5000  # bounds a pipeline's memory on both ends
# Keys looked at per SCAN call: the scan for live workers walks every key (10,000 retained
# runs are some 130,000), and a call of this size keeps Redis busy for about a millisecond.
SCAN_COUNT = 10_000
COUNTER_FAMILIES = (
    counters.LLM_CALLS,
    counters.LLM_TOKENS,
    counters.LLM_COST_USD,
    counters.LLM_UNPRICED_TOKENS,
    counters.NODE_DURATION,
    counters.SANDBOX_EXECUTIONS,
)
# As the settings spell them (dagwright.redis_endpoint).
REDIS_SCHEMES = ("redis", "rediss", "unix", "sentinel", "sentinels")


@dataclass(frozen=True)
class Readings:
    runs: dict[str, int]  # run status -> retained runs
    counters: dict[str, dict[tuple[str, ...], float]]  # family -> label values -> total
    queue_depths: dict[str, int] | None  # queue -> messages waiting (None: not a Redis broker)
    breakers: list[BreakerStatus]
    dlq_depth: int
    workers_online: int
    # queue -> nodes waiting in the runs' pools (pulled fan-outs): the ready backlog's other half
    pooled: dict[str, int] = field(default_factory=dict)


def metrics_client(url: str, access: RedisAccess, *, decode_responses: bool = True) -> redis.Redis:
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
        self.keys = Keys(settings.key_prefix)
        access = settings.redis_access
        self.client = metrics_client(redis_url, access)
        self.broker = metrics_client(broker_url, access) if is_redis_url(broker_url) else None
        self.queues = queues_of(registry)
        self.breakers = Breakers(
            metrics_client(redis_url, access, decode_responses=False),
            self.keys,
            fail_max=settings.breaker_fail_max,
            reset_timeout_s=settings.breaker_reset_timeout_s,
            max_probes=settings.breaker_max_probes,
        )
        self.dead_letters = DeadLetterStore(
            self.client, self.keys, retention_s=settings.dlq_retention_s
        )

    def read(self) -> Readings:
        """Everything, or the Redis error that stopped it."""
        retained, active, families, pooled = self._read_indexes()
        return Readings(
            runs=self._runs_by_status(retained | active),
            counters=families,
            queue_depths=self._queue_depths(),
            pooled={queue: pooled.get(queue, 0) for queue in self.queues},
            breakers=self.breakers.statuses(),
            dlq_depth=self.dead_letters.depth(),
            workers_online=self._workers_online(),
        )

    def _read_indexes(
        self,
    ) -> tuple[set[str], set[str], dict[str, dict[tuple[str, ...], float]], dict[str, int]]:
        """The retained and the open runs' ids, every counter family and the pooled
        nodes per queue: one round trip."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zrange(self.keys.run_index, 0, -1)
        pipe.smembers(self.keys.active_runs)
        pipe.hgetall(self.keys.pooled_nodes)
        for family in COUNTER_FAMILIES:
            pipe.hgetall(self.keys.metrics(family))
        retained, active, pooled, *raw = pipe.execute()
        families = {
            family: counters.decode_counters(values)
            for family, values in zip(COUNTER_FAMILIES, raw, strict=True)
        }
        return set(retained), set(active), families, decode_pooled(pooled)

    def backlogs(self) -> list[ReadyBacklog]:
        """Each measured queue's ready backlog (messages waiting + pooled nodes), for an
        autoscaler: two round trips, whatever the number of runs."""
        depths = self._queue_depths()
        pooled = decode_pooled(self.client.hgetall(self.keys.pooled_nodes))
        waiting = (lambda queue: None) if depths is None else depths.get
        return ready_backlogs(self.queues, waiting, pooled)

    def _runs_by_status(self, run_ids: set[str]) -> dict[str, int]:
        """Each retained run's status, read anew at every scrape: a run that ended may be
        re-opened by a replay and end again between two scrapes, so no status is
        remembered. (An expired run, indexed until the reconciler trims the index, counts
        as nothing.)"""
        statuses = self._pipelined(
            [("hget", self.keys.run_key(run_id, "run"), "status") for run_id in run_ids]
        )
        found = Counter(status for status in statuses if status is not None)
        return {status.value: found.get(status.value, 0) for status in RunStatus}

    def _pipelined(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        replies: list[Any] = []
        for start in range(0, len(commands), COMMANDS_PER_PIPELINE):
            pipe = self.client.pipeline(transaction=False)
            for name, *args in commands[start : start + COMMANDS_PER_PIPELINE]:
                getattr(pipe, name)(*args)
            replies += pipe.execute()
        return replies

    def _queue_depths(self) -> dict[str, int] | None:
        """Each queue's messages: its lists of every priority step summed (app.py), as
        kombu's own queue size does. The one reading of messages waiting here (the
        metrics, the ready backlog): another broker answers it in its own way."""
        if self.broker is None:
            return None
        pipe = self.broker.pipeline(transaction=False)
        for name in priority_lists(self.queues):
            pipe.llen(name)
        lengths = pipe.execute()
        per_queue = len(KOMBU_PRIORITY_STEPS)
        return {
            queue: sum(lengths[i * per_queue : (i + 1) * per_queue])
            for i, queue in enumerate(self.queues)
        }

    def _workers_online(self) -> int:
        """Workers whose presence record has not expired (refreshed every few seconds)."""
        pattern = self.keys.worker_heartbeat_pattern
        return sum(1 for _ in self.client.scan_iter(pattern, count=SCAN_COUNT))


def queues_of(registry: WorkerRegistry) -> list[str]:
    """The orchestrator's queue and the queue of every registered worker type."""
    return sorted({ORCHESTRATOR_QUEUE, *registry.served_queues().values()})


def is_redis_url(url: str) -> bool:
    return url.partition("://")[0] in REDIS_SCHEMES
