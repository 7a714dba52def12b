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

from dagwright.keys import Keys
from dagwright.tasks.env import execution_env, reconciler_for
from dagwright.tasks.reconciler_service import one_pass, release

log = logging.getLogger(__name__)

PRESENCE_INTERVAL_S = 5.0


class ReconcilerStep(bootsteps.StartStopStep):
    """Run a reconciler pass every ``settings.reconcile_interval_s``."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._timer: Any = None

    def start(self, parent: Any) -> None:
        interval = parent.app.dagwright_settings.reconcile_interval_s
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
    """Keep ``dw:workers:<hostname>`` alive while the worker runs: which queues it serves."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._timer: Any = None
        self._started = time.time()

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
            runtime.client.delete(
                Keys(runtime.settings.key_prefix).worker_heartbeat(parent.hostname)
            )
        except Exception:
            log.debug("could not withdraw the presence record", exc_info=True)

    shutdown = stop

    def _announce(self, parent: Any) -> None:
        try:
            runtime = execution_env(parent.app).runtime
            key = runtime.keys.worker_heartbeat(parent.hostname)
            queues = ",".join(sorted(parent.app.amqp.queues.consume_from))
            pipe = runtime.client.pipeline(transaction=False)
            pipe.hset(
                key,
                mapping={"queues": queues, "pid": os.getpid(), "started_at": int(self._started)},
            )
            pipe.expire(key, int(PRESENCE_INTERVAL_S * 3))
            pipe.execute()
        except Exception:
            log.warning("could not refresh the worker's presence record", exc_info=True)


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
