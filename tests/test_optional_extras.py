"""Optional dependencies: a feature whose extra is not installed says which to install."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from dagwright.errors import EXTRA_OF_MODULE, MissingExtraError, SandboxUnavailableError
from dagwright.settings import Settings

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())


@pytest.mark.parametrize(
    ("module", "extra"), [("docker.errors", "docker"), ("PIL.Image", "charts"), ("mcp", "mcp"),
                          ("mcp_types", "mcp"), ("flower.app", "flower")],
)  # fmt: skip
def test_a_missing_optional_module_names_its_extra(module: str, extra: str) -> None:
    error = MissingExtraError.of(ImportError(f"No module named {module!r}", name=module), "X")
    assert str(error).endswith(f"pip install 'dagwright[{extra}]'")


def test_a_missing_module_that_is_no_extra_is_raised_as_it_is() -> None:
    missing = ImportError("No module named 'celery'", name="celery")
    with pytest.raises(ImportError) as raised:
        MissingExtraError.of(missing, "X")
    assert raised.value is missing


def test_every_extra_named_is_declared_and_the_core_does_not_need_it() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    core = " ".join(PYPROJECT["project"]["dependencies"]).lower()
    for extra in set(EXTRA_OF_MODULE.values()):
        assert extra in extras and "dagwright[" in extras["all"][0]
        assert extra in extras["all"][0]
        for requirement in extras[extra]:
            assert requirement.split(">")[0].split("=")[0] not in core


def test_the_docker_backend_without_the_docker_sdk_says_which_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dagwright.sandbox.choice import build_backend

    monkeypatch.setitem(sys.modules, "docker", None)  # import docker -> ImportError
    monkeypatch.delitem(sys.modules, "dagwright.sandbox.docker", raising=False)
    with pytest.raises(SandboxUnavailableError, match=r"pip install 'dagwright\[docker\]'"):
        build_backend("docker", Settings().sandbox)
