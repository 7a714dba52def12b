"""An id from outside, as an error message or a log line shows it: cut to a length a line
can hold, with the characters that would break the line escaped.

A run id on a command line, a node id in a plan, a schedule name in an API call, a task
id in a broker message: each arrives unchecked, and each is echoed in the message that
refuses it ("no run ... here"). Echoed whole, a 1 MB id makes that one line a megabyte
on a terminal, in a log pipeline, in a dead letter. The id is cut where it is shown, not
where it enters: the lookup stays exact (an id is refused for not existing, not for its
length), and every way in is covered by the few places that echo.

Any other value from outside that a message quotes (a duplicate key of a plan file, a
number too large) is shown the same way, as ``shown_id(repr(value))``: one cut for all.
"""

from __future__ import annotations

# Real ids are never cut: the longest, a node's task id, is a run id (20 chars), a node
# id (64) and a fence.
MAX_SHOWN_ID_CHARS = 100


def shown_id(value: str) -> str:
    """``value`` for a message or a log line: its first ``MAX_SHOWN_ID_CHARS`` characters,
    then ``…(N chars)`` if it is longer; control characters (a newline that would forge
    a second log line) escaped."""
    shown = _escaped(value[:MAX_SHOWN_ID_CHARS])
    if len(value) > MAX_SHOWN_ID_CHARS:
        shown += f"…({len(value):,} chars)"
    return shown


def _escaped(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
