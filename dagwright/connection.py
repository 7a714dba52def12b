"""Redis connections for the run-state store, and the translation of redis errors.

The state store and the broker are separate settings (docs/architecture.md §9); this
module only deals with the state store. Connection failures become
``BrokerUnavailableError`` with a line a person can act on.

``redis`` is imported where a client is made or its errors caught, not with the module:
the URL helpers serve every CLI command, and redis-py costs ~60 ms to import.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from dagwright.errors import BrokerUnavailableError, ConfigurationError
from dagwright.stackfile import process_alive, read_stack, read_stack_record

if TYPE_CHECKING:
    import redis

    from dagwright.settings import Settings

NO_REDIS_HINT = (
    "no Redis configured: set DAGWRIGHT_REDIS_URL, or start the local stack with "
    "`dagwright up` in another terminal"
)


def resolve_redis_url(settings: Settings) -> str | None:
    """The configured state-store URL, else the one of a running local stack."""
    if settings.redis_url:
        return settings.redis_url
    record = read_stack(settings.data_dir)
    return record.redis_url if record else None


def not_redis(url: str, exc: BaseException) -> ConfigurationError:
    """The error for a URL whose server answers, but not as Redis (an HTTP server, a
    database): a wrong port in the settings, not an outage."""
    return ConfigurationError(
        f"{redact_url(url)} does not answer as Redis ({exc}): check the port in DAGWRIGHT_REDIS_URL"
    )


def require_redis_url(settings: Settings) -> str:
    url = resolve_redis_url(settings)
    if not url:
        raise ConfigurationError(stopped_stack_hint(settings) or NO_REDIS_HINT)
    return url


def stopped_stack_hint(settings: Settings) -> str:
    """What to say when the stack file names a stack whose owner has died ("" if not)."""
    record = read_stack_record(settings.data_dir)
    if record is None or process_alive(record.pid):
        return ""
    return (
        f"the local stack of `dagwright {record.owner}` (pid {record.pid}) has died: start "
        "`dagwright up` again (it stops what it left running), or set DAGWRIGHT_REDIS_URL"
    )


def connect(url: str, *, decode_responses: bool = True) -> redis.Redis:
    """A client with timeouts and a short reconnect-retry, decoding replies to str unless
    told not to (pybreaker's storage wants bytes)."""
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    options: dict[str, Any] = {
        "decode_responses": decode_responses,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "health_check_interval": 15,
        "retry": Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=5),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
    }
    try:
        return redis.Redis.from_url(url, **options)
    except ValueError as exc:
        raise ConfigurationError(f"invalid Redis URL {redact_url(url)!r}: {exc}") from exc


def redact_url(url: str) -> str:
    """The URL with its password replaced, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


@contextmanager
def translate_redis_errors(url: str) -> Iterator[None]:
    """Turn redis connection failures into BrokerUnavailableError."""
    import redis

    try:
        yield
    except redis.AuthenticationError as exc:
        raise ConfigurationError(
            f"Redis at {redact_url(url)} refused the credentials: check the password in "
            "DAGWRIGHT_REDIS_URL"
        ) from exc
    except redis.exceptions.InvalidResponse as exc:  # what answers there speaks no RESP
        raise not_redis(url, exc) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise BrokerUnavailableError(
            f"cannot reach Redis at {redact_url(url)} ({exc}); is it running? "
            "(`dagwright up` starts a local one)"
        ) from exc
