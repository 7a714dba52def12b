"""``celery_task`` nodes (issue 34): a task of the team's own Celery app, sent by name to
the team's own worker, on real worker subprocesses of both apps sharing one Valkey.

The team's app is ``tests/support/celery_team_app.py`` (queue ``team``, a result backend,
JSON only); its worker is ``celery -A tests.support.celery_team_app worker -Q team``.
dagwright's worker serves ``celery_task`` and ``function`` with ONE slot: a plan whose
team task waits for a gate that a dagwright function node opens can only finish if the
waiting node holds no slot.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from celery import Celery

from dagwright import Client, PlanBuilder, Settings
from dagwright.errors import PlanError, TeamAppError, TeamTaskFailedError, TeamTaskPendingError
from dagwright.keys import Keys
from dagwright.models import Node, NodeStatus, RunStatus
from dagwright.tasks.team_app import CeleryTeamApp, stored_outcome
from dagwright.workers.capabilities import WorkerCapabilities
from dagwright.workers.context import NodeContext
from dagwright.workers.team_tasks import SentTask, TaskOutcome, run_celery_task
from tests.support.celery_team_app import body_runs_key, gate_key
from tests.support.processes import GroupProcess, WorkerProcess, Workers
from tests.support.waiting import wait_until

TEAM_APP = "tests.support.celery_team_app:app"
GATES = "tests.support.team_gates"


class TeamWorker(GroupProcess):
    """``celery -A tests.support.celery_team_app worker -Q team``: the team's own worker,
    in its own process group (so a SIGKILL takes its pool children too)."""

    def __init__(self, log_path: Path, *, pool: str = "solo") -> None:
        command = [sys.executable, "-m", "celery", "-A", "tests.support.celery_team_app"]
        command += ["worker", "-Q", "team", "-P", pool, "-c", "1", "-l", "INFO"]
        command += ["--without-mingle", "--without-gossip", "-n", f"team.{os.getpid()}@test"]
        super().__init__(command, log_path, dict(os.environ))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        wait_until(lambda: " ready." in self.log(), timeout=60, what="the team's worker ready")


@pytest.fixture
def team_settings(subprocess_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The subprocess settings with the team's app; its worker and ours find its broker
    (the same Valkey database as dagwright's broker) in the environment. A node's own
    poll is 5 minutes away: the runs here finish only if the reconciler wakes them."""
    monkeypatch.setenv("TEAM_APP_BROKER_URL", subprocess_settings.redis.broker_url or "")
    imports = [*subprocess_settings.process.imports, GATES]
    update = {"celery_app": TEAM_APP, "imports": imports, "celery_task_poll_s": 300.0}
    return subprocess_settings.model_copy(update=update)


@pytest.fixture
def team_workers(tmp_path: Path) -> Iterator[list[TeamWorker]]:
    started: list[TeamWorker] = []
    yield started
    for worker in started:
        worker.stop()


def start_team_worker(
    team_workers: list[TeamWorker], tmp_path: Path, pool: str = "solo"
) -> TeamWorker:
    worker = TeamWorker(tmp_path / f"team{len(team_workers)}.log", pool=pool)
    team_workers.append(worker)
    worker.wait_ready()
    return worker


def start_dagwright_worker(workers: Workers, settings: Settings) -> WorkerProcess:
    """A dagwright worker with ONE slot, serving celery_task and function nodes."""
    args = ("-t", "celery_task", "-t", "function", "--import", GATES)
    worker = workers.start(settings, concurrency=1, args=args)
    state = redis.Redis.from_url(settings.redis.url or "", decode_responses=True)
    wait_until(
        lambda: any(
            {"celery_task", "function"} <= set(WorkerCapabilities.from_json(raw)[0].worker_types)
            for raw in state.hvals(Keys().worker_capabilities)
        ),
        timeout=60,
        what="a dagwright worker serving celery_task",
    )
    return worker


def team_redis(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.redis.broker_url or "", decode_responses=True)


def body_runs(settings: Settings, tag: str) -> int:
    return int(team_redis(settings).get(body_runs_key(tag)) or 0)


def succeeded_events(client: Client, run_id: str, node_id: str) -> int:
    return sum(
        1
        for event in client.events(run_id, follow=False)
        if event.kind == "node.succeeded" and event.node == node_id
    )


def gated_plan(tag: str, *, open_it: bool) -> PlanBuilder:
    plan = PlanBuilder("a team task and a dagwright node at once")
    plan.celery_task("team", "team_app.wait_for_gate", kwargs={"tag": tag}, timeout_s=120)
    if open_it:
        plan.function("opener", "open_gate", params={"tag": tag})
    return plan


def test_a_team_task_runs_on_the_teams_worker_while_dagwrights_only_slot_runs_another_node(
    team_settings: Settings, workers: Workers, team_workers: list[TeamWorker], tmp_path: Path
) -> None:
    """Acceptance: the team task runs on the team's worker (its log says so) and blocks
    until the gate opens; dagwright's one slot meanwhile runs the node that opens it."""
    team = start_team_worker(team_workers, tmp_path)
    start_dagwright_worker(workers, team_settings)
    client = Client(team_settings)
    plan = gated_plan("slotless", open_it=True)
    plan.celery_task("prices", "team_app.fetch_prices", kwargs={"ticker": "ACME", "days": 2})
    run = client.submit(plan.build(output=["team", "prices"]))
    state = run.wait(timeout=90)
    assert state.status == RunStatus.SUCCEEDED, (workers.log_tails(), team.log()[-3000:])
    assert state.result == {
        "team": {"tag": "slotless", "gate": "opened"},
        "prices": {"ticker": "ACME", "prices": [100, 101]},
    }
    task_id = f"{run.run_id}.team.1.team"
    assert f"team_app.wait_for_gate[{task_id}] succeeded" in team.log()
    assert "team_app.fetch_prices[" in team.log()
    assert body_runs(team_settings, "slotless") == 1
    assert succeeded_events(client, run.run_id, "team") == 1


def test_a_team_task_that_fails_fails_its_node_under_its_own_class(
    team_settings: Settings, workers: Workers, team_workers: list[TeamWorker], tmp_path: Path
) -> None:
    """The task's own retry (autoretry_for) runs on the team's side; its final failure
    fails the node under the team's exception class and message, dead-lettered."""
    start_team_worker(team_workers, tmp_path)
    start_dagwright_worker(workers, team_settings)
    client = Client(team_settings)
    plan = PlanBuilder("no such ticker")
    plan.celery_task("prices", "team_app.no_prices", kwargs={"ticker": "ZZZ"})
    state = client.submit(plan.build()).wait(timeout=90)
    assert state.status == RunStatus.FAILED, workers.log_tails()
    error = state.nodes["prices"].error
    assert error is not None
    assert (error.error_class, error.message) == ("LookupError", "no prices for ZZZ")
    assert body_runs(team_settings, "no_prices:ZZZ") == 2  # its own retry, on its worker
    assert state.nodes["prices"].attempts == 1  # no dagwright retry on top

    # Past the node's timeout_s from the send, the task is revoked and the node times out.
    slow = PlanBuilder("a gate nobody opens")
    kwargs = {"tag": "shut", "timeout_s": 8}
    slow.celery_task("slow", "team_app.wait_for_gate", kwargs=kwargs, timeout_s=3)
    state = client.submit(slow.build()).wait(timeout=60)
    error = state.nodes["slow"].error
    assert error is not None and error.error_class == "NodeTimeoutError", workers.log_tails()
    assert error.message.endswith("had no result within the node's timeout_s of 3s: revoked")


def test_sigkill_of_dagwrights_worker_after_the_send_still_completes_the_node_once(
    team_settings: Settings, workers: Workers, team_workers: list[TeamWorker], tmp_path: Path
) -> None:
    team = start_team_worker(team_workers, tmp_path)
    first = start_dagwright_worker(workers, team_settings)
    client = Client(team_settings)
    run = client.submit(gated_plan("dw-killed", open_it=False).build())
    wait_until(lambda: body_runs(team_settings, "dw-killed") == 1, timeout=60, what="task started")
    first.kill_all()  # the task was sent: dagwright's worker dies, the team's runs on
    start_dagwright_worker(workers, team_settings)
    team_redis(team_settings).set(gate_key("dw-killed"), "1")
    state = run.wait(timeout=90)
    assert state.status == RunStatus.SUCCEEDED, (workers.log_tails(), team.log()[-3000:])
    assert body_runs(team_settings, "dw-killed") == 1  # sent once, run once
    assert succeeded_events(client, run.run_id, "team") == 1


def test_sigkill_of_the_teams_worker_mid_task_still_completes_the_node_once(
    team_settings: Settings, workers: Workers, team_workers: list[TeamWorker], tmp_path: Path
) -> None:
    """An acks_late task of a killed team worker comes back (the team app's visibility
    timeout) to the next team worker; the node records its one result once."""
    first = start_team_worker(team_workers, tmp_path)
    start_dagwright_worker(workers, team_settings)
    client = Client(team_settings)
    run = client.submit(gated_plan("team-killed", open_it=False).build())
    wait_until(lambda: body_runs(team_settings, "team-killed") == 1, timeout=60, what="started")
    first.kill_all()
    team_redis(team_settings).set(gate_key("team-killed"), "1")
    second = start_team_worker(team_workers, tmp_path)
    state = run.wait(timeout=90)
    assert state.status == RunStatus.SUCCEEDED, (workers.log_tails(), second.log()[-3000:])
    assert state.nodes["team"].output == {"tag": "team-killed", "gate": "opened"}
    assert body_runs(team_settings, "team-killed") == 2  # redelivered: the body ran again
    assert succeeded_events(client, run.run_id, "team") == 1


def test_cancel_revokes_the_team_tasks_through_the_teams_app(
    team_settings: Settings, workers: Workers, team_workers: list[TeamWorker], tmp_path: Path
) -> None:
    """The running team task is terminated, the one queued behind it is discarded by the
    team's worker unrun; while they wait, status says on what."""
    team = start_team_worker(team_workers, tmp_path, pool="prefork")
    start_dagwright_worker(workers, team_settings)
    client = Client(team_settings)
    plan = gated_plan("cancelled-running", open_it=False)
    plan.celery_task("queued", "team_app.wait_for_gate", kwargs={"tag": "cancelled-queued"})
    run = client.submit(plan.build())

    def waiting_on_both() -> bool:
        nodes = client.status(run.run_id).nodes
        return all(
            nodes[name].status == NodeStatus.RETRY_WAIT and nodes[name].waiting is not None
            for name in ("team", "queued")
        )

    wait_until(waiting_on_both, timeout=60, what="both nodes waiting on their team tasks")
    wait_until(lambda: body_runs(team_settings, "cancelled-running") == 1, timeout=60, what="run")
    waiting = client.status(run.run_id).nodes["queued"].waiting
    assert waiting is not None and waiting.on == "celery_task"
    queued_id = waiting.name
    assert waiting.describe().startswith(
        f"waiting for Celery task {queued_id} on the team's workers for "
    )
    assert client.cancel(run.run_id).status == RunStatus.CANCELLED
    wait_until(
        lambda: f"Discarding revoked task: team_app.wait_for_gate[{queued_id}]" in team.log(),
        timeout=60,
        what="the team's worker discarding the queued task",
    )
    assert body_runs(team_settings, "cancelled-queued") == 0
    assert "Terminating" in team.log()


def test_a_team_app_without_a_result_backend_or_not_json_only_is_refused() -> None:
    no_backend = Celery("team", broker="redis://127.0.0.1:1/0")
    with pytest.raises(TeamAppError) as refused:
        CeleryTeamApp(no_backend, "team:app", 1024)
    assert str(refused.value) == (
        "the Celery app team:app has no result backend: celery_task nodes read their "
        "tasks' results from it; set result_backend (e.g. redis://...) in that app"
    )
    pickling = Celery("team", broker="redis://127.0.0.1:1/0", backend="redis://127.0.0.1:1/0")
    pickling.conf.update(result_serializer="pickle", accept_content=["json", "pickle"])
    with pytest.raises(TeamAppError, match=r"is not JSON-only .* refuse pickle"):
        CeleryTeamApp(pickling, "team:app", 1024)


def test_a_stored_failure_is_read_as_data_bounded() -> None:
    """No exception is rebuilt from the team's result (that would import its module)."""
    stored = {"status": "FAILURE", "result": {"exc_type": "LookupError", "exc_module": "evil",
              "exc_message": ["no prices for ZZZ" * 500]}}  # fmt: skip
    outcome = stored_outcome(stored)
    assert (outcome.ready, outcome.error_class) == (True, "LookupError")
    assert len(outcome.message) == 2_000
    assert stored_outcome(None).state == "PENDING" and not stored_outcome(None).ready


def test_a_stored_result_larger_than_an_output_may_be_is_refused_unparsed(
    settings: Settings,
) -> None:
    url = settings.redis.broker_url or ""
    app = CeleryTeamApp(Celery("team", broker=url, backend=url), "team:app", 1024)
    fits, too_big = f"fits-{uuid.uuid4().hex}", f"too-big-{uuid.uuid4().hex}"
    app.app.backend.store_result(fits, {"prices": [1, 2]}, "SUCCESS")
    app.app.backend.store_result(too_big, "x" * (1024 + 70 * 1024), "SUCCESS")
    outcomes = app.outcomes([fits, too_big, "never-sent"])
    assert outcomes[fits].output() == {"prices": [1, 2]}
    assert outcomes[too_big].error_class == "ResultTooLargeError"
    assert not outcomes["never-sent"].ready


def test_a_celery_task_node_without_a_team_app_is_refused_in_one_line(
    settings: Settings,
) -> None:
    plan = PlanBuilder("no app")
    plan.celery_task("prices", "team_app.fetch_prices", kwargs={"ticker": "ACME"})
    with pytest.raises(PlanError) as refused:
        Client(settings.model_copy(update={"celery_app": None})).submit(plan.build())
    assert (
        "node 'prices': a celery_task node needs your team's Celery app: set "
        "DAGWRIGHT_CELERY_APP=module:app (or celery_app in dagwright.toml)"
    ) in str(refused.value)


class TeamTasksDouble:
    """The node's services, as far as a celery_task claim uses them: what it sends,
    checkpoints and settles, and the outcome its team task has."""

    def __init__(self, outcome: TaskOutcome) -> None:
        self.outcome_now = outcome
        self.sent: list[tuple[str, dict[str, object], str]] = []
        self.checkpoints: list[object] = []
        self.settled: list[str] = []

    def team_tasks(self, ctx: NodeContext) -> TeamTasksDouble:
        return self

    def record_progress(self, ctx: NodeContext, *, checkpoint: object = None, **_: object) -> None:
        self.checkpoints.append(checkpoint)

    def send(self, name: str, kwargs: dict[str, object], task_id: str) -> None:
        self.sent.append((name, kwargs, task_id))

    def outcome(self, task_id: str) -> TaskOutcome:
        return self.outcome_now

    def revoke(self, task_id: str) -> None:
        raise AssertionError("not revoked here")

    def settle(self, task_id: str) -> None:
        self.settled.append(task_id)


def claim_of(services: TeamTasksDouble, checkpoint: object, fence: int = 4) -> NodeContext:
    return NodeContext(
        run_id="r1", node_id="prices", attempt=1, fence=fence, settings=Settings(),
        inputs={}, services=services, last_checkpoint=checkpoint,  # type: ignore[arg-type]
    )  # fmt: skip


PRICES = Node(id="prices", type="celery_task", task="team_app.fetch_prices", params={"t": 1})


def test_a_claim_after_a_crash_around_the_send_sends_again_under_the_same_id() -> None:
    """The id was checkpointed, the send not confirmed: same id, so the team's side sees
    one task id whatever happened to the first send."""
    services = TeamTasksDouble(TaskOutcome(state="PENDING"))
    unconfirmed = SentTask(task_id="r1.prices.2.team", sent_at=time.time()).as_checkpoint()
    with pytest.raises(TeamTaskPendingError):
        run_celery_task(claim_of(services, unconfirmed), PRICES)
    assert services.sent == [("team_app.fetch_prices", {"t": 1}, "r1.prices.2.team")]


def test_a_claim_of_a_sent_task_only_looks_and_a_settled_one_sends_anew() -> None:
    services = TeamTasksDouble(TaskOutcome(state="STARTED"))
    sent = SentTask(task_id="r1.prices.2.team", sent_at=time.time(), confirmed=True)
    with pytest.raises(TeamTaskPendingError) as parked:
        run_celery_task(claim_of(services, sent.as_checkpoint()), PRICES)
    assert services.sent == [] and parked.value.task_id == "r1.prices.2.team"
    settled = SentTask(task_id="r1.prices.2.team", sent_at=0, confirmed=True, settled=True)
    with pytest.raises(TeamTaskPendingError):
        run_celery_task(claim_of(services, settled.as_checkpoint(), fence=7), PRICES)
    assert [task_id for *_, task_id in services.sent] == ["r1.prices.7.team"]


def test_a_succeeded_task_is_the_output_and_a_failed_one_is_settled_first() -> None:
    sent = SentTask(task_id="r1.prices.2.team", sent_at=time.time(), confirmed=True)
    done = TeamTasksDouble(TaskOutcome(state="SUCCESS", result={"p": [1]}))
    assert run_celery_task(claim_of(done, sent.as_checkpoint()), PRICES) == {"p": [1]}
    assert done.checkpoints == []  # not settled: a redelivery reads the same result
    failed = TeamTasksDouble(TaskOutcome("FAILURE", error_class="LookupError", message="no"))
    with pytest.raises(TeamTaskFailedError) as raised:
        run_celery_task(claim_of(failed, sent.as_checkpoint()), PRICES)
    assert raised.value.error_class == "LookupError"
    assert SentTask.from_checkpoint(failed.checkpoints[-1]) == replace(sent, settled=True)
