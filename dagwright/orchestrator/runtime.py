"""Everything that talks to the run-state store, built once per process from Settings."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar, cast

import redis

from dagwright.connection import connect, require_redis_url
from dagwright.keys import Keys
from dagwright.models import DEFAULT_PRIORITY, Node
from dagwright.orchestrator.runstate.machine import Dispatch, EndedRetention, RunStateMachine
from dagwright.orchestrator.runstate.store import RunStore
from dagwright.redaction import known_secrets
from dagwright.settings import Settings
from dagwright.telemetry.counters import Counters

if TYPE_CHECKING:
    from dagwright.orchestrator.runstate.node_logs import NodeLogs
    from dagwright.resilience import Breakers
    from dagwright.telemetry.node_logs import LogLimits
    from dagwright.workers import WorkerRegistry

T = TypeVar("T")


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    redis_url: str
    client: redis.Redis
    keys: Keys
    store: RunStore
    machine: RunStateMachine
    counters: Counters
    given_registry: WorkerRegistry | None = field(default=None, repr=False)
    """The process's registry if it has built one already; else ``registry`` builds one."""
    _build_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    @cached_property
    def registry(self) -> WorkerRegistry:
        """The worker types, built from the settings on first use: building imports the
        user's modules, scans entry points and loads the agent loop, which the read-only
        commands (``status``, ``events``, ``dlq list``) never need."""
        if self.given_registry is not None:
            return self.given_registry
        return self._once("registry", self._build_registry)

    @cached_property
    def breakers(self) -> Breakers:
        """The per-model circuit breakers, made on first use: only the processes that call
        LLMs need them (and pybreaker, and a second connection pool that speaks bytes)."""
        return self._once("breakers", self._make_breakers)

    @cached_property
    def node_logs(self) -> NodeLogs:
        """The runs' node logs in Redis (what a worker appends an attempt's lines to)."""
        return self._once("node_logs", self._make_node_logs)

    @cached_property
    def log_limits(self) -> LogLimits:
        """The bounds of a node attempt's logs, and the secrets masked in them."""
        from dagwright.telemetry.node_logs import LogLimits

        settings = self.settings
        return LogLimits(
            settings.node_logs.max_bytes, settings.node_logs.max_line_chars, known_secrets(settings)
        )

    def _make_node_logs(self) -> NodeLogs:
        from dagwright.orchestrator.runstate.node_logs import NodeLogs

        return NodeLogs(self.client, self.keys, max_lines=self.settings.node_logs.run_max_lines)

    def _once(self, name: str, build: Callable[[], T]) -> T:
        """``build()`` stored as attribute ``name``, once even when threads of a worker ask
        together: cached_property holds no lock since Python 3.12."""
        with self._build_lock:
            if name not in self.__dict__:
                self.__dict__[name] = build()
            return cast(T, self.__dict__[name])

    def _build_registry(self) -> WorkerRegistry:
        from dagwright.registry import build_registry

        return build_registry(self.settings)

    def _make_breakers(self) -> Breakers:
        from dagwright.resilience import Breakers

        return Breakers(
            connect(self.redis_url, self.settings.redis, decode_responses=False),
            self.keys,
            fail_max=self.settings.breakers.fail_max,
            reset_timeout_s=self.settings.breakers.reset_timeout_s,
            max_probes=self.settings.breakers.max_probes,
            secrets=known_secrets(self.settings),
        )

    @classmethod
    def from_settings(cls, settings: Settings, registry: WorkerRegistry | None = None) -> Runtime:
        """``registry``: the process's, if it has built one already; else one is built
        from ``settings`` (``build_registry``) when first used."""
        url = require_redis_url(settings)
        client = connect(url, settings.redis)
        keys = Keys(settings.redis.key_prefix)
        return cls(
            settings=settings,
            redis_url=url,
            client=client,
            keys=keys,
            store=RunStore(client, keys, events_maxlen=settings.retention.events_maxlen),
            machine=RunStateMachine(
                client,
                keys,
                events_maxlen=settings.retention.events_maxlen,
                retention_s=settings.retention.retention_s,
                dlq_retention_s=settings.retention.dlq_retention_s,
            ),
            given_registry=registry,
            counters=Counters(client, keys),
        )

    def dispatch_for(
        self,
        node: Node,
        run_priority: int = DEFAULT_PRIORITY,
        registry: WorkerRegistry | None = None,
    ) -> Dispatch:
        """How ``node`` is published: at its own priority, else its run's; routed by
        ``registry`` (a submit's, widened by the live workers') else this process's."""
        worker_type = (registry or self.registry).get(node.type)
        return Dispatch(
            queue=worker_type.queue_of(node),
            time_limit_s=node.timeout_s or self.settings.limits.default_timeout_s,
            task=worker_type.task,
            worker_type=worker_type.name,
            priority=node.priority or run_priority,
        )

    def live_worker_queues(self) -> set[str]:
        """Every queue some live worker consumes (from the workers' presence records)."""
        keys = list(self.client.scan_iter(self.keys.worker_heartbeat_pattern, count=500))
        if not keys:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hget(key, "queues")
        return {queue for queues in pipe.execute() if queues for queue in queues.split(",")}

    @property
    def ended_retention(self) -> EndedRetention:
        """What an ended run keeps, and how long (the retention settings)."""
        settings = self.settings
        return EndedRetention(
            checkpoints_s=settings.retention.checkpoint_retention_s,
            events_s=settings.retention.events_retention_s,
            spans_s=settings.retention.trace_retention_s,
        )

    def forget_active(self, run_id: str) -> None:
        """Drop a finished run from the reconciler's set (and queue its trace's export,
        if traces are exported)."""
        from dagwright.telemetry.otlp import exporting  # the trace model: not to read a run

        forgotten = self.machine.forget(  # compacted first: a crash in between is retried
            run_id,
            export_trace=exporting(self.settings.telemetry.otlp_endpoint),
            compaction=self.ended_retention,
        )
        if forgotten.concurrency_key:
            self.release_key_place(run_id, forgotten.concurrency_key)

    def release_key_place(self, run_id: str, key: str) -> None:
        """Give back an ended run's place of its concurrency key ``key`` (the next waiter
        takes it at the reconciler's next pass: control/run_gates.py)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zrem(self.keys.key_holders(key), run_id)
        pipe.zrem(self.keys.key_waiters(key), run_id)
        pipe.execute()
