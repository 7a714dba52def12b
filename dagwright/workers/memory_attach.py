"""Offering the memory tool to the agent types ``settings.memory.agent_memory`` names.

``[agent_memory.<type>]`` adds ``memory`` to the type's tools and puts its ``rules``
before the type's own policy rules. Attaching offers the tool; it allows nothing: with
no rule, every command is denied (and audited), as for any tool. A plan node's ``tools``
may leave it out (narrow), never add it to a type that is not offered it.
"""

from __future__ import annotations

from dataclasses import replace

from dagwright.errors import ConfigurationError
from dagwright.settings import Settings
from dagwright.workers.agent_spec import AgentSpec
from dagwright.workers.builtin_agents import agent_worker_type
from dagwright.workers.registry import WorkerRegistry
from dagwright.workers.tools.memory import MEMORY_TOOL
from dagwright.workers.tools.policy import PolicyRule, ToolPolicy


def attach_memory(registry: WorkerRegistry, settings: Settings) -> None:
    """Give each agent type of ``settings.memory.agent_memory`` the memory tool and its rules;
    ConfigurationError (one line) on a name that is no agent type."""
    for name, attached in settings.memory.agent_memory.items():
        spec = registry.declaration(name)
        if not isinstance(spec, AgentSpec):
            agents = sorted(
                wt.name
                for wt in registry.types()
                if isinstance(registry.declaration(wt.name), AgentSpec)
            )
            raise ConfigurationError(
                f"agent_memory names {name!r}, which is no agent type: the agent types are "
                f"{', '.join(agents)}"
            )
        rules = [PolicyRule.model_validate(rule.model_dump()) for rule in attached.rules]
        tools = spec.tools if MEMORY_TOOL in spec.tools else (*spec.tools, MEMORY_TOOL)
        equipped = replace(spec, tools=tools, policy=ToolPolicy(rules=[*rules, *spec.policy.rules]))
        registry.replace_type(agent_worker_type(equipped, registry.tools), declaration=equipped)
