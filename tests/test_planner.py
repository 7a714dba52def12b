"""Goals planned into DAGs by the planner, through the real SDK against the fake API, on a
real worker and Valkey: parallel branches, synthesis, repairs, failure, re-planning."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_script import text_of
from tests.support.untrusted import without_tokens

pytestmark = pytest.mark.usefixtures("worker")

PLANNER = "You are the planner"


def submit_plan(*nodes: dict[str, Any], output: str | None = None, **match: Any) -> dict[str, Any]:
    """A script entry: the planner answers with ``submit_plan``."""
    plan: dict[str, Any] = {"goal": "g", "nodes": list(nodes)}
    if output:
        plan["output"] = output
    return {
        "match": {"system_contains": PLANNER, **match},
        "reply": {"content": [{"type": "tool_use", "name": "submit_plan", "input": plan}]},
    }


def agent(role: str, says: str, when: str, **entry: Any) -> dict[str, Any]:
    """A script entry: an agent of ``role`` whose instruction contains ``when`` says ``says``."""
    return {
        "match": {"system_contains": f"You are the {role}", "last_user_contains": when},
        "reply": {"content": [{"type": "text", "text": says}]},
        **entry,
    }


def node(node_id: str, type_: str, instruction: str, *deps: str) -> dict[str, Any]:
    return {"id": node_id, "type": type_, "instruction": instruction, "depends_on": list(deps)}


def dispatch_queue(client: Client, run_id: str, node_id: str) -> str:
    """The queue the node was routed to, from its stored spec (a succeeded run's
    ``dispatch`` column is dropped at its end: docs/internals/retention.md)."""
    from dagwright.models import Node

    raw = client.runtime.client.hget(client.runtime.keys.run_key(run_id, "spec"), node_id)
    return client.runtime.dispatch_for(Node.model_validate_json(raw or "{}")).queue


def test_a_goal_becomes_parallel_branches_and_a_synthesis(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        submit_plan(
            node("pros", "researcher", "List the pros of Redis streams."),
            node("cons", "researcher", "List the cons of Redis streams."),
        ),
        agent("researcher", "fast, durable", "List the pros", delay_s=0.6),
        agent("researcher", "memory-bound", "List the cons", delay_s=0.6),
        agent("writer", "Streams are fast and durable, but memory-bound.", "Combine the results"),
    )
    run = client.submit(goal="Weigh Redis streams for our event bus")
    assert run.status().status in (RunStatus.PLANNING, RunStatus.RUNNING)
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert state.result == "Streams are fast and durable, but memory-bound."
    assert set(state.nodes) == {"_plan", "pros", "cons", "synthesis"}
    assert state.output_nodes == ["synthesis"]
    pros, cons = state.nodes["pros"], state.nodes["cons"]
    assert pros.started_at and cons.started_at and pros.finished_at and cons.finished_at
    assert pros.started_at < cons.finished_at and cons.started_at < pros.finished_at  # concurrent
    assert dispatch_queue(client, run.run_id, "pros") == "dw.researcher"
    assert dispatch_queue(client, run.run_id, "synthesis") == "dw.writer"
    assert dispatch_queue(client, run.run_id, "_plan") == "dw.orchestrator"
    synthesis_prompt = without_tokens(text_of(fake_llm.requests[-1].body["messages"][0]["content"]))
    assert '<untrusted_input_T node="pros">\nfast, durable' in synthesis_prompt
    synthesis_system = text_of(fake_llm.requests[-1].body["system"])
    assert "<goal>\nWeigh Redis streams for our event bus\n</goal>" in synthesis_system
    planner_request = fake_llm.requests[0].body
    assert [tool["name"] for tool in planner_request["tools"]] == ["read_input", "submit_plan"]
    assert "- researcher (agent):" in text_of(planner_request["messages"][0]["content"])
    kinds = [e.kind for e in run.events(follow=False)]
    assert kinds.index("run.planned") < kinds.index("run.succeeded")
    assert state.nodes["_plan"].usage.llm_calls == 1


def test_a_planner_that_first_answers_nothing_is_nudged_and_the_goal_runs(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        {"match": {"system_contains": "You are the planner"}, "reply": {"content": []}},
        submit_plan(node("facts", "researcher", "List the facts."), output="facts"),
        agent("researcher", "Streams are logs.", "List the facts"),
    )
    state = client.submit(goal="Explain Redis streams", worker_types=["researcher"]).wait(60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert state.result == "Streams are logs."
    assert [request.status for request in fake_llm.requests] == [200, 200, 200]
    empty, nudged = (request.body["messages"] for request in fake_llm.requests[:2])
    assert all(message["content"] for message in nudged)  # no empty turn sent back
    assert len(nudged) == len(empty)  # the nudge joins the user's turn


def test_a_plan_with_a_cycle_is_repaired_on_the_second_try(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        submit_plan(
            node("a", "writer", "Do a.", "b"), node("b", "writer", "Do b.", "a"), messages_count=1
        ),
        submit_plan(node("a", "writer", "Do a."), output="a", messages_count=3),
        agent("writer", "done", "Do a."),
    )
    state = client.submit(goal="Write the thing").wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED and state.result == "done"
    rejection = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert rejection["is_error"]
    assert "dependency cycle a -> b -> a" in rejection["content"]


def test_a_model_that_never_plans_validly_fails_the_run_with_the_problem(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    cycle = submit_plan(node("a", "writer", "Do a.", "b"), node("b", "writer", "Do b.", "a"))
    fake_llm.add({**cycle, "times": -1})
    state = client.submit(goal="Write the thing").wait(timeout=60)
    assert state.status == RunStatus.FAILED
    planner = state.nodes["_plan"]
    assert planner.attempts == 1 and planner.error is not None
    assert planner.error.error_class == "PlanningFailedError"
    assert planner.error.message.startswith("the planner gave no valid plan in 3 tries")
    assert "dependency cycle a -> b -> a" in planner.error.message
    assert len(fake_llm.requests) == 3  # planner_max_repairs (2) + 1


@pytest.mark.parametrize("intro_state", ["completed", "still running"])
def test_a_failed_branch_is_replanned_and_completed_work_is_kept(
    client: Client, fake_llm: FakeAnthropicServer, intro_state: str
) -> None:
    # "completed": fetch needs intro, so intro is done when fetch fails and reaches the
    # re-planner as an input; "still running": intro is slow, and the new summary waits for it.
    fetch_deps = ["intro"] if intro_state == "completed" else []
    intro_delay = 0.0 if intro_state == "completed" else 1.5
    fake_llm.add(
        submit_plan(  # the re-plan, matched first: it is the more specific request
            node("fetch2", "researcher", "Find the figures in the archive."),
            node("summary2", "writer", "Summarise the figures.", "fetch2", "intro"),
            output="summary2",
            last_user_contains="Part of the plan for this goal failed",
        ),
        submit_plan(
            node("intro", "researcher", "Write the background."),
            {
                "id": "fetch",
                "type": "function",
                "function": "fail",
                "params": {"message": "source down"},
                "depends_on": fetch_deps,
            },
            node("summary", "writer", "Summarise the figures.", "fetch", "intro"),
            output="summary",
        ),
        agent("researcher", "background text", "Write the background", delay_s=intro_delay),
        agent("researcher", "figures: 1, 2, 3", "Find the figures in the archive"),
        agent("writer", "Summary of 1, 2, 3 with background.", "Summarise the figures"),
    )
    run = client.submit(goal="Report the quarterly figures", replan=True)
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, {
        k: (v.status, v.error) for k, v in state.nodes.items()
    }
    assert state.result == "Summary of 1, 2, 3 with background."
    statuses = {node_id: n.status.value for node_id, n in state.nodes.items()}
    assert statuses == {
        "_plan": "succeeded",
        "intro": "succeeded",
        "fetch": "replaced",
        "summary": "replaced",
        "_replan-1": "succeeded",
        "fetch2": "succeeded",
        "summary2": "succeeded",
    }
    assert state.counts.replaced == 2 and state.counts.failed == 0
    assert state.output_nodes == ["summary2"]
    intro_requests = [
        r for r in fake_llm.requests if "Write the background" in str(r.body["messages"][0])
    ]
    assert len(intro_requests) == 1 and state.nodes["intro"].attempts == 1  # never re-run
    replan_prompt = next(
        without_tokens(text_of(r.body["messages"][0]["content"]))
        for r in fake_llm.requests
        if "Part of the plan for this goal failed" in str(r.body["messages"][0])
    )
    assert "node 'fetch' failed for good" in replan_prompt
    assert '<untrusted_input_T source="error">\nsource down\n</untrusted_input_T>' in replan_prompt
    if intro_state == "completed":
        assert '<untrusted_input_T node="intro">\nbackground text' in replan_prompt
    else:
        assert "and on these nodes still running: intro" in replan_prompt
    summary_prompt = without_tokens(text_of(fake_llm.requests[-1].body["messages"][0]["content"]))
    assert '<untrusted_input_T node="intro">\nbackground text' in summary_prompt


def test_without_replanning_the_failed_branch_fails_the_run(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        submit_plan(
            {"id": "fetch", "type": "function", "function": "fail", "params": {"message": "down"}},
            output="fetch",
        )
    )
    state = client.submit(goal="Report the figures").wait(timeout=60)
    assert state.status == RunStatus.FAILED and "_replan-1" not in state.nodes


def test_a_run_budget_refuses_the_call_that_could_exceed_it(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    plan = PlanBuilder()
    plan.agent("research", "researcher", "Find it.")
    state = client.submit(plan.build(), budget_tokens=1000).wait(timeout=60)
    research = state.nodes["research"]
    assert state.status == RunStatus.FAILED and research.error is not None
    assert research.error.error_class == "BudgetExceededError"
    assert research.error.message.startswith("run budget 1,000 tokens: the next LLM call")
    assert "the call was not made" in research.error.message
    assert fake_llm.requests == []


def test_one_rejection_names_a_cycle_and_an_unknown_type_together(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        submit_plan(
            node("a", "writer", "Do a.", "b"),
            node("b", "wrtier", "Do b.", "a"),
            output="a",
            messages_count=1,
        ),
        submit_plan(node("a", "writer", "Do a."), output="a", messages_count=3),
        agent("writer", "done", "Do a."),
    )
    state = client.submit(goal="Write the thing").wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED and state.result == "done"
    rejection = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert rejection["is_error"]
    assert (
        "node 'b' has type 'wrtier', which no worker type is registered as" in rejection["content"]
    )
    assert "(did you mean 'writer'?)" in rejection["content"]
    assert "dependency cycle a -> b -> a" in rejection["content"]


def test_a_type_left_out_by_worker_types_is_named_not_allowed(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        submit_plan(node("a", "analyst", "Do a."), output="a", messages_count=1),
        submit_plan(node("a", "writer", "Do a."), output="a", messages_count=3),
        agent("writer", "done", "Do a."),
    )
    state = client.submit(goal="Write the thing", worker_types=["writer", "researcher"]).wait(60)
    assert state.status == RunStatus.SUCCEEDED and state.result == "done"
    rejection = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert rejection["content"] == (
        "rejected: node 'a' has type 'analyst', which is not allowed in this run "
        "(allowed: researcher, writer)"
    )


def test_a_planned_plan_with_knobs_out_of_bounds_is_repaired(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    def nap(seconds: float) -> dict[str, Any]:
        return {
            "id": "nap",
            "type": "function",
            "function": "sleep",
            "params": {"seconds": seconds},
        }

    turned_up = {
        **node("report", "writer", "Write the report.", "nap"),
        "approval": "required",
        "retry": {"max_attempts": 100},
        "timeout_s": 21600,
    }
    fake_llm.add(
        submit_plan(nap(20000), turned_up, output="report", messages_count=1),
        submit_plan(
            nap(0.01), node("report", "writer", "Write the report.", "nap"), output="report"
        ),
        agent("writer", "the report", "Write the report."),
    )
    state = client.submit(goal="Report after a pause").wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert state.result == "the report"
    first = text_of(fake_llm.requests[0].body["messages"][0]["content"])
    assert "Each node: no `approval`; timeout_s at most 1800; retry.max_attempts at most 5" in first
    rejection = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert rejection["is_error"]
    for bound in ("MAX_TIMEOUT_S", "MAX_SLEEP_S", "ALLOW_APPROVALS", "MAX_ATTEMPTS"):
        assert f"(DAGWRIGHT_PLANNER_{bound})" in rejection["content"]  # all in one rejection
    assert rejection["content"].count("node '") == 4  # and nothing else
    assert state.nodes["report"].attempts == 1 and state.nodes["_plan"].attempts == 1


def test_submit_plan_describes_every_field_and_offers_no_run_option(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    """The planner's manual of the plan language is submit_plan's schema: every field
    described, and nothing offered that the run would then ignore (issue 26)."""
    fake_llm.add(
        submit_plan(node("a", "writer", "Do a."), output="a"), agent("writer", "ok", "Do a.")
    )
    assert client.submit(goal="Write the thing").wait(timeout=60).status == RunStatus.SUCCEEDED

    planner_request = fake_llm.requests[0].body
    tool = next(t for t in planner_request["tools"] if t["name"] == "submit_plan")
    schema = tool["input_schema"]
    assert not {"budget", "timeout_s", "response_cache", "inputs", "webhooks"} & set(
        schema["properties"]
    )
    assert schema["properties"]["output"]["description"]
    node_fields = schema["$defs"]["Node"]["properties"]
    undescribed = [name for name, field in node_fields.items() if not field.get("description")]
    assert undescribed == []
    assert "self-contained" in node_fields["instruction"]["description"]
    system = text_of(planner_request["system"])
    for control in ("output_schema", "`tools`", "`model`", "max_tokens"):
        assert control in system
    first = text_of(planner_request["messages"][0]["content"])
    assert f"Today's date is {datetime.now(UTC).date().isoformat()}." in first


def test_a_planned_plan_setting_run_options_is_sent_back_not_stripped(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    """A model that writes webhooks or a budget into its plan is told they are not its
    to set, and corrects the plan; nothing it wrote is dropped in silence."""
    hooked = submit_plan(node("a", "writer", "Do a."), output="a", messages_count=1)
    plan = hooked["reply"]["content"][0]["input"]
    plan["webhooks"] = [{"url": "https://collector.example/x"}]
    plan["budget"] = {"max_cost_usd": 1000}
    fake_llm.add(
        hooked,
        submit_plan(node("a", "writer", "Do a."), output="a", messages_count=3),
        agent("writer", "done", "Do a."),
    )
    state = client.submit(goal="Write the thing").wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED and state.result == "done"
    rejection = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert rejection["is_error"]
    assert "`budget`, `webhooks`: run options are the submitter's" in rejection["content"]


def test_a_re_plan_replaces_the_none_failed_node_its_failure_blocked(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        submit_plan(  # the re-plan, matched first: it is the more specific request
            {"id": "fetch2", "type": "function", "function": "concat", "params": {"parts": ["ok"]}},
            {"id": "publish2", "type": "function", "function": "concat", "depends_on": ["fetch2"]},
            output="publish2",
            last_user_contains="Part of the plan for this goal failed",
        ),
        submit_plan(
            {"id": "fetch", "type": "function", "function": "fail", "params": {"message": "down"}},
            {
                "id": "publish",
                "type": "function",
                "function": "noop",
                "depends_on": ["fetch"],
                "run_if": "none_failed",
            },
            output="publish",
        ),
    )
    state = client.submit(goal="Publish the figures", replan=True).wait(timeout=60)
    statuses = {node_id: n.status.value for node_id, n in state.nodes.items()}
    assert statuses == {
        "_plan": "succeeded",
        "fetch": "replaced",
        "publish": "replaced",  # in the failure's branch: it blocked it, as a plain node
        "_replan-1": "succeeded",
        "fetch2": "succeeded",
        "publish2": "succeeded",
    }
    assert state.status == RunStatus.SUCCEEDED
