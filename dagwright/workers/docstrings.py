"""What a function's Google-style docstring tells the model about it, when the function is a
tool: the description (everything but the ``Args:`` section) and one description per
argument (the ``Args:`` entries).

The model reads only the tool definition: the description is its whole manual for when
and how to call the tool, so all of it goes, not the first line (a docstring's first
line is often half a sentence, wrapped at 100 columns). Lines wrapped inside a paragraph
are joined, as the line breaks are the source file's, not the author's.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Example|Examples|Note):\s*$"
)
ARG_SECTIONS = frozenset({"Args", "Arguments", "Parameters"})
ARG_ENTRY = re.compile(r"^(\*{0,2}\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def tool_description(func: Callable[..., Any]) -> str:
    """The docstring without its ``Args:`` section, wrapped lines joined."""
    lines = (inspect.getdoc(func) or "").splitlines()
    kept: list[str] = []
    skipping = False
    for line in lines:
        header = SECTION.match(line)
        if header:
            skipping = header.group(1) in ARG_SECTIONS
        elif skipping and line and not line[0].isspace():
            skipping = False
        if not skipping:
            kept.append(line)
    return joined_paragraphs(kept)


def argument_descriptions(func: Callable[..., Any]) -> dict[str, str]:
    """Each argument's description from the docstring's ``Args:`` section."""
    descriptions: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_args = False
    for line in (inspect.getdoc(func) or "").splitlines():
        header = SECTION.match(line)
        if header:
            in_args, current = header.group(1) in ARG_SECTIONS, None
            continue
        if not in_args or not line.strip():
            continue
        if not line[0].isspace():  # back at the docstring's margin: the section ended
            in_args, current = False, None
            continue
        entry = ARG_ENTRY.match(line.strip())
        if entry and len(line) - len(line.lstrip()) <= 4:
            current = descriptions.setdefault(entry.group(1).lstrip("*"), [])
            current.append(entry.group(2))
        elif current is not None:
            current.append(line.strip())
    return {name: " ".join(parts).strip() for name, parts in descriptions.items()}


def joined_paragraphs(lines: list[str]) -> str:
    """Paragraphs separated by one blank line, each paragraph's lines joined by spaces
    (list items and indented lines keep their own line)."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if not line.strip():
            paragraphs.append([])
        elif paragraphs[-1] and not line.lstrip().startswith(("- ", "* ")) and line[0] != " ":
            paragraphs[-1][-1] += " " + line.strip()
        else:
            paragraphs[-1].append(line.rstrip())
    return "\n\n".join("\n".join(p) for p in paragraphs if p)
