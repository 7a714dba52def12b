"""One typed settings object for every dagwright process, in sections.

Precedence, highest first: a command-line flag (the CLI passes it to ``Settings(...)``),
an environment variable ``DAGWRIGHT_<NAME>``, the TOML file named by
``DAGWRIGHT_CONFIG_FILE`` (which must exist if set; default ``./dagwright.toml``, if
there is one), then the defaults. The object is passed to whatever needs it; nothing
reads a module-level global.

Code reads a section (``settings.sandbox.memory_mb``, ``settings.llm.max_attempts``), and
code that needs one group of settings is given that section only (``settings.sandbox``
for the sandbox backends, ``settings.llm`` for the LLM client). Users keep writing flat
names: ``DAGWRIGHT_SANDBOX_MEMORY_MB``, ``sandbox_memory_mb`` in dagwright.toml,
``Settings(sandbox_memory_mb=...)``; ``sources.py`` routes each to its section.

Where each section lives:

- ``connections.py``: ``redis`` (store and broker), ``process`` (imports, data dir),
  ``celery`` (your Celery app).
- ``runs.py``: ``limits``, ``dispatch``, ``throttles``, ``retention``, ``node_logs``,
  ``workspace``, ``beat``, ``breakers``.
- ``llm.py``: ``llm``, ``agent_context``, ``planner``, ``evals``.
- ``tools.py``: ``http_tool``, ``web_tools``, ``egress``; ``sandbox.py``: ``sandbox``;
  ``mcp.py``: ``mcp``; ``memory.py``: ``memory``; ``skills.py``: ``skills``.
- ``surfaces.py``: ``server``, ``flower``, ``webhooks``, ``telemetry``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, ValidationError, ValidatorFunctionWrapHandler, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from dagwright.settings.connections import (
    CelerySettings,
    ProcessSettings,
    RedisSettings,
    default_data_dir,
)
from dagwright.settings.llm import (
    AgentContextSettings,
    EvalSettings,
    LLMRateLimit,
    LLMSettings,
    ModelPrice,
    PlannerSettings,
)
from dagwright.settings.mcp import (
    MCP_SERVER_NAME_PATTERN,
    AgentMcpSettings,
    McpServerSettings,
    McpSettings,
    McpToolRule,
)
from dagwright.settings.memory import (
    MEMORY_NAMESPACE_PATTERN,
    AgentMemorySettings,
    MemorySettings,
    MemoryToolRule,
)
from dagwright.settings.runs import (
    BeatSettings,
    BreakerSettings,
    DispatchSettings,
    NodeLogSettings,
    RetentionSettings,
    RunLimits,
    ThrottleSettings,
    WorkspaceSettings,
)
from dagwright.settings.sandbox import REQUIREMENT, SandboxSettings
from dagwright.settings.section import Section
from dagwright.settings.skills import (
    SKILL_TOOLS,
    AgentSkillsSettings,
    SkillSettings,
    SkillToolRule,
)
from dagwright.settings.sources import FlatNames, Nested, config_file_source, flat_env_source
from dagwright.settings.surfaces import (
    FlowerSettings,
    ServerSettings,
    TelemetrySettings,
    WebhookSettings,
)
from dagwright.settings.tools import (
    EgressSettings,
    HttpToolSettings,
    WebToolSettings,
    WebToolsSettings,
)

__all__ = [
    "FLAT_NAMES",
    "MCP_SERVER_NAME_PATTERN",
    "MEMORY_NAMESPACE_PATTERN",
    "REQUIREMENT",
    "SKILL_TOOLS",
    "AgentContextSettings",
    "AgentMcpSettings",
    "AgentMemorySettings",
    "AgentSkillsSettings",
    "BeatSettings",
    "BreakerSettings",
    "CelerySettings",
    "DispatchSettings",
    "EgressSettings",
    "EvalSettings",
    "FlowerSettings",
    "HttpToolSettings",
    "LLMRateLimit",
    "LLMSettings",
    "McpServerSettings",
    "McpSettings",
    "McpToolRule",
    "MemorySettings",
    "MemoryToolRule",
    "ModelPrice",
    "NodeLogSettings",
    "PlannerSettings",
    "ProcessSettings",
    "RedisSettings",
    "RetentionSettings",
    "RunLimits",
    "SandboxSettings",
    "Section",
    "ServerSettings",
    "Settings",
    "SkillSettings",
    "SkillToolRule",
    "TelemetrySettings",
    "ThrottleSettings",
    "WebToolSettings",
    "WebToolsSettings",
    "WebhookSettings",
    "WorkspaceSettings",
    "config_file_source",
    "default_data_dir",
]


class Settings(BaseSettings):
    """dagwright's configuration. Every setting is settable as ``DAGWRIGHT_<NAME>``, by its
    flat name (``sandbox_memory_mb``); code reads it in its section (``sandbox.memory_mb``)."""

    model_config = SettingsConfigDict(
        env_prefix="DAGWRIGHT_", extra="ignore", frozen=True, validate_default=True
    )

    redis: RedisSettings = Field(default_factory=RedisSettings)
    """The run-state store and the broker, and how to reach them."""
    process: ProcessSettings = Field(default_factory=ProcessSettings)
    """What every process imports, and where it keeps its files."""
    celery: CelerySettings = Field(default_factory=CelerySettings)
    """Your team's own Celery app."""
    limits: RunLimits = Field(default_factory=RunLimits)
    """Bounds on a run's plan, params, outputs and times."""
    dispatch: DispatchSettings = Field(default_factory=DispatchSettings)
    """Leases, heartbeats, the reconciler, priorities, deliveries."""
    throttles: ThrottleSettings = Field(default_factory=ThrottleSettings)
    """Concurrency slots and rate limits shared across runs."""
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    """How long runs, events, dead letters and idempotency keys are kept."""
    node_logs: NodeLogSettings = Field(default_factory=NodeLogSettings)
    """What a node attempt's logs may keep."""
    workspace: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    """A run's shared workspace files."""
    beat: BeatSettings = Field(default_factory=BeatSettings)
    """The schedules' beat."""
    breakers: BreakerSettings = Field(default_factory=BreakerSettings)
    """The circuit breakers of worker types."""
    llm: LLMSettings = Field(default_factory=LLMSettings)
    """The LLM client: endpoint, key, retries, rate limits, caches, prices."""
    agent_context: AgentContextSettings = Field(default_factory=AgentContextSettings)
    """How an agent's conversation is kept within bounds."""
    planner: PlannerSettings = Field(default_factory=PlannerSettings)
    """The planner, and the bounds of what it plans."""
    evals: EvalSettings = Field(default_factory=EvalSettings)
    """Evals and their judge."""
    http_tool: HttpToolSettings = Field(default_factory=HttpToolSettings)
    """The http_get tool."""
    web_tools: WebToolsSettings = Field(default_factory=WebToolsSettings)
    """The API's server-side web search and fetch."""
    egress: EgressSettings = Field(default_factory=EgressSettings)
    """The one door out."""
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    """The sandbox of model-written code."""
    mcp: McpSettings = Field(default_factory=McpSettings)
    """MCP servers for agents, and dagwright's own MCP server."""
    memory: MemorySettings = Field(default_factory=MemorySettings)
    """Agents' long-term memory."""
    skills: SkillSettings = Field(default_factory=SkillSettings)
    """Agent Skills, and the agent types they attach to."""
    server: ServerSettings = Field(default_factory=ServerSettings)
    """The HTTP API and dashboard."""
    flower: FlowerSettings = Field(default_factory=FlowerSettings)
    """Flower, as ``dagwright up`` starts it."""
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    """Webhook signing and delivery."""
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    """Metrics and traces."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            Nested(settings_cls, init_settings, FLAT_NAMES),
            flat_env_source(settings_cls, FLAT_NAMES),
            Nested(settings_cls, config_file_source(settings_cls), FLAT_NAMES),
        )

    @model_validator(mode="wrap")
    @classmethod
    def _by_flat_names(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # Flat keys into their sections; errors located by the flat name the user wrote.
        if isinstance(data, Mapping):
            data = FLAT_NAMES.nest(data)
        try:
            return handler(data)
        except ValidationError as exc:
            raise FLAT_NAMES.located(exc) from None

    @model_validator(mode="after")
    def _sandbox_packages_under_data_dir(self) -> Settings:
        # Unset, sandbox_packages_dir follows data_dir; it stays unset (not dumped).
        self._resolve_packages_dir()
        return self

    def _resolve_packages_dir(self) -> None:
        if "packages_dir" not in self.sandbox.model_fields_set:
            object.__setattr__(self, "sandbox", packages_under(self.sandbox, self.process.data_dir))

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with some settings changed, by flat name (``{"redis_url": url}``) or by
        section; like pydantic's, it does not validate the new values."""
        if not update:
            return super().model_copy(deep=deep)
        sections = {
            name: getattr(self, name).model_copy(update=values)
            for name, values in FLAT_NAMES.nest(update).items()
            if name in FLAT_NAMES.sections
        }
        copied = super().model_copy(update=sections, deep=deep)
        copied._resolve_packages_dir()
        return copied

    @property
    def visibility_timeout_s(self) -> int:
        """Broker visibility timeout: far above any node's run time, so Redis never
        redelivers a live task (leases, not redelivery, detect dead workers)."""
        return int(2 * self.limits.max_timeout_s)

    @property
    def workspace_root(self) -> Path:
        return self.workspace.dir or self.process.data_dir / "workspaces"

    def flat_value(self, flat: str) -> Any:
        """A setting's value, by its flat name (``sandbox_memory_mb``): for code that
        names settings in data (tests passing a list of them on to workers)."""
        section, field = FLAT_NAMES.place[flat]
        return getattr(getattr(self, section), field)

    def flat_dump(self, *, mode: Literal["python", "json"] = "python") -> dict[str, Any]:
        """Every setting by its flat name, as ``model_dump`` gives values."""
        dumped = self.model_dump(mode=mode)
        return {flat: dumped[section][field] for flat, (section, field) in FLAT_NAMES.place.items()}

    @classmethod
    def flat_fields(cls) -> dict[str, FieldInfo]:
        """Every setting by its flat name (``lease_s``), section by section."""
        return {
            flat: FLAT_NAMES.sections[section].model_fields[field]
            for flat, (section, field) in FLAT_NAMES.place.items()
        }

    @classmethod
    def flat_field(cls, flat: str) -> FieldInfo:
        """A setting's field, by its flat name (``lease_s``)."""
        section, field = FLAT_NAMES.place[flat]
        return FLAT_NAMES.sections[section].model_fields[field]


def packages_under(sandbox: SandboxSettings, data_dir: Path) -> SandboxSettings:
    """The sandbox section with its unset ``packages_dir`` under ``data_dir``."""
    resolved = sandbox.model_copy(update={"packages_dir": data_dir / "sandbox-packages"})
    resolved.__pydantic_fields_set__.discard("packages_dir")
    return resolved


FLAT_NAMES = FlatNames(
    {name: info.annotation for name, info in Settings.model_fields.items()}  # type: ignore[misc]
)
"""Every setting's flat name -> (section, field), from the sections' fields."""
