"""Packages the sandboxed code may import: installed ahead of time from the package index
(``dagwright sandbox install``), importable in a real bubblewrap sandbox, and named, with
the versions actually installed, by run_python's description, the coder's prompt and the
planner's catalog. A missing module ends with one line the model can act on."""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagwright.errors import ConfigurationError
from dagwright.planning.planner import RestrictedCatalog
from dagwright.registry import builtin_registry
from dagwright.sandbox.base import Limits
from dagwright.sandbox.bubblewrap import BubblewrapSandbox
from dagwright.sandbox.choice import forget_choice
from dagwright.sandbox.environment import forget_environments
from dagwright.sandbox.packages import install_packages
from dagwright.settings import Settings
from dagwright.workers.agent_tools import offered_tools
from dagwright.workers.builtin_agents import builtin_agents, with_sandbox_note
from tests.support.cli import dagwright
from tests.support.sandboxes import sandbox_or_skip

pytestmark = pytest.mark.sandbox

PACKAGE = "six"  # tiny, pure Python, surely on the index this machine's pip uses
LIMITS = Limits(wall_time_s=20, cpu_time_s=20, memory_mb=256, pids=32, scratch_mb=16)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, str]]:
    """``six`` installed by ``install_packages`` into a packages dir under a 0700 home
    (root's data directory is under /root): the settings, and the version installed."""
    sandbox_or_skip("bubblewrap")
    home = tmp_path_factory.mktemp("home")
    home.chmod(0o700)
    settings = Settings(
        sandbox_backend="bubblewrap",
        sandbox_packages=[PACKAGE],
        sandbox_packages_dir=home / "sandbox-packages",
    )
    target = install_packages(settings.sandbox, timeout_s=300)
    [site] = target.glob("lib/python3*/site-packages")
    version = _version_in(site)
    forget_choice()
    forget_environments()
    yield settings, version
    forget_choice()
    forget_environments()


def _version_in(site: Path) -> str:
    [dist] = importlib.metadata.distributions(path=[str(site)])
    assert dist.metadata["Name"] == PACKAGE
    return dist.version


def test_code_imports_the_installed_package_read_only(installed: tuple[Settings, str]) -> None:
    settings, version = installed
    sandbox = BubblewrapSandbox.from_settings(settings.sandbox)
    code = (
        "import six, sys\n"
        "print(six.__version__, sys.prefix)\n"
        "try:\n"
        "    open(six.__file__, 'a')\n"
        "except OSError as exc:\n"
        "    print('read-only', exc.errno in (13, 30))\n"
    )
    result = sandbox.run(code, limits=LIMITS)
    assert result.ok, result
    prefix = str(settings.sandbox.packages_dir)
    assert result.stdout.splitlines() == [f"{version} {prefix}", "read-only True"]
    if os.geteuid() == 0:  # it ran as the sandbox uid, through the 0700 home
        assert sandbox.host_uid == settings.sandbox.uid


def test_a_missing_module_says_what_is_available(installed: tuple[Settings, str]) -> None:
    settings, version = installed
    sandbox = BubblewrapSandbox.from_settings(settings.sandbox)
    result = sandbox.run("import fastapi\n", limits=LIMITS)
    assert result.exit_code == 1
    assert "ModuleNotFoundError: No module named 'fastapi'" in result.stderr
    assert result.describe_failure() == (
        "the code exited with 1: module 'fastapi' is not available in this sandbox, and "
        "nothing can be installed (no network); available: the standard library and "
        f"six {version}"
    )


def test_the_tool_the_prompt_and_the_catalog_name_what_is_installed(
    installed: tuple[Settings, str],
) -> None:
    settings, version = installed
    registry = builtin_registry()
    said = f"only these packages: six {version}. Nothing else can be installed (no network)."
    [tool] = offered_tools(["run_python"], registry.tools, settings)
    assert said in tool.definition["description"]
    assert tool.definition["description"].startswith("Run a Python 3 program")
    [coder] = [spec for spec in builtin_agents() if spec.name == "coder"]
    prompt = with_sandbox_note(coder, registry.tools, settings).system_prompt
    assert "## The sandbox\n\n" in prompt and said in prompt
    assert "nothing can be installed there" in prompt  # coder.md's own rule
    [writer] = [spec for spec in builtin_agents() if spec.name == "writer"]
    assert with_sandbox_note(writer, registry.tools, settings) == writer  # no run_python
    catalog = RestrictedCatalog(registry, ["coder"], settings).describe()
    assert "run_python: Run a Python 3 program" in catalog and f"six {version}" in catalog


def test_requirements_come_from_the_index_only() -> None:
    assert Settings(sandbox_packages="six, attrs==23.2.0").sandbox.packages == [
        "six",
        "attrs==23.2.0",
    ]
    assert Settings(sandbox_packages='["attrs>=22,<24"]').sandbox.packages == ["attrs>=22,<24"]
    for bad in ("-r /etc/passwd", "x @ https://example.com/x.whl", "./local", "--index-url=x"):
        with pytest.raises(ValueError, match="not a package of the index"):
            Settings(sandbox_packages=[bad])


def test_nothing_declared_is_refused_in_one_line(tmp_path: Path) -> None:
    settings = Settings(sandbox_packages_dir=tmp_path / "pk")
    with pytest.raises(ConfigurationError, match="sandbox_packages is empty"):
        install_packages(settings.sandbox, timeout_s=5)


def test_a_failed_install_leaves_the_installed_packages_alone(
    installed: tuple[Settings, str],
) -> None:
    settings, version = installed
    broken = Settings(
        sandbox_packages=["dagwright-no-such-package-on-any-index"],
        sandbox_packages_dir=settings.sandbox.packages_dir,
    )
    with pytest.raises(ConfigurationError, match="sandbox install: pip install failed"):
        install_packages(broken.sandbox, timeout_s=120)
    [site] = settings.sandbox.packages_dir.glob("lib/python3*/site-packages")
    assert _version_in(site) == version
    assert [p.name for p in settings.sandbox.packages_dir.parent.iterdir()] == ["sandbox-packages"]


def test_docker_reports_what_its_image_holds() -> None:
    """The image of the test engine has python3 alone: its description says the standard
    library only, read from a container; a missing module names the same."""
    from dagwright.sandbox.environment import sandbox_environment

    sandbox = sandbox_or_skip("docker")
    forget_environments()
    try:
        found = sandbox_environment(Settings(sandbox_backend="docker").sandbox)
    finally:
        forget_environments()
    assert found is not None and found.python.startswith("3.")
    assert found.describe() == (
        f"The sandbox has Python {found.python} with its standard library only: no other "
        "package, and none can be installed (no network)."
    )
    result = sandbox.run("import fastapi\n", limits=LIMITS)
    assert result.describe_failure().endswith(
        "nothing can be installed (no network); available: the standard library only"
    )


@pytest.mark.subprocess
def test_the_install_command_installs_and_says_what_the_sandbox_has(tmp_path: Path) -> None:
    sandbox_or_skip("bubblewrap")
    env = {
        **os.environ,
        "DAGWRIGHT_CONFIG_FILE": "/dev/null",
        "DAGWRIGHT_SANDBOX_BACKEND": "bubblewrap",
        "DAGWRIGHT_SANDBOX_PACKAGES": PACKAGE,
        "DAGWRIGHT_SANDBOX_PACKAGES_DIR": str(tmp_path / "pk"),
    }
    done = dagwright("sandbox", "install", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"installing {PACKAGE} into {tmp_path / 'pk'}" in done.stderr
    assert re.fullmatch(
        r"The sandbox has Python 3\.\S+ with its standard library and only "
        r"these packages: six \S+\. Nothing else can be installed \(no network\)\.\n",
        done.stdout,
    ), done.stdout
    refused = dagwright("sandbox", "install", env={**env, "DAGWRIGHT_SANDBOX_PACKAGES": "-r x"})
    assert refused.returncode == 2 and "not a package of the index" in refused.stderr
