"""docs/architecture.md's concrete claims, checked against the code.

The page is what a newcomer reads first, so it must stay short and true: its paths and
modules exist, its key and script tables name exactly what ``keys.py`` and the ``.lua``
files define (and its counts are theirs), its layers are the import-linter contract's, and
every decision it cites is in docs/decisions.md. The focused pages it links to are held to
the smaller promise that the files they name exist. No Redis: reading files only.
"""

from __future__ import annotations

import importlib
import inspect
import re
import tomllib
from collections import Counter
from pathlib import Path

from dagwright import keys
from dagwright.orchestrator.runstate.scripts import SCRIPT_NAMES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dagwright"
DOCS = ROOT / "docs"
ARCHITECTURE = DOCS / "architecture.md"
DECISIONS = DOCS / "decisions.md"
MAX_LINES = 800
PRELUDE_MARK = "-- Shared by"  # the first line of a Lua file prepended to others
EN_DASH = "\N{EN DASH}"  # in a range of decisions: "decisions 25-28"


def doc() -> str:
    return ARCHITECTURE.read_text()


def section(title: str) -> str:
    """The text under ``## <title>`` up to the next second-level heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", doc(), re.M | re.S)
    assert match, f"docs/architecture.md has no section '## {title}'"
    return match.group(1)


def backticked(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the markdown tables in ``text``, as lists of cells."""
    lines = [line.strip() for line in text.splitlines() if line.startswith("|")]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]
    return [row for row in rows if row[0].startswith("`")]


def stated(pattern: str, text: str | None = None) -> int:
    match = re.search(pattern, doc() if text is None else text)
    assert match, f"docs/architecture.md states no count matching {pattern!r}"
    return int(match.group(1))


# -- size ------------------------------------------------------------------------------


def test_the_page_is_short_enough_for_a_newcomer() -> None:
    lines = len(doc().splitlines())
    assert lines <= MAX_LINES, f"docs/architecture.md has {lines} lines (at most {MAX_LINES})"


# -- paths and modules -----------------------------------------------------------------


def module_exists(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def module_or_export_exists(dotted: str) -> bool:
    """A module (``dagwright.orchestrator.runtime``) or a name its package exports
    (``dagwright.function``, as ``@dagwright.function`` is written)."""
    if module_exists(dotted):
        return True
    parent, _, name = dotted.rpartition(".")
    return module_exists(parent) and hasattr(importlib.import_module(parent), name)


def defines(path: Path, name: str) -> bool:
    """Whether ``path`` defines ``name`` (a class, function or module-level constant)."""
    pattern = rf"^\s*(?:class|def|async def)\s+{re.escape(name)}\b|^{re.escape(name)}\s*[:=]"
    return re.search(pattern, path.read_text(), re.M) is not None


def path_problem(token: str) -> str | None:
    """Why a backticked ``dagwright/...`` path (optionally ``path:Symbol``) is wrong."""
    path, _, symbol = token.partition(":")
    if not (ROOT / path).exists():
        return f"`{token}`: no such file or folder"
    if symbol and not defines(ROOT / path, symbol):
        return f"`{token}`: {path} defines no {symbol}"
    return None


def test_every_path_it_names_exists() -> None:
    problems = []
    for token in backticked(doc()):
        if token.startswith(("dagwright/", "tests/", "docs/", "ops/", "benchmarks/")):
            problems.append(path_problem(token))
    assert [p for p in problems if p] == []


def test_every_module_it_names_exists() -> None:
    dotted = re.compile(r"dagwright(?:\.\w+)+")
    task_names = ("dagwright.node.", "dagwright.run.", "dagwright.schedule.")
    missing = {
        name
        for token in backticked(doc())
        for name in dotted.findall(token)
        if not token.startswith(task_names)
        and not name.endswith(".toml")  # dagwright.toml: the settings file
        and not module_or_export_exists(name)
    }
    assert missing == set(), f"modules named in docs/architecture.md that do not exist: {missing}"


def layout_bullets() -> list[tuple[int, str]]:
    """The Layout section's bullets as (indent, text), continuation lines joined."""
    bullets: list[tuple[int, str]] = []
    for line in section("Layout").splitlines():
        start = re.match(r"^(\s*)- ", line)
        if start:
            bullets.append((len(start.group(1)), line))
        elif bullets and line.startswith(" "):
            indent, text = bullets[-1]
            bullets[-1] = (indent, f"{text} {line.strip()}")
    return bullets


def resolve(token: str, base: Path) -> Path | None:
    """A layout name: from the root if it starts with ``dagwright/``, else under ``base``
    (directly, or anywhere below it: ``static/js/`` of the server's dashboard)."""
    name = token.rstrip("/")
    if token.startswith("dagwright/"):
        path = ROOT / name
        return path if path.exists() else None
    if (base / name).exists():
        return base / name
    if base == ROOT:  # from the root, a name is exact (below it lie .venv and caches)
        return None
    return next((p for p in base.rglob("*") if p.as_posix().endswith(f"/{name}")), None)


def layout_names() -> tuple[list[str], set[Path]]:
    """Walk the Layout bullets: (names that resolve to nothing, everything they name)."""
    file_or_folder = re.compile(r"[\w./-]+\.(?:py|lua|md|js)|[\w./-]+/")
    parents: list[tuple[int, Path]] = []
    missing: list[str] = []
    named: set[Path] = set()
    for indent, text in layout_bullets():
        parents = [(i, p) for i, p in parents if i < indent]
        base = parents[-1][1] if parents else ROOT
        tokens = [t for t in backticked(text) if file_or_folder.fullmatch(t) and "*" not in t]
        if tokens and tokens[0].endswith("/") and resolve(tokens[0], base):
            base = resolve(tokens[0], base) or base
            named.add(base)
            tokens = tokens[1:]
        for token in tokens:
            found = resolve(token, base)
            if found is None:
                missing.append(f"{token} (under {base.relative_to(ROOT)})")
            else:
                named.add(found)
        parents.append((indent, base))
    return missing, named


def test_the_layout_names_only_what_exists() -> None:
    missing, _ = layout_names()
    assert missing == []


def test_the_layout_names_every_package_and_top_level_module() -> None:
    _, named = layout_names()
    packages = {p.parent for p in PACKAGE.rglob("__init__.py")} - {PACKAGE}
    modules = set(PACKAGE.glob("*.py"))
    unnamed = sorted(str(p.relative_to(ROOT)) for p in (packages | modules) - named)
    assert unnamed == [], f"the Layout of docs/architecture.md leaves out {unnamed}"


def test_its_links_lead_somewhere() -> None:
    headings = {slug(h) for h in re.findall(r"^#+ (.+)$", doc(), re.M)}
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", doc()):
        path, _, anchor = target.partition("#")
        if path.startswith(("http:", "https:")):
            continue
        if (DOCS / path).exists() if path else anchor in headings:
            continue
        broken.append(target)
    assert broken == []


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


# -- Redis keys --------------------------------------------------------------------------


def key_builders() -> set[str]:
    """The members of ``Keys`` that build one key: a property or method whose value is a
    string under the prefix with no wildcard (not ``run_key``/``run_keys``, which build the
    run's keys of ``RUN_KEY_NAMES``, nor a SCAN pattern)."""
    built = keys.Keys()
    builders = set()
    for name, member in vars(keys.Keys).items():
        if name.startswith("_") or not (isinstance(member, property) or inspect.isfunction(member)):
            continue
        try:
            value = getattr(built, name)
            if callable(value):
                value = value(*["x"] * (len(inspect.signature(value).parameters)))
        except KeyError:  # run_key: only the names of RUN_KEY_NAMES
            continue
        if isinstance(value, str) and value.startswith(built.prefix) and "*" not in value:
            builders.add(name)
    return builders


def key_table() -> tuple[list[str], list[str]]:
    """(run keys, ``Keys`` members) as the Redis keys table names them, repeats kept."""
    run_keys: list[str] = []
    members: list[str] = []
    for row in table_rows(section("Redis keys")):
        if "`RUN_KEY_NAMES`" in row[1]:
            run_keys += backticked(row[0])
        else:
            members += re.findall(r"`Keys\.(\w+)`", row[1])
    return run_keys, members


def test_the_key_table_names_each_run_key_once() -> None:
    run_keys, _ = key_table()
    assert Counter(run_keys) == Counter(keys.RUN_KEY_NAMES)


def test_the_key_table_names_each_other_key_once() -> None:
    _, members = key_table()
    assert Counter(members) == Counter(key_builders())


def test_the_key_counts_are_the_code_s() -> None:
    text = section("Redis keys")
    run, others = len(keys.RUN_KEY_NAMES), len(key_builders())
    assert stated(r"\*\*(\d+) per run\*\*", text) == run
    assert stated(r"\*\*(\d+) others\*\*", text) == others
    assert stated(r"\*\*(\d+) Redis keys\*\*", text) == run + others


def test_every_count_of_run_keys_is_right() -> None:
    counts = re.findall(r"(\d+)\s+run\s+keys", doc())
    assert counts and set(counts) == {str(len(keys.RUN_KEY_NAMES))}


# -- Lua scripts -------------------------------------------------------------------------


def lua_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.lua"))


def is_prelude(path: Path) -> bool:
    return path.read_text().startswith(PRELUDE_MARK)


def test_the_script_table_names_each_lua_file_once() -> None:
    named = [
        f"{row[1].strip('`')}{row[0].strip('`')}"
        for row in table_rows(section("Lua scripts"))
        if row[0].endswith(".lua`")
    ]
    files = [p.relative_to(PACKAGE).as_posix() for p in lua_files()]
    assert Counter(named) == Counter(files)


def test_the_script_counts_are_the_code_s() -> None:
    text = section("Lua scripts")
    files = lua_files()
    preludes = [p for p in files if is_prelude(p)]
    counts = re.search(r"\*\*(\d+) Lua files: (\d+) scripts and (\d+) shared preludes\*\*", text)
    assert counts, "the Lua scripts section states no count of files, scripts and preludes"
    assert [int(n) for n in counts.groups()] == [
        len(files),
        len(files) - len(preludes),
        len(preludes),
    ]
    assert stated(r"The (\d+) run-state scripts", text) == len(SCRIPT_NAMES)


# -- import layers ---------------------------------------------------------------------


def import_contracts() -> list[dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def test_the_layers_are_the_import_linter_contract_s() -> None:
    (layers,) = [
        c["layers"]
        for c in import_contracts()
        if c["type"] == "layers" and "containers" not in c  # the package-wide one
    ]
    listed = re.findall(r"^\d+\. `([^`]+)`$", section("Import layers"), re.M)
    assert listed == layers


def test_every_import_contract_is_named() -> None:
    text = section("Import layers")
    names = [c["name"] for c in import_contracts()]
    assert [n for n in names if f'"{n}"' not in text] == []
    assert stated(r"\((\d+) in all\)", text) == len(names)


# -- decisions ---------------------------------------------------------------------------


def decision_numbers() -> list[str]:
    return re.findall(r"^(\d+[a-z]?)\. \*\*", DECISIONS.read_text(), re.M)


def cited_decisions(text: str) -> set[str]:
    """Every decision ``text`` cites: "decision 18", "decisions 59, 60", and ranges written
    with an en dash ("decisions 25-28" in the page's spelling)."""
    cited = set()
    listed = rf"[Dd]ecisions?\s+(\d+[a-z]?(?:(?:,\s*|\s+and\s+|{EN_DASH})\d+[a-z]?)*)"
    for run in re.findall(listed, text):
        for first, last in re.findall(rf"(\d+[a-z]?)(?:{EN_DASH}(\d+))?", run):
            if last:
                cited |= {str(n) for n in range(int(first), int(last) + 1)}
            else:
                cited.add(first)
    return cited


def test_the_decisions_are_numbered_once_in_order() -> None:
    numbers = decision_numbers()
    values = [(int(n.rstrip("abcdefghijklmnopqrstuvwxyz")), n) for n in numbers]
    assert len(numbers) == len(set(numbers))
    assert values == sorted(values)


def test_every_decision_it_cites_exists() -> None:
    cited = cited_decisions(doc())
    assert cited, "docs/architecture.md cites no decision"
    assert cited - set(decision_numbers()) == set()


# -- the pages it links to ---------------------------------------------------------------


def test_the_focused_pages_name_only_files_that_exist() -> None:
    """A path in docs/internals/ or docs/decisions.md (``runstate/lua/claim.lua``,
    ``workers/agent_spec.py``) is some file of the repository, so a rename is caught."""
    roots = [PACKAGE, *(ROOT / d for d in ("tests", "benchmarks", "ops", "examples", "docs"))]
    present = {p.relative_to(ROOT).as_posix() for r in roots for p in r.rglob("*") if p.is_file()}
    path = re.compile(r"`([\w./-]+/[\w.-]+\.(?:py|lua))(?::\w+)?`")
    missing = []
    for page in [*sorted((DOCS / "internals").glob("*.md")), DECISIONS]:
        for name in path.findall(page.read_text()):
            if not any(f == name or f.endswith(f"/{name}") for f in present):
                missing.append(f"{page.relative_to(ROOT)}: {name}")
    assert missing == []


def test_every_page_cites_only_decisions_that_exist() -> None:
    """The decisions moved out of this page keep their numbers: any page citing one finds it."""
    numbers = set(decision_numbers())
    unknown = {
        str(page.relative_to(ROOT)): sorted(cited_decisions(page.read_text()) - numbers)
        for page in sorted(DOCS.rglob("*.md"))
    }
    assert {page: found for page, found in unknown.items() if found} == {}
