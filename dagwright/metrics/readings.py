"""What the metrics show, read from Redis at scrape time in a few pipelined round trips.

Nothing here is kept between scrapes: every number is read from the state store (and the
broker) when Prometheus asks, so any process can serve the metrics and they are the
whole deployment's.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from dagwright.brokers import open_queue_reader
from dagwright.connection import connect
from dagwright.dlq import DeadLetterStore
from dagwright.keys import ORCHESTRATOR_QUEUE, Keys
from dagwright.models import RunStatus
from dagwright.resilience.breakers import Breakers, BreakerStatus
from dagwright.settings import RedisAccess, Settings
from dagwright.telemetry import counters
from dagwright.workers import WorkerRegistry

log = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class Readings:
    runs: dict[str, int]  # run status -> retained runs
    counters: dict[str, dict[tuple[str, ...], float]]  # family -> label values -> total
    queue_depths: dict[str, int] | None  # queue -> messages waiting (None: a broker not read)
    breakers: list[BreakerStatus]
    dlq_depth: int
    workers_online: int


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
        self.broker_url = broker_url
        self.access = access
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
        retained, active, families = self._read_indexes()
        return Readings(
            runs=self._runs_by_status(retained | active),
            counters=families,
            queue_depths=self._queue_depths(),
            breakers=self.breakers.statuses(),
            dlq_depth=self.dead_letters.depth(),
            workers_online=self._workers_online(),
        )

    def _read_indexes(
        self,
    ) -> tuple[set[str], set[str], dict[str, dict[tuple[str, ...], float]]]:
        """The retained and the open runs' ids, and every counter family: one round trip."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zrange(self.keys.run_index, 0, -1)
        pipe.smembers(self.keys.active_runs)
        for family in COUNTER_FAMILIES:
            pipe.hgetall(self.keys.metrics(family))
        retained, active, *raw = pipe.execute()
        families = {
            family: counters.decode_counters(values)
            for family, values in zip(COUNTER_FAMILIES, raw, strict=True)
        }
        return set(retained), set(active), families

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
        """Workers whose presence record has not expired (refreshed every few seconds)."""
        pattern = self.keys.worker_heartbeat_pattern
        return sum(1 for _ in self.client.scan_iter(pattern, count=SCAN_COUNT))


def queues_of(registry: WorkerRegistry) -> list[str]:
    """The orchestrator's queue and the queue of every registered worker type."""
    return sorted({ORCHESTRATOR_QUEUE, *registry.served_queues().values()})
