"""Paged reads: read_input and workspace_read give a long text whole, a page at a time,
and say when there is more (issue 26: reads were cut silently at the output limit)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dagwright.registry import build_registry
from dagwright.settings import Settings
from dagwright.testing import ScriptedLLM
from dagwright.workers.tools.base import ToolOutcome
from dagwright.workers.tools.builtin_tools import (
    READ_INPUT_MAX_CHARS,
    READ_INPUT_PAGE_CHARS,
    WORKSPACE_READ_MAX_CHARS,
    WORKSPACE_READ_PAGE_CHARS,
)
from tests.support.agents import MemoryServices

NEXT_OFFSET = re.compile(r"offset=(\d+)\]$")


def tool_call(
    name: str, args: dict[str, Any], services: MemoryServices, **inputs: Any
) -> ToolOutcome:
    tool = build_registry(Settings()).tools.get(name)
    assert tool is not None
    return tool.call(services.context(inputs=inputs, settings=Settings()), args)


def numbered_text(chars: int) -> str:
    """A text whose every position is recognisable: no page can be shifted unnoticed."""
    text = "".join(f"{i:07d}\n" for i in range(chars // 8 + 1))
    return text[:chars]


def read_all(
    name: str, first_args: dict[str, Any], services: MemoryServices, **inputs: Any
) -> list[str]:
    """Every page of a read, following each page's note to the next offset."""
    pages, args = [], dict(first_args)
    for _ in range(20):
        outcome = tool_call(name, args, services, **inputs)
        assert not outcome.is_error, outcome.text
        body, _, note = outcome.text.rpartition("\n[characters ")
        pages.append(body if note else outcome.text)
        follow = NEXT_OFFSET.search(outcome.text)
        if not note or follow is None:
            return pages
        args = {**first_args, "offset": int(follow.group(1))}
    raise AssertionError("the read never ended")


def test_read_input_pages_through_an_input_longer_than_its_output_limit(tmp_path: Path) -> None:
    text = numbered_text(READ_INPUT_MAX_CHARS + 70_000)
    services = MemoryServices(ScriptedLLM([]), tmp_path)

    pages = read_all("read_input", {"node": "big"}, services, big=text)

    assert "".join(pages) == text  # nothing lost, nothing repeated
    assert len(pages) == -(-len(text) // READ_INPUT_PAGE_CHARS)
    first = tool_call("read_input", {"node": "big"}, services, big=text).text
    assert first.endswith(
        f"[characters 0-{READ_INPUT_PAGE_CHARS} of {len(text)}; the rest: call read_input "
        f'with node="big" and offset={READ_INPUT_PAGE_CHARS}]'
    )


def test_a_short_input_comes_back_whole_with_no_note(tmp_path: Path) -> None:
    services = MemoryServices(ScriptedLLM([]), tmp_path)
    value = {"rows": [1, 2, 3]}
    outcome = tool_call("read_input", {"node": "a"}, services, a=value)
    assert outcome.text == json.dumps(value, ensure_ascii=False, indent=1)


def test_workspace_read_pages_through_a_file_and_says_where_it_ends(tmp_path: Path) -> None:
    services = MemoryServices(ScriptedLLM([]), tmp_path, workspace_max_bytes=10**6)
    text = numbered_text(WORKSPACE_READ_MAX_CHARS * 2 + 123)
    ctx = services.context(settings=Settings())
    services.workspace(ctx).write("notes/long.md", text)

    pages = read_all("workspace_read", {"path": "notes/long.md"}, services)

    assert "".join(pages) == text
    last = tool_call(
        "workspace_read", {"path": "notes/long.md", "offset": len(text) - 10}, services
    ).text
    assert last.endswith(
        f"[characters {len(text) - 10}-{len(text)} of {len(text)}; this is the end]"
    )


def test_a_page_is_never_cut_by_the_tool_output_limit(tmp_path: Path) -> None:
    """The largest page a call may ask for, with its note, fits the tool's limit: the
    generic '[... truncated' cut never hides where the next page starts."""
    services = MemoryServices(ScriptedLLM([]), tmp_path, workspace_max_bytes=10**6)
    text = numbered_text(WORKSPACE_READ_MAX_CHARS * 3)
    services.workspace(services.context(settings=Settings())).write("f.txt", text)

    outcome = tool_call("workspace_read", {"path": "f.txt", "limit": 10**9}, services)

    assert "[... truncated" not in outcome.text
    assert NEXT_OFFSET.search(outcome.text)
    assert len(outcome.text) <= WORKSPACE_READ_MAX_CHARS


def test_an_offset_past_the_end_is_refused_with_the_size(tmp_path: Path) -> None:
    services = MemoryServices(ScriptedLLM([]), tmp_path)
    outcome = tool_call("read_input", {"node": "a", "offset": 500}, services, a="short")
    assert outcome.is_error and outcome.refused_by_tool
    assert "past the end: the text has 5 characters" in outcome.text


def test_the_descriptions_promise_what_the_tools_do() -> None:
    tools = build_registry(Settings()).tools
    read_input, workspace_read = tools.get("read_input"), tools.get("workspace_read")
    assert read_input is not None and workspace_read is not None
    for tool, largest, default in (
        (read_input, READ_INPUT_MAX_CHARS, READ_INPUT_PAGE_CHARS),
        (workspace_read, WORKSPACE_READ_MAX_CHARS, WORKSPACE_READ_PAGE_CHARS),
    ):
        described = json.dumps(tool.schema())
        assert "page at a time" in described
        assert f"at most {largest - 200:,} (default {default:,})" in described
        assert set(tool.schema()["input_schema"]["properties"]) >= {"offset", "limit"}
