"""The skill tools: load a skill's instructions, read one of its files, run one of its
scripts in the sandbox (Agent Skills' progressive disclosure, ``dagwright/skills``).

The system prompt lists the node's skills by name and description only
(``workers/agent_skills.py``); these tools bring the rest when the model asks. They act
on ``SkillTools.skills``, the node's own skills as the registry read them (the bytes
whose hash the checkpoint records): a skill the node was not given is refused with the
list of those it was. The registry holds an instance with none (every call refused), so
that the names resolve everywhere (catalogs, policies); a node with skills is given one
of its own (``ToolRegistry.extended``).

What they return: a skill's body (``load_skill``) is the deployment's instructions, as
trusted as the type's prompt (it is installed by whoever runs the workers, decision 93),
so it comes back as it is; a file's text and a script's output come delimited as
untrusted data, like any file or program output. Each call is a ``skill.use`` span
naming the skill and its hash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from dagwright.errors import ToolError
from dagwright.settings import SKILL_TOOLS
from dagwright.skills.folder import Skill
from dagwright.skills.scripts import LAUNCHER, launcher_input
from dagwright.workers.context import NodeContext, OpenSpan
from dagwright.workers.sandboxed import run_code
from dagwright.workers.tools.base import Tool, ToolRegistry
from dagwright.workers.tools.pages import page, page_limit
from dagwright.workers.tools.run_python import RUN_PYTHON_MAX_CHARS, RUN_PYTHON_TIMEOUT_S

LOAD_SKILL, READ_SKILL_FILE, RUN_SKILL_SCRIPT = SKILL_TOOLS
SKILL_USE_SPAN = "skill.use"
SKILL_BODY_MAX_CHARS = 60_000
READ_SKILL_FILE_MAX_CHARS = 50_000
READ_SKILL_FILE_PAGE_CHARS = 20_000


@dataclass(frozen=True)
class SkillTools:
    """The skill tools over one node's skills (none: every call refused)."""

    skills: Mapping[str, Skill] = field(default_factory=dict)

    def load_skill(self, ctx: NodeContext, skill: str) -> str:
        """Load a skill's instructions (its SKILL.md) when your task matches its
        description in the list of skills of your system prompt; follow them. The answer
        also lists the skill's other files.

        Args:
            skill: The skill's name, as the list of skills gives it.
        """
        found = self._skill(skill)
        with _used(ctx, found, LOAD_SKILL):
            files = ", ".join(found.resources) or "none"
            head = f"Skill {found.name} ({found.short_hash}). Its files: {files}."
            return f"{head}\n\n{found.manifest.body}"

    def read_skill_file(
        self, ctx: NodeContext, skill: str, path: str, offset: int = 0, limit: int | None = None
    ) -> str:
        """Read one file of a skill (a reference, an asset, a script's source), a page
        at a time: a page that is not the end says so and gives the call that reads on.

        Args:
            skill: The skill's name.
            path: The file's path inside the skill's folder, e.g. ``references/style.md``.
            offset: The character to start at (0: the beginning).
            limit: How many characters to read, at most 49,800 (default 20,000).
        """
        found = self._skill(skill)
        with _used(ctx, found, READ_SKILL_FILE, path=path[:200]):
            text = found.file(path).decode("utf-8", errors="replace")
            size = page_limit(
                limit, default=READ_SKILL_FILE_PAGE_CHARS, tool_limit=READ_SKILL_FILE_MAX_CHARS
            )
            read_on = _reading_on(skill, path)
            return page(text, offset=offset, limit=size, read_on=read_on)

    def run_skill_script(
        self,
        ctx: NodeContext,
        skill: str,
        script: str,
        args: list[str] | None = None,
        stdin: str = "",
    ) -> str:
        """Run one of a skill's Python scripts in the isolated sandbox (no network, no
        host files, bounded time and memory), in a copy of the skill's folder; returns
        its exit status, stdout and stderr.

        Args:
            skill: The skill's name.
            script: The script's path inside the skill's folder, e.g. ``scripts/check.py``.
            args: Its command-line arguments (``sys.argv[1:]``).
            stdin: Text given to it as its standard input (empty: none).
        """
        found = self._skill(skill)
        job = launcher_input(found, script, list(args or []), stdin)
        with _used(ctx, found, RUN_SKILL_SCRIPT, path=script[:200]):
            result = run_code(ctx, LAUNCHER, input_json=job)
        if result.exit_code is None or result.oom:
            status = result.describe_failure()
        else:
            status = f"exit code {result.exit_code}"
        parts = [status + (" (output truncated)" if result.truncated else "")]
        parts += [f"{name}:\n{text}" for name, text in _streams(result.stdout, result.stderr)]
        return "\n".join(parts)

    def _skill(self, name: str) -> Skill:
        if name not in self.skills:
            given = ", ".join(sorted(self.skills)) or "none"
            raise ToolError(f"no skill {name!r} here; the skills of this task: {given}")
        return self.skills[name]


def _used(
    ctx: NodeContext, skill: Skill, tool: str, path: str | None = None
) -> AbstractContextManager[OpenSpan]:
    return ctx.span(
        SKILL_USE_SPAN, skill=skill.name, skill_hash=skill.content_hash, tool=tool, path=path
    )


def _streams(stdout: str, stderr: str) -> list[tuple[str, str]]:
    return [(name, text) for name, text in (("stdout", stdout), ("stderr", stderr)) if text]


def _reading_on(skill: str, path: str) -> Callable[[int], str]:
    args = f"skill={json.dumps(skill)}, path={json.dumps(path)}"
    return lambda offset: f"call read_skill_file with {args} and offset={offset}"


def register_skill_tools(tools: ToolRegistry, skill_tools: SkillTools) -> list[Tool]:
    """Register the three tools of ``skill_tools`` in ``tools``; return them."""
    return [
        tools.register(
            skill_tools.load_skill, name=LOAD_SKILL, max_output_chars=SKILL_BODY_MAX_CHARS
        ),
        tools.register(
            skill_tools.read_skill_file,
            name=READ_SKILL_FILE,
            max_output_chars=READ_SKILL_FILE_MAX_CHARS,
            carries_outside_content=True,
        ),
        tools.register(
            skill_tools.run_skill_script,
            name=RUN_SKILL_SCRIPT,
            timeout_s=RUN_SKILL_TIMEOUT_S,
            max_output_chars=RUN_PYTHON_MAX_CHARS,
            carries_outside_content=True,
        ),
    ]


RUN_SKILL_TIMEOUT_S = RUN_PYTHON_TIMEOUT_S


def node_skill_tools(tools: ToolRegistry, skills: Mapping[str, Skill]) -> ToolRegistry:
    """``tools`` with the skill tools acting on ``skills`` (a node's)."""
    return tools.extended(register_skill_tools(ToolRegistry(), SkillTools(dict(skills))))
