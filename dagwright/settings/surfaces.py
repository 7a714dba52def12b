"""What dagwright serves to people and other programs: the API, Flower, webhooks, telemetry."""

from __future__ import annotations

import ipaddress
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from dagwright.settings.section import CommaList, Section


class ServerSettings(Section):
    """``dagwright server``: the HTTP API and the dashboard."""

    prefix: ClassVar[str] = "server_"

    host: str = "127.0.0.1"
    """Address ``dagwright server`` (the HTTP API and the dashboard) listens on."""

    port: int = Field(8400, ge=1, le=65535)
    """Port of ``dagwright server``."""

    session_ttl_s: int = Field(8 * 3600, ge=60)
    """How long a dashboard login lasts (its session cookie and its record in Redis)."""

    max_event_streams: int = Field(100, ge=1, le=10_000)
    """Event streams (SSE) ``dagwright server`` keeps open at once; one more is refused
    (503 with Retry-After). Each reads Redis over a connection of the streams' own pool
    (this many connections) in a thread of their own: open streams never take a
    connection or a thread that the API's other calls need."""

    max_event_streams_per_token: int = Field(20, ge=1)
    """Event streams one API token (its dashboard sessions included) keeps open at once;
    one more is refused (429 with Retry-After)."""

    max_request_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest request body ``dagwright server`` accepts, in bytes (the default is that of
    ``max_plan_bytes``: a submit carries its plan; raise both together). Refused (413)
    before the body is read, parsed or its sender authenticated."""

    trusted_proxies: CommaList = Field(default_factory=list)
    """Addresses or networks (``10.0.0.5``, ``10.0.0.0/8``; comma-separated in the
    environment) of the reverse proxies in front of ``dagwright server``: only from these
    are ``X-Forwarded-Proto`` and ``X-Forwarded-For`` believed, so that a request that
    reached the proxy over https gets a ``Secure`` session cookie. Empty: none is."""

    keepalive_s: float = Field(15.0, gt=0)
    """Seconds between keep-alive comments of an idle event stream (SSE), so proxies and
    browsers do not take a quiet run for a dead connection."""

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, proxies: list[str]) -> list[str]:
        # Addresses only: a wildcard would let any client claim to be behind https.
        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(
                    f"server_trusted_proxies: {proxy!r} is not an IP address or network"
                ) from None
        return proxies


class FlowerSettings(Section):
    """Flower, Celery's monitor, as ``dagwright up`` starts it."""

    prefix: ClassVar[str] = "flower_"

    basic_auth: SecretStr | None = None
    """``user:password`` (comma-separated for several) that ``dagwright flower`` requires."""

    port: int = Field(5555, ge=1, le=65535)
    """Port of ``dagwright flower``."""


class WebhookSettings(Section):
    """Webhooks: how a run's events are signed and delivered."""

    prefix: ClassVar[str] = "webhook_"

    secret: SecretStr | None = None
    """Key that signs webhooks whose ``secret_env`` is unset (``DAGWRIGHT_WEBHOOK_SECRET``);
    a webhook with neither is sent unsigned (its receiver cannot tell it from a forgery)."""

    timeout_s: float = Field(10.0, gt=0, le=120)
    """Bound of one webhook delivery attempt (connect, send and read the answer)."""

    max_attempts: int = Field(8, ge=1, le=100)
    """Attempts of one webhook delivery before it is given up (then ``redeliver`` it)."""

    backoff_s: float = Field(5.0, gt=0)
    """Delay after a delivery's first failed attempt; doubled after each one."""

    backoff_max_s: float = Field(3600.0, gt=0)
    """Longest delay between two attempts of a delivery."""

    max_age_s: float = Field(24 * 3600.0, gt=0)
    """A delivery still failing this long after its run ended is given up."""


class TelemetrySettings(Section):
    """Metrics and traces."""

    metrics_port: int | None = Field(None, ge=1, le=65535)
    """Port on which each worker serves Prometheus metrics at ``/metrics``; unset: none.
    ``dagwright metrics-server`` serves the same metrics on its own."""

    metrics_host: str = "0.0.0.0"
    """Address the metrics endpoints listen on."""

    trace_enabled: bool = True
    """Record spans (nodes, LLM calls, tool calls, sandbox runs, retries, breaker events)
    for ``dagwright trace``."""

    trace_maxlen: int = Field(100_000, ge=100)
    """Spans kept per run (the oldest are trimmed first)."""

    otlp_endpoint: str | None = None
    """OTLP/HTTP endpoint (e.g. ``http://collector:4318``) to export spans to as well; needs
    the ``opentelemetry`` extra. Unset: spans stay in Redis only."""
