"""Start-to-result time of a one-line program (``print(1)``) per sandbox backend.

    python benchmarks/sandbox.py [--runs 20] [--pool 2]

Times ``sandbox.run("print(1)", ...)`` from the call to its result, ``--runs`` times per
backend, and prints the median, 90th percentile and extremes side by side:

- docker cold: create, attach, start, run, remove (DockerSandbox());
- docker warm pool: a started container waits for the code (DockerSandbox(warm_pool=N)),
  the pool refilled before each run (an idle worker between nodes);
- docker warm pool, back to back: no pause, so the background refills race the runs
  (a busy worker: the pool only helps while it keeps up);
- bubblewrap, when its self-test passes.

The docker rows need an engine (DOCKER_HOST; ``ops/docker/start-test-dockerd.sh``) with
the sandbox image; a backend that cannot run here is listed with the reason.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from dagwright.errors import SandboxUnavailableError
from dagwright.sandbox import Limits, Sandbox
from dagwright.sandbox.bubblewrap import BubblewrapSandbox
from dagwright.sandbox.docker import DockerSandbox

LIMITS = Limits()
CODE = "print(1)"


def time_runs(sandbox: Sandbox, runs: int, before_each: Callable[[], None]) -> list[float]:
    """Seconds from run() to its result, ``runs`` times (``before_each`` is not timed)."""
    times = []
    for _ in range(runs):
        before_each()
        start = time.perf_counter()
        result = sandbox.run(CODE, limits=LIMITS)
        times.append(time.perf_counter() - start)
        if result.stdout != "1\n":
            raise SystemExit(f"{sandbox.name}: unexpected result {result}")
    return times


def checked(sandbox: Sandbox) -> Sandbox:
    if not sandbox.available():
        raise SandboxUnavailableError(f"{sandbox.name}: not available here")
    sandbox.self_test()
    return sandbox


def docker_rows(runs: int, pool: int) -> dict[str, list[float] | str]:
    try:
        cold = checked(DockerSandbox())
    except SandboxUnavailableError as exc:
        return {"docker": str(exc)}
    rows: dict[str, list[float] | str] = {"docker cold": time_runs(cold, runs, lambda: None)}
    with DockerSandbox(warm_pool=pool) as warm:
        rows[f"docker warm pool ({pool})"] = time_runs(warm, runs, lambda: warm.prewarm(LIMITS))
    with DockerSandbox(warm_pool=pool) as warm:
        warm.prewarm(LIMITS)
        rows[f"docker warm pool ({pool}), back to back"] = time_runs(warm, runs, lambda: None)
    return rows


def bubblewrap_rows(runs: int) -> dict[str, list[float] | str]:
    try:
        sandbox = checked(BubblewrapSandbox())
    except SandboxUnavailableError as exc:
        return {"bubblewrap": f"not measured: {exc}"}
    return {"bubblewrap": time_runs(sandbox, runs, lambda: None)}


def print_table(rows: dict[str, list[float] | str]) -> None:
    width = max(len(name) for name in rows)
    print(f"{'backend':<{width}}  {'median_s':>8}  {'p90_s':>7}  {'min_s':>7}  {'max_s':>7}")
    for name, times in rows.items():
        if isinstance(times, str):
            print(f"{name:<{width}}  {times}")
            continue
        p90 = statistics.quantiles(times, n=10)[-1]
        print(
            f"{name:<{width}}  {statistics.median(times):8.3f}  {p90:7.3f}  "
            f"{min(times):7.3f}  {max(times):7.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--pool", type=int, default=2, help="warm pool size")
    args = parser.parse_args()
    rows = docker_rows(args.runs, args.pool) | bubblewrap_rows(args.runs)
    print(f"{args.runs} runs of {CODE!r} each, seconds from run() to its result")
    print_table(rows)


if __name__ == "__main__":
    main()
