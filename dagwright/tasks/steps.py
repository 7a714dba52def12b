"""Worker bootsteps: the reconciler timer, the worker's presence record, and the metrics
endpoint.

The first two run on the consumer's timer in the worker's main process, so no extra
thread exists when the prefork pool forks its children; the metrics endpoint's thread
starts only after the pool has forked them.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Protocol

from celery import bootsteps

from dagwright.app import broker_identity
from dagwright.orchestrator.runtime import Runtime
from dagwright.tasks.env import execution_env, reconciler_for
from dagwright.tasks.reconciler_service import one_pass, release
from dagwright.workers.capabilities import WorkerCapabilities

log = logging.getLogger(__name__)

PRESENCE_INTERVAL_S = 5.0
PRESENCE_TTL_S = int(PRESENCE_INTERVAL_S * 3)  # a worker missing two refreshes is gone
DEAD_WORKER_GRACE_S = 60.0  # an expired capabilities entry is removed after this


class ReconcilerStep(bootsteps.StartStopStep):
    """Run a reconciler pass every ``settings.dispatch.reconcile_interval_s``."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._timer: Any = None

    def start(self, parent: Any) -> None:
        interval = parent.app.dagwright_settings.dispatch.reconcile_interval_s
        self._timer = parent.timer.call_repeatedly(interval, self._tick, (parent.app,), priority=10)

    def stop(self, parent: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            release(reconciler_for(parent.app))  # a standby takes over at its next pass

    shutdown = stop

    @staticmethod
    def _tick(app: Any) -> None:
        one_pass(reconciler_for(app))


class PresenceStep(bootsteps.StartStopStep):
    """Keep ``dw:workers:<hostname>`` alive while the worker runs (which queues it
    serves), and its entry of ``dw:worker-capabilities`` (what it can run, for submits:
    workers/capabilities.py)."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._timer: Any = None
        self._started = time.time()
        self._capabilities: WorkerCapabilities | None = None

    def start(self, parent: Any) -> None:
        self._announce(parent)
        self._timer = parent.timer.call_repeatedly(
            PRESENCE_INTERVAL_S, self._announce, (parent,), priority=10
        )

    def stop(self, parent: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        try:
            runtime = execution_env(parent.app).runtime
            pipe = runtime.client.pipeline(transaction=False)
            pipe.delete(runtime.keys.worker_heartbeat(parent.hostname))
            pipe.hdel(runtime.keys.worker_capabilities, parent.hostname)
            pipe.execute()
        except Exception:
            log.debug("could not withdraw the presence record", exc_info=True)

    shutdown = stop

    def _announce(self, parent: Any) -> None:
        try:
            runtime = execution_env(parent.app).runtime
            key = runtime.keys.worker_heartbeat(parent.hostname)
            consumed = sorted(parent.app.amqp.queues.consume_from)
            broker = broker_identity(parent.app.conf.broker_url)
            capabilities = self._capabilities_of(runtime, consumed, pool_size(parent), broker)
            now = time.time()
            pipe = runtime.client.pipeline(transaction=False)
            pipe.hset(
                key,
                mapping={
                    "queues": ",".join(consumed),
                    "pid": os.getpid(),
                    "started_at": int(self._started),
                },
            )
            pipe.expire(key, PRESENCE_TTL_S)
            pipe.hset(
                runtime.keys.worker_capabilities,
                parent.hostname,
                capabilities.to_json(expires_at=now + PRESENCE_TTL_S),
            )
            pipe.hgetall(runtime.keys.worker_capabilities)
            entries = pipe.execute()[-1]
            forget_dead_workers(runtime, entries, now)
        except Exception:
            log.warning("could not refresh the worker's presence record", exc_info=True)

    def _capabilities_of(
        self, runtime: Runtime, queues: list[str], slots: int, broker: str
    ) -> WorkerCapabilities:
        """Built once: the registry and the settings do not change while the worker runs."""
        if self._capabilities is None:
            self._capabilities = WorkerCapabilities.of(
                runtime.registry, runtime.settings, queues, slots, broker
            )
        return self._capabilities


def pool_size(consumer: Any) -> int:
    """How many tasks the worker runs at once (0 if it cannot tell)."""
    concurrency = getattr(getattr(consumer, "controller", None), "concurrency", None)
    return concurrency if isinstance(concurrency, int) else 0


def forget_dead_workers(runtime: Runtime, entries: dict[str, str], now: float) -> None:
    """Drop the capabilities of workers that stopped refreshing them a while ago (killed
    without a chance to withdraw them); readers already ignore expired entries."""
    dead = [
        hostname
        for hostname, raw in entries.items()
        if WorkerCapabilities.from_json(raw)[1] < now - DEAD_WORKER_GRACE_S
    ]
    if dead:
        runtime.client.hdel(runtime.keys.worker_capabilities, *dead)


class Endpoint(Protocol):
    """A bound server (dagwright.metrics.server.MetricsServer) to run with the worker."""

    @property
    def url(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class MetricsStep(bootsteps.StartStopStep):
    """Serve the metrics endpoint given to the worker (``metrics_endpoint=``) from its main
    process, once the pool has started: a prefork pool's children never bind it."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, parent: Any, metrics_endpoint: Endpoint | None = None, **kwargs: Any):
        super().__init__(parent, **kwargs)
        self.endpoint = metrics_endpoint

    def include_if(self, parent: Any) -> bool:
        return self.endpoint is not None

    def start(self, parent: Any) -> None:
        assert self.endpoint is not None
        self.endpoint.start()
        log.info("serving metrics at %s", self.endpoint.url)

    def stop(self, parent: Any) -> None:
        if self.endpoint is not None:
            self.endpoint.stop()

    shutdown = stop
