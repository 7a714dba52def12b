"""``run_if: always``: a teardown node runs as ``all_done`` does, and also after a cancel
and after a run timeout, which keep the run open for it (bounded by
``teardown_timeout_s``) and end it cancelled or failed once it is done. Real Valkey, a
real worker (threads pool, reconciler included)."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.errors import RunFailedError
from dagwright.json_views import run_json
from tests.support.functions import release_key
from tests.support.processes import Workers
from tests.support.waiting import wait_until


def kinds(client: Client, run_id: str) -> list[str]:
    return [event.kind for event in client.events(run_id, follow=False)]


def long_work_then_teardown(goal: str, *, held_teardown: bool) -> PlanBuilder:
    """``work`` (long), ``after`` (needs it), ``cleanup`` (always: held until the test
    releases it, or at once) and ``report`` (always, after ``cleanup``: in order)."""
    plan = PlanBuilder(goal)
    plan.function("work", "sleep", params={"seconds": 120})
    plan.function("after", "count", depends_on=["work"])
    if held_teardown:
        plan.function("cleanup", "held_until_released", depends_on=["work"], run_if="always")
    else:
        plan.function("cleanup", "count", depends_on=["work"], run_if="always")
    plan.function("report", "echo_inputs", depends_on=["work", "cleanup"], run_if="always")
    return plan


@pytest.mark.usefixtures("worker")
def test_a_cancel_runs_the_teardown_in_order_and_ends_the_run_cancelled(client: Client) -> None:
    run = client.submit(
        long_work_then_teardown("cancel, then clean up", held_teardown=True).build()
    )
    wait_until(lambda: client.status(run.run_id).nodes["work"].status == "running", timeout=30)

    state = run.cancel()
    assert state.status == RunStatus.RUNNING and state.tearing_down == RunStatus.CANCELLED
    assert state.reason == "cancelled by a user"
    assert state.teardown_note() == "tearing down after a cancel: 2 nodes"
    assert run_json(state)["tearing_down"] == "cancelled"  # the API's, the dashboard's
    assert {nid: n.status.value for nid, n in state.nodes.items() if nid in ("work", "after")} == {
        "work": "cancelled",
        "after": "cancelled",
    }
    wait_until(lambda: client.status(run.run_id).nodes["cleanup"].status == "running", timeout=30)
    assert client.status(run.run_id).nodes["report"].status == "pending"  # after cleanup
    assert client.cancel(run.run_id).tearing_down == RunStatus.CANCELLED  # a 2nd cancel waits

    client.runtime.client.set(release_key(run.run_id), 1)
    final = client.wait(run.run_id, timeout=30)
    assert final.status == RunStatus.CANCELLED and final.reason == "cancelled by a user"
    assert final.tearing_down is None and run_json(final)["tearing_down"] is None
    outputs = {nid: n.output for nid, n in client.status(run.run_id).nodes.items()}
    assert outputs["cleanup"] == "released"
    assert outputs["report"] == {
        "work": {"status": "cancelled"},
        "cleanup": {"status": "succeeded", "output": "released"},
    }
    assert "run.tearing_down" in kinds(client, run.run_id)


@pytest.mark.usefixtures("worker")
def test_a_teardown_running_when_the_run_is_cancelled_goes_on_unstopped(client: Client) -> None:
    plan = PlanBuilder("cancelled while cleaning up")
    plan.function("done_early", "count")
    # sleep stops early, failing, if its node is told to stop
    cleanup = {"seconds": 8}
    plan.function("cleanup", "sleep", params=cleanup, depends_on=["done_early"], run_if="always")
    plan.function("work", "sleep", params={"seconds": 120})
    run = client.submit(plan.build())
    wait_until(
        lambda: (
            {n.status.value for n in client.status(run.run_id).nodes.values()}
            == {"succeeded", "running"}
        ),
        timeout=30,
        what="cleanup and work running",
    )
    assert run.cancel().teardown_note() == "tearing down after a cancel: 1 node"
    final = client.wait(run.run_id, timeout=30)
    assert final.status == RunStatus.CANCELLED
    assert final.nodes["work"].status == "cancelled"
    # Not told to stop: its first attempt ran to its end (a stopped one is taken over).
    cleanup_state = final.nodes["cleanup"]
    assert cleanup_state.status == "succeeded" and cleanup_state.attempts == 1
    assert cleanup_state.output == 8


@pytest.mark.usefixtures("worker")
def test_a_run_timeout_runs_the_teardown_and_fails_the_run_with_its_reason(
    client: Client,
) -> None:
    plan = long_work_then_teardown("time out, then clean up", held_teardown=False)
    run = client.submit(plan.build(), timeout_s=2)
    final = client.wait(run.run_id, timeout=60)
    assert final.status == RunStatus.FAILED
    assert final.reason == "timed out after 2s (its run timeout)"
    states = {nid: n.status.value for nid, n in final.nodes.items()}
    assert states == {
        "work": "cancelled",
        "after": "cancelled",
        "cleanup": "succeeded",
        "report": "succeeded",
    }
    with pytest.raises(RunFailedError, match="timed out after 2s"):
        run.result(timeout=5)


@pytest.mark.usefixtures("worker")
def test_a_teardown_past_teardown_timeout_s_is_cancelled_and_the_run_ends(
    settings: Settings, client: Client
) -> None:
    quick = Client(settings.model_copy(update={"teardown_timeout_s": 1.5}))
    plan = PlanBuilder("a teardown that never ends")
    plan.function("work", "sleep", params={"seconds": 120})
    plan.function("cleanup", "sleep", params={"seconds": 120}, depends_on=["work"], run_if="always")
    run = quick.submit(plan.build())
    wait_until(lambda: quick.status(run.run_id).nodes["work"].status == "running", timeout=30)
    run.cancel()
    wait_until(lambda: quick.status(run.run_id).nodes["cleanup"].status == "running", timeout=30)

    final = quick.wait(run.run_id, timeout=30)
    assert final.status == RunStatus.CANCELLED
    assert {nid: n.status.value for nid, n in final.nodes.items()} == {
        "work": "cancelled",
        "cleanup": "cancelled",
    }
    assert "run.teardown_timed_out" in kinds(quick, run.run_id)


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize("fails", [False, True])
def test_without_a_stop_always_behaves_as_all_done(client: Client, fails: bool) -> None:
    plan = PlanBuilder("always, in a run nobody stops")
    plan.function("work", "flaky", params={"fail_times": 1 if fails else 0, "permanent": True})
    plan.function("cleanup", "echo_inputs", depends_on=["work"], run_if="always")
    run = client.submit(plan.build())
    final = client.wait(run.run_id, timeout=30)
    assert final.status == (RunStatus.FAILED if fails else RunStatus.SUCCEEDED)
    assert final.reason is None and final.tearing_down is None
    cleanup: Any = client.status(run.run_id).nodes["cleanup"].output
    assert cleanup["work"]["status"] == ("failed" if fails else "succeeded")


def test_a_teardown_whose_worker_is_killed_is_taken_over_and_still_ends_the_run(
    subprocess_settings: Settings, workers: Workers
) -> None:
    first = workers.start(subprocess_settings, concurrency=2)
    client = Client(subprocess_settings)
    plan = PlanBuilder("the teardown's worker dies")
    plan.function("work", "sleep", params={"seconds": 120})
    plan.function(
        "cleanup",
        "held_until_released",
        params={"seconds": 60},
        depends_on=["work"],
        run_if="always",
    )
    run = client.submit(plan.build())
    wait_until(lambda: client.status(run.run_id).nodes["work"].status == "running", timeout=60)
    run.cancel()
    wait_until(lambda: client.status(run.run_id).nodes["cleanup"].status == "running", timeout=60)

    first.kill_all()
    client.runtime.client.set(release_key(run.run_id), 1)
    workers.start(subprocess_settings, concurrency=2)
    final = client.wait(run.run_id, timeout=90)
    assert final.status == RunStatus.CANCELLED, workers.log_tails()
    cleanup = final.nodes["cleanup"]
    assert cleanup.status == "succeeded" and cleanup.attempts == 2
    assert cleanup.output == "released"
