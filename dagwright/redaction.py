"""Secrets out of text that leaves a process: error messages, tracebacks, dead letters.

Two layers: the secret values this process knows (its API key, its Redis password),
replaced wherever they appear; and patterns of secrets it cannot know (an API key in an
exception from a user's function, a password in a URL, ``token=...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from dagwright.settings import Settings

MASK = "***"
MIN_KNOWN_SECRET_CHARS = 6  # shorter values would mask ordinary words

PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Anthropic and OpenAI-style keys.
    (re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}"), "sk-" + MASK),
    # Authorization: Bearer <token> / Basic <credentials>.
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + MASK),
    # scheme://user:password@host
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://[^:/@\s]*:)[^@\s/]+@"), r"\1" + MASK + "@"),
    # api_key=..., "password": "...", x-api-key: ..., token=...
    (
        re.compile(
            r"(?i)\b((?:[\w\-]*(?:api[_\-]?key|secret|token|password|passwd|pwd)|authorization)"
            r"[\"']?\s*[:=]\s*[\"']?)(?!\*\*\*)[^\s\"',;}&]+"
        ),
        r"\1" + MASK,
    ),
)


def redact(text: str, known_secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret and every secret-looking token masked."""
    for secret in sorted(set(known_secrets), key=len, reverse=True):
        if len(secret) >= MIN_KNOWN_SECRET_CHARS:
            text = text.replace(secret, MASK)
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def known_secrets(settings: Settings) -> tuple[str, ...]:
    """The secret values in ``settings``: the API key and the Redis/broker passwords."""
    found: list[str] = []
    if settings.anthropic_api_key is not None:
        found.append(settings.anthropic_api_key.get_secret_value())
    for url in (settings.redis_url, settings.effective_broker_url):
        password = urlsplit(url).password if url else None
        if password:
            found.append(password)
    return tuple(secret for secret in found if secret)
