"""What the Anthropic Messages API accepts, as data both sides of the wire read.

The client (:mod:`dagwright.llm.anthropic`) can consult it before sending, and the fake
(:mod:`dagwright.testing.fake_anthropic_rules`) refuses what it lists, so the two cannot
disagree. Model families are matched by prefix: a dated id (``claude-opus-4-7-20260101``)
behaves as its alias does.

Sources: Anthropic's model migration notes (sampling parameters and budget thinking
removed from Opus 4.7 on and the 5 families), the prompt caching page (minimum
cacheable lengths, four breakpoints) and the extended thinking page (``budget_tokens`` at
least 1024 and below ``max_tokens``).
"""

from __future__ import annotations

import re

SAMPLING_PARAMETERS = ("temperature", "top_p", "top_k")

# Which models answer 400 "`temperature` is deprecated for this model." to any sampling
# parameter: Claude Opus and Sonnet from 4.7 on, Haiku from 4.6 on, and the families
# without a version-numbered Opus/Sonnet/Haiku name (Fable, Mythos). A version cutoff
# rather than a list of ids, on purpose: a new Claude model is covered the day it appears,
# instead of failing every request until someone extends a list. An id that is not a
# Claude model (a proxy's alias) keeps its sampling parameters: nothing is known of it.
# claude-<family>-<major>[-<minor>][-<date>]; a date (8 digits) is not a minor version.
CLAUDE_ID = re.compile(r"^claude-(?P<family>[a-z]+)-(?P<major>\d+)(?:-(?P<minor>\d{1,2}))?(?!\d)")
VERSIONED_FAMILIES = frozenset({"opus", "sonnet", "haiku"})
FIRST_WITHOUT_SAMPLING = {"opus": (4, 7), "sonnet": (4, 7), "haiku": (4, 6)}
# Older Claude ids put the version first: claude-3-5-sonnet-20241022.
LEGACY_CLAUDE_ID = re.compile(r"^claude-\d")
UNVERSIONED_FAMILIES = ("claude-fable", "claude-mythos")
# From Opus 4.1 to the 4.6 models, one sampler at a time: temperature or top_p, not both.
MODELS_WITH_ONE_SAMPLER = (
    "claude-opus-4-1",
    "claude-opus-4-5",
    "claude-opus-4-6",
    "claude-sonnet-4-5",
    "claude-sonnet-4-6",
    "claude-haiku-4-5",
)
# Thinking with a fixed ``budget_tokens`` ({"type": "enabled"}) is gone where sampling is:
# those models think only in adaptive mode.
MIN_THINKING_BUDGET_TOKENS = 1024

# Custom tool names; the API words a mismatch as a pydantic pattern error.
TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"

# Server tools (the API runs them): each ``type`` a dated version, its ``name`` fixed.
# The versions the anthropic SDK 2.14 knows; the later ones add dynamic filtering
# (code execution), which only newer models have. Web fetch left beta with these types.
SERVER_TOOL_VERSIONS = {
    "web_search": ("web_search_20250305", "web_search_20260209", "web_search_20260318"),
    "web_fetch": (
        "web_fetch_20250910",
        "web_fetch_20260209",
        "web_fetch_20260309",
        "web_fetch_20260318",
    ),
}
# The fields each server tool takes besides type and name (anything else is a 400).
SERVER_TOOL_FIELDS = {
    "web_search": frozenset(
        {
            "max_uses",
            "allowed_domains",
            "blocked_domains",
            "user_location",
            "cache_control",
            "allowed_callers",
            "defer_loading",
            "strict",
        }
    ),
    "web_fetch": frozenset(
        {
            "max_uses",
            "allowed_domains",
            "blocked_domains",
            "citations",
            "max_content_tokens",
            "cache_control",
            "allowed_callers",
            "defer_loading",
            "strict",
            "url_sources",
        }
    ),
}

MAX_CACHE_BREAKPOINTS = 4
CACHE_TTLS_S = {"5m": 300, "1h": 3600}
# A prefix shorter than this (in tokens) is not cached: the request is simply uncached.
# Matched by prefix, first match wins (so ``claude-sonnet-5-5`` before ``claude-sonnet-5``).
# From the prompt caching page: 512 on Opus 5, Fable 5 and Mythos 5; 1,024 on Sonnet 5,
# Opus 4.8, Sonnet 4.5 and Opus 4.1; 2,048 on Opus 4.7; 4,096 on Sonnet 5.5, Opus 4.6,
# Opus 4.5 and Haiku 4.5. Sonnet 4.6 is listed at 1,024 but caches from 2,048 in practice
# (anthropic-sdk-python#1194): the higher is kept, so the fake caches no more than the API.
MIN_CACHEABLE_TOKENS = (
    ("claude-sonnet-5-5", 4096),
    ("claude-sonnet-5", 1024),
    ("claude-opus-5", 512),
    ("claude-fable-5", 512),
    ("claude-mythos-5", 512),
    ("claude-opus-4-8", 1024),
    ("claude-opus-4-7", 2048),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 2048),
    ("claude-sonnet-4-5", 1024),
    ("claude-opus-4-1", 1024),
)
DEFAULT_MIN_CACHEABLE_TOKENS = 4096  # the highest: a model not listed is not over-cached

# The most output one request may ask for; larger ``max_tokens`` is a 400.
MAX_OUTPUT_TOKENS = (
    ("claude-sonnet-4-5", 64_000),
    ("claude-haiku-4-5", 64_000),
    ("claude-opus-4-5", 64_000),
    ("claude-opus-4-1", 32_000),
)
DEFAULT_MAX_OUTPUT_TOKENS = 128_000


def refuses_sampling(model: str) -> bool:
    """Whether ``model`` answers 400 to ``temperature``, ``top_p`` or ``top_k``."""
    model = model.lower().removeprefix("anthropic.")  # a Bedrock id names the same model
    if not model.startswith("claude-") or LEGACY_CLAUDE_ID.match(model):
        return False
    found = CLAUDE_ID.match(model)
    if found is None or found["family"] not in VERSIONED_FAMILIES:
        return model.startswith(UNVERSIONED_FAMILIES) or found is not None
    version = (int(found["major"]), int(found["minor"] or 0))
    return version >= FIRST_WITHOUT_SAMPLING[found["family"]]


def takes_one_sampler(model: str) -> bool:
    """Whether ``model`` refuses ``temperature`` and ``top_p`` sent together."""
    return model.startswith(MODELS_WITH_ONE_SAMPLER)


def refuses_budget_thinking(model: str) -> bool:
    """Whether ``model`` refuses ``thinking: {type: enabled, budget_tokens: n}``."""
    return refuses_sampling(model)


def min_cacheable_tokens(model: str) -> int:
    """The shortest prefix, in tokens, that ``model`` writes to the prompt cache."""
    return _by_prefix(model, MIN_CACHEABLE_TOKENS, DEFAULT_MIN_CACHEABLE_TOKENS)


def max_output_tokens(model: str) -> int:
    """The largest ``max_tokens`` a request to ``model`` may carry."""
    return _by_prefix(model, MAX_OUTPUT_TOKENS, DEFAULT_MAX_OUTPUT_TOKENS)


def _by_prefix(model: str, table: tuple[tuple[str, int], ...], default: int) -> int:
    return next((value for prefix, value in table if model.startswith(prefix)), default)


def server_tool_name(tool_type: str) -> str | None:
    """The server tool a ``type`` such as ``web_search_20250305`` is a version of; None if
    it is no version the API knows."""
    return next(
        (name for name, versions in SERVER_TOOL_VERSIONS.items() if tool_type in versions),
        None,
    )


# --- What each model refuses (the migration guides' 400s), and when models retire ----------
#
# Sources: the Sonnet 5.5 migration guide and "What's new in Claude Sonnet 5.5" (five
# settings return 400 there: thinking budgets, sampling parameters, assistant prefill,
# forced tool choice, ``thinking: {"type": "disabled"}``; ``between_tools`` is its lowest
# thinking setting, refused at effort xhigh and max), the Claude 4.6 migration notes
# (prefill is a 400 from the 4.6 models on), the adaptive thinking page (Opus 4.7, Mythos
# Preview and the Fable/Mythos 5 families think only adaptively: ``disabled`` is a 400)
# and the Opus 5.5 / Fable 5.1 notes (thinking always on, forced tool use refused). As
# with FIRST_WITHOUT_SAMPLING, a version cutoff covers a new model the day it appears.

# From these versions on, a conversation may not end with an assistant turn (a prefill).
FIRST_WITHOUT_PREFILL = {"opus": (4, 6), "sonnet": (4, 6), "haiku": (5, 5)}
# From these versions on, ``tool_choice`` ``any`` or ``tool`` (forced tool use) is a 400.
FIRST_WITHOUT_FORCED_TOOL_CHOICE = {"opus": (5, 5), "sonnet": (5, 5), "haiku": (5, 5)}
# Version ranges (first, last; None: every later one) where thinking cannot be turned off.
ALWAYS_THINKING = {
    "opus": (((4, 7), (4, 7)), ((5, 5), None)),
    "sonnet": (((5, 5), None),),
}
# Models whose lowest thinking setting is ``between_tools`` (and which alone accept it).
FIRST_WITH_BETWEEN_TOOLS = {"sonnet": (5, 5)}
BETWEEN_TOOLS_REFUSED_EFFORTS = frozenset({"xhigh", "max"})
# The Fable and Mythos families: every model refuses prefill and thinking turned off;
# from 5.1 on, forced tool use too.
UNVERSIONED_FORCED_TOOL_CUTOFF = (5, 1)

# The recommended replacement of each deprecated or retired model family (the model
# deprecations page). The end-of-life dates come from the installed anthropic SDK
# (``anthropic._data.DEPRECATED_MODELS``, read by dagwright.llm.model_lifecycle); the SDK
# drops a model once it is retired, so RETIRED_MODELS keeps the dates of those.
MODEL_REPLACEMENTS = {
    "claude-mythos-preview": "claude-mythos-5-2",
    "claude-opus-4-5": "claude-opus-5-5",
    "claude-sonnet-4-5": "claude-sonnet-5-5",
    "claude-opus-4": "claude-opus-5-5",
    "claude-sonnet-4": "claude-sonnet-5-5",
    "claude-3-7-sonnet": "claude-sonnet-5-5",
}
# End of life (ISO date) of models the SDK no longer lists: the release notes' retirements.
RETIRED_MODELS = {
    "claude-opus-4": "2026-06-15",
    "claude-sonnet-4": "2026-06-15",
    "claude-3-7-sonnet": "2026-02-19",
}
END_OF_LIFE_WARNING_DAYS = 30


def claude_version(model: str) -> tuple[str, tuple[int, int]] | None:
    """The family (``opus``, ``fable``...) and version of a Claude id; None for an id that
    is no ``claude-<family>-<major>[-<minor>]`` (a proxy's alias, ``claude-3-...``)."""
    model = model.lower().removeprefix("anthropic.")
    found = CLAUDE_ID.match(model)
    if found is None or LEGACY_CLAUDE_ID.match(model):
        return None
    return found["family"], (int(found["major"]), int(found["minor"] or 0))


def _unversioned(model: str) -> bool:
    """A Fable or Mythos model (``claude-mythos-preview`` included)."""
    return model.lower().removeprefix("anthropic.").startswith(UNVERSIONED_FAMILIES)


def _from_version(model: str, cutoffs: dict[str, tuple[int, int]]) -> bool:
    found = claude_version(model)
    return found is not None and found[0] in cutoffs and found[1] >= cutoffs[found[0]]


def refuses_prefill(model: str) -> bool:
    """Whether ``model`` answers 400 to a conversation ending with an assistant turn."""
    return _unversioned(model) or _from_version(model, FIRST_WITHOUT_PREFILL)


def refuses_forced_tool_choice(model: str) -> bool:
    """Whether ``model`` answers 400 to ``tool_choice`` ``any`` or ``tool``."""
    if _unversioned(model):
        found = claude_version(model)
        return found is not None and found[1] >= UNVERSIONED_FORCED_TOOL_CUTOFF
    return _from_version(model, FIRST_WITHOUT_FORCED_TOOL_CHOICE)


def refuses_thinking_disabled(model: str) -> bool:
    """Whether ``model`` answers 400 to ``thinking: {"type": "disabled"}``."""
    if _unversioned(model):
        return True
    found = claude_version(model)
    if found is None:
        return False
    family, version = found
    return any(
        first <= version and (last is None or version <= last)
        for first, last in ALWAYS_THINKING.get(family, ())
    )


def takes_between_tools(model: str) -> bool:
    """Whether ``model`` accepts ``thinking: {"type": "between_tools"}``."""
    return _from_version(model, FIRST_WITH_BETWEEN_TOOLS)


# The models the effort page lists, by prefix (a dated or Bedrock ``anthropic.`` id is its
# family's); ``llm/effort.py`` sends no effort to any other: the API would refuse it.
MODELS_WITH_EFFORT = (
    "claude-fable-5",
    "claude-mythos-5",
    "claude-mythos-preview",
    "claude-opus-5",
    "claude-sonnet-5",
    "claude-haiku-5-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-opus-4-5",
    "claude-sonnet-4-6",
)

# The models the context editing page lists, by prefix (likewise). ``llm/context_management.py``
# clears tool results on these; the others (older ids, a proxy's aliases) get the
# client-side fallback: a summary of older turns (``workers/agent_context.py``).
MODELS_WITH_CONTEXT_EDITING = (
    "claude-fable-5",
    "claude-mythos-5",
    "claude-mythos-preview",
    "claude-opus-5",
    "claude-sonnet-5",
    "claude-haiku-5-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-opus-4-5",
    "claude-sonnet-4-6",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
)
