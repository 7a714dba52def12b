"""The ``/metrics`` endpoint: of ``dagwright metrics-server``, and of each worker started
with ``DAGWRIGHT_METRICS_PORT``.

Binding and serving are two steps (prometheus_client's ``start_http_server`` does both at
once): the port is taken first, so a port in use is one clear error before anything else
starts, and a worker serves only once its prefork pool has forked its children, so no
serving thread exists in the process they are forked from.

Beside ``/metrics``, ``GET /backlog?queue=<queue>`` answers one queue's ready backlog as
JSON (backlog_endpoint.py): what KEDA's metrics-api scaler reads to scale a worker type
(ops/helm/dagwright/templates/workers.yaml).
"""

from __future__ import annotations

import socket
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    make_wsgi_app,
)
from prometheus_client.exposition import ThreadingWSGIServer

from dagwright.connection import require_redis_url
from dagwright.errors import ConfigurationError
from dagwright.metrics import DEFAULT_PORT
from dagwright.metrics.backlog_endpoint import with_backlog
from dagwright.metrics.collector import DagwrightCollector
from dagwright.metrics.readings import MetricsReader
from dagwright.registry import build_registry
from dagwright.settings import Settings


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # one log line per scrape is noise


def metrics_reader(settings: Settings) -> MetricsReader:
    """The reader of the deployment's numbers, for every registered queue."""
    url = require_redis_url(settings)
    worker_types = build_registry(settings)  # whose queues are measured
    return MetricsReader(settings, url, settings.redis.broker_url or url, worker_types)


def metrics_registry(reader: MetricsReader) -> CollectorRegistry:
    """The dagwright collector, plus the process, platform and GC collectors of this process."""
    registry = CollectorRegistry()
    for collector in (ProcessCollector, PlatformCollector, GCCollector):
        collector(registry=registry)
    registry.register(DagwrightCollector(reader))
    return registry


class MetricsServer:
    """An HTTP server answering ``GET /metrics``; the port is bound when it is built."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        host: str,
        port: int,
        reader: MetricsReader | None = None,
    ) -> None:
        app = make_wsgi_app(registry)
        if reader is not None:  # also answers /backlog
            app = with_backlog(app, reader)
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
            server_class = type("Server", (ThreadingWSGIServer,), {"address_family": family})
            self._httpd: WSGIServer = make_server(
                host, port, app, server_class, handler_class=QuietHandler
            )
        except OSError as exc:
            raise ConfigurationError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; choose another "
                "port with --port or DAGWRIGHT_METRICS_PORT"
            ) from exc
        self.host = host
        self.port = int(self._httpd.server_port)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> None:
        """Answer requests from a daemon thread."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="dagwright-metrics", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()


def bind_metrics_server(
    settings: Settings, *, host: str | None = None, port: int | None = None
) -> MetricsServer:
    """A server for the deployment's metrics and ready backlog, bound
    (ConfigurationError if it cannot be)."""
    reader = metrics_reader(settings)
    return MetricsServer(
        metrics_registry(reader),
        host=host or settings.telemetry.metrics_host,
        port=port or settings.telemetry.metrics_port or DEFAULT_PORT,
        reader=reader,
    )
