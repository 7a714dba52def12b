"""Evals in Redis: each eval's record and results, and the index that lists them.

An eval's keys (``keys.eval_record``, ``keys.eval_results``) expire ``eval_retention_s``
after it was last written; the index (``keys.eval_index``) forgets ids older than that as
it is read. A case run's result is written with HSETNX: however often a driver that was
interrupted is resumed, each case run is scored once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagwright.errors import UnknownEvalError
from dagwright.evals.results import EVAL_ID_PREFIX, CaseResult, EvalRecord, EvalReport

if TYPE_CHECKING:
    import redis

    from dagwright.keys import Keys

MAX_LISTED = 500


def new_eval_id() -> str:
    """An id that sorts by start time, like a run's: ``ev_<20 characters>``."""
    from dagwright.orchestrator.runstate.store import new_run_id

    return EVAL_ID_PREFIX + new_run_id()


class EvalStore:
    """Reads and writes evals under ``keys``, kept ``retention_s``."""

    def __init__(self, client: redis.Redis, keys: Keys, retention_s: int) -> None:
        self.client = client
        self.keys = keys
        self.retention_s = retention_s

    def save(self, record: EvalRecord) -> None:
        """Write an eval's record (new or changed) and list it."""
        started_ms = int(record.started_at.timestamp() * 1000)
        pipe = self.client.pipeline(transaction=False)
        pipe.set(self.keys.eval_record(record.id), record.model_dump_json(), ex=self.retention_s)
        pipe.zadd(self.keys.eval_index, {record.id: started_ms})
        pipe.expire(self.keys.eval_results(record.id), self.retention_s)
        pipe.execute()

    def add_result(self, eval_id: str, result: CaseResult) -> bool:
        """Keep a case run's result, unless one is kept already: whether it was added."""
        key = self.keys.eval_results(eval_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hsetnx(key, result.key, result.model_dump_json())
        pipe.expire(key, self.retention_s)
        added, _ = pipe.execute()
        return bool(added)

    def result_keys(self, eval_id: str) -> set[str]:
        """The ``<case>#<repeat>`` of the case runs already scored."""
        return set(self.client.hkeys(self.keys.eval_results(eval_id)))

    def record(self, eval_id: str) -> EvalRecord:
        raw = self.client.get(self.keys.eval_record(eval_id)) if _plausible(eval_id) else None
        if raw is None:
            raise UnknownEvalError(eval_id)
        return EvalRecord.model_validate_json(raw)

    def report(self, eval_id: str) -> EvalReport:
        """An eval and its results (UnknownEvalError if there is none)."""
        record = self.record(eval_id)
        raw = self.client.hvals(self.keys.eval_results(eval_id))
        results = [CaseResult.model_validate_json(value) for value in raw]
        order = {name: i for i, name in enumerate(record.cases)}
        results.sort(key=lambda r: (order.get(r.case, len(order)), r.repeat))
        return EvalReport(record=record, results=results)

    def list(self, *, limit: int = 20, suite: str | None = None) -> list[EvalRecord]:
        """The newest evals first (of ``suite`` only, if given)."""
        self._forget_expired()
        ids = self.client.zrevrange(self.keys.eval_index, 0, MAX_LISTED - 1)
        records = []
        pipe = self.client.pipeline(transaction=False)  # one round trip; each in its slot
        for eval_id in ids:
            pipe.get(self.keys.eval_record(eval_id))
        for raw in pipe.execute() if ids else []:
            if raw is None:
                continue
            record = EvalRecord.model_validate_json(raw)
            if suite is None or record.suite == suite:
                records.append(record)
            if len(records) >= limit:
                break
        return records

    def latest_of(self, suite: str, *, before: str | None = None) -> EvalRecord | None:
        """The newest finished eval of ``suite`` (started before the eval ``before``)."""
        for record in self.list(limit=MAX_LISTED, suite=suite):
            if record.status == "finished" and (before is None or record.id < before):
                return record
        return None

    def _forget_expired(self) -> None:
        now_s, _ = self.client.time()
        oldest_ms = (int(now_s) - self.retention_s) * 1000
        self.client.zremrangebyscore(self.keys.eval_index, "-inf", f"({oldest_ms}")


def _plausible(eval_id: str) -> bool:
    """Whether ``eval_id`` could name an eval: no key is built from anything else."""
    return eval_id.startswith(EVAL_ID_PREFIX) and len(eval_id) <= 40 and eval_id.isascii()
