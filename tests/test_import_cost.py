"""``import dagwright`` loads no Celery and no LLM SDK: they are imported where first used
(``Client.broker``, the worker, ``llm/anthropic.py``), so scripts and every ``dagwright``
command start quickly. A timing assertion would be flaky on a shared machine; the modules
loaded decide the time, and they are what is checked here."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = {"celery", "kombu", "redbeat", "anthropic"}


def imported_packages(statement: str) -> set[str]:
    """The top-level packages that ``statement`` imports in a fresh interpreter."""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lines = [line for line in completed.stderr.splitlines() if line.startswith("import time:")]
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in lines[1:]}


def test_import_dagwright_loads_no_celery_nor_llm_sdk() -> None:
    loaded = imported_packages("import dagwright")
    assert "dagwright" in loaded
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


@pytest.mark.parametrize(
    "statement",
    [
        "from dagwright import Client, PlanBuilder, Settings, worker_type",
        "import dagwright.cli",  # every command registered: Celery only runs inside some
    ],
)
def test_celery_waits_for_its_first_use(statement: str) -> None:
    loaded = imported_packages(statement)
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


def imported_modules(statement: str) -> set[str]:
    """Every module (dotted name) that ``statement`` imports in a fresh interpreter."""
    completed = subprocess.run(
        [sys.executable, "-c", f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(completed.stdout.split())


def test_cli_loads_no_redis_workers_nor_llm_layer() -> None:
    # `--help` and `status` pay for every module the command tree imports: the Redis client
    # is imported by the commands that connect, the workers and LLM layer by those that run
    # or describe nodes (issue 14: both start in under 0.35 s).
    loaded = imported_modules("import dagwright.cli")
    unwanted = {"redis", "dagwright.workers", "dagwright.llm", "dagwright.client"}
    assert not loaded & unwanted, sorted(loaded & unwanted)
