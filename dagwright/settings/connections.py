"""Where dagwright's processes connect to, and what they load: the store, the broker, Celery."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr

from dagwright.settings.section import CommaList, Section


def default_data_dir() -> Path:
    """Per-user data directory (XDG): the embedded Valkey's files and the stack file."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dagwright"


class RedisSettings(Section):
    """The run-state store and the broker: where they are, and how to reach them beyond
    their URLs (credentials and TLS, ``dagwright.redis_endpoint``)."""

    prefix: ClassVar[str] = "redis_"
    flat_names: ClassVar[dict[str, str]] = {"broker_url": "broker_url", "key_prefix": "key_prefix"}

    url: str | None = None
    """Run-state store. Unset: use a running ``dagwright up``, or (for ``dagwright run``)
    start an embedded Valkey for the duration of the command."""

    broker_url: str | None = None
    """Celery broker. Unset: the same server as ``redis_url``."""

    username: str | None = None
    """ACL user of every Redis connection (state store, broker, the primary a Sentinel
    names) whose URL carries no credentials of its own."""

    password: SecretStr | None = None
    """Password going with ``redis_username`` (or of the ``default`` user), for URLs
    without credentials: keeps it out of the URL, which commands print (redacted)."""

    tls_ca_file: Path | None = None
    """CA bundle (PEM) that the server certificate of a ``rediss://`` or ``sentinels://``
    URL must chain to. Unset: the system's trusted CAs."""

    tls_cert_file: Path | None = None
    """Client certificate (PEM) for servers that require one (``tls-auth-clients yes``)."""

    tls_key_file: Path | None = None
    """Private key (PEM) of ``redis_tls_cert_file``."""

    tls_cert_reqs: Literal["required", "optional", "none"] = "required"
    """Whether the server's certificate must be valid. ``none`` turns verification off:
    encrypted, but open to a man in the middle (only for tests)."""

    tls_check_hostname: bool = True
    """Whether the server's certificate must name the host of the URL."""

    sentinel_password: SecretStr | None = None
    """Password of the Sentinels themselves (``requirepass`` in sentinel.conf), when they
    have one; the primary's credentials come from the URL or ``redis_username`` /
    ``redis_password``."""

    key_prefix: str = "dw:"
    """Prefix of every key dagwright writes, so several deployments can share one Redis."""

    cluster_failover_wait_s: float = Field(30.0, ge=0, le=600)
    """On a ``redis+cluster://`` state store: how long a command that finds its primary
    unreachable, or the cluster down, is sent again (pausing up to 1 s between tries) while
    the cluster elects a replica in its place. The election comes after the cluster's
    ``cluster-node-timeout`` (15 s by default): keep this longer. 0: a few quick tries
    only, as redis-py makes."""

    @property
    def effective_broker_url(self) -> str | None:
        """The broker URL, defaulting to the state store."""
        return self.broker_url or self.url


class ProcessSettings(Section):
    """What every dagwright process loads at start-up, and where it keeps its files."""

    imports: CommaList = Field(default_factory=list)
    """Modules imported at start-up by workers and clients, to register your functions and
    worker types (comma-separated in the environment)."""

    data_dir: Path = Field(default_factory=default_data_dir)
    """Where the embedded Valkey keeps its data and the running stack is recorded."""

    worker_concurrency: int | None = Field(None, ge=1)
    """Processes per worker (default: the number of CPUs)."""


class CelerySettings(Section):
    """Your team's own Celery app, which ``celery_task`` nodes send their tasks through."""

    prefix: ClassVar[str] = "celery_"

    app: str | None = Field(None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    """Your team's own Celery app, as ``module:attribute`` (``myproject.celery:app``;
    ``celery_app`` in dagwright.toml): ``celery_task`` nodes send their tasks through it,
    by name, to your workers (your routing, rate limits, time limits and retries apply).
    It must have a result backend and use JSON only. Unset: plans with ``celery_task``
    nodes are refused. Workers serving ``celery_task`` import it; so does the reconciler,
    which reads the tasks' results and revokes those of stopped runs."""

    task_poll_s: float = Field(30.0, gt=0, le=3600)
    """The longest a ``celery_task`` node stays parked before a worker looks at its task
    itself: the reconciler wakes it as soon as the task's result is in (every pass), so
    this is only the backstop (a node is also woken at its ``timeout_s``, to revoke the
    task and time out)."""
