"""``import dagwright`` loads no Celery, no broker client and no LLM SDK: they are imported
where first used (``Client.broker``, the worker, ``llm/anthropic.py``), so scripts and
every ``dagwright`` command start quickly. A timing assertion would be flaky on a shared
machine; the modules loaded are what decides the time, and they are checked here."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("celery", "kombu", "redbeat", "anthropic")


def imported_modules(statement: str) -> set[str]:
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
    loaded = imported_modules("import dagwright")
    assert "dagwright" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_client_loads_celery_only_to_publish() -> None:
    loaded = imported_modules("from dagwright import Client, PlanBuilder, Settings")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_command_line_loads_celery_only_for_the_commands_that_publish() -> None:
    loaded = imported_modules("import dagwright.cli")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
