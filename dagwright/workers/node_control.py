"""What an agent node may set for itself (``output_schema``, ``model``, ``max_tokens``,
``tools``, ``skills``), checked as the plan's problems, each one line the planner or a
person can act on. The values override the type's for that node only (``agent_loop.run_agent``).

The model must be one dagwright knows: a Claude model id (the Messages API rules read
them: ``llm/messages_api_rules``) or one the price table lists, so a typo or a made-up id
is refused before any call, not by a 404 after the node started; ``max_tokens`` at most
that model's output limit (the type's model when the node names none; the deployment's
default model is not known here, and the loop's own cap still applies).
"""

from __future__ import annotations

from dagwright.llm.messages_api_rules import CLAUDE_ID, LEGACY_CLAUDE_ID, max_output_tokens
from dagwright.llm.model_ids import model_family
from dagwright.llm.pricing import DEFAULT_MODEL_PRICES
from dagwright.models import Node
from dagwright.workers.agent_answers import output_schema_problems
from dagwright.workers.agent_spec import AgentSpec

CONTROL_FIELDS = ("output_schema", "model", "max_tokens", "tools", "skills")


def node_control_problems(node: Node, spec: AgentSpec) -> list[str]:
    """The problems of ``node``'s own settings as a node of agent type ``spec``."""
    problems = []
    if node.output_schema is not None:
        problems += output_schema_problems(node.output_schema)
    if node.model is not None and not is_known_model(node.model):
        problems.append(
            f"`model: {node.model}` is not a Claude model id dagwright knows "
            "(e.g. claude-sonnet-5-5); leave it out to use the type's"
        )
    problems += _max_tokens_problems(node, spec)
    problems += _tools_problems(node, spec)
    problems += _skills_problems(node, spec)
    return problems


def is_known_model(model: str) -> bool:
    """A Claude model id (any version or snapshot), or one the price table lists."""
    bare = model.lower().removeprefix("anthropic.")
    known_shape = CLAUDE_ID.match(bare) or LEGACY_CLAUDE_ID.match(bare)
    return bool(known_shape) or model_family(model) in DEFAULT_MODEL_PRICES


def _max_tokens_problems(node: Node, spec: AgentSpec) -> list[str]:
    model = node.model or spec.model
    if node.max_tokens is None or model is None:
        return []
    ceiling = max_output_tokens(model)
    if node.max_tokens <= ceiling:
        return []
    return [f"`max_tokens: {node.max_tokens}` is above the {ceiling} that {model} can write"]


def _tools_problems(node: Node, spec: AgentSpec) -> list[str]:
    if node.tools is None:
        return []
    foreign = [name for name in node.tools if name not in spec.tools]
    if not foreign:
        return []
    return [
        f"`tools` may only narrow the {spec.name}'s tools ({', '.join(spec.tools) or 'none'}); "
        f"not theirs: {', '.join(foreign)}"
    ]


def _skills_problems(node: Node, spec: AgentSpec) -> list[str]:
    if node.skills is None:
        return []
    given = [skill.name for skill in spec.attached_skills]
    foreign = [name for name in node.skills if name not in given]
    if not foreign:
        return []
    return [
        f"`skills` may only narrow the {spec.name}'s skills ({', '.join(given) or 'none'}); "
        f"not theirs: {', '.join(foreign)}"
    ]
