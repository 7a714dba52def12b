"""Scores on runs: feedback given after a run ran (``Client.score``), kept with the run,
bounded, expiring with it; over the client, the asyncio client, the HTTP API and the CLI."""

from __future__ import annotations

import asyncio
import getpass
import math
from pathlib import Path
from typing import Any

import httpx
import pytest

from dagwright import AsyncClient, Client, Settings
from dagwright.errors import ScoreError, ScoreLimitError, UnknownRunError
from dagwright.models import ErrorInfo, RunScore, RunStatus
from dagwright.orchestrator.runtime import Runtime
from tests.support.api_server import ApiServer
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.runstate import claim, finish, start
from tests.support.waiting import wait_until

ERROR = ErrorInfo(error_class="ValueError", message="bad", retryable=False)


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


@pytest.fixture
def scorer(no_worker_settings: Settings) -> Client:
    return Client(no_worker_settings)


def ended_run(runtime: Runtime) -> str:
    """A run of one node, succeeded and forgotten (what its last worker does at the end)."""
    run_id, _ = start(runtime, [{"id": "a"}])
    assert finish(runtime, run_id, "a").run_finished == RunStatus.SUCCEEDED
    runtime.forget_active(run_id)
    return run_id


def scores_key(runtime: Runtime, run_id: str) -> str:
    return runtime.keys.run_scores(run_id)


def ttl_ms(runtime: Runtime, key: str) -> int:
    return int(runtime.client.pttl(key))


def test_a_run_keeps_every_score_given_oldest_first(runtime: Runtime, scorer: Client) -> None:
    run_id = ended_run(runtime)
    first = scorer.score(run_id, "correctness", 0.8, "right, but long")
    scorer.score(run_id, "correctness", 1, by="reviewer-2")  # one name, several people
    thumbs = scorer.score(run_id, "user.thumbs", True, source="api", by="ops-token")
    assert first.value == 0.8 and first.comment == "right, but long"
    assert (first.source, first.by) == ("client", getpass.getuser())
    assert thumbs.value == 1.0 and isinstance(thumbs.value, float)
    listed = scorer.scores(run_id)
    assert [(s.name, s.value, s.by) for s in listed] == [
        ("correctness", 0.8, getpass.getuser()),
        ("correctness", 1.0, "reviewer-2"),
        ("user.thumbs", 1.0, "ops-token"),
    ]
    assert listed[0] == first and listed[2] == thumbs
    assert len({s.id for s in listed}) == 3 and listed[0].at <= listed[2].at
    assert all(s.run_id == run_id for s in listed)
    assert scorer.score(run_id, "user.thumbs", False).value == 0.0


@pytest.mark.parametrize(
    ("name", "value", "comment", "says"),
    [
        ("Correctness", 1, None, "score name 'Correctness': a name is 1-64 lowercase"),
        ("", 1, None, "score name '': a name is"),
        ("x" * 65, 1, None, "a name is 1-64"),
        ("ok", "0.5", None, "score value '0.5': a score is a finite number or a boolean"),
        ("ok", math.nan, None, "score value nan: a score is a finite number"),
        ("ok", math.inf, None, "score value inf"),
        ("ok", 10**400, None, "a score is a finite number"),
        ("ok", None, None, "score value None"),
        ("ok", 1, "x" * 2001, "a comment is at most 2000 characters"),
    ],
)
def test_a_bad_score_is_refused_with_one_line_and_nothing_written(
    runtime: Runtime, scorer: Client, name: str, value: Any, comment: str | None, says: str
) -> None:
    run_id = ended_run(runtime)
    with pytest.raises(ScoreError) as refused:
        scorer.score(run_id, name, value, comment)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert scorer.scores(run_id) == []


def test_who_and_where_from_are_checked_too(runtime: Runtime, scorer: Client) -> None:
    run_id = ended_run(runtime)
    with pytest.raises(ScoreError, match="score by 'a\\\\nb'"):
        scorer.score(run_id, "ok", 1, by="a\nb")
    with pytest.raises(ScoreError, match="a source is client, api, cli or eval:<id>"):
        scorer.score(run_id, "ok", 1, source="Eval X")
    assert scorer.score(run_id, "ok", 1, source="eval:ev_01abc", by="ev_01abc").source == (
        "eval:ev_01abc"
    )


def test_a_run_holds_at_most_run_scores_max(no_worker_settings: Settings) -> None:
    settings = no_worker_settings.model_copy(update={"run_scores_max": 3})
    runtime, scorer = Runtime.from_settings(settings), Client(settings)
    run_id = ended_run(runtime)
    for value in (0.1, 0.2, 0.3):
        scorer.score(run_id, "grade", value)
    with pytest.raises(ScoreLimitError, match="holds 3 scores, the most a run may hold"):
        scorer.score(run_id, "grade", 0.4)
    assert [s.value for s in scorer.scores(run_id)] == [0.1, 0.2, 0.3]


def test_an_unknown_run_cannot_be_scored_and_nothing_is_left(
    runtime: Runtime, scorer: Client
) -> None:
    with pytest.raises(UnknownRunError):
        scorer.score("no-such-run", "grade", 1)
    with pytest.raises(UnknownRunError):
        scorer.scores("no-such-run")
    assert not runtime.client.exists(scores_key(runtime, "no-such-run"))


def test_an_expired_run_cannot_be_scored(runtime: Runtime, scorer: Client) -> None:
    run_id = ended_run(runtime)
    scorer.score(run_id, "grade", 1)
    for key in [*runtime.keys.run_keys(run_id), scores_key(runtime, run_id)]:
        runtime.client.pexpire(key, 1)  # the run's retention, run out
    wait_until(
        lambda: (
            not runtime.client.exists(
                runtime.keys.run_key(run_id, "run"), scores_key(runtime, run_id)
            )
        ),
        timeout=5,
        what="the run's keys to expire",
    )
    with pytest.raises(UnknownRunError):
        scorer.score(run_id, "grade", 1)
    assert not runtime.client.exists(scores_key(runtime, run_id))


def test_scores_of_an_open_run_expire_when_the_run_ends_with_it(
    runtime: Runtime, scorer: Client
) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    scorer.score(run_id, "early", 0.5)
    assert ttl_ms(runtime, scores_key(runtime, run_id)) == -1  # open: kept like the run
    finish(runtime, run_id, "a")
    runtime.forget_active(run_id)
    run_ttl = ttl_ms(runtime, runtime.keys.run_key(run_id, "run"))
    assert 0 < run_ttl <= runtime.settings.retention.retention_s * 1000
    assert 0 <= run_ttl - ttl_ms(runtime, scores_key(runtime, run_id)) < 1000


def test_a_score_given_after_the_end_takes_the_runs_remaining_time(
    runtime: Runtime, scorer: Client
) -> None:
    run_id = ended_run(runtime)
    runtime.client.pexpire(runtime.keys.run_key(run_id, "run"), 90_000)  # most of it gone
    scorer.score(run_id, "late", 1)
    assert 0 <= 90_000 - ttl_ms(runtime, scores_key(runtime, run_id)) < 1000


def test_a_replay_that_reopens_the_run_keeps_its_scores_until_it_ends_again(
    runtime: Runtime, scorer: Client
) -> None:
    from dagwright.dlq import DeadLetterFilter
    from dagwright.orchestrator.control.dead_letter_replay import dead_letters
    from dagwright.orchestrator.runstate.machine import Replayed

    run_id, _ = start(runtime, [{"id": "a"}])
    claim(runtime, run_id, "a")
    runtime.machine.fail(run_id, "a", 1, ERROR)
    runtime.forget_active(run_id)
    scorer.score(run_id, "before-replay", 0.0)
    assert ttl_ms(runtime, scores_key(runtime, run_id)) > 0
    [letter] = dead_letters(runtime).find(DeadLetterFilter(run_id=run_id))
    assert isinstance(runtime.machine.replay(run_id, "a", 1, entry_id=letter.id), Replayed)
    assert ttl_ms(runtime, scores_key(runtime, run_id)) == -1  # open again: kept
    finish(runtime, run_id, "a", fence=2)
    runtime.forget_active(run_id)
    assert ttl_ms(runtime, scores_key(runtime, run_id)) > 0
    assert [s.name for s in scorer.scores(run_id)] == ["before-replay"]


def test_the_async_client_scores_and_lists_alike(
    runtime: Runtime, no_worker_settings: Settings
) -> None:
    run_id = ended_run(runtime)

    async def score_and_list() -> list[RunScore]:
        async with AsyncClient(no_worker_settings) as client:
            await client.score(run_id, "grade", 0.25, "async", by="bot")
            with pytest.raises(UnknownRunError):
                await client.score("nope", "grade", 1)
            with pytest.raises(ScoreError):
                await client.score(run_id, "Grade", 1)
            return await client.scores(run_id)

    [score] = asyncio.run(score_and_list())
    assert (score.name, score.value, score.comment, score.by) == ("grade", 0.25, "async", "bot")
    assert Client(no_worker_settings).scores(run_id) == [score]


# Over the HTTP API (the session's server, with its in-process worker).

ONE_NODE = {
    "nodes": [{"id": "a", "type": "function", "function": "concat", "params": {"parts": ["x"]}}]
}


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert "Traceback" not in response.text
    return body


@pytest.fixture
def api_run(api: ApiServer, worker: object) -> str:
    """A run of the API server's database, ended."""
    run_id = api.client.submit(ONE_NODE).run_id
    assert api.client.wait(run_id, timeout=30).status == RunStatus.SUCCEEDED
    return run_id


def test_a_score_posted_over_http_is_kept_with_its_tokens_name(
    api: ApiServer, api_run: str
) -> None:
    with api.http("operate") as http:
        posted = http.post(
            f"/api/v1/runs/{api_run}/scores",
            json={"name": "helpfulness", "value": 0.75, "comment": "<b>good</b>"},
        )
        assert posted.status_code == 201, posted.text
        thumbs = http.post(f"/api/v1/runs/{api_run}/scores", json={"name": "thumbs", "value": True})
    score = posted.json()
    assert (score["by"], score["source"], score["value"]) == ("test-operate", "api", 0.75)
    assert score["comment"] == "<b>good</b>" and score["run_id"] == api_run
    assert thumbs.json()["value"] == 1.0
    with api.http("read") as http:
        listed = http.get(f"/api/v1/runs/{api_run}/scores")
    assert listed.status_code == 200
    assert [s["name"] for s in listed.json()] == ["helpfulness", "thumbs"]
    assert listed.json()[0] == score
    assert api.client.scores(api_run)[0].by == "test-operate"


def test_a_read_token_cannot_score_and_nobody_scores_unnamed(api: ApiServer, api_run: str) -> None:
    body = {"name": "thumbs", "value": 1}
    with api.http("read") as http:
        refused = problem(http.post(f"/api/v1/runs/{api_run}/scores", json=body), 403)
    assert "operate" in refused["detail"]
    with api.http(None) as anonymous:
        problem(anonymous.post(f"/api/v1/runs/{api_run}/scores", json=body), 401)
        problem(anonymous.get(f"/api/v1/runs/{api_run}/scores"), 401)
    with api.http("operate") as http:
        posing = http.post(f"/api/v1/runs/{api_run}/scores", json={**body, "by": "someone-else"})
        assert problem(posing, 422)["error"] == "RequestValidationError"
    assert api.client.scores(api_run) == []


@pytest.mark.parametrize(
    ("content", "status", "says"),
    [
        ('{"name": "Thumbs", "value": 1}', 422, "score name 'Thumbs': a name is 1-64"),
        ('{"name": "thumbs", "value": NaN}', 422, "score value nan: a score is a finite"),
        ('{"name": "thumbs", "value": "1"}', 422, "value"),
        ('{"name": "thumbs"}', 422, "value: Field required"),
        ('{"name": "thumbs", "value": 1, "comment": "' + "x" * 2001 + '"}', 422, "at most 2000"),
        ("not json", 422, "JSON"),
    ],
)
def test_a_bad_score_over_http_is_a_problem_with_one_line(
    api: ApiServer, api_run: str, content: str, status: int, says: str
) -> None:
    with api.http("operate") as http:
        answer = http.post(
            f"/api/v1/runs/{api_run}/scores",
            content=content,
            headers={"content-type": "application/json"},
        )
    assert says in problem(answer, status)["detail"]
    assert api.client.scores(api_run) == []


def test_scoring_an_unknown_run_over_http_is_404(api: ApiServer) -> None:
    with api.http("operate") as http:
        gone = problem(http.post("/api/v1/runs/nope/scores", json={"name": "a", "value": 1}), 404)
        assert gone["error"] == "UnknownRunError"
        assert problem(http.get("/api/v1/runs/nope/scores"), 404)["error"] == "UnknownRunError"


def test_the_scores_routes_are_in_the_openapi_document(api: ApiServer) -> None:
    with api.http("read") as http:
        document = http.get("/api/v1/openapi.json").json()
    route = document["paths"]["/api/v1/runs/{run_id}/scores"]
    created = route["post"]["responses"]["201"]["content"]["application/json"]["schema"]
    assert created == {"$ref": "#/components/schemas/RunScore"}
    listed = route["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert listed["items"] == {"$ref": "#/components/schemas/RunScore"}
    shape = document["components"]["schemas"]["RunScore"]
    assert {"id", "run_id", "name", "value", "comment", "source", "by", "at"} <= set(
        shape["properties"]
    )
    assert document["components"]["schemas"]["ScoreRequest"]["additionalProperties"] is False


# The command line.


@pytest.fixture
def cli(no_worker_settings: Settings, tmp_path: Path) -> dict[str, str]:
    return cli_env(no_worker_settings, tmp_path / "data", COLUMNS="80")


@pytest.mark.subprocess
def test_the_cli_scores_a_run_and_lists_its_scores_in_80_columns(
    runtime: Runtime, scorer: Client, cli: dict[str, str]
) -> None:
    run_id = ended_run(runtime)
    long_why = "the answer cites its sources but misses the second question entirely " * 3
    given = dagwright("score", run_id, "correctness", "0.8", "--comment", long_why, env=cli)
    assert given.returncode == 0, given.stderr
    assert given.stdout == f"scored run {run_id}: correctness = 0.8\n"
    thumbs = json_out(dagwright("score", run_id, "user.thumbs", "true", "--json", env=cli))
    assert (thumbs["value"], thumbs["source"], thumbs["by"]) == (1.0, "cli", getpass.getuser())
    scorer.score(run_id, "tone", 0, "\x1b[31mred[/]\nnext line", by="[bold]x")
    table = dagwright("scores", run_id, env=cli)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["name", "value", "by", "at", "comment"]
    assert all(len(line) <= 80 for line in lines), table.stdout
    assert "\x1b" not in table.stdout and "\\x1b[31mred[/] next line" in table.stdout
    assert "[bold]x" in table.stdout
    rows = [line.split()[0] for line in lines[1:] if line[:1].strip()]
    assert rows == ["correctness", "user.thumbs", "tone"]
    status = dagwright("status", run_id, env=cli)
    assert status.returncode == 0, status.stderr
    assert "scores: correctness 0.8 · user.thumbs 1 · tone 0\n" in status.stdout
    listed = json_out(dagwright("scores", run_id, "--json", env=cli))
    assert [s["name"] for s in listed] == ["correctness", "user.thumbs", "tone"]
    assert listed[0]["comment"] == long_why


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["correctness", "good"], "score value 'good': a score is a number or true/false"),
        (["correctness", "nan"], "score value nan: a score is a finite number or a boolean"),
        (["Correctness", "1"], "score name 'Correctness': a name is 1-64 lowercase letters"),
        (["ok", "1", "--comment", "x" * 2001], "a comment is at most 2000 characters"),
    ],
)
def test_a_bad_score_on_the_command_line_exits_2_with_one_line(
    runtime: Runtime, scorer: Client, cli: dict[str, str], args: list[str], says: str
) -> None:
    run_id = ended_run(runtime)
    refused = dagwright("score", run_id, *args, env=cli)
    assert refused.returncode == 2
    assert says in one_error_line(refused)
    assert scorer.scores(run_id) == []


@pytest.mark.subprocess
def test_scores_of_an_unknown_run_exit_2_naming_it(cli: dict[str, str]) -> None:
    for args in (["score", "nope", "ok", "1"], ["scores", "nope"]):
        refused = dagwright(*args, env=cli)
        assert refused.returncode == 2
        assert one_error_line(refused).startswith("no run 'nope' here")


def test_status_sums_up_each_names_scores_in_the_order_given() -> None:
    from datetime import UTC, datetime

    from dagwright.cli.scores import scores_summary

    def given(name: str, value: float) -> RunScore:
        at = datetime.now(tz=UTC)
        return RunScore(id="1-0", run_id="r", name=name, value=value, source="cli", by="me", at=at)

    found = [given("correctness", 1), given("thumbs", 0), given("correctness", 0.5)]
    assert scores_summary(found) == "correctness 0.75 (mean of 2) · thumbs 0"


def test_a_token_with_a_long_or_odd_name_still_scores_under_it(
    api: ApiServer, api_run: str
) -> None:
    name = "ci\tbot " + "x" * 200
    token = api.client.tokens.create(name, scope="operate").token
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {token}"}) as http:
        posted = http.post(f"/api/v1/runs/{api_run}/scores", json={"name": "a", "value": 1})
    assert posted.status_code == 201, posted.text
    assert posted.json()["by"] == ("ci\\tbot " + "x" * 200)[:128]
