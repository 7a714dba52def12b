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
The real API also looks back a few blocks from each breakpoint for a hit; the fake does
not, so a client that relies on it sees fewer hits here, never more.
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

    def clear(self) -> None:
        self._expires_at.clear()

    def account(self, model: str, blocks: list[PromptBlock]) -> InputUsage:
        """The input usage of one request, reading and writing cached prefixes."""
        now = self._clock()
        prefixes = _breakpoint_prefixes(model, blocks)
        total = max(1, sum(block.tokens for block in blocks))
        hit = self._longest_hit(prefixes, now)
        read = prefixes[hit].tokens if hit is not None else 0
        if hit is not None:
            self._remember(prefixes[hit], now)
        written = self._write(prefixes[hit + 1 if hit is not None else 0 :], model, read, now)
        cached = read + written["5m"] + written["1h"]
        return InputUsage(max(total - cached, 0), read, written["5m"], written["1h"])

    def _longest_hit(self, prefixes: list[_Prefix], now: float) -> int | None:
        live = [
            i for i, prefix in enumerate(prefixes) if self._expires_at.get(prefix.digest, 0) > now
        ]
        return live[-1] if live else None

    def _write(self, prefixes: list[_Prefix], model: str, start: int, now: float) -> dict[str, int]:
        written = {"5m": 0, "1h": 0}
        floor = min_cacheable_tokens(model)
        covered = start
        for prefix in prefixes:
            if prefix.tokens < floor:
                continue  # too short to cache: the API quietly does not
            written[prefix.ttl] += prefix.tokens - covered
            covered = prefix.tokens
            self._remember(prefix, now)
        return written

    def _remember(self, prefix: _Prefix, now: float) -> None:
        self._expires_at[prefix.digest] = now + CACHE_TTLS_S[prefix.ttl]


@dataclass(frozen=True)
class _Prefix:
    digest: str
    tokens: int
    ttl: str


def _breakpoint_prefixes(model: str, blocks: list[PromptBlock]) -> list[_Prefix]:
    """The prefix ending at each breakpoint: its hash (model included), size and TTL."""
    running = hashlib.sha256(model.encode())
    tokens = 0
    prefixes: list[_Prefix] = []
    for block in blocks:
        running.update(block.identity.encode())
        tokens += block.tokens
        if block.ttl is not None:
            prefixes.append(_Prefix(running.copy().hexdigest(), tokens, block.ttl))
    return prefixes


def _block(place: str, block: Mapping[str, Any]) -> PromptBlock:
    cache_control = block.get("cache_control")
    bare = {name: value for name, value in block.items() if name != "cache_control"}
    ttl = None
    if isinstance(cache_control, dict):
        ttl = str(cache_control.get("ttl", "5m"))
    identity = json.dumps([place, bare], sort_keys=True, separators=(",", ":"))
    return PromptBlock(identity, estimate_tokens(block), ttl)


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
