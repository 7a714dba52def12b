"""A run's scores: feedback on its work that may arrive long after it ended.

Stored beside the run's keys, not among them (``keys.run_scores``, a stream outside
``RUN_KEY_NAMES``): a run scored by nobody pays nothing, and no run-state script carries
one more key. A stream rather than a hash: scores are appended and read in the order
written, its entry id is each score's id and time, and XLEN bounds them in O(1).

A score cannot outlive its run. ``lua/score.lua`` checks the run, the bound
(``run_scores_max``) and writes in one step, giving the stream the run hash's time to
live; ``forget.lua`` gives it the run's when the run ends, and ``replay.lua`` takes it
away when a replay re-opens the run (the run's own keys persist then).

Rejected: a hash of id -> JSON (a list must then be sorted by time, and ids made up);
one key per score (a run's scores could not be bounded nor expired in one step).

The sync store (``RunScores``) and the asyncio one (``AsyncRunScores``) build their
call and decode their replies with the same functions.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from dagwright.errors import ScoreLimitError, UnknownRunError
from dagwright.keys import Keys
from dagwright.models import NewScore, RunScore, from_ms
from dagwright.redis_scripts import load_script, named_reply
from dagwright.shown_ids import shown_id

if TYPE_CHECKING:
    import redis
    import redis.asyncio

PACKAGE = "dagwright.orchestrator.runstate"
SCORE_FIELD = "score"  # the one field of a stream entry: the score's JSON


class RunScores:
    """Add a score to a run and list its scores (``Client.score``, ``Client.scores``)."""

    def __init__(self, client: redis.Redis, keys: Keys, *, max_scores: int) -> None:
        self.client = client
        self.keys = keys
        self.max_scores = max_scores
        self._score = load_script(client, PACKAGE, "score")

    def add(self, run_id: str, score: NewScore) -> RunScore:
        """Write ``score`` to the run: UnknownRunError if there is no such run (or it
        expired), ScoreLimitError if it holds ``max_scores`` already."""
        keys, args = score_call(self.keys, run_id, score, self.max_scores)
        return added_score(run_id, score, self.max_scores, self._score(keys=keys, args=args))

    def read(self, run_id: str) -> list[RunScore]:
        """Every score of the run, oldest first (UnknownRunError if there is no such run)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(self.keys.run_key(run_id, "run"), "status")
        pipe.xrange(self.keys.run_scores(run_id), count=self.max_scores)
        status, entries = pipe.execute()
        return scores_of(run_id, status, entries)


class AsyncRunScores:
    """``RunScores`` over ``redis.asyncio`` (``AsyncClient.score``, ``AsyncClient.scores``)."""

    def __init__(self, client: redis.asyncio.Redis, keys: Keys, *, max_scores: int) -> None:
        self.client = client
        self.keys = keys
        self.max_scores = max_scores
        self._score = load_script(client, PACKAGE, "score")

    async def add(self, run_id: str, score: NewScore) -> RunScore:
        keys, args = score_call(self.keys, run_id, score, self.max_scores)
        reply = await self._score(keys=keys, args=args)
        return added_score(run_id, score, self.max_scores, reply)

    async def read(self, run_id: str) -> list[RunScore]:
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hget(self.keys.run_key(run_id, "run"), "status")
            pipe.xrange(self.keys.run_scores(run_id), count=self.max_scores)
            status, entries = await pipe.execute()
        return scores_of(run_id, status, entries)


def score_call(
    keys: Keys, run_id: str, score: NewScore, max_scores: int
) -> tuple[list[str], list[str | int]]:
    """The keys and arguments of ``lua/score.lua`` writing ``score`` to the run."""
    run_keys = [keys.run_key(run_id, "run"), keys.run_scores(run_id)]
    return run_keys, [score.model_dump_json(), max_scores]


def added_score(run_id: str, score: NewScore, max_scores: int, reply: Any) -> RunScore:
    """The score ``lua/score.lua`` wrote, or its refusal raised."""
    fields = named_reply(reply)
    status = _text(fields["status"])
    if status == "unknown":
        raise UnknownRunError(run_id)
    if status == "full":
        raise ScoreLimitError(
            f"run {shown_id(run_id)} holds {max_scores} scores, the most a run may hold "
            "(DAGWRIGHT_RUN_SCORES_MAX)"
        )
    return run_score(run_id, _text(fields["id"]), score.model_dump())


def scores_of(run_id: str, status: str | None, entries: list[Any]) -> list[RunScore]:
    """The run's scores from its status and an XRANGE of its stream (UnknownRunError if
    the run has no status: there is none, or it expired)."""
    if status is None:
        raise UnknownRunError(run_id)
    return [
        run_score(run_id, _text(entry_id), json.loads(fields[SCORE_FIELD]))
        for entry_id, fields in entries
    ]


def run_score(run_id: str, entry_id: str, given: dict[str, Any]) -> RunScore:
    """A stored score: what was given, with the entry id as its id and time."""
    at = from_ms(entry_id.split("-", 1)[0])
    return RunScore.model_validate({**given, "id": entry_id, "run_id": run_id, "at": at})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = ["AsyncRunScores", "RunScores", "added_score", "score_call", "scores_of"]
