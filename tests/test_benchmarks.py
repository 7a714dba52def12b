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
