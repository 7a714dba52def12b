"""Skill folders as the Agent Skills specification defines them: what SKILL.md may say
(and what is refused, with one line), the content hash, the path rules of a skill's
files, a malformed skill refused by a starting worker and by ``doctor``, and a resumed
node whose skill changed since it started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

from dagwright.doctor import Status, skill_checks
from dagwright.errors import ConfigurationError, MalformedSkillError, SkillChangedError, ToolError
from dagwright.models import Node
from dagwright.registry import build_registry
from dagwright.settings import SKILL_TOOLS, Settings
from dagwright.skills.folder import SkillLimits, read_skill
from dagwright.skills.library import SkillLibrary
from dagwright.testing import FakeAnthropicServer
from dagwright.workers.agent_loop import run_agent
from dagwright.workers.agent_skills import equip_skills
from dagwright.workers.agent_spec import AgentSpec
from dagwright.workers.memory_services import MemoryServices
from tests.support.llm_script import call, turn
from tests.support.settings import TEST_API_KEY
from tests.support.skills import EXAMPLE_SKILLS, RELEASE_NOTES, write_skill

LONG = "x" * 1025


def skill_md(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)
    return folder


def test_the_example_skill_has_every_field_the_specification_defines() -> None:
    skill = read_skill(EXAMPLE_SKILLS / RELEASE_NOTES, SkillLimits())
    manifest = skill.manifest
    assert manifest.name == RELEASE_NOTES and manifest.license == "MIT"
    assert manifest.metadata == {"author": "dagwright", "version": "1.0"}
    assert manifest.compatibility and manifest.description.startswith("Turns a list")
    assert skill.resources == ["references/style.md", "scripts/group_changes.py"]
    assert skill.scripts == ["scripts/group_changes.py"]
    assert skill.content_hash.startswith("sha256:") and len(skill.content_hash) == 71


@pytest.mark.parametrize(
    ("folder", "front", "said"),
    [
        ("Bad_Skill", "name: Bad_Skill\ndescription: d", "lowercase letters, digits"),
        ("bad--name", "name: bad--name\ndescription: d", "single hyphens"),
        ("-lead", "name: -lead\ndescription: d", "neither starting nor ending"),
        ("a" * 65, f"name: {'a' * 65}\ndescription: d", "at most 64"),
        ("other", "name: mine\ndescription: d", "must be the folder's name (other)"),
        ("nodesc", "name: nodesc", "`description` must be a non-empty string"),
        ("longdesc", f"name: longdesc\ndescription: {LONG}", "1025 characters long; at most 1024"),
        ("compat", f"name: compat\ndescription: d\ncompatibility: {'c' * 501}", "at most 500"),
        ("meta", "name: meta\ndescription: d\nmetadata: {version: 1}", "string values"),
        ("typo", "name: typo\ndescripton: d\ndescription: d", "unknown front matter field(s)"),
        ("tools", "name: tools\ndescription: d\nallowed-tools: [a, b]", "space-separated"),
        ("yaml", "name: yaml\ndescription: a: b", "not valid YAML"),
    ],
)
def test_a_skill_md_the_specification_refuses_is_refused_with_one_line(
    tmp_path: Path, folder: str, front: str, said: str
) -> None:
    skill_md(tmp_path / folder, f"---\n{front}\n---\nBody.\n")
    with pytest.raises(MalformedSkillError) as refused:
        SkillLibrary.load([tmp_path], SkillLimits())
    message = str(refused.value)
    assert said in message and "\n" not in message
    assert str(tmp_path / folder / "SKILL.md") in message


def test_a_skill_md_without_front_matter_is_refused(tmp_path: Path) -> None:
    skill_md(tmp_path / "plain", "# Just markdown\n")
    with pytest.raises(MalformedSkillError, match="must start with YAML front matter"):
        SkillLibrary.load([tmp_path], SkillLimits())


def test_a_link_out_of_the_folder_is_refused_and_a_read_cannot_escape(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "skills", "linker")
    (tmp_path / "secret.txt").write_text("host secret")
    (folder / "references").mkdir()
    (folder / "references" / "out.md").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(MalformedSkillError, match="a link out of the skill's folder"):
        SkillLibrary.load([tmp_path / "skills"], SkillLimits())

    (folder / "references" / "out.md").unlink()
    (folder / "references" / "in.md").write_text("inside")
    skill = SkillLibrary.load([tmp_path / "skills"], SkillLimits()).get("linker")
    assert skill.file("references/in.md") == b"inside"
    for escape in ("../secret.txt", "/etc/passwd", "references/../../secret.txt"):
        with pytest.raises(ToolError):
            skill.file(escape)


def test_the_content_hash_covers_every_file_of_the_folder(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "hashed")
    first = read_skill(folder, SkillLimits()).content_hash
    assert read_skill(folder, SkillLimits()).content_hash == first
    (folder / "assets").mkdir()
    (folder / "assets" / "t.txt").write_text("a")
    second = read_skill(folder, SkillLimits()).content_hash
    (folder / "assets" / "t.txt").write_text("b")
    assert len({first, second, read_skill(folder, SkillLimits()).content_hash}) == 3


def test_a_folder_past_the_bounds_is_refused(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "big")
    (folder / "references").mkdir()
    (folder / "references" / "huge.md").write_text("x" * 2000)
    with pytest.raises(MalformedSkillError, match="skill_max_bytes"):
        SkillLibrary.load([tmp_path], SkillLimits(max_bytes=1000))


def test_an_unknown_skill_or_type_in_agent_skills_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path, "known")
    with pytest.raises(ConfigurationError, match="unknown skill"):
        build_registry(Settings(skill_dirs=[tmp_path], agent_skills={"writer": ["nope"]}))
    with pytest.raises(ConfigurationError, match="no agent type"):
        build_registry(Settings(skill_dirs=[tmp_path], agent_skills={"wizard": ["known"]}))


def bad_skills_dir(tmp_path: Path) -> Path:
    skill_md(tmp_path / "skills" / "broken", "---\nname: broken\n---\nNo description.\n")
    return tmp_path / "skills"


def test_a_worker_refuses_to_start_with_a_malformed_skill_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGWRIGHT_")}
    env.update(
        DAGWRIGHT_SKILL_DIRS=f'["{bad_skills_dir(tmp_path)}"]',
        DAGWRIGHT_REDIS_URL="redis://127.0.0.1:1/0",  # never reached: it stops before
    )
    done = subprocess.run(
        [sys.executable, "-m", "dagwright", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "skill 'broken': `description` must be a non-empty string" in lines[0]


def test_doctor_reports_a_malformed_skill_and_the_skills_each_type_has(tmp_path: Path) -> None:
    (check,) = skill_checks(Settings(skill_dirs=[bad_skills_dir(tmp_path)]))
    assert check.status == Status.FAIL and "skill 'broken'" in check.detail
    good = Settings(skill_dirs=[EXAMPLE_SKILLS], agent_skills={"writer": [RELEASE_NOTES]})
    (check,) = skill_checks(good)
    assert check.status == Status.OK and "writer (release-notes)" in check.detail


def test_a_resumed_node_whose_skill_changed_is_refused_with_one_line(tmp_path: Path) -> None:
    settings = Settings(skill_dirs=[EXAMPLE_SKILLS], agent_skills={"writer": [RELEASE_NOTES]})
    registry = build_registry(settings)
    spec = registry.declaration("writer")
    checkpoint = {
        "messages": [{"role": "user", "content": "Write."}],
        "skills": {RELEASE_NOTES: "sha256:" + "0" * 64},
    }
    ctx = MemoryServices().context(checkpoint=checkpoint, settings=settings, node_id="w")
    node = Node(id="w", type="writer", instruction="Write.")
    with pytest.raises(SkillChangedError) as refused:
        run_agent(ctx, node, spec, registry.tools)  # type: ignore[arg-type]
    message = str(refused.value)
    assert "skill 'release-notes' changed since node 'w' started (000000000000 ->" in message
    assert "dagwright dlq replay ID --fresh" in message and "\n" not in message


def skill_tool_definitions() -> list[dict[str, Any]]:
    settings = Settings(skill_dirs=[EXAMPLE_SKILLS], agent_skills={"writer": [RELEASE_NOTES]})
    tools = build_registry(settings).tools
    return [tools.get(name).schema() for name in SKILL_TOOLS]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("offered", "played", "said"),
    [
        (False, {"skill": RELEASE_NOTES}, "the request does not offer load_skill"),
        (True, {}, "its input schema refuses: 'skill' is a required property"),
        (True, {"skill": 3}, "its input schema refuses: 3 is not of type 'string'"),
    ],
)
def test_the_fake_plays_no_skill_call_the_model_could_not_make(
    fake_llm: FakeAnthropicServer, offered: bool, played: dict[str, Any], said: str
) -> None:
    fake_llm.add(turn("You are", 1, call("load_skill", **played)))
    sdk = anthropic.Anthropic(api_key=TEST_API_KEY, base_url=fake_llm.base_url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match=said):
        sdk.messages.create(
            model="claude-sonnet-5-5",
            max_tokens=100,
            system="You are a writer",
            messages=[{"role": "user", "content": "hi"}],
            tools=skill_tool_definitions() if offered else [],  # type: ignore[arg-type]
        )


def test_the_fake_plays_a_skill_call_as_any_tool_call(fake_llm: FakeAnthropicServer) -> None:
    fake_llm.add(turn("You are", 1, call("load_skill", skill=RELEASE_NOTES)))
    sdk = anthropic.Anthropic(api_key=TEST_API_KEY, base_url=fake_llm.base_url, max_retries=0)
    reply = sdk.messages.create(
        model="claude-sonnet-5-5",
        max_tokens=100,
        system="You are a writer",
        messages=[{"role": "user", "content": "hi"}],
        tools=skill_tool_definitions(),  # type: ignore[arg-type]
    )
    (used,) = reply.content
    assert used.type == "tool_use" and used.input == {"skill": RELEASE_NOTES}


def test_a_node_that_narrows_away_load_skill_gets_no_catalog() -> None:
    settings = Settings(skill_dirs=[EXAMPLE_SKILLS], agent_skills={"writer": [RELEASE_NOTES]})
    registry = build_registry(settings)
    spec = registry.declaration("writer")
    assert isinstance(spec, AgentSpec)
    ctx = MemoryServices().context(settings=settings, node_id="w")
    kept = Node(id="w", type="writer", instruction="Write.")
    equipped, _, versions = equip_skills(ctx, kept, spec, registry.tools)
    assert "<name>release-notes</name>" in equipped.system_prompt and versions
    narrowed = Node(id="w", type="writer", instruction="Write.", tools=["read_input"])
    equipped, _, _ = equip_skills(ctx, narrowed, spec, registry.tools)
    assert "<available_skills>" not in equipped.system_prompt
    assert "load_skill" not in equipped.tools
