"""Half-price LLM calls through the Message Batches API (issue 26, "runs nobody waits on
cost half"): real worker processes, real Valkey, the real SDK against the fake's batch
endpoints (``fake_anthropic_batches``), which hold a batch ``in_progress`` as long as a
test says.

- a run submitted with ``llm_batch``: its node waits visibly ("waiting on batch …",
  status, the client, ``status --json``), its call is sent once however often it is
  polled, and it is priced at half the list price;
- a batch that outlives ``llm_batch_max_wait_s`` is cancelled and the node dead-lettered;
- an expired batch sends the call again, as a retry;
- an agent type opted in by settings, and a schedule's runs, batch their calls too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

from dagwright import Client, PlanBuilder
from dagwright.llm.model_ids import price_of
from dagwright.llm.pricing import priced
from dagwright.models import RunStatus
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.processes import Workers
from tests.support.waiting import wait_until

pytestmark = pytest.mark.subprocess

ANSWER = {"reply": {"content": [{"type": "text", "text": "Found it."}]}, "times": -1}


def one_agent(name: str) -> PlanBuilder:
    plan = PlanBuilder(name)
    plan.agent("research", "researcher", "Find it.")
    return plan


def batched(settings: Settings, **more: Any) -> Settings:
    return settings.model_copy(update={"llm_batch_poll_s": 0.5, **more})


def sdk(fake_llm: FakeAnthropicServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", base_url=fake_llm.base_url, max_retries=0)


def test_a_batched_run_waits_visibly_sends_its_call_once_and_pays_half(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    # Parked most of the time: between two polls the node is queued, then running.
    settings = batched(subprocess_settings, llm_batch_poll_s=3.0)
    fake_llm.add(ANSWER)
    fake_llm.batches.processing_s = 3600.0  # until the test has looked
    workers.start(settings)
    client = Client(settings)
    run = client.submit(one_agent("batched").build(), llm_batch=True)

    wait_until(  # (before the worker is up, the node waits for a worker)
        lambda: {w.on for w in client.waits(run.run_id).values()} == {"batch"},
        timeout=90,
        what="the node waiting on its batch",
    )
    wait = client.waits(run.run_id)["research"]
    assert wait.on == "batch" and wait.name.startswith("msgbatch_")
    env = cli_env(settings, tmp_path)

    def shown_wait() -> str:
        shown = json_out(dagwright("status", run.run_id, "--json", env=env))
        return str((shown["nodes"]["research"]["waiting"] or {}).get("description", ""))

    described = wait_until(shown_wait, timeout=60, interval=0.5, what="status --json's wait")
    assert described.startswith(f"waiting on batch {wait.name} for ")
    assert fake_llm.batches.finish_all() == 1

    state = run.wait(timeout=120)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert state.result == "Found it."
    assert fake_llm.requests == []  # no streamed call: all went through the batch
    assert len(fake_llm.batched_requests) == 1  # polled several times, sent once
    node = state.nodes["research"]
    assert node.attempts == 1  # waiting on the batch spent no attempt
    price = price_of(settings.llm.default_model, settings.llm.model_prices)
    list_price = priced(node.usage.model_copy(update={"cost_usd": 0.0}), price).cost_usd
    assert node.usage.cost_usd == pytest.approx(list_price / 2)


def test_a_batch_that_never_answers_is_cancelled_and_dead_lettered(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    settings = batched(subprocess_settings, llm_batch_max_wait_s=4.0)
    fake_llm.add(ANSWER)
    fake_llm.batches.processing_s = 3600.0
    workers.start(settings)
    client = Client(settings)
    run = client.submit(one_agent("stuck batch").build(), llm_batch=True)

    wait_until(lambda: client.status(run.run_id).status.is_final, timeout=120, what="the end")
    state = client.status(run.run_id)
    assert state.status == RunStatus.FAILED, workers.log_tails()
    error = state.nodes["research"].error
    assert error is not None and error.error_class == "BatchWaitExpiredError"
    assert "(DAGWRIGHT_LLM_BATCH_MAX_WAIT_S)" in error.message
    [letter] = client.dlq.list(run_id=run.run_id)
    assert letter.classification == "transient"
    batch_id = error.message.split()[2]  # "Message Batch <id> did not answer ..."
    assert sdk(fake_llm).messages.batches.retrieve(batch_id).request_counts.canceled == 1


def test_an_expired_batch_sends_the_call_again(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    settings = batched(subprocess_settings)
    fake_llm.add(ANSWER)
    fake_llm.batches.processing_s = 3600.0
    workers.start(settings)
    client = Client(settings)
    run = client.submit(one_agent("expired batch").build(), llm_batch=True)
    wait_until(  # (before the worker is up, the node waits for a worker)
        lambda: {w.on for w in client.waits(run.run_id).values()} == {"batch"},
        timeout=90,
        what="the node waiting on its batch",
    )

    fake_llm.batches.processing_s = 0.0  # the next batch answers at once
    assert fake_llm.batches.expire_all() == 1

    state = run.wait(timeout=120)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert len(fake_llm.batched_requests) == 2
    assert state.nodes["research"].attempts == 2  # the expiry was a failed attempt


def test_an_agent_type_in_llm_batch_types_batches_every_call(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    settings = batched(subprocess_settings, llm_batch_types=["researcher"])
    fake_llm.add(ANSWER)
    workers.start(settings)
    state = Client(settings).submit(one_agent("typed").build()).wait(timeout=120)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert fake_llm.requests == [] and len(fake_llm.batched_requests) == 1


def test_a_schedules_runs_batch_their_calls(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    settings = batched(subprocess_settings)
    fake_llm.add(ANSWER)
    workers.start(settings)
    client = Client(settings)
    client.schedules.add(
        "nightly", cron="0 3 * * *", plan=one_agent("nightly").build(), llm_batch=True
    )
    fired = client.schedules.run_now("nightly")
    assert fired.run_id is not None
    state = client.get_run(fired.run_id).wait(timeout=120)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert fake_llm.requests == [] and len(fake_llm.batched_requests) == 1


def test_the_fake_refuses_a_malformed_batch_as_the_api_does(
    fake_llm: FakeAnthropicServer,
) -> None:
    api = sdk(fake_llm)
    params = {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": []}
    with pytest.raises(anthropic.BadRequestError, match="custom_id: String should match"):
        api.messages.batches.create(requests=[{"custom_id": "not ok!", "params": params}])
    with pytest.raises(anthropic.BadRequestError, match="duplicate custom_id"):
        api.messages.batches.create(
            requests=[{"custom_id": "a", "params": params}, {"custom_id": "a", "params": params}]
        )
    fake_llm.batches.processing_s = 60.0
    batch = api.messages.batches.create(requests=[{"custom_id": "a", "params": params}])
    assert batch.processing_status == "in_progress" and batch.results_url is None
    with pytest.raises(anthropic.AnthropicError, match="results_url"):
        list(api.messages.batches.results(batch.id))
    fake_llm.batches.processing_s = 0.0
    streamed = {**params, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    done = api.messages.batches.create(
        requests=[{"custom_id": "empty", "params": params}, {"custom_id": "s", "params": streamed}]
    )
    results = {line.custom_id: line.result for line in api.messages.batches.results(done.id)}
    assert {result.type for result in results.values()} == {"errored"}  # checked when processed


def test_each_turn_of_a_batched_agent_waits_on_its_own_batch(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    """Three turns, each batch taking 2.5 s, under a 6 s bound per batch: the bound is
    each batch's, not the sum of a node's waits (found by review: retry.lua kept the
    first wait's start across batches, and would have dead-lettered this node)."""
    settings = batched(subprocess_settings, llm_batch_max_wait_s=6.0)
    tool_call = {"type": "tool_use", "name": "workspace_list", "input": {}}
    fake_llm.add(
        {"match": {"messages_count": 1}, "reply": {"content": [tool_call]}},
        {"match": {"messages_count": 3}, "reply": {"content": [tool_call]}},
        ANSWER,
    )
    fake_llm.batches.processing_s = 2.5
    workers.start(settings)
    state = Client(settings).submit(one_agent("turns").build(), llm_batch=True).wait(timeout=180)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert len(fake_llm.batched_requests) == 3
    assert state.nodes["research"].attempts == 1
