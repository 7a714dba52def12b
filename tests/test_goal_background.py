"""Goal-aware workers, on a real worker and Valkey against the fake API: every agent of a
goal run sees the goal and context (as fenced background), a plan ending in one node
answers with it, and a plan file without a goal shows no background."""

from __future__ import annotations

import pytest

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_script import text_of
from tests.support.llm_script import agent_node, answers, planned
from tests.support.untrusted import without_tokens

pytestmark = pytest.mark.usefixtures("worker")

GOAL = "Weigh Redis streams for our event bus"
CONTEXT = "We run three brokers in two regions; p99 latency matters more than cost."


def first_prompts(fake_llm: FakeAnthropicServer) -> list[str]:
    return [text_of(r.body["messages"][0]["content"]) for r in fake_llm.requests]


def test_every_agent_of_a_goal_run_sees_the_context(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        planned(
            agent_node("pros", "researcher", "List the pros of Redis streams."),
            agent_node("cons", "researcher", "List the cons of Redis streams."),
        ),
        answers("researcher", "fast, durable", "List the pros"),
        answers("researcher", "memory-bound", "List the cons"),
        answers("writer", "Fast but memory-bound.", "Combine the results"),
    )
    state = client.submit(goal=GOAL, context=CONTEXT).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert set(state.nodes) == {"_plan", "pros", "cons", "synthesis"}
    prompts = first_prompts(fake_llm)
    assert len(prompts) == 4  # the planner, two researchers, the synthesis writer
    assert all(CONTEXT in prompt for prompt in prompts)
    planner_system = str(fake_llm.requests[0].body["system"])
    assert "Make every instruction self-contained" in planner_system
    for worker_prompt in map(without_tokens, prompts[1:]):
        assert f'<untrusted_input_T source="goal">\n{GOAL}\n</untrusted_input_T>' in worker_prompt
        assert f'<untrusted_input_T source="context">\n{CONTEXT}\n' in worker_prompt
    assert without_tokens(prompts[-1]).endswith(
        "Your task:\nCombine the results of the tasks before you into one final answer to "
        "the run's goal (shown above as background), for the person who set it."
    )


def test_a_goal_planned_into_a_chain_answers_with_its_last_node(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        planned(
            agent_node("facts", "researcher", "Gather the facts about Redis streams."),
            agent_node("note", "writer", "Write a note from the facts.", "facts"),
        ),
        answers("researcher", "streams are logs", "Gather the facts"),
        answers("writer", "A note: streams are logs.", "Write a note"),
    )
    state = client.submit(goal=GOAL).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert set(state.nodes) == {"_plan", "facts", "note"}  # no synthesis over one sink
    assert state.output_nodes == ["note"] and state.result == "A note: streams are logs."
    assert len(fake_llm.requests) == 3


def test_a_plan_file_shows_its_goal_if_it_has_one_and_nothing_else(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(answers("researcher", "done", "Find it"), answers("researcher", "done", "Find it"))
    for goal in ("", GOAL):
        plan = PlanBuilder(goal=goal)
        plan.agent("find", "researcher", "Find it.")
        assert client.submit(plan.build()).wait(timeout=60).status == RunStatus.SUCCEEDED
    bare, with_goal = map(without_tokens, first_prompts(fake_llm))
    assert "Background" not in bare and 'source="goal"' not in bare
    assert bare.endswith("Find it.")
    assert f'<untrusted_input_T source="goal">\n{GOAL}\n' in with_goal
    assert 'source="context"' not in with_goal
