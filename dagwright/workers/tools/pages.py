"""Paged reads: a window of a long text, and where the next one starts.

A tool's output is cut at its limit (``base.redacted_output``); a read that returned the
first 20,000 characters of a 60,000-character file, cut with no way on, left the model
believing it had read the file, or stuck. The read tools (``read_input``,
``workspace_read``) take ``offset`` and ``limit`` instead, and a page that is not the
end says so, with the call that reads on. A text that fits in one page comes back as it
is, with no note: most reads are short.
"""

from __future__ import annotations

from collections.abc import Callable

from dagwright.errors import ToolError

# Room under the tool's output limit for the note that ends a page.
PAGE_NOTE_ROOM_CHARS = 200


def page(text: str, *, offset: int, limit: int, read_on: Callable[[int], str]) -> str:
    """Characters ``offset`` to ``offset + limit`` of ``text``; ``read_on(offset)``
    says the call that reads the page starting there."""
    total = len(text)
    if offset < 0 or limit < 1:
        raise ToolError("offset must be 0 or more and limit 1 or more")
    if offset > total or (offset == total and total > 0):
        raise ToolError(f"offset {offset} is past the end: the text has {total} characters")
    end = min(offset + limit, total)
    if offset == 0 and end == total:
        return text
    note = f"[characters {offset}-{end} of {total}"
    if end < total:
        note += f"; the rest: {read_on(end)}]"
    else:
        note += "; this is the end]"
    return f"{text[offset:end]}\n{note}"


def page_limit(requested: int | None, *, default: int, tool_limit: int) -> int:
    """The page size: what the call asks (``default`` if nothing), at most what the
    tool's output limit leaves room for."""
    return min(default if requested is None else requested, tool_limit - PAGE_NOTE_ROOM_CHARS)
