"""The Helm chart (ops/helm/dagwright) rendered by the real ``helm`` (``helm template``,
about 50 ms), for tests/test_helm_chart.py: the objects as a cluster would receive them.

The helm is ``$DAGWRIGHT_HELM`` (CI fetches a pinned one there with
ops/helm/fetch-helm.sh), else the first on PATH. Without one the tests are skipped,
unless ``DAGWRIGHT_REQUIRE_HELM=1`` (CI sets it): then they fail, so CI cannot go green
by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.deployment_files import REPO

CHART = REPO / "ops" / "helm" / "dagwright"
HELM_ENV = "DAGWRIGHT_HELM"
REQUIRE_ENV = "DAGWRIGHT_REQUIRE_HELM"
RELEASE = "dagwright"


def find_helm() -> str | None:
    """The helm binary to run, or None."""
    configured = os.environ.get(HELM_ENV)
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("helm")


def helm_or_skip() -> str:
    """The helm binary; skips the test without one (fails it under DAGWRIGHT_REQUIRE_HELM=1)."""
    found = find_helm()
    if found is not None:
        return found
    where = os.environ.get(HELM_ENV) or "PATH"
    reason = f"no helm in {where} (bash ops/helm/fetch-helm.sh puts the pinned one in place)"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
    pytest.skip(reason)


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``helm <args>``, with its caches and config in a throwaway place (it writes none
    for a local chart, but must not read a developer's repositories either)."""
    home = Path(os.environ.get("TMPDIR", "/tmp")) / "dagwright-helm-home"
    env = {
        **os.environ,
        **{f"HELM_{kind}_HOME": str(home / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")},
    }
    return subprocess.run(
        [helm, *args], capture_output=True, text=True, timeout=60, check=False, env=env
    )


@dataclass(frozen=True)
class Rendered:
    """The objects one ``helm template`` rendered."""

    documents: list[dict[str, Any]]

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        """Objects of ``kind`` by name."""
        return {d["metadata"]["name"]: d for d in self.documents if d["kind"] == kind}

    def deployment_args(self) -> dict[str, list[str]]:
        """Deployment name -> the args of its dagwright container."""
        return {
            name: container["args"]
            for name, deployment in self.objects("Deployment").items()
            for container in containers(deployment)
            if container["image"].startswith("dagwright")
        }

    def worker_args(self) -> dict[str, list[str]]:
        """The worker types' Deployments (not the orchestrator's) -> their args."""
        return {
            name: args
            for name, args in self.deployment_args().items()
            if args[0] == "worker" and name != "dagwright-orchestrator"
        }


def containers(pod_owner: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = pod_owner["spec"]["template"]["spec"]["containers"]
    return found


def pod_spec(pod_owner: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = pod_owner["spec"]["template"]["spec"]
    return found


def render(helm: str, values: dict[str, Any] | None = None, *, tmp: Path | None = None) -> Rendered:
    """The chart rendered with its default values, and ``values`` over them (written to a
    values file in ``tmp``, as an operator would)."""
    args = ["template", RELEASE, str(CHART)]
    if values is not None:
        assert tmp is not None, "values need a directory for their file"
        values_file = tmp / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        args += ["-f", str(values_file)]
    result = run_helm(helm, *args)
    assert result.returncode == 0, result.stderr
    return Rendered([doc for doc in yaml.safe_load_all(result.stdout) if doc])


def render_error(helm: str, values: dict[str, Any], tmp: Path) -> str:
    """What helm says when it refuses to render the chart with ``values``."""
    values_file = tmp / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    result = run_helm(helm, "template", RELEASE, str(CHART), "-f", str(values_file))
    assert result.returncode != 0, "helm rendered it"
    return result.stderr
