"""The registry: built from settings, once per process, never shared through a global."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagwright import Settings
from dagwright.errors import ConfigurationError
from dagwright.keys import ORCHESTRATOR_QUEUE, PLAN_TASK
from dagwright.planning.planner import PLANNER_TYPE
from dagwright.registry import build_registry


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for modules this test writes, forgotten after it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def write_module(folder: Path, name: str, code: str) -> str:
    (folder / f"{name}.py").write_text("import dagwright\nfrom dagwright import AgentSpec\n" + code)
    return name


def test_registries_built_from_different_settings_do_not_leak_into_each_other(
    module_dir: Path,
) -> None:
    shouting = write_module(
        module_dir,
        "shouting",
        "@dagwright.worker_type(name='shouter', description='Shouts.')\n"
        "def shout(ctx, node):\n    return 'HEY'\n\n"
        "@dagwright.function\ndef whisper() -> str:\n    return 'hey'\n",
    )
    with_it = build_registry(Settings(imports=[shouting]))
    without_it = build_registry(Settings(imports=[]))
    assert "shouter" in with_it.type_names() and with_it.functions.get("whisper")
    assert "shouter" not in without_it.type_names()
    assert without_it.functions.get("whisper") is None
    # built again, the module (already imported) gives the same declarations, once
    assert "shouter" in build_registry(Settings(imports=[shouting, shouting])).type_names()


def test_the_planner_type_is_in_every_registry_without_being_asked_for() -> None:
    planner = build_registry(Settings(imports=[])).get(PLANNER_TYPE)
    assert (planner.internal, planner.queue, planner.task) == (True, ORCHESTRATOR_QUEUE, PLAN_TASK)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            "@dagwright.function\ndef concat() -> str:\n    return ''\n",
            r"two functions are named 'concat' \(dagwright\.workers\.builtin_functions:concat "
            r"and clash\w*:concat\): rename one with @dagwright\.function\(name=\.\.\.\)",
        ),
        (
            "@dagwright.tool(name='read_input')\ndef mine() -> str:\n    return ''\n",
            r"two tools are named 'read_input'.*@dagwright\.tool\(name=\.\.\.\)",
        ),
        (
            "writer = AgentSpec(name='writer', description='d', system_prompt='p')\n",
            r"two worker types are named 'writer': rename one",
        ),
        (
            "scout = AgentSpec(name='scout', description='d', system_prompt='p',\n"
            "                  tools=('read_inptu',))\n",
            r"agent type 'scout' names unknown tool\(s\) read_inptu: declare them",
        ),
    ],
    ids=["function", "tool", "worker type", "unknown tool"],
)
def test_a_conflict_is_a_configuration_error_of_one_line(
    module_dir: Path, code: str, message: str, request: pytest.FixtureRequest
) -> None:
    name = write_module(module_dir, f"clash{request.node.callspec.indices['code']}", code)
    with pytest.raises(ConfigurationError, match=message) as caught:
        build_registry(Settings(imports=[name]))
    assert "\n" not in str(caught.value)


def test_an_agent_may_name_a_tool_declared_below_it(module_dir: Path) -> None:
    name = write_module(
        module_dir,
        "ordered",
        "scout = AgentSpec(name='scout', description='d', system_prompt='p', tools=('peek',))\n\n"
        "@dagwright.tool\ndef peek() -> str:\n    '''Peek.'''\n    return ''\n",
    )
    assert build_registry(Settings(imports=[name])).get("scout").tools == ("peek",)


def test_declaring_registers_nothing_until_a_registry_is_built(module_dir: Path) -> None:
    name = write_module(
        module_dir, "quiet", "@dagwright.function\ndef murmur() -> str:\n    return ''\n"
    )
    __import__(name)
    assert build_registry(Settings(imports=[])).functions.get("murmur") is None


def test_a_module_that_does_not_import_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"cannot import 'no_such_module_here'"):
        build_registry(Settings(imports=["no_such_module_here"]))


def test_reading_a_run_builds_no_registry_and_a_runtime_builds_it_once(
    no_worker_settings: Settings,
) -> None:
    from dagwright import Client, PlanBuilder

    plan = PlanBuilder("read me")
    plan.function("a", "noop")
    run_id = Client(no_worker_settings).submit(plan.build()).run_id
    reader = Client(no_worker_settings)
    assert reader.status(run_id).run_id == run_id
    # `dagwright status` must not import users' modules nor scan entry points.
    assert "registry" not in reader.runtime.__dict__
    assert reader.runtime.registry is reader.runtime.registry
    assert reader.runtime.registry.get(PLANNER_TYPE).name == PLANNER_TYPE  # the full one
