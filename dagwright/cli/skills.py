"""``dagwright skills``: the Agent Skills of ``skill_dirs`` and the agent types given
each (docs/skills.md)."""

from __future__ import annotations

import textwrap
from typing import Annotated, Any

import typer

from dagwright.cli.options import ImportOption, JsonOption, WideOption, settings_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.cli.tables import Column, FittedTable, Kind

app = typer.Typer(
    help="Agent Skills (SKILL.md folders of skill_dirs) and the agent types given them.",
    no_args_is_help=True,
)
COLUMNS = [
    Column("SKILL", Kind.ID),
    Column("TYPES"),
    Column("DESCRIPTION", Kind.TEXT, min_width=24),
    Column("HASH", optional=True),
]
SHORT_HASH_CHARS = 12


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="skills")


@app.command("list")
def list_skills(
    json_output: JsonOption = False, wide: WideOption = False, imports: ImportOption = None
) -> None:
    """List the skills: the agent types given each, what it does, its content hash. A
    malformed SKILL.md is refused in one line, as a starting worker refuses it."""
    from dagwright.client.skills import describe_skills

    rows = describe_skills(settings_from(imports))
    if json_output:
        print_json(rows)
        return
    if not rows:
        stderr.print("no skills (set skill_dirs: DAGWRIGHT_SKILL_DIRS or dagwright.toml)")
        return
    table = FittedTable(COLUMNS)
    for row in rows:
        table.add_row(row["name"], "\n".join(row["types"]) or "-", row["description"], short(row))
    table.print(stdout, wide=wide, notes=stderr)


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="The skill's name.")],
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Print a skill: its front matter, files, hash, types and instructions."""
    from dagwright.client.skills import describe_skill

    row = describe_skill(settings_from(imports), name)
    if json_output:
        print_json(row)
        return
    lines = summary_lines(row)
    width = max(len(label) for label, _ in lines) + 2
    for label, value in lines:
        wrapped = textwrap.wrap(value, max(stdout.width - width, 20)) or [""]
        indented = f"\n{' ' * width}".join(wrapped)
        stdout.out(f"{label:<{width}}{indented}", highlight=False)
    stdout.rule("SKILL.md", style="dim")
    stdout.out(row["body"], highlight=False)


def summary_lines(row: dict[str, Any]) -> list[tuple[str, str]]:
    lines = [
        ("name", row["name"]),
        ("description", row["description"]),
        ("hash", row["content_hash"]),
        ("folder", row["folder"]),
        ("files", ", ".join(row["files"]) or "-"),
        ("types", ", ".join(row["types"]) or "- (attach it: agent_skills)"),
    ]
    optional = [("license", row["license"]), ("compatibility", row["compatibility"])]
    lines += [(label, value) for label, value in optional if value]
    lines += [(f"metadata.{key}", value) for key, value in row["metadata"].items()]
    if row["allowed_tools"]:
        lines.append(("allowed-tools", " ".join(row["allowed_tools"])))
    return lines


def short(row: dict[str, Any]) -> str:
    return str(row["content_hash"]).removeprefix("sha256:")[:SHORT_HASH_CHARS]
