"""``dagwright skills list|show`` and the skills of each type in ``worker-types`` (the
real command, in a subprocess) and in the planner's catalog of worker types."""

from __future__ import annotations

from pathlib import Path

from dagwright.planning.planner import RestrictedCatalog
from dagwright.registry import build_registry
from dagwright.settings import Settings
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.skills import EXAMPLE_SKILLS, RELEASE_NOTES, write_skill


def skills_env(tmp_path: Path, skills_dir: Path = EXAMPLE_SKILLS) -> dict[str, str]:
    return cli_env(
        None,
        tmp_path / "data",
        DAGWRIGHT_SKILL_DIRS=f'["{skills_dir}"]',
        DAGWRIGHT_AGENT_SKILLS=f'{{"writer": ["{RELEASE_NOTES}"]}}',
        COLUMNS="80",
    )


def test_skills_list_fits_80_columns_and_says_which_types_have_each(tmp_path: Path) -> None:
    env = skills_env(tmp_path)
    listed = dagwright("skills", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert all(len(line) <= 80 for line in listed.stdout.splitlines())
    header, first = listed.stdout.splitlines()[:2]
    assert header.split()[:3] == ["SKILL", "TYPES", "DESCRIPTION"]
    assert first.split()[:2] == [RELEASE_NOTES, "writer"]
    (row,) = json_out(dagwright("skills", "list", "--json", env=env))
    assert row["types"] == ["writer"] and row["content_hash"].startswith("sha256:")
    assert row["files"] == ["references/style.md", "scripts/group_changes.py"]


def test_skills_show_prints_the_front_matter_and_the_body(tmp_path: Path) -> None:
    env = skills_env(tmp_path)
    shown = dagwright("skills", "show", RELEASE_NOTES, env=env)
    assert shown.returncode == 0, shown.stderr
    summary = shown.stdout.split("SKILL.md")[0]  # the body is printed as the skill has it
    assert all(len(line) <= 80 for line in summary.splitlines())
    assert "metadata.version  1.0" in shown.stdout
    assert "1. Group the changes" in shown.stdout
    assert json_out(dagwright("skills", "show", RELEASE_NOTES, "--json", env=env))["body"]
    unknown = dagwright("skills", "show", "nope", env=env)
    assert unknown.returncode == 2
    assert one_error_line(unknown) == f"no skill 'nope'; the skills here: {RELEASE_NOTES}"


def test_a_malformed_skill_is_refused_by_skills_list_in_one_line(tmp_path: Path) -> None:
    bad = write_skill(tmp_path / "skills", "good")
    (bad / "SKILL.md").write_text("---\nname: good\nlicence: MIT\ndescription: d\n---\n")
    listed = dagwright("skills", "list", env=skills_env(tmp_path, tmp_path / "skills"))
    assert listed.returncode == 2
    assert "unknown front matter field(s) licence" in one_error_line(listed)


def test_worker_types_and_the_planners_catalog_show_each_types_skills(tmp_path: Path) -> None:
    env = skills_env(tmp_path)
    rows = {row["name"]: row for row in json_out(dagwright("worker-types", "--json", env=env))}
    assert rows["writer"]["skills"] == [RELEASE_NOTES] and rows["analyst"]["skills"] == []
    table = dagwright("worker-types", env=env).stdout
    assert f"skill:{RELEASE_NOTES}" in table

    settings = Settings(skill_dirs=[EXAMPLE_SKILLS], agent_skills={"writer": [RELEASE_NOTES]})
    catalog = RestrictedCatalog(build_registry(settings), settings=settings).describe()
    assert f"    - skill {RELEASE_NOTES}: Turns a list of changes" in catalog
