"""A score as the client, the CLI and the API are given it: checked once, with one line
that says what to fix (ScoreError), before anything is written."""

from __future__ import annotations

import getpass
from typing import Any

from pydantic import ValidationError

from dagwright.errors import ScoreError
from dagwright.models import MAX_SCORE_BY, MAX_SCORE_COMMENT, NewScore
from dagwright.shown_ids import shown_id

# What to fix, by field: pydantic's own message names a regular expression.
FIELD_HINTS = {
    "name": "a name is 1-64 lowercase letters, digits, '_', '.' or '-', starting with a "
    "letter or digit (e.g. correctness, user.thumbs)",
    "value": "a score is a finite number or a boolean",
    "comment": f"a comment is at most {MAX_SCORE_COMMENT} characters",
    "source": "a source is client, api, cli or eval:<id>",
    "by": f"who scored is 1-{MAX_SCORE_BY} printable characters",
}


def new_score(
    name: str, value: Any, comment: str | None, *, source: str, by: str | None
) -> NewScore:
    """The score to write (``by``: the OS user if None); ScoreError naming the first bad
    field and what it should be."""
    try:
        return NewScore(
            name=name,
            value=value,
            comment=comment or None,
            source=source,
            by=by if by is not None else author_name(getpass.getuser()),
        )
    except ValidationError as exc:
        raise ScoreError(score_problem(exc)) from None


def author_name(name: str) -> str:
    """A name dagwright knows the scorer by (an API token's, the OS user), made to fit
    ``by``: control characters escaped, cut to ``MAX_SCORE_BY``. A token's name is free
    text: a long one must not make every score of its holder fail."""
    shown = "".join(char if char.isprintable() else repr(char)[1:-1] for char in name)
    return shown[:MAX_SCORE_BY].strip() or "unknown"


def score_problem(exc: ValidationError) -> str:
    """One line for the first problem of a score's validation."""
    problem = exc.errors()[0]
    field = str(problem["loc"][0]) if problem["loc"] else "score"
    given = shown_id(repr(problem.get("input")))
    return f"score {field} {given}: {FIELD_HINTS.get(field, problem['msg'])}"


__all__ = ["author_name", "new_score", "score_problem"]
