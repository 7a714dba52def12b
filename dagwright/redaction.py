"""Secrets out of every text that leaves a process or goes to the model.

One redactor, ``redact``, for every such text: tool results and the first message of an
agent (what the model sees, and what its checkpoint keeps), node errors and tracebacks
(run state, events, dead letters, logs), spans, the last failure a circuit breaker
remembers, audit entries. Two layers: the secret values this process knows
(``known_secrets``: its API key, the passwords of its Redis, broker, API and OTLP URLs
and the Redis passwords set apart from a URL, Flower's basic auth, what MCP servers are
given from the environment, the webhook signing keys), replaced wherever they appear; and
patterns of secrets it cannot know (an API key in an exception from a user's function, a
password in a URL, ``token=...``).

Rejected: redacting the request at the LLM client, just before it is sent. The checkpoint
(kept for the run's retention) would still hold the secret, and so would every later
request built from it; a text is cleaned once, where it enters the conversation.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from urllib.parse import unquote

from dagwright.models import WEBHOOK_SECRET_ENV_PATTERN
from dagwright.settings import Settings

MASK = "***"
MIN_KNOWN_SECRET_CHARS = 6  # shorter values would mask ordinary words

PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Anthropic and OpenAI-style keys.
    (re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}"), "sk-" + MASK),
    # Authorization: Bearer <token> / Basic <credentials>.
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + MASK),
    # scheme://user:password@host (the scheme bounded, as the key's prefix below)
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]{0,30}://[^:/@\s]*:)[^@\s/]+@"), r"\1" + MASK + "@"),
    # api_key=..., "password": "...", x-api-key: ..., token=... (not a path: the
    # "/etc/passwd" of "invalid path '/etc/passwd': absolute paths are refused"). The key's
    # prefix is bounded: unbounded, a long hyphenated run in a tool's output (it may be
    # 200,000 characters) is matched again from each of its hyphens, in quadratic time.
    (
        re.compile(
            r"(?i)(?<![/\\])\b("
            r"(?:[\w\-]{0,64}(?:api[_\-]?key|secret|token|password|passwd|pwd)|authorization)"
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
    """The secret values in ``settings``: the API key, the passwords in the Redis, broker,
    API and OTLP URLs, the Redis and Sentinel passwords set apart from them, Flower's
    basic-auth credentials, the values of the environment variables given to MCP
    servers (their ``env`` and ``headers``), and the webhook signing keys."""
    found: list[str] = []
    if settings.llm.api_key is not None:
        found.append(settings.llm.api_key.get_secret_value())
    urls = (
        settings.redis.url,
        settings.redis.effective_broker_url,
        settings.llm.base_url,
        settings.telemetry.otlp_endpoint,
    )
    for url in filter(None, urls):
        found.extend(url_password_spellings(url))
    for password in (settings.redis.password, settings.redis.sentinel_password):
        if password is not None:
            found.append(password.get_secret_value())
    if settings.flower.basic_auth is not None:
        found.extend(basic_auth_secrets(settings.flower.basic_auth.get_secret_value()))
    for server in settings.mcp.servers.values():  # what it is given from the environment
        found.extend(server.secret_values())
    found.extend(webhook_secrets(settings))
    return tuple(dict.fromkeys(secret for secret in found if secret))


def webhook_secrets(settings: Settings) -> list[str]:
    """The keys that sign webhooks: ``webhook_secret`` and the values of this process's
    ``DAGWRIGHT_WEBHOOK_SECRET_<NAME>`` variables (a webhook's ``secret_env``), which a
    user's function or a tool could quote as well as any other secret."""
    found = [settings.webhooks.secret.get_secret_value()] if settings.webhooks.secret else []
    pattern = re.compile(WEBHOOK_SECRET_ENV_PATTERN)
    found.extend(value for name, value in os.environ.items() if pattern.match(name))
    return found


def url_password_spellings(url: str) -> tuple[str, str]:
    """A URL's password as written (percent-encoded) and as sent to the server."""
    password = url_password(url)
    return password, unquote(password)


def url_password(url: str) -> str:
    """The password written in ``url`` (percent-encoded as written). Split by hand:
    ``urlsplit`` refuses some URLs it would still have to find a password in (a Sentinel
    URL's several hosts beside an IPv6 one, on Debian's Python 3.11.2)."""
    _, sep, rest = url.partition("://")
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    _, colon, password = userinfo.partition(":")
    return password if sep and at and colon else ""


def basic_auth_secrets(credentials: str) -> list[str]:
    """Each ``user:password`` of a comma-separated list, whole and its password alone."""
    found = []
    for pair in credentials.split(","):
        found.append(pair.strip())
        found.append(pair.partition(":")[2])
    return found


class RedactingFormatter(logging.Formatter):
    """A handler's formatter whose every line, traceback included, is redacted.

    Our own log calls pass redacted texts already; this catches the rest: a library's
    traceback quoting a URL with its password, a user's function logging its API key.
    Rejected: a ``logging.Filter`` on records. It sees the message and its arguments, but
    a traceback is formatted later, by the formatter, and a filter on a logger misses the
    records of its children that propagate to the handler."""

    def __init__(self, inner: logging.Formatter, secrets: Iterable[str]) -> None:
        super().__init__()
        self.inner = inner
        self.secrets = tuple(secrets)

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.inner.format(record), self.secrets)


def redact_log_handlers(logger: logging.Logger, secrets: Iterable[str]) -> None:
    """Make every handler of ``logger`` redact what it writes, ``secrets`` included (a
    handler redacting already, e.g. by pattern only, learns them)."""
    secrets = tuple(secrets)
    for handler in logger.handlers:
        formatter = handler.formatter
        if isinstance(formatter, RedactingFormatter):
            formatter.secrets = tuple(dict.fromkeys((*formatter.secrets, *secrets)))
        else:
            handler.setFormatter(RedactingFormatter(formatter or logging.Formatter(), secrets))
