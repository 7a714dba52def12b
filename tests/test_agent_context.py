"""Context that lasts: long agents on a real worker against the strict fake Messages API,
which clears tool results as the real API's context editing does.

The acceptance of issue 26: an agent re-reading a 19k-character file each turn for 40
turns finishes under the default budget, and a 60-turn tool loop's input per turn stays
bounded once past the trigger. Each prints what it measured (``-s`` shows it)."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.llm.context_management import CONTEXT_MANAGEMENT_BETA
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_context import managed_prompt
from dagwright.testing.fake_anthropic_tokens import count_input_tokens
from dagwright.workers.agent_spec import AgentSpec
from tests.support.functions import REREADER
from tests.support.llm_script import UNPRICED_MODEL, call, text

pytestmark = pytest.mark.usefixtures("worker")

FILE = "big.txt"


def rereads(turns: int) -> list[dict[str, Any]]:
    """The rereader's script: read the file, then read it again, ``turns`` turns in all."""
    read = call("workspace_read", path=FILE)
    return [
        {"match": {"system_contains": REREADER, "messages_count": 1}, "reply": {"content": [read]}},
        {
            "match": {"system_contains": REREADER, "tool_result_for": "workspace_read"},
            "reply": {"content": [text("Once more."), read]},
            "times": turns - 2,
        },
        {"match": {"system_contains": REREADER}, "reply": {"content": [text("The file is read.")]}},
    ]


def reread_plan(chars: int, **reader: Any) -> PlanBuilder:
    plan = PlanBuilder("Read a big file many times")
    seed = plan.function("seed", "write_file", params={"path": FILE, "chars": chars})
    plan.agent("reader", "rereader", f"Read {FILE} again and again.", depends_on=[seed], **reader)
    return plan


def read_per_turn(fake: FakeAnthropicServer) -> list[int]:
    """Input tokens the model read on each call, as the fake counted them (after its
    context edits)."""
    bodies = [r.body for r in fake.requests if REREADER in str(r.body.get("system"))]
    return [count_input_tokens(managed_prompt(body)[0]) for body in bodies]


def run_rereader(
    client: Client, fake: FakeAnthropicServer, turns: int, chars: int
) -> tuple[Any, list[int]]:
    fake.add(*rereads(turns))
    run = client.submit(reread_plan(chars).build())
    state = run.wait(timeout=240)
    calls = [e.typed_data() for e in run.events(follow=False) if e.kind == "llm.call"]
    cleared = [call.get("cleared_tool_uses", 0) for call in calls]
    print(f"\ncleared tool uses per call (llm.call events): {cleared}")
    assert any(cleared), "no llm.call event shows what the API cleared"
    return state, read_per_turn(fake)


def report(name: str, state: Any, per_turn: list[int]) -> None:
    usage = state.nodes["reader"].usage
    print(
        f"\n{name}: {state.status.value}, {len(per_turn)} turns, input tokens read per turn "
        f"{per_turn}, {usage.read_input_tokens:,} read in all, {usage.billed_total_tokens:,} "
        f"billed-equivalent tokens of the {AgentSpec.token_budget:,} budget, "
        f"{usage.cache_read_input_tokens:,} of them cache reads, ${usage.cost_usd:.4f}"
    )


def test_an_agent_rereading_a_19k_file_for_40_turns_finishes_under_the_default_budget(
    client: Client, fake_llm: FakeAnthropicServer, settings: Settings
) -> None:
    state, per_turn = run_rereader(client, fake_llm, turns=40, chars=19_000)
    report("19k re-read, 40 turns", state, per_turn)
    assert state.status == RunStatus.SUCCEEDED, state.nodes["reader"].error
    assert state.nodes["reader"].output == "The file is read."
    assert len(per_turn) == 40
    usage = state.nodes["reader"].usage
    assert usage.billed_total_tokens < AgentSpec.token_budget
    # the API cleared older results: no call read more than the trigger and a batch
    assert max(per_turn) < settings.agent_context.trigger_tokens + 8 * 5_000
    sent = fake_llm.requests[-1]
    assert CONTEXT_MANAGEMENT_BETA in sent.headers.get("anthropic-beta", "")


def test_a_60_turn_tool_loop_reads_a_bounded_prompt_every_turn_after_the_trigger(
    client: Client, fake_llm: FakeAnthropicServer, settings: Settings
) -> None:
    state, per_turn = run_rereader(client, fake_llm, turns=60, chars=6_000)
    report("6k re-read, 60 turns", state, per_turn)
    assert state.status == RunStatus.SUCCEEDED, state.nodes["reader"].error
    trigger = settings.agent_context.trigger_tokens
    cleared = next(i for i in range(1, len(per_turn)) if per_turn[i] < per_turn[i - 1])
    after = per_turn[cleared:]
    assert len(after) > 30  # most of the loop runs past the trigger
    # bounded: never past the trigger by more than a batch of results (about 1,600 tokens
    # each); and flat: the last turns read about what the first ones after the trigger
    # did (each cleared call leaves a few tokens of placeholder)
    assert max(per_turn) < trigger + settings.agent_context.clear_batch * 2_000
    assert max(after[-10:]) < 1.3 * max(after[:10])
    # what it would be without clearing: the whole conversation, growing every turn
    bodies = [r.body for r in fake_llm.requests if REREADER in str(r.body.get("system"))]
    assert count_input_tokens(bodies[-1]) > 2 * max(after)


def test_without_context_editing_older_turns_are_summarised_and_the_agent_goes_on(
    client: Client, fake_llm: FakeAnthropicServer, settings: Settings
) -> None:
    fake_llm.add(
        *rereads(30),
        {
            "match": {"system_contains": "You condense the record"},
            "reply": {"content": [text("Read big.txt many times; it holds numbered lines.")]},
            "times": -1,
        },
    )
    # a model the context editing page does not list: the client summarises instead
    run = client.submit(reread_plan(6_000, model=UNPRICED_MODEL).build())
    state = run.wait(timeout=240)
    per_turn = read_per_turn(fake_llm)
    report("6k re-read, 30 turns, summarised", state, per_turn)
    assert state.status == RunStatus.SUCCEEDED, state.nodes["reader"].error
    summaries = [r for r in fake_llm.requests if "You condense" in str(r.body.get("system"))]
    assert len(summaries) == 1 and "context_management" not in summaries[0].body
    assert summaries[0].body["max_tokens"] == settings.agent_context.summary_max_tokens
    after = [r.body for r in fake_llm.requests if REREADER in str(r.body.get("system"))][-1]
    first = after["messages"][0]["content"]
    assert "Read big.txt many times" in first[-1]["text"]  # the summary follows the task
    assert max(per_turn) < settings.agent_context.trigger_tokens + 2_000
    assert min(per_turn[20:]) < settings.agent_context.trigger_tokens / 2  # it dropped
