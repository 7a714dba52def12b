"""The docs say what the code does: their tables, examples, commands and links are real.

- docs/configuration.md's settings table is the one docs/tools/configuration.py makes
  from Settings (every field, nothing else); its other table lists every DAGWRIGHT_*
  variable the code reads that is not a setting.
- Every ```python block of docs/ compiles; the blocks after ``<!-- doctest: run -->`` run
  (in order, one namespace per page) against the test Valkey and real workers, a block
  after ``<!-- doctest: module NAME -->`` is that module, imported by the worker, and one
  after ``<!-- doctest: pytest NAME -->`` is a test file NAME.py that pytest runs beside it.
- Every `dagwright ...` line of a ```sh block in docs/ and ops/runbooks/ is accepted by
  the CLI's parser; every relative link leads to a file.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dagwright.settings import FLAT_NAMES, Settings
from tests.support.cli import cli_problem
from tests.support.processes import REPO_ROOT, Workers, settings_env

DOCS = REPO_ROOT / "docs"
RUNBOOKS = REPO_ROOT / "ops" / "runbooks"
PAGES = sorted([*DOCS.glob("*.md"), *RUNBOOKS.glob("*.md"), REPO_ROOT / "README.md"])
SETTINGS_VARIABLES = {f"DAGWRIGHT_{name.upper()}" for name in Settings.flat_fields()}


def load_configuration_tool() -> Any:
    """docs/tools/configuration.py, which makes the settings table (not a package)."""
    spec = importlib.util.spec_from_file_location(
        "docs_configuration_tool", DOCS / "tools" / "configuration.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


configuration_page = load_configuration_tool()


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    marker: str  # "" / "run" / "module NAME"
    line: int


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, with the doctest marker on the line before each."""
    found = []
    pattern = re.compile(
        r"(?:<!-- doctest: (?P<marker>[^>]*?) -->\n)?"
        r"^(?P<indent>[ \t]*)```(?P<lang>\w*)\n(?P<code>.*?)^(?P=indent)```",
        re.M | re.S,
    )
    text = page.read_text()
    for match in pattern.finditer(text):
        line = text.count("\n", 0, match.start("code"))
        code = textwrap.dedent(match["code"])
        found.append(Block(match["lang"], code, match["marker"] or "", line))
    return found


def python_blocks(page: Path, marker: str | None = None) -> list[Block]:
    return [
        b
        for b in blocks(page)
        if b.language == "python" and (marker is None or b.marker.startswith(marker))
    ]


# -- configuration.md ---------------------------------------------------------------


def table_rows(page: str, after: str) -> list[list[str]]:
    """The cells of the first markdown table after the heading ``after``."""
    section = page.split(after, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif rows:
            break
    return rows[2:]  # without the header and the |---| line


def test_the_settings_table_is_generated_from_the_code() -> None:
    page = (DOCS / "configuration.md").read_text()
    assert configuration_page.page_with_table(page) == page, (
        "docs/configuration.md is out of date: run python docs/tools/configuration.py"
    )


def settings_rows(page: str) -> list[list[str]]:
    """The rows of every section's table, between the generated block's markers."""
    block = page.split(configuration_page.BEGIN, 1)[1].split(configuration_page.END, 1)[0]
    return [
        [cell.strip() for cell in line.strip("|").split(" | ")]
        for line in block.splitlines()
        if line.startswith("| `")
    ]


def test_the_settings_table_lists_every_setting_and_nothing_else() -> None:
    page = (DOCS / "configuration.md").read_text()
    rows = settings_rows(page)
    first_names = [re.findall(r"`([A-Z0-9_]+)`", row[0])[0] for row in rows]
    assert sorted(first_names) == sorted(SETTINGS_VARIABLES)
    for row in rows:
        assert row[3], f"{row[0]} has no meaning: give its field a docstring"


def test_the_settings_tables_are_grouped_by_section() -> None:
    page = (DOCS / "configuration.md").read_text()
    headings = re.findall(r"^### `(\w+)`$", page, flags=re.MULTILINE)
    assert headings == list(FLAT_NAMES.sections)


def dagwright_strings_in_the_code() -> set[str]:
    found = set()
    for path in (REPO_ROOT / "dagwright").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"DAGWRIGHT_[A-Z0-9_]+", node.value)
            ):
                found.add(node.value)
    return found


def test_every_other_variable_the_code_reads_is_documented() -> None:
    page = (DOCS / "configuration.md").read_text()
    others = {row[0].strip("`") for row in table_rows(page, "## Other variables")}
    assert not others & SETTINGS_VARIABLES
    read_by_code = {
        name
        for name in dagwright_strings_in_the_code() - SETTINGS_VARIABLES
        if not name.startswith("DAGWRIGHT_ANTHROPIC_")  # the settings' own aliases
    }
    assert read_by_code <= others, read_by_code - others
    assert {"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "DAGWRIGHT_CONFIG_FILE"} <= others


# -- code examples ------------------------------------------------------------------


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name)
def test_every_python_example_compiles(page: Path) -> None:
    for block in python_blocks(page):
        compile(block.code, f"{page.name}:{block.line}", "exec")


@pytest.mark.usefixtures("worker")
def test_the_client_guide_runs_as_written(
    settings: Settings,
    redis_client: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in settings_env(settings).items():
        monkeypatch.setenv(name, value)
    runnable = python_blocks(DOCS / "client-guide.md", "run")
    assert len(runnable) >= 5
    namespace: dict[str, Any] = {"__name__": "client_guide"}
    for block in runnable:
        exec(compile(block.code, f"client-guide.md:{block.line}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "hello, world" in out
    assert "succeeded 3/3 succeeded" in out
    assert "run.succeeded" in out
    assert "cancelled" in out
    assert "PermanentError: no customer 42" in out
    assert "permanent PermanentError no customer 42" in out


@pytest.mark.subprocess
def test_the_extension_example_runs_on_a_worker(
    subprocess_settings: Settings, workers: Workers, tmp_path: Path
) -> None:
    (module,) = python_blocks(DOCS / "extending.md", "module")
    module_name = module.marker.split()[1]
    (tmp_path / f"{module_name}.py").write_text(module.code)
    env = settings_env(subprocess_settings)
    env["DAGWRIGHT_IMPORTS"] = f"tests.support.functions,{module_name}"
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(REPO_ROOT)])
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [
            *(sys.executable, "-m", "dagwright", "worker"),
            *("--type", "shouter", "--type", "function", "--type", "triager"),
            *("-c", "2", "--pool", "threads", "-n", f"ext.{os.getpid()}@test"),
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        (client_code,) = python_blocks(DOCS / "extending.md", "run")
        result = subprocess.run(
            [sys.executable, "-c", client_code.code],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()
    worker_log = (tmp_path / "worker.log").read_text(errors="replace")[-2000:]
    assert result.returncode == 0, result.stderr + worker_log
    assert result.stdout.strip() == "4"
    types = subprocess.run(
        [sys.executable, "-m", "dagwright", "worker-types", "--json"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert {"shouter", "triager"} <= {row["name"] for row in json.loads(types.stdout)}


@pytest.mark.subprocess
def test_the_extension_tests_pass_as_written(tmp_path: Path) -> None:
    (module,) = python_blocks(DOCS / "extending.md", "module")
    (test_file,) = python_blocks(DOCS / "extending.md", "pytest")
    (tmp_path / f"{module.marker.split()[1]}.py").write_text(module.code)
    test_path = tmp_path / f"{test_file.marker.split()[1]}.py"
    test_path.write_text(test_file.code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


# -- commands and links -------------------------------------------------------------


SHELL_STOPS = {"|", ">", ">>", "&&", "||", ";", "&", "2>&1"}
VALUED_EXEC_OPTIONS = {"-e", "--env", "-w", "--workdir", "-u", "--user", "--index"}
VALUED_RUN_OPTIONS = VALUED_EXEC_OPTIONS | {"-v", "--volume", "--name"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")


def after_options(words: list[str], start: int, valued: set[str]) -> int:
    """The index of the first word from ``start`` that is not an option (or its value)."""
    k = start
    while k < len(words) and words[k].startswith("-"):
        k += 1 if "=" in words[k] or words[k] not in valued else 2
    return k


def dagwright_argv(words: list[str]) -> list[str] | None:
    """The arguments given to `dagwright` by a shell line, if it runs it: directly
    (after VAR=value assignments), through `docker compose exec [options] SERVICE` or
    `kubectl exec ... --`, or as `docker compose run [options] SERVICE ARGS` (the image's
    entrypoint is dagwright)."""
    start = 0
    while start < len(words) and ASSIGNMENT.fullmatch(words[start]):
        start += 1
    if words[start : start + 1] == ["dagwright"]:
        return words[start + 1 :]
    if words[:3] == ["docker", "compose", "exec"]:
        service = after_options(words, 3, VALUED_EXEC_OPTIONS)
        command = words[service + 1 : service + 2]
        return words[service + 2 :] if command == ["dagwright"] else None
    for i, word in enumerate(words):
        if word == "dagwright" and i and words[i - 1] == "--":
            return words[i + 1 :]
    if words[:3] == ["docker", "compose", "run"]:
        return words[after_options(words, 3, VALUED_RUN_OPTIONS) + 1 :]
    return None


def test_the_command_finder_sees_every_way_of_running_dagwright() -> None:
    def argv(line: str) -> list[str] | None:
        return dagwright_argv(shlex.split(line))

    assert argv("DAGWRIGHT_IMPORTS=x dagwright worker -t a") == ["worker", "-t", "a"]
    assert argv("docker compose exec orchestrator dagwright doctor") == ["doctor"]
    assert argv("docker compose exec -T coder dagwright doctor --json") == ["doctor", "--json"]
    assert argv("docker compose exec -u 0 -T python dagwright runs") == ["runs"]
    assert argv("docker compose exec valkey valkey-cli PING") is None
    assert argv("kubectl -n dw exec deploy/x -- dagwright dlq stats") == ["dlq", "stats"]
    run = "docker compose run --rm -v a:b orchestrator run plan.yaml"
    assert argv(run) == ["run", "plan.yaml"]
    assert argv("dagwrightish doctor") is None


def sets_imports(words: list[str]) -> bool:
    """The line gives `dagwright` modules to import, which may register worker types."""
    return any(w.startswith("DAGWRIGHT_IMPORTS=") for w in words if ASSIGNMENT.fullmatch(w))


def dagwright_commands(page: Path) -> list[tuple[int, list[str], bool]]:
    """Each `dagwright ARGS` of the page's ```sh blocks, as the argv after `dagwright`,
    and whether the line sets DAGWRIGHT_IMPORTS."""
    found = []
    for block in blocks(page):
        if block.language not in ("sh", "bash", "console"):
            continue
        for offset, line in enumerate(block.code.replace("\\\n", " ").splitlines()):
            words = shlex.split(line, comments=True)
            argv = dagwright_argv(words)
            if argv is None:
                continue
            stops = [i for i, word in enumerate(argv) if word in SHELL_STOPS]
            argv = argv[: stops[0]] if stops else argv
            found.append((block.line + offset, argv, sets_imports(words)))
    return found


def all_commands() -> list[tuple[str, list[str], bool]]:
    return [
        (f"{page.relative_to(REPO_ROOT)}:{line}", argv, plugins)
        for page in PAGES
        for line, argv, plugins in dagwright_commands(page)
    ]


@pytest.mark.parametrize(
    ("where", "argv", "plugins"), all_commands(), ids=[c[0] for c in all_commands()]
)
def test_every_documented_command_is_accepted_by_the_cli(
    where: str, argv: list[str], plugins: bool
) -> None:
    problem = cli_problem(argv, plugins=plugins)
    assert problem is None, f"{where}: {problem}"


def test_the_runbooks_cover_the_issue() -> None:
    names = {page.stem for page in RUNBOOKS.glob("*.md")}
    assert {"dlq", "breaker", "scaling", "redis-failover", "upgrading", "finding-a-run"} <= names
    assert len(all_commands()) > 40


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_relative_links_lead_to_files(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
