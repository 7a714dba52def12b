"""Reading prompts whose untrusted data sit in tags with a random token
(``dagwright.workers.untrusted``)."""

from __future__ import annotations

import re

FENCE_TOKEN = re.compile(r"untrusted_input_[0-9a-f]{16}")
SHOWN_TAG = "untrusted_input_T"


def without_tokens(prompt: str) -> str:
    """``prompt`` with every tag's token shown as ``T``: ``<untrusted_input_T node="a">``."""
    return FENCE_TOKEN.sub(SHOWN_TAG, prompt)


def tokens_in(prompt: str) -> set[str]:
    """The distinct tokens of the tags in ``prompt``."""
    return {match.removeprefix("untrusted_input_") for match in FENCE_TOKEN.findall(prompt)}
