"""The house's layout: module names that say what they hold and never collide.

A module named like a standard-library one (``select``, ``trace``, ``types``, ``code``)
shadows it for anyone who runs a file from that folder and misleads a reader; two siblings
whose names differ only by a plural (``agent``/``agents``, ``planner``/``planning``) make a
newcomer guess which holds what.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagwright

PACKAGE = Path(dagwright.__file__).parent


def module_names(folder: Path) -> list[str]:
    """The modules and subpackages directly in ``folder``."""
    names = [path.stem for path in folder.glob("*.py") if path.stem != "__init__"]
    names += [path.name for path in folder.iterdir() if (path / "__init__.py").exists()]
    return names


def packages() -> list[Path]:
    return [PACKAGE, *(init.parent for init in PACKAGE.rglob("__init__.py"))]


def stem(name: str) -> str:
    """The name without a plural, -er or -ing ending: planner and planning share "plann",
    scheduler and schedules "schedul" (plans, the documents, and planning, the act, differ)."""
    for ending in ("ing", "er", "es", "s"):
        if name.endswith(ending) and len(name) - len(ending) >= 3:
            return name[: -len(ending)]
    return name


def test_no_module_shadows_the_standard_library() -> None:
    shadowing = [
        f"{folder.relative_to(PACKAGE.parent)}/{name}"
        for folder in packages()
        for name in module_names(folder)
        if name in sys.stdlib_module_names
    ]
    assert shadowing == []


def test_no_two_siblings_differ_only_by_a_plural() -> None:
    collisions = []
    for folder in packages():
        by_stem: dict[str, list[str]] = {}
        for name in module_names(folder):
            by_stem.setdefault(stem(name), []).append(name)
        collisions += [sorted(names) for names in by_stem.values() if len(names) > 1]
    assert collisions == []


def test_the_card_components_are_visible_at_the_top() -> None:
    top = set(module_names(PACKAGE))
    assert {"orchestrator", "workers", "tasks", "dlq", "sandbox"} <= top
    assert {"plans", "planning", "schedules", "telemetry", "llm", "testing"} <= top


WRONG_WAY = {
    # A module written into a copy of the package → its import, each one the old layers
    # (which interleaved the orchestrator's floors with planning and the schedules) allowed.
    "planning/wrong_way.py": "import dagwright.orchestrator.runstate.machine",
    "orchestrator/execution/wrong_way.py": "import dagwright.schedules.followups",
    "workers/wrong_way.py": "import dagwright.testing.scripted",
}


def test_the_import_contracts_fail_on_a_wrong_way_import(tmp_path: Path) -> None:
    """lint-imports, on a copy of the package with one module per wrong-way import
    (planning onto the orchestrator, the orchestrator onto the schedules, production onto
    the test kit), names each: the contracts forbid the cycles, not just today's code."""
    shutil.copytree(PACKAGE, tmp_path / "dagwright", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PACKAGE.parent / "pyproject.toml", tmp_path)
    for path, statement in WRONG_WAY.items():
        (tmp_path / "dagwright" / path).write_text(f"{statement}\n")
    found = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = found.stdout + found.stderr
    assert found.returncode == 1, report
    for path in WRONG_WAY:
        assert "dagwright." + path.removesuffix(".py").replace("/", ".") in report
    assert "Dependencies point one way (docs/architecture.md §1) BROKEN" in report
    assert "No two packages import each other BROKEN" in report
    assert "Illegal imports of protected package dagwright.testing" in report


def test_no_two_lua_scripts_of_a_folder_are_named_as_anagrams() -> None:
    """``key_claim.lua`` beside ``claim_key.lua`` made a reader open both to find which
    was the shared prelude: names of the same words in another order are refused."""
    collisions = []
    for folder in {path.parent for path in PACKAGE.rglob("*.lua")}:
        by_words: dict[tuple[str, ...], list[str]] = {}
        for script in folder.glob("*.lua"):
            by_words.setdefault(tuple(sorted(script.stem.split("_"))), []).append(script.name)
        collisions += [sorted(names) for names in by_words.values() if len(names) > 1]
    assert collisions == []
