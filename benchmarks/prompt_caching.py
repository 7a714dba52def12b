"""What prompt caching saves, flow by flow: the input cost of agent runs with cache
breakpoints (``llm_prompt_cache_ttl=5m``) and without (``off``), against the strict fake.

    python benchmarks/prompt_caching.py [--rounds 3] [--context-chars 45000]

Three flows, each run through the real ``anthropic`` SDK to ``dagwright.testing``'s fake
Messages API (a fresh fake for each run, so no cache is shared between runs or sides),
on ``claude-sonnet-5-5``:

- ``readme goal``: the README's goal ("Compare Redis streams and Kafka for our event
  bus"), planned and run on ``examples/fake-llm/goal.yaml``'s answers: the planner, two
  researchers, the synthesis writer (each node in turn, as a run's would be);
- ``3-researcher chain``: three researchers, each working on the one before, in a run
  given a 45,000-character ``--context``; each answers in one turn;
- ``6-turn researcher``: one researcher reading a 40,000-character input, keeping notes
  in the workspace and answering at its sixth call.

The input is priced from the usage the fake reports (``input_tokens`` at the input price,
``cache_creation_input_tokens`` at the 5-minute write price, ``cache_read_input_tokens``
at the read price) with Sonnet 5.5's published prices ($2 input, $2.50 write, $0.10
read per million tokens), so that two checkouts are priced alike. The fake caches as the
API does (a prefix at least the model's minimum, read back within its TTL through the
20-block lookback): a flow whose prefixes never reach the minimum shows no cache usage,
and costs the same both ways. Prints a table; exits 1 if caching costs more on any flow,
or saves less than the targets (30% on the chain, 40% on the 6-turn researcher).

``DAGWRIGHT_CHECKOUT=/path/to/other/checkout`` runs the same flows on another checkout's
``dagwright`` (the code before a change), for a before/after comparison.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
ROOT = Path(os.environ.get("DAGWRIGHT_CHECKOUT") or HERE)
sys.path.insert(0, str(ROOT))  # run as a script: dagwright from this (or that) checkout

from pydantic import SecretStr  # noqa: E402

from dagwright.llm.anthropic import AnthropicLLM  # noqa: E402
from dagwright.llm.pricing import priced  # noqa: E402
from dagwright.models import Node, Plan, Usage  # noqa: E402
from dagwright.planning.goals import GoalOptions, plan_locally, plan_request  # noqa: E402
from dagwright.settings import ModelPrice, Settings  # noqa: E402
from dagwright.testing import FakeAnthropicServer, MemoryServices  # noqa: E402
from dagwright.testing.fake_anthropic_script import Script  # noqa: E402
from dagwright.workers import builtin_registry  # noqa: E402
from dagwright.workers.agent_loop import AgentSpec, run_agent  # noqa: E402
from dagwright.workers.builtin_agents import builtin_agents  # noqa: E402
from dagwright.workers.context import RunBackground  # noqa: E402

MODEL = "claude-sonnet-5-5"
PRICE = ModelPrice(input=2, output=10, cache_read=0.1)  # published, November 2026
README_GOAL = "Compare Redis streams and Kafka for our event bus"
GOAL_SCRIPT = HERE / "examples" / "fake-llm" / "goal.yaml"
TARGETS = {"3-researcher chain": 0.30, "6-turn researcher": 0.40}


@dataclass(frozen=True)
class InputBill:
    """The input side of one flow: tokens read, and what they cost."""

    tokens: int
    cache_read: int
    cache_write: int
    cost_usd: float


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": arguments}


def answer(role: str, content: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    return {
        "match": {"system_contains": role, **match},
        "reply": {"content": content, "usage": {"output_tokens": 40}},
    }


# -- the flows: each runs its nodes against ``fake`` and returns their summed usage -----


def settings_for(fake: FakeAnthropicServer, ttl: str) -> Settings:
    return Settings(
        anthropic_base_url=fake.base_url,
        anthropic_api_key=SecretStr("benchmark"),
        default_model=MODEL,
        planner_model=MODEL,
        llm_prompt_cache_ttl=ttl,
    )


def run_nodes(
    services: MemoryServices, settings: Settings, nodes: list[Node], run_id: str = "run1"
) -> None:
    """Run agent ``nodes`` one after the other (in dependency order), each given the
    outputs of those it depends on, as a run's worker would."""
    registry = builtin_registry()
    outputs: dict[str, Any] = {}
    for node in nodes:
        spec = agent_spec(node.type)
        inputs = {dep: outputs[dep] for dep in node.depends_on}
        ctx = services.context(inputs=inputs, settings=settings, run_id=run_id, node_id=node.id)
        outputs[node.id] = run_agent(ctx, node, spec, registry.tools)


def readme_goal(fake: FakeAnthropicServer, settings: Settings, workspace: Path) -> Usage:
    fake.add(*Script.load(GOAL_SCRIPT).entries)
    registry = builtin_registry()
    options = GoalOptions(worker_types=["researcher", "writer"])
    request = plan_request(settings, registry, README_GOAL, options)
    plan, planning = plan_locally(settings, request, registry)
    services = MemoryServices(AnthropicLLM(settings.llm), workspace)
    services.background = RunBackground(goal=README_GOAL, nonce="0" * 32)
    run_nodes(services, settings, in_order(plan))
    return services.usage.plus(planning)


def researcher_chain(context: str) -> Callable[[FakeAnthropicServer, Settings, Path], Usage]:
    def flow(fake: FakeAnthropicServer, settings: Settings, workspace: Path) -> Usage:
        steps = ("Find the facts", "Check the facts", "Summarise the checked facts")
        fake.add(
            *(
                answer("You are the researcher", [text(f"{step}: done.")], last_user_contains=step)
                for step in steps
            )
        )
        services = MemoryServices(AnthropicLLM(settings.llm), workspace)
        services.background = RunBackground(
            goal="Brief us on our event bus options", context=context, nonce="0" * 32
        )
        nodes = [
            Node(id=f"r{i}", type="researcher", instruction=f"{step}.", depends_on=previous)
            for i, (step, previous) in enumerate(zip(steps, ([], ["r0"], ["r1"]), strict=True))
        ]
        run_nodes(services, settings, nodes)
        return services.usage

    return flow


def six_turn_researcher(brief: str) -> Callable[[FakeAnthropicServer, Settings, Path], Usage]:
    def flow(fake: FakeAnthropicServer, settings: Settings, workspace: Path) -> Usage:
        replies = [
            [text("Reading the brief."), call("read_input", node="brief")],
            [call("workspace_write", path="notes.md", content="Streams are append-only logs.")],
            [call("workspace_list")],
            [call("workspace_read", path="notes.md")],
            [call("workspace_write", path="summary.md", content="Consumer groups share work.")],
            [text("Redis streams are append-only logs read by groups.")],
        ]
        fake.add(
            *(
                answer("You are the researcher", content, messages_count=2 * turn + 1)
                for turn, content in enumerate(replies)
            )
        )
        services = MemoryServices(AnthropicLLM(settings.llm), workspace)
        ctx = services.context(inputs={"brief": brief}, settings=settings)
        node = Node(id="research", type="researcher", instruction="Collect the facts.")
        run_agent(ctx, node, agent_spec("researcher"), builtin_registry().tools)
        return services.usage

    return flow


def agent_spec(name: str) -> AgentSpec:
    return next(spec for spec in builtin_agents() if spec.name == name)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def in_order(plan: Plan) -> list[Node]:
    """The plan's nodes, each after those it depends on."""
    done: list[Node] = []
    waiting = list(plan.nodes)
    while waiting:
        ready = [n for n in waiting if all(d in {m.id for m in done} for d in n.depends_on)]
        done += ready
        waiting = [n for n in waiting if n not in ready]
    return done


# -- measuring -------------------------------------------------------------------------


def run_once(flow: Callable[[FakeAnthropicServer, Settings, Path], Usage], ttl: str) -> Usage:
    """One run of ``flow`` on a fresh fake; the usage of its calls, summed."""
    with FakeAnthropicServer() as fake, tempfile.TemporaryDirectory() as workspace:
        return flow(fake, settings_for(fake, ttl), Path(workspace))


def input_bill(usage: Usage) -> InputBill:
    """The input tokens and their cost (the output priced at nothing)."""
    inputs_only = usage.model_copy(update={"output_tokens": 0})
    return InputBill(
        tokens=usage.input_tokens
        + usage.cache_read_input_tokens
        + usage.cache_creation_input_tokens,
        cache_read=usage.cache_read_input_tokens,
        cache_write=usage.cache_creation_input_tokens,
        cost_usd=priced(inputs_only, PRICE).cost_usd,
    )


def median_bill(bills: list[InputBill]) -> InputBill:
    return InputBill(
        tokens=int(statistics.median(b.tokens for b in bills)),
        cache_read=int(statistics.median(b.cache_read for b in bills)),
        cache_write=int(statistics.median(b.cache_write for b in bills)),
        cost_usd=statistics.median(b.cost_usd for b in bills),
    )


def measure(
    flow: Callable[[FakeAnthropicServer, Settings, Path], Usage], rounds: int
) -> dict[str, InputBill]:
    """The median bill of each side; the sides take turns, round after round."""
    bills: dict[str, list[InputBill]] = {"off": [], "5m": []}
    for _ in range(rounds):
        for ttl in bills:
            bills[ttl].append(input_bill(run_once(flow, ttl)))
    return {ttl: median_bill(side) for ttl, side in bills.items()}


def report(results: dict[str, dict[str, InputBill]]) -> int:
    """Print the table; 0 if every flow meets its target (and none costs more), else 1."""
    print(f"dagwright from {ROOT}, {MODEL}, input cost in USD")
    header = f"{'flow':<20} {'without caching':>16} {'with caching':>13} {'saving':>7}"
    print(header + "   cache write / read tokens")
    failed = False
    for name, sides in results.items():
        without, with_cache = sides["off"], sides["5m"]
        saving = 1 - with_cache.cost_usd / without.cost_usd
        target = TARGETS.get(name, 0.0)
        verdict = "" if saving >= target - 1e-9 else f"  (target {target:.0%}: NOT met)"
        failed = failed or bool(verdict)
        print(
            f"{name:<20} {without.cost_usd:>16.6f} {with_cache.cost_usd:>13.6f} {saving:>7.1%}"
            f"   {with_cache.cache_write:>6} / {with_cache.cache_read:<6}{verdict}"
        )
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side (median)")
    parser.add_argument("--context-chars", type=int, default=45_000, help="the chain's run context")
    parser.add_argument(
        "--brief-chars", type=int, default=40_000, help="the 6-turn researcher's input"
    )
    args = parser.parse_args(argv)
    prose = "Redis streams are append-only logs with consumer groups. " * 2000
    flows = {
        "readme goal": readme_goal,
        "3-researcher chain": researcher_chain(prose[: args.context_chars]),
        "6-turn researcher": six_turn_researcher(prose[: args.brief_chars]),
    }
    return report({name: measure(flow, args.rounds) for name, flow in flows.items()})


if __name__ == "__main__":
    sys.exit(main())
