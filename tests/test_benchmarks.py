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
