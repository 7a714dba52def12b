"""One typed run request (issue 32): every door builds the same frozen ``RunRequest``
(the client's keywords, the API's submit body, the MCP tool's arguments, the CLI's
flags, a schedule), its bounds checked once, in the model, with the lines callers read;
``start_run`` and ``prepare_run`` take it whole."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dagwright import Client, Plan, PlanBuilder, Settings
from dagwright.cli.runs import run_request_for
from dagwright.client.run_options import RUN_OPTION_NAMES, build_run_request
from dagwright.errors import InputError, RunInputError
from dagwright.models import Budget, Webhook
from dagwright.orchestrator.control import submission
from dagwright.orchestrator.control.run_request import RunRequest
from dagwright.schedules.definition import Schedule
from dagwright.server.routes.runs import SubmitRequest

MAX_PLAN_BYTES = 1_000_000


def greeting() -> Plan:
    plan = PlanBuilder("Greet")
    plan.function("hello", "concat", params={"parts": ["hello"]})
    return plan.build()


def built(plan: Any = None, **options: Any) -> RunRequest:
    return build_run_request("Client.submit", plan, options, max_plan_file_bytes=MAX_PLAN_BYTES)


def test_the_request_is_frozen_and_refuses_unknown_fields() -> None:
    request = RunRequest(goal="g")
    with pytest.raises(ValidationError):
        request.priority = 5  # type: ignore[misc]
    with pytest.raises(ValidationError):
        RunRequest(goal="g", timeout=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("options", "line"),
    [
        ({"max_concurrent_nodes": 0}, "max_concurrent_nodes must be at least 1, not 0"),
        ({"priority": 9}, "the priority must be 1 to 5 (higher first), not 9"),
        (
            {"timeout_s": math.inf},
            "the run timeout must be a positive number of seconds, at most 2592000, not inf",
        ),
        ({"not_before": 5}, "not_before is a datetime or ISO 8601 text, not int"),
        ({"countdown_s": "5"}, "countdown_s is a number of seconds, not str"),
    ],
)
def test_each_bound_is_one_line_of_the_model(options: dict[str, Any], line: str) -> None:
    with pytest.raises(InputError) as raised:
        RunRequest(goal="g", **options)
    assert str(raised.value) == line


def test_a_plan_or_a_goal_and_goal_options_on_goals_only() -> None:
    with pytest.raises(InputError, match=r"^give either a plan or a goal$"):
        RunRequest()
    with pytest.raises(InputError, match=r"^give either a plan or a goal$"):
        RunRequest(plan=greeting(), goal="g")
    with pytest.raises(InputError, match=r"^context, max_nodes apply to a goal, not to a plan$"):
        RunRequest(plan=greeting(), context="c", max_nodes=3)
    with pytest.raises(RunInputError, match="inputs are a mapping of names to values, not list"):
        RunRequest(goal="g", inputs=[1])  # type: ignore[arg-type]
    hooks = tuple(Webhook(url=f"https://h.example/{n}") for n in range(21))
    with pytest.raises(InputError, match="at most 20 webhooks"):
        RunRequest(goal="g", webhooks=hooks)


def test_the_client_keywords_build_it_coerced() -> None:
    request = built(
        greeting().model_dump(mode="json"),
        budget={"max_cost_usd": 1.0},
        budget_tokens=500,
        webhooks=["https://hooks.example/end"],
        memory="team-digest",
        priority=4,
    )
    assert request.plan == greeting()
    assert request.budget == Budget(max_cost_usd=1.0, max_total_tokens=500)
    assert request.webhooks == (Webhook(url="https://hooks.example/end"),)
    assert (request.memory, request.priority, request.llm_batch) == ("team-digest", 4, False)


def test_the_api_body_builds_the_same_request_as_the_keywords(client: Client) -> None:
    body = {
        "goal": "Summarise the news",
        "context": "for the team",
        "worker_types": ["writer"],
        "max_nodes": 4,
        "budget": {"max_total_tokens": 9000},
        "timeout_s": 60.0,
        "priority": 2,
        "memory": "team-digest",
        "webhooks": ["https://hooks.example/end"],
        "countdown_s": 5.0,
    }
    options = SubmitRequest.model_validate(body).model_dump(exclude={"plan", "idempotency_key"})
    from_body = client.run_request(None, **options)
    assert from_body == built(**body)
    assert from_body.goal_options().worker_types == ["writer"]


def test_the_cli_flags_build_the_same_request(tmp_path: Path, settings: Settings) -> None:
    plan_file = tmp_path / "greet.yaml"
    plan_file.write_text(
        "goal: Greet\nnodes:\n"
        "  - {id: hello, type: function, function: concat, params: {parts: [hello]}}\n"
    )
    flags: dict[str, Any] = {
        "context": "",
        "worker_types": None,
        "max_nodes": None,
        "max_depth": None,
        "replan": None,
        "budget": None,
        "max_concurrent_nodes": 2,
        "timeout_s": 30.0,
        "response_cache": None,
        "llm_batch": False,
        "webhooks": [],
        "priority": 5,
        "not_before": None,
        "countdown_s": None,
        "memory": "team-digest",
    }
    from_flags = run_request_for(str(plan_file), settings, flags)
    from_keywords = built(
        str(plan_file), max_concurrent_nodes=2, timeout_s=30.0, priority=5, memory="team-digest"
    )
    assert from_flags == from_keywords.model_copy(update={"inputs": from_flags.inputs})
    assert set(flags) <= RUN_OPTION_NAMES


def test_a_schedule_builds_its_request() -> None:
    schedule = Schedule(
        name="digest",
        every_s=60,
        goal="What changed?",
        worker_types=["writer"],
        budget_tokens=1000,
        priority=4,
        memory="team-digest",
        llm_batch=True,
    )
    request = schedule.run_request()
    assert request == RunRequest(
        goal="What changed?",
        worker_types=("writer",),
        budget=Budget(max_total_tokens=1000),
        priority=4,
        memory="team-digest",
        llm_batch=True,
    )
    assert schedule.followup_request("Look again").goal == "Look again"


def test_start_run_and_prepare_run_take_the_request_whole() -> None:
    for function in (submission.start_run, submission.prepare_run):
        parameters = inspect.signature(function).parameters
        assert "request" in parameters
        assert not {"plan", "goal", "priority", "memory", "timeout_s"} & set(parameters)
