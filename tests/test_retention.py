"""Bounded retention (issue 31): what an ended run keeps and how long, and the maximum
age of a run that never ends. On the Lua state machine of a real Valkey (no Celery):
the run is driven by hand, its end seen as a worker sees it (``forget_active``)."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis
import redis.asyncio

from dagwright.client.node_detail import read_node_detail
from dagwright.dlq import Classification, DeadLetterFilter
from dagwright.json_views import event_json, run_json
from dagwright.metrics.readings import MetricsReader
from dagwright.models import ErrorInfo, RunState, RunStatus
from dagwright.orchestrator.control.dead_letter_replay import dead_letters, replay
from dagwright.orchestrator.execution.reconciler import Reconciler
from dagwright.orchestrator.runstate import machine as machine_module
from dagwright.orchestrator.runstate.async_store import AsyncRunStore
from dagwright.orchestrator.runstate.machine import Claim
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from dagwright.telemetry.timeline import chart
from dagwright.telemetry.trace_reads import read_trace
from dagwright.workers import builtin_registry
from tests.support.runstate import RecordingBroker, claim, finish, start

DAY_S = 24 * 3600
DIAMOND = [
    {"id": "a"},
    {"id": "b", "depends_on": ["a"]},
    {"id": "c", "depends_on": ["a"]},
    {"id": "d", "depends_on": ["b", "c"]},
]
CHECKPOINT = json.dumps({"messages": [{"role": "user", "content": "hello"}]})
# What a succeeded run keeps: what status, trace, logs, the dashboard and `runs` read.
# Its per-node state, attempts, times and outputs are folded into one string, `nodes`.
KEPT_BY_A_SUCCEEDED_RUN = {"run", "spec", "nodes", "events", "done"}


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    """The default retention (the suite's settings keep checkpoints: tests/support)."""
    return runtime_with(no_worker_settings, checkpoint_retention_s=0)


def runtime_with(settings: Settings, **changes: object) -> Runtime:
    return Runtime.from_settings(settings.model_copy(update=changes))


def run_keys(runtime: Runtime, run_id: str) -> dict[str, int]:
    """The run's keys that exist (by their name after the hash tag) -> TTL in seconds."""
    found = {}
    for key in runtime.client.scan_iter(match=f"{runtime.keys.prefix}{{{run_id}}}:*"):
        found[key.rsplit(":", 1)[1]] = int(runtime.client.ttl(key))
    return found


def succeeded_diamond(runtime: Runtime) -> str:
    """A diamond run to its end, its node ``b`` having saved a checkpoint."""
    run_id, _ = start(runtime, DIAMOND)
    finish(runtime, run_id, "a", output='"A"')
    assert isinstance(claim(runtime, run_id, "b"), Claim)
    runtime.client.hset(runtime.keys.run_key(run_id, "checkpoint"), "b", CHECKPOINT)
    runtime.machine.complete(run_id, "b", 1, '"B"')
    finish(runtime, run_id, "c", output='"C"')
    advance = finish(runtime, run_id, "d", output='"D"')
    assert advance.run_finished == RunStatus.SUCCEEDED
    runtime.forget_active(run_id)
    return run_id


def test_a_succeeded_run_keeps_only_what_its_surfaces_read_for_its_retention(
    runtime: Runtime,
) -> None:
    assert Settings.flat_field("checkpoint_retention_s").default == 0
    run_id = succeeded_diamond(runtime)

    kept = run_keys(runtime, run_id)
    assert set(kept) == KEPT_BY_A_SUCCEEDED_RUN
    retention_s = runtime.settings.retention.retention_s
    assert all(retention_s - 60 < ttl <= retention_s for ttl in kept.values()), kept
    state = runtime.store.read_state(run_id)
    assert state.status == RunStatus.SUCCEEDED and state.result == "D"
    assert {n: node.output for n, node in state.nodes.items()} == dict(a="A", b="B", c="C", d="D")
    assert state.nodes["d"].depends_on == ["b", "c"] and state.nodes["d"].attempts == 1
    trace = read_trace(runtime.store, run_id)
    assert [span.attributes["outcome"] for span in trace.attempts()] == ["succeeded"] * 4
    assert runtime.store.wait_until_done(run_id, 0.1)


def test_a_dropped_checkpoint_is_said_gone_where_the_transcript_was_shown(
    runtime: Runtime,
) -> None:
    run_id = succeeded_diamond(runtime)

    detail = read_node_detail(runtime.store, run_id, "b")
    assert detail.transcript == []
    assert "checkpoints dropped at the end of the run" in detail.to_json()["transcript_gone"]
    assert "checkpoint_retention_s" in detail.transcript_gone


def test_checkpoints_events_and_spans_are_kept_as_long_as_their_settings_say(
    no_worker_settings: Settings,
) -> None:
    runtime = runtime_with(
        no_worker_settings, checkpoint_retention_s=DAY_S, events_retention_s=3600
    )
    run_id = succeeded_diamond(runtime)

    kept = run_keys(runtime, run_id)
    assert DAY_S - 60 < kept["checkpoint"] <= DAY_S
    assert 3600 - 60 < kept["events"] <= 3600
    assert kept["run"] > DAY_S
    detail = read_node_detail(runtime.store, run_id, "b")
    assert detail.transcript[0]["content"] == "hello" and not detail.transcript_gone

    forever = runtime_with(no_worker_settings, checkpoint_retention_s=None)
    other = succeeded_diamond(forever)
    assert run_keys(forever, other)["checkpoint"] > DAY_S


def test_a_failed_run_keeps_what_a_replay_needs_and_replays_after_its_compaction(
    runtime: Runtime,
) -> None:
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    assert isinstance(claim(runtime, run_id, "a"), Claim)
    runtime.client.hset(runtime.keys.run_key(run_id, "checkpoint"), "a", CHECKPOINT)
    error = ErrorInfo(error_class="ValueError", message="bad", retryable=False)
    assert runtime.machine.fail(run_id, "a", 1, error).run_finished == RunStatus.FAILED
    runtime.forget_active(run_id)

    kept = run_keys(runtime, run_id)
    assert {"dispatch", "deps", "dependents", "remaining", "fence", "checkpoint"} <= set(kept)
    assert "plan" not in kept
    [letter] = dead_letters(runtime).find()
    broker = RecordingBroker()
    assert replay(runtime, broker, letter).reopened
    claimed = claim(runtime, run_id, "a", 2)
    assert isinstance(claimed, Claim) and claimed.checkpoint == json.loads(CHECKPOINT)
    runtime.machine.complete(run_id, "a", 2, '"A"')
    assert finish(runtime, run_id, "b").run_finished == RunStatus.SUCCEEDED


def aged(runtime: Runtime, run_id: str, seconds: int) -> None:
    """Make the run look ``seconds`` older than it is."""
    key = runtime.keys.run_key(run_id, "run")
    created = int(runtime.client.hget(key, "created_at") or 0)
    runtime.client.hset(key, "created_at", created - seconds * 1000)


def test_a_run_open_past_its_maximum_age_is_failed_visibly_and_replayable(
    no_worker_settings: Settings,
) -> None:
    runtime = runtime_with(no_worker_settings, run_max_age_s=3600)
    assert Settings.flat_field("run_max_age_s").default == 7 * DAY_S
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b"}, {"id": "c", "depends_on": ["a", "b"]}])
    assert isinstance(claim(runtime, run_id, "a"), Claim)  # a runs, b waits in its queue
    reconciler = Reconciler(runtime, RecordingBroker())
    reconciler.run_once()
    assert runtime.store.run_status(run_id) == RunStatus.RUNNING  # not old yet

    aged(runtime, run_id, 3601)
    report = reconciler.run_once()

    state = runtime.store.read_state(run_id)
    assert state.status == RunStatus.FAILED and run_id in report.finished
    assert state.reason and "maximum age (3600 s, run_max_age_s)" in state.reason
    statuses = {n: node.status.value for n, node in state.nodes.items()}
    assert statuses == {"a": "failed", "b": "failed", "c": "blocked"}
    assert state.nodes["a"].error and state.nodes["a"].error.error_class == "RunMaxAgeExceeded"
    letters = dead_letters(runtime).find(DeadLetterFilter(run_id=run_id))
    assert sorted(letter.node_id for letter in letters) == ["a", "b"]
    assert {letter.classification for letter in letters} == {Classification.TRANSIENT}
    attempts = read_trace(runtime.store, run_id).attempts()
    outcomes = {span.node: span.attributes["outcome"] for span in attempts}
    assert outcomes == {"a": "failed"}  # b never ran: no attempt of its own

    broker = RecordingBroker()
    for letter in letters:
        assert replay(runtime, broker, letter).replayed
    assert runtime.store.read_state(run_id).reason is None
    reconciler.run_once()  # its age counts from the replay: not failed again
    assert runtime.store.run_status(run_id) == RunStatus.RUNNING
    for node in ("a", "b"):
        finish(runtime, run_id, node, fence=2)
    assert finish(runtime, run_id, "c").run_finished == RunStatus.SUCCEEDED


def test_a_run_still_planning_past_its_maximum_age_fails(no_worker_settings: Settings) -> None:
    runtime = runtime_with(no_worker_settings, run_max_age_s=3600)
    run_id, _ = start(runtime, [{"id": "a"}])
    key = runtime.keys.run_key(run_id, "run")
    runtime.client.hset(key, "status", "planning")  # as a goal run whose plan never came
    runtime.client.hset(runtime.keys.run_key(run_id, "state"), "a", "pending")
    aged(runtime, run_id, 7200)

    Reconciler(runtime, RecordingBroker()).run_once()
    state = runtime.store.read_state(run_id)
    assert state.status == RunStatus.FAILED and "maximum age" in (state.reason or "")


def test_no_maximum_age_leaves_an_old_run_open(no_worker_settings: Settings) -> None:
    runtime = runtime_with(no_worker_settings, run_max_age_s=None)
    run_id, _ = start(runtime, [{"id": "a"}])
    aged(runtime, run_id, 30 * DAY_S)
    Reconciler(runtime, RecordingBroker()).run_once()
    assert runtime.store.run_status(run_id) == RunStatus.RUNNING


def test_compacting_an_open_run_changes_nothing(runtime: Runtime) -> None:
    run_id, _ = start(runtime, DIAMOND)
    before = run_keys(runtime, run_id)
    assert runtime.machine.compact(run_id, runtime.ended_retention).status == "open"
    assert run_keys(runtime, run_id) == before
    assert isinstance(runtime.client, redis.Redis)


def scrape_commands(reader: MetricsReader, observer: redis.Redis, dbs: set[str]) -> int:
    """Commands one metrics read sends to the state store and the broker (their
    connections' ``tot-cmds`` in CLIENT LIST, before and after; the observer's left out)."""

    def sent() -> int:
        me = str(observer.client_id())
        return sum(
            int(entry["tot-cmds"])
            for entry in observer.client_list()
            if entry["db"] in dbs and entry["id"] != me
        )

    reader.read()  # any health-check PING of a connection idle since is sent here
    before = sent()
    reader.read()
    return sent() - before


def retain_runs(runtime: Runtime, succeeded: int, dead_letters: int) -> None:
    """``succeeded`` one-node runs ended and forgotten, and ``dead_letters`` entries."""
    for _ in range(succeeded):
        run_id, _ = start(runtime, [{"id": "only"}])
        finish(runtime, run_id, "only")
        runtime.forget_active(run_id)
    for i in range(dead_letters):
        runtime.client.xadd(runtime.keys.dlq, {"run": "", "node": f"n{i}", "spec": "{}"})


def test_a_metrics_scrape_costs_the_same_whatever_the_store_retains(
    runtime: Runtime, no_worker_settings: Settings
) -> None:
    settings = no_worker_settings
    reader = MetricsReader(
        settings, settings.redis.url or "", settings.redis.broker_url or "", builtin_registry()
    )
    observer = redis.Redis.from_url(settings.redis.url or "", decode_responses=True)
    dbs = {settings.redis.url.rsplit("/", 1)[1], settings.redis.broker_url.rsplit("/", 1)[1]}  # type: ignore[union-attr]
    open_run, _ = start(runtime, [{"id": "left"}])
    failed_run = chain_failed(runtime)
    reader.read()  # its connections made

    retain_runs(runtime, succeeded=10, dead_letters=10)
    few = scrape_commands(reader, observer, dbs)
    retain_runs(runtime, succeeded=140, dead_letters=240)
    many = scrape_commands(reader, observer, dbs)

    assert many == few, (few, many)
    readings = reader.read()
    assert readings.runs == {
        "planning": 0, "running": 1, "succeeded": 150, "failed": 1, "cancelled": 0
    }  # fmt: skip
    assert readings.dlq_depth == 251
    [letter] = dead_letters(runtime).find(DeadLetterFilter(run_id=failed_run))
    assert replay(runtime, RecordingBroker(), letter).reopened
    readings = reader.read()
    assert (readings.runs["running"], readings.runs["failed"]) == (2, 0)
    assert readings.dlq_depth == 250
    assert runtime.store.run_status(open_run) == RunStatus.RUNNING


def chain_failed(runtime: Runtime) -> str:
    """A one-node run failed for good (one dead letter), its end seen."""
    run_id, _ = start(runtime, [{"id": "a"}])
    assert isinstance(claim(runtime, run_id, "a"), Claim)
    error = ErrorInfo(error_class="ValueError", message="bad", retryable=False)
    runtime.machine.fail(run_id, "a", 1, error)
    runtime.forget_active(run_id)
    return run_id


def test_an_ended_runs_small_streams_give_their_preallocated_slack_back(
    runtime: Runtime,
) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    logs = runtime.keys.run_logs(run_id)
    runtime.client.xadd(logs, {"line": json.dumps({"node": "a", "text": "hello"})})
    done = runtime.keys.run_key(run_id, "done")
    finish(runtime, run_id, "a")
    assert (runtime.client.memory_usage(done, samples=0) or 0) > 4000  # a 4 KB listpack node
    assert (runtime.client.memory_usage(logs, samples=0) or 0) > 4000

    runtime.forget_active(run_id)
    for key in (done, logs):
        assert (runtime.client.memory_usage(key, samples=0) or 0) < 1000, key
        assert runtime.client.ttl(key) > 0
    assert runtime.store.wait_until_done(run_id, 0.1)
    [entry] = runtime.client.xrange(logs)
    assert json.loads(entry[1]["line"])["text"] == "hello"


def surfaces(runtime: Runtime, run_id: str) -> dict[str, object]:
    """What the surfaces of an ended run show, as they read it: status JSON (CLI, API,
    dashboard), each node's detail, the trace's spans and its timeline, the events a
    watch of the run prints (and the dashboard lists), the run's row in `runs`."""
    trace = read_trace(runtime.store, run_id)
    return {
        "status": run_json(runtime.store.read_state(run_id)),
        "status_async": run_json(asyncio.run(read_state_async(runtime, run_id))),
        "summary": run_json(runtime.store.read_state(run_id, include_nodes=False)),
        "nodes": {
            node: read_node_detail(runtime.store, run_id, node).to_json()
            for node in ("a", "b", "c", "d")
        },
        "trace": trace.model_dump(mode="json"),
        "timeline": chart(trace),
        "events": [event_json(event) for event in runtime.store.read_events(run_id)],
    }


async def read_state_async(runtime: Runtime, run_id: str) -> RunState:
    """The run's state as the API server reads it (its asyncio store)."""
    client = redis.asyncio.Redis.from_url(runtime.settings.redis.url or "", decode_responses=True)
    try:
        store = AsyncRunStore(
            client, runtime.keys, events_maxlen=runtime.settings.retention.events_maxlen
        )
        return await store.read_state(run_id)
    finally:
        await client.aclose()


def test_every_surface_reads_a_succeeded_run_the_same_after_its_compaction(
    no_worker_settings: Settings,
) -> None:
    runtime = runtime_with(no_worker_settings, checkpoint_retention_s=None)
    run_id, _ = start(runtime, DIAMOND)
    finish(runtime, run_id, "a", output='{"text": "A", "n": [1, 2]}')
    assert isinstance(claim(runtime, run_id, "b"), Claim)
    runtime.client.hset(runtime.keys.run_key(run_id, "checkpoint"), "b", CHECKPOINT)
    error = ErrorInfo(error_class="E", message="again", retryable=True)
    assert runtime.machine.schedule_retry(run_id, "b", 1, error, delay_s=0)
    runtime.machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)
    # events carry no `at` (their id has the time), but one written with it keeps it
    runtime.client.xadd(runtime.keys.run_key(run_id, "events"), {"kind": "x", "at": "1000"})
    finish(runtime, run_id, "b", fence=2, output='"B"')
    finish(runtime, run_id, "c", output="null")
    assert finish(runtime, run_id, "d", output='"D"').run_finished == RunStatus.SUCCEEDED
    before = surfaces(runtime, run_id)

    runtime.forget_active(run_id)  # compacts it
    assert "nodes" in run_keys(runtime, run_id) and "state" not in run_keys(runtime, run_id)
    assert surfaces(runtime, run_id) == before
    assert before["nodes"]["b"]["attempts"] == 2  # type: ignore[index]
    stored = runtime.client.xrange(runtime.keys.run_key(run_id, "events"))
    assert [fields for _, fields in stored if "at" in fields] == [{"kind": "x", "at": "1000"}]

    runtime.machine.compact(run_id, runtime.ended_retention)  # twice is once
    assert surfaces(runtime, run_id) == before


def run_bytes(runtime: Runtime, run_id: str) -> int:
    """MEMORY USAGE summed over every key of the run (its hash tag)."""
    pattern = f"{runtime.keys.prefix}{{{run_id}}}*"
    return sum(
        int(runtime.client.memory_usage(key, samples=0) or 0)
        for key in runtime.client.scan_iter(match=pattern, count=1000)
    )


def test_a_succeeded_run_keeps_at_most_its_target_bytes(runtime: Runtime) -> None:
    """Issue 31's targets with the default settings: <= 6 KB for a 4-node run, <= 300 KB
    for a 1,000-node fan-out (benchmarks/run_bytes.py measures them through a worker)."""
    assert run_bytes(runtime, succeeded_diamond(runtime)) <= 6 * 1024

    run_id = succeeded_fan_out(runtime, 998)
    runtime.forget_active(run_id)
    assert run_bytes(runtime, run_id) <= 300 * 1024


def succeeded_fan_out(runtime: Runtime, width: int) -> str:
    """A root, ``width`` nodes and a join, run to their end (not forgotten yet)."""
    fan_out = [{"id": f"n{i}", "depends_on": ["root"]} for i in range(width)]
    join = {"id": "join", "depends_on": [f"n{i}" for i in range(width)]}
    run_id, _ = start(runtime, [{"id": "root"}, *fan_out, join])
    advance = finish(runtime, run_id, "root")
    while advance.settling:
        advance = runtime.machine.settle(run_id)
    for node in fan_out:
        finish(runtime, run_id, node["id"], output=f'{{"n": "{node["id"]}"}}')
    assert finish(runtime, run_id, "join").run_finished == RunStatus.SUCCEEDED
    return run_id


def test_a_big_run_is_folded_a_chunk_a_step_and_stays_active_until_the_last(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decision 126: a run past hash-max-listpack-entries (512 on the test server; a
    smaller hash is one HSCAN step) folded 100 nodes a step, each step its own script."""
    monkeypatch.setattr(machine_module, "FOLD_CHUNK", 100)
    run_id = succeeded_fan_out(runtime, 700)
    before = runtime.store.read_state(run_id)
    run_hash = runtime.keys.run_key(run_id, "run")

    first = runtime.machine.compact(run_id, runtime.ended_retention)
    assert first.folding
    # the rest of the compaction is done; the fold is under way where no reader looks
    assert {"nodes", "dispatch", "plan"}.isdisjoint(run_keys(runtime, run_id))
    assert {"state", "output", "folding"} <= set(run_keys(runtime, run_id))
    assert runtime.client.hget(run_hash, "fold_cursor") not in (None, "0")
    assert runtime.store.read_state(run_id).nodes == before.nodes
    # forgotten without its fold (as by a process that died after a step): still active
    assert not runtime.machine.forget(run_id).forgotten
    assert runtime.client.sismember(runtime.keys.active_runs, run_id)

    steps = 1
    while runtime.machine.compact(run_id, runtime.ended_retention).folding:
        steps += 1
        assert runtime.store.read_state(run_id).nodes == before.nodes
    assert 3 <= steps + 1 <= 30  # 703 nodes, about 100 an HSCAN step (a hint, not a bound)
    kept = run_keys(runtime, run_id)
    assert "nodes" in kept and {"state", "output", "folding"}.isdisjoint(kept)
    assert runtime.client.hget(run_hash, "fold_cursor") is None
    assert runtime.store.read_state(run_id).nodes == before.nodes
    assert before.nodes["n699"].output == {"n": "n699"}
    runtime.forget_active(run_id)
    assert not runtime.client.sismember(runtime.keys.active_runs, run_id)


def test_whoever_forgets_a_run_next_goes_on_with_its_fold(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(machine_module, "FOLD_CHUNK", 100)
    run_id = succeeded_fan_out(runtime, 600)
    before = runtime.store.read_state(run_id)
    assert runtime.machine.compact(run_id, runtime.ended_retention).folding  # then it died
    runtime.forget_active(run_id)  # the reconciler's, say: every step left, then the rest
    assert not runtime.client.sismember(runtime.keys.active_runs, run_id)
    assert "nodes" in run_keys(runtime, run_id)
    assert runtime.store.read_state(run_id).nodes == before.nodes
