"""One typed settings object for every dagwright process.

Precedence, highest first: a command-line flag (the CLI passes it to ``Settings(...)``),
an environment variable ``DAGWRIGHT_<NAME>``, the TOML file named by
``DAGWRIGHT_CONFIG_FILE`` (default ``./dagwright.toml``, optional), then the defaults
below. The object is passed to whatever needs it; nothing reads a module-level global.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


def default_data_dir() -> Path:
    """Per-user data directory (XDG): the embedded Valkey's files and the stack file."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dagwright"


class Settings(BaseSettings):
    """dagwright's configuration. Every field is settable as ``DAGWRIGHT_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="DAGWRIGHT_", extra="ignore", frozen=True, validate_default=True
    )

    redis_url: str | None = None
    """Run-state store. Unset: use a running ``dagwright up``, or (for ``dagwright run``)
    start an embedded Valkey for the duration of the command."""

    broker_url: str | None = None
    """Celery broker. Unset: the same server as ``redis_url``."""

    key_prefix: str = "dw:"
    """Prefix of every key dagwright writes, so several deployments can share one Redis."""

    imports: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Modules imported at start-up by workers and clients, to register your functions and
    worker types (comma-separated in the environment)."""

    max_nodes: int = Field(10_000, ge=1)
    """Largest plan accepted."""

    max_output_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    """Largest JSON output a node may produce; bigger outputs fail the node."""

    default_timeout_s: float = Field(3600.0, gt=0)
    """Execution time limit of a node whose plan sets no ``timeout_s``."""

    max_timeout_s: float = Field(6 * 3600.0, gt=0)
    """Largest ``timeout_s`` a plan may ask for; the broker's visibility timeout is twice this."""

    lease_s: float = Field(10.0, gt=0)
    """A running node's lease; its worker renews it. An expired lease re-queues the node."""

    heartbeat_interval_s: float = Field(2.0, gt=0)
    """How often a worker renews the leases of the nodes it runs."""

    reconcile_interval_s: float = Field(2.0, gt=0)
    """How often the reconciler looks for expired leases, due retries and lost publishes."""

    publish_grace_s: float = Field(5.0, gt=0)
    """A queued node whose message was not confirmed published after this is published again."""

    stranded_after_s: float = Field(20.0, gt=0)
    """A queued node not claimed after this, while its queue is empty, is published again."""

    retention_s: int = Field(7 * 24 * 3600, ge=60)
    """How long every key of a finished run is kept."""

    events_maxlen: int = Field(100_000, ge=100)
    """Approximate cap of a run's event stream."""

    worker_concurrency: int | None = Field(None, ge=1)
    """Processes per worker (default: the number of CPUs)."""

    data_dir: Path = Field(default_factory=default_data_dir)
    """Where the embedded Valkey keeps its data and the running stack is recorded."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = os.environ.get("DAGWRIGHT_CONFIG_FILE", "dagwright.toml")
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file))

    @field_validator("imports", mode="before")
    @classmethod
    def _split_imports(cls, value: object) -> object:
        # From the environment: "a.b,c.d", or a JSON list.
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            return json.loads(value)
        return [part.strip() for part in value.split(",") if part.strip()]

    @model_validator(mode="after")
    def _check_timing(self) -> Settings:
        if self.heartbeat_interval_s >= self.lease_s:
            raise ValueError(
                f"heartbeat_interval_s ({self.heartbeat_interval_s}) must be below lease_s "
                f"({self.lease_s}), or every lease expires before it is renewed"
            )
        return self

    @property
    def visibility_timeout_s(self) -> int:
        """Broker visibility timeout: far above any node's run time, so Redis never
        redelivers a live task (leases, not redelivery, detect dead workers)."""
        return int(2 * self.max_timeout_s)

    @property
    def effective_broker_url(self) -> str | None:
        """The broker URL, defaulting to the state store."""
        return self.broker_url or self.redis_url
