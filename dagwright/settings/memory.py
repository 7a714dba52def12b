"""Agents' long-term memory: who may use which namespace, and its bounds."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from dagwright.settings.section import Section

MEMORY_NAMESPACE_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
"""A named memory namespace (``team-digest``): the pattern of schedule names. The names
dagwright derives (``schedule:<name>``, ``run:<id>``) hold a ``:``, so none is taken."""


class MemoryToolRule(BaseModel):
    """A policy rule on the memory tool of an agent type (as ``PolicyRule``, for the
    ``memory`` tool only): tried before the type's own rules, first match wins, and a call
    no rule matches is denied. ``when`` matches the command's fields, e.g. ``{command =
    "view"}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: Literal["memory"] = "memory"
    """Always ``memory``: these rules cannot widen what a type may do with other tools."""
    action: Literal["allow", "deny", "require_approval"]
    """What happens to a matching call."""
    when: dict[str, str] = Field(default_factory=dict)
    """Argument name -> glob its value must match (all of them): ``command``, ``path``..."""
    reason: str = ""
    """Why: shown to the model when the call is refused, and audited."""


class AgentMemorySettings(BaseModel):
    """The memory tool of one agent type: offered when this entry exists."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str | None = Field(None, pattern=MEMORY_NAMESPACE_PATTERN)
    """A named namespace every node of the type uses (a run's or schedule's own ``memory``
    wins). None: the schedule's for a scheduled run, else the run's."""
    read_only: bool = False
    """The type may view its memory, never change it: a write is refused, the reason told
    to the model."""
    rules: list[MemoryToolRule] = Field(default_factory=list)
    """Policy rules on the memory tool's commands. None: every call is denied (deny by
    default), as with any tool: ``[{action = "allow"}]`` allows them all."""


class MemorySettings(Section):
    """Agents' long-term memory: who may use which namespace, and its bounds."""

    prefix: ClassVar[str] = "memory_"
    flat_names: ClassVar[dict[str, str]] = {"agent_memory": "agent_memory"}

    agent_memory: dict[str, AgentMemorySettings] = Field(default_factory=dict)
    """Agent types offered the memory tool (the Messages API's ``memory_20250818``), by
    type name, with their namespace and the policy rules on its commands:
    ``[agent_memory.digest]`` ``rules = [{action = "allow"}]``. Attaching offers the tool;
    only a rule lets a command through (docs/memory.md)."""

    max_file_bytes: int = Field(64 * 1024, ge=1)
    """Largest memory file, in bytes (UTF-8): a write that would make a file bigger is
    refused, the reason told to the model."""

    max_files: int = Field(200, ge=1)
    """Most files one memory namespace holds: a write that would add one more is refused."""

    max_namespace_bytes: int = Field(1024 * 1024, ge=1)
    """Most bytes one memory namespace holds, all its files together: a write past it is
    refused."""

    retention_s: float = Field(90 * 24 * 3600.0, gt=0)
    """How long a memory namespace is kept after its last write, in seconds (each write
    renews it); then Redis forgets it whole."""

    namespace_retention_s: dict[str, float] = Field(default_factory=dict)
    """Retention of some namespaces, by name (``{"team-digest": 31536000}``), in place of
    ``memory_retention_s``; derived names too (``schedule:digest``)."""
