"""What dagwright knows of Claude models by their id: which reject sampling parameters.

Claude Opus and Sonnet from 4.7 on, Haiku from 4.6 on, and the families without a
version-numbered Opus/Sonnet/Haiku name (Fable, Mythos) answer 400 to ``temperature``,
``top_p`` and ``top_k``, whatever their value. Older models still take them.

A version cutoff rather than a list of ids, on purpose: a new Claude model is covered the
day it appears, instead of failing every request until someone extends a list. An id
that is not a Claude model (a proxy's alias, a test's ``scripted``) keeps its sampling
parameters: dagwright cannot know, and the caller asked for them.
"""

from __future__ import annotations

import re

# claude-<family>-<major>[-<minor>][-<date>]; a date (8 digits) is not a minor version.
CLAUDE_ID = re.compile(r"^claude-(?P<family>[a-z]+)-(?P<major>\d+)(?:-(?P<minor>\d{1,2}))?(?!\d)")
VERSIONED_FAMILIES = frozenset({"opus", "sonnet", "haiku"})
# The first version of each family that rejects sampling parameters.
FIRST_REJECTING = {"opus": (4, 7), "sonnet": (4, 7), "haiku": (4, 6)}
# Older Claude ids put the version first: claude-3-5-sonnet-20241022.
LEGACY_CLAUDE_ID = re.compile(r"^claude-\d")


def rejects_sampling_parameters(model: str) -> bool:
    """Whether ``model`` answers 400 to ``temperature``, ``top_p`` and ``top_k``."""
    model = model.lower().removeprefix("anthropic.")
    if not model.startswith("claude-") or LEGACY_CLAUDE_ID.match(model):
        return False
    found = CLAUDE_ID.match(model)
    if found is None or found["family"] not in VERSIONED_FAMILIES:
        return model.startswith(("claude-fable", "claude-mythos")) or found is not None
    version = (int(found["major"]), int(found["minor"] or 0))
    return version >= FIRST_REJECTING[found["family"]]
