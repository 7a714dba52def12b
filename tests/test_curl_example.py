"""examples/curl/submit_and_follow.sh run for real: curl and a POSIX shell (dash here)
against the API server over HTTP, with a real worker executing the plan."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dagwright.models import RunStatus
from tests.support.api_server import ApiServer

pytestmark = [pytest.mark.usefixtures("worker"), pytest.mark.subprocess]

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "curl" / "submit_and_follow.sh"
# What the script may use: curl, a POSIX shell and the basic tools; jq is optional.
TOOLS = ("sh", "curl", "grep", "sed", "head", "cat", "mktemp", "rm", "dirname", "date")


def run_script(api: ApiServer, token: str | None, path: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, "DAGWRIGHT_URL": api.url}
    if token is not None:
        env["DAGWRIGHT_TOKEN"] = token
    return subprocess.run(
        ["sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def bin_without_jq(tmp_path: Path) -> str:
    """A PATH holding only the tools the script may use, jq left out."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (folder / tool).symlink_to(found)
    return str(folder)


@pytest.mark.parametrize("with_jq", [False, True], ids=["curl-only", "with-jq"])
def test_the_script_submits_follows_and_prints_the_result(
    api: ApiServer, tmp_path: Path, with_jq: bool
) -> None:
    if with_jq and not shutil.which("jq"):
        pytest.skip("no jq here")
    path = os.environ["PATH"] if with_jq else bin_without_jq(tmp_path)
    done = run_script(api, api.token("operate"), path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("submitted run ")
    run_id = lines[0].removeprefix("submitted run ")
    events = lines[1:-2]
    # Every node's success arrived over the event stream, in dependency order.
    succeeded = [line for line in events if line.startswith("event node.succeeded")]
    order = [line.removeprefix("event node.succeeded (node ").rstrip(")") for line in succeeded]
    assert order[0] == "a" and order[-1] == "d" and sorted(order) == ["a", "b", "c", "d"]
    assert lines[-2:] == ["status succeeded", 'result "left hello + right hello"']
    assert api.client.status(run_id).status is RunStatus.SUCCEEDED
    assert done.stderr == ""


def test_a_missing_token_is_one_line_and_exit_2(api: ApiServer) -> None:
    refused = run_script(api, None, os.environ["PATH"])
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        "submit refused (401): authentication required: send an API token (dagwright token)\n"
    )


def test_a_read_token_cannot_submit(api: ApiServer) -> None:
    refused = run_script(api, api.token("read"), os.environ["PATH"])
    assert refused.returncode == 2
    assert refused.stderr == (
        "submit refused (403): this needs the operate scope; your token has read\n"
    )
