"""Token counts and prompt caching for the fake Anthropic API, as the real API reports them.

A request is read as the ordered blocks the API caches: tool definitions, then system
blocks, then each message's content blocks. Each block counts as its JSON, as sent, over
four characters (the estimate dagwright's own budgets use, :func:`rough_tokens`), so the
totals track what the client really sends rather than a token-free placeholder.

Caching follows the real API: a block with ``cache_control`` is a breakpoint, and the
prefix up to it (model included) is remembered for its TTL once it reaches the model's
minimum cacheable length. A later request repeating a remembered prefix reads it
(``cache_read_input_tokens``), refreshing its TTL; the part between that prefix and the
last breakpoint is written (``cache_creation_input_tokens``, split by TTL in
``cache_creation``); ``input_tokens`` counts only what follows the last breakpoint.
As the real API does, each breakpoint looks back up to ``LOOKBACK_BLOCKS`` block
boundaries before it for a prefix written earlier (by another breakpoint of an earlier
request): the longest live one found is read. Only prefixes that ended at a breakpoint
were ever written, so a request whose breakpoints moved more than the lookback past the
last written prefix reads nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dagwright.llm.messages_api_rules import CACHE_TTLS_S, min_cacheable_tokens
from dagwright.llm.protocol import CHARS_PER_TOKEN

LOOKBACK_BLOCKS = 20  # block boundaries a breakpoint checks for a hit, itself included


@dataclass(frozen=True)
class PromptBlock:
    """One cacheable unit of a request: its identity, size and breakpoint, if any."""

    identity: str
    """Canonical JSON of where the block sits and what it holds, without ``cache_control``."""
    tokens: int
    ttl: str | None
    """The TTL of its ``cache_control`` (``5m`` when not given); None if not a breakpoint."""


@dataclass(frozen=True)
class InputUsage:
    """The input side of a message's ``usage``."""

    input_tokens: int
    cache_read_input_tokens: int = 0
    cache_creation_5m: int = 0
    cache_creation_1h: int = 0

    @property
    def cache_creation_input_tokens(self) -> int:
        return self.cache_creation_5m + self.cache_creation_1h

    def to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_5m,
                "ephemeral_1h_input_tokens": self.cache_creation_1h,
            },
        }


def estimate_tokens(payload: object) -> int:
    """Tokens of ``payload``'s JSON: characters over four, rounded up."""
    characters = len(json.dumps(payload, ensure_ascii=False))
    return -(-characters // CHARS_PER_TOKEN)


def prompt_blocks(body: Mapping[str, Any]) -> list[PromptBlock]:
    """The request's blocks in the API's cache order: tools, system, messages."""
    blocks = [_block("tool", tool) for tool in _dicts(body.get("tools"))]
    blocks += [_block("system", block) for block in _system_blocks(body.get("system"))]
    for message in _dicts(body.get("messages")):
        role = str(message.get("role"))
        blocks += [_block(role, block) for block in _content_blocks(message.get("content"))]
    return blocks


def count_input_tokens(body: Mapping[str, Any]) -> int:
    """What ``count_tokens`` answers: every input token, cached or not (at least 1)."""
    return max(1, sum(block.tokens for block in prompt_blocks(body)))


class PromptCache:
    """Prefixes written to the cache, by hash, with the monotonic time they expire.

    Not thread-safe: the playback calls it under its lock.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._expires_at: dict[str, float] = {}
        self._ttls: dict[str, str] = {}

    def clear(self) -> None:
        self._expires_at.clear()
        self._ttls.clear()

    def account(self, model: str, blocks: list[PromptBlock]) -> InputUsage:
        """The input usage of one request, reading and writing cached prefixes."""
        now = self._clock()
        boundaries = _boundaries(model, blocks)
        total = max(1, sum(block.tokens for block in blocks))
        marked = [i for i, block in enumerate(blocks) if block.ttl is not None]
        hit = self._longest_hit(boundaries, marked, now)
        read = boundaries[hit].tokens if hit is not None else 0
        if hit is not None:
            self._remember(boundaries[hit], now)
        later = [boundaries[i] for i in marked if hit is None or i > hit]
        written = self._write(later, model, read, now)
        cached = read + written["5m"] + written["1h"]
        return InputUsage(max(total - cached, 0), read, written["5m"], written["1h"])

    def _longest_hit(self, boundaries: list[_Prefix], marked: list[int], now: float) -> int | None:
        """The last block boundary, within the lookback of a breakpoint, whose prefix is
        cached and live."""
        live = [
            i
            for mark in marked
            for i in range(max(0, mark - LOOKBACK_BLOCKS + 1), mark + 1)
            if self._expires_at.get(boundaries[i].digest, 0) > now
        ]
        return max(live) if live else None

    def _write(self, prefixes: list[_Prefix], model: str, start: int, now: float) -> dict[str, int]:
        written = {"5m": 0, "1h": 0}
        floor = min_cacheable_tokens(model)
        covered = start
        for prefix in prefixes:
            if prefix.tokens < floor:
                continue  # too short to cache: the API quietly does not
            written[prefix.ttl or "5m"] += prefix.tokens - covered
            covered = prefix.tokens
            self._remember(prefix, now)
        return written

    def _remember(self, prefix: _Prefix, now: float) -> None:
        """Written or read: live for its TTL from now (a read keeps the TTL it was
        written with, as the API refreshes an entry)."""
        ttl = prefix.ttl or self._ttls.get(prefix.digest, "5m")
        self._ttls[prefix.digest] = ttl
        self._expires_at[prefix.digest] = now + CACHE_TTLS_S[ttl]


@dataclass(frozen=True)
class _Prefix:
    digest: str
    tokens: int
    ttl: str | None
    """The TTL of the breakpoint ending there; None: no breakpoint ends there."""


def _boundaries(model: str, blocks: list[PromptBlock]) -> list[_Prefix]:
    """The prefix ending at each block: its hash (model included), size and TTL."""
    running = hashlib.sha256(model.encode())
    tokens = 0
    prefixes: list[_Prefix] = []
    for block in blocks:
        running.update(block.identity.encode())
        tokens += block.tokens
        prefixes.append(_Prefix(running.copy().hexdigest(), tokens, block.ttl))
    return prefixes


def _block(place: str, block: Mapping[str, Any]) -> PromptBlock:
    cache_control = block.get("cache_control")
    bare = {name: value for name, value in block.items() if name != "cache_control"}
    ttl = None
    if isinstance(cache_control, dict):
        ttl = str(cache_control.get("ttl", "5m"))
    identity = json.dumps([place, bare], sort_keys=True, separators=(",", ":"))
    # Counted without its cache_control, as the API counts: a breakpoint is not input.
    return PromptBlock(identity, estimate_tokens(bare), ttl)


def _system_blocks(system: object) -> list[dict[str, Any]]:
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return _dicts(system)


def _content_blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return _dicts(content)


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
