"""Redis connections for the run-state store, and the translation of redis errors.

The state store and the broker are separate settings (docs/configuration.md); this
module makes the redis-py clients (of the state store, and of the broker where doctor
and the metrics server read it), through ``dagwright.redis_endpoint`` for TLS, ACL
credentials and Sentinel. Connection failures become
``BrokerUnavailableError`` with a line a person can act on.

``redis`` is imported where a client is made or its errors caught, not with the module:
the URL helpers serve every CLI command, and redis-py costs ~60 ms to import.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dagwright.errors import BrokerUnavailableError, ConfigurationError
from dagwright.redis_endpoint import (
    credential_options,
    is_cluster_url,
    is_sentinel_url,
    parse_cluster_url,
    parse_sentinel_url,
    sentinel_options,
    tls_options,
    uses_tls,
)
from dagwright.stackfile import process_alive, read_stack, read_stack_record

if TYPE_CHECKING:
    import redis
    import redis.asyncio

    from dagwright.redis_endpoint import ClusterTarget, SentinelTarget
    from dagwright.settings import RedisSettings, Settings

# Options of the connections to the Sentinels themselves (the rest is the primary's).
SENTINEL_TIMEOUTS = ("socket_timeout", "socket_connect_timeout")

NO_REDIS_HINT = (
    "no stack is running and no Redis is configured: start the local stack with "
    "`dagwright up` in another terminal, or set DAGWRIGHT_REDIS_URL"
)


def resolve_redis_url(settings: Settings) -> str | None:
    """The configured state-store URL, else the one of a running local stack."""
    if settings.redis.url:
        return settings.redis.url
    record = read_stack(settings.process.data_dir)
    return record.redis_url if record else None


def not_redis(
    url: str, exc: BaseException, setting: str = "DAGWRIGHT_REDIS_URL"
) -> ConfigurationError:
    """The error for a URL whose server answers, but not as Redis (an HTTP server, a
    database): a wrong port in the settings, not an outage."""
    return ConfigurationError(
        f"{redact_url(url)} does not answer as Redis ({exc}): check the port in {setting}"
    )


def speaks_no_redis(exc: BaseException) -> BaseException | None:
    """The ``InvalidResponse`` behind ``exc`` (kombu wraps it), if the server that answered
    does not speak Redis; None for any other failure (an outage: retried)."""
    import redis

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, redis.exceptions.InvalidResponse):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def require_redis_url(settings: Settings) -> str:
    url = resolve_redis_url(settings)
    if not url:
        raise ConfigurationError(stopped_stack_hint(settings) or NO_REDIS_HINT)
    return url


def stopped_stack_hint(settings: Settings) -> str:
    """What to say when the stack file names a stack whose owner has died ("" if not)."""
    record = read_stack_record(settings.process.data_dir)
    if record is None or process_alive(record.pid):
        return ""
    return (
        f"the local stack of `dagwright {record.owner}` (pid {record.pid}) has died: start "
        "`dagwright up` again (it stops what it left running), or set DAGWRIGHT_REDIS_URL"
    )


def connect(
    url: str,
    access: RedisSettings | None = None,
    *,
    decode_responses: bool = True,
    **overrides: Any,
) -> redis.Redis:
    """A client with timeouts and a short reconnect-retry, decoding replies to str unless
    told not to (pybreaker's storage wants bytes). ``access``: the TLS and credential
    settings (``settings.redis``); a ``sentinel://`` URL gives a client of the
    primary its Sentinels name, found again after a failover. ``overrides`` replace the
    default options (a probe's shorter timeouts)."""
    import redis
    from redis.retry import Retry

    options = client_options(Retry, decode_responses=decode_responses, **overrides)
    try:
        if is_sentinel_url(url):
            return sentinel_client(url, access, options)
        if is_cluster_url(url):
            return cluster_client(url, access, options)
        options.update(endpoint_options(url, access))
        return redis.Redis.from_url(url, **options)
    except ValueError as exc:
        raise ConfigurationError(f"invalid Redis URL {redact_url(url)!r}: {exc}") from exc


def connect_async(url: str, access: RedisSettings | None = None) -> redis.asyncio.Redis:
    """``connect``'s asyncio twin (``AsyncClient``): the same options, TLS and
    credentials, replies decoded to str. A ``sentinel://`` URL is refused for now."""
    import redis.asyncio
    from redis.asyncio.retry import Retry

    if is_sentinel_url(url):
        raise ConfigurationError(
            f"AsyncClient does not support Sentinel URLs yet ({redact_url(url)}): "
            "use Client, or the primary's redis:// URL"
        )
    options = client_options(Retry, decode_responses=True)
    try:
        if is_cluster_url(url):
            return async_cluster_client(url, access, options)
        options.update(endpoint_options(url, access))
        return redis.asyncio.Redis.from_url(url, **options)
    except ValueError as exc:
        raise ConfigurationError(f"invalid Redis URL {redact_url(url)!r}: {exc}") from exc


def client_options(retry_class: Any, *, decode_responses: bool, **overrides: Any) -> dict[str, Any]:
    """The options every client gets: timeouts, health checks and a short reconnect-retry
    (``retry_class``: redis-py's Retry of the sync or the asyncio client)."""
    import redis
    from redis.backoff import ExponentialBackoff

    return {
        "decode_responses": decode_responses,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "health_check_interval": 15,
        "retry": retry_class(ExponentialBackoff(cap=2.0, base=0.05), retries=5),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        **overrides,
    }


def endpoint_options(url: str, access: RedisSettings | None) -> dict[str, Any]:
    """The credentials (and TLS files, for a rediss:// URL) of a direct connection."""
    options = credential_options(url, access)
    if uses_tls(url) and access is not None:
        options.update(tls_options(access))
    return options


def sentinel_client(url: str, access: RedisSettings | None, options: dict[str, Any]) -> redis.Redis:
    """A client of the primary a ``sentinel://`` URL names: redis-py asks the Sentinels
    for its address on every new connection, so a failover is followed."""
    from redis.sentinel import Sentinel

    target = parse_sentinel_url(url)
    options = {**options, "db": target.db, **target_options(target, url, access)}
    timeouts = {name: options[name] for name in SENTINEL_TIMEOUTS if name in options}
    sentinel = Sentinel(
        list(target.sentinels),
        sentinel_kwargs={**timeouts, **sentinel_options(access, target.tls)},
        **options,
    )
    return sentinel.master_for(target.primary_name)


def cluster_options(
    url: str, access: RedisSettings | None, options: dict[str, Any]
) -> dict[str, Any]:
    """The options of a cluster client: every node's connection gets the credentials
    (the URL's, else the settings') and, for ``rediss+cluster://``, TLS. redis-py's
    cluster client keeps its own retries (it re-reads the slot map on MOVED and after a
    failover), so the per-connection Retry is left out."""
    target = parse_cluster_url(url)
    options = {k: v for k, v in options.items() if k not in ("retry", "retry_on_error")}
    return {**options, **target_options(target, url, access)}


def target_options(
    target: SentinelTarget | ClusterTarget, url: str, access: RedisSettings | None
) -> dict[str, Any]:
    """The connection options a multi-host URL gives each connection: its credentials
    (the URL's user and password over the settings') and, for a TLS scheme, TLS."""
    options = credential_options(url, access)
    if target.username:
        options["username"] = target.username
    if target.password:
        options["password"] = target.password
    if target.tls:
        options.update(ssl=True, **(tls_options(access) if access is not None else {}))
    return options


def cluster_client(url: str, access: RedisSettings | None, options: dict[str, Any]) -> Any:
    """A ``redis.cluster.RedisCluster`` of the cluster a ``redis+cluster://`` URL names:
    each command goes to the primary of its key's slot (a script to its first key's), and
    is sent again across a failover (``redis_cluster.PatientRedisCluster``)."""
    from redis.cluster import ClusterNode

    from dagwright.redis_cluster import PatientRedisCluster

    nodes = [ClusterNode(host, port) for host, port in parse_cluster_url(url).nodes]
    return PatientRedisCluster(
        startup_nodes=nodes,
        failover_wait_s=failover_wait_s(access),
        **cluster_options(url, access, options),
    )


def async_cluster_client(url: str, access: RedisSettings | None, options: dict[str, Any]) -> Any:
    """``cluster_client``'s asyncio twin (``redis.asyncio.cluster.RedisCluster``)."""
    from redis.asyncio.cluster import ClusterNode

    from dagwright.redis_cluster import PatientAsyncRedisCluster

    nodes = [ClusterNode(host, port) for host, port in parse_cluster_url(url).nodes]
    return PatientAsyncRedisCluster(
        startup_nodes=nodes,
        failover_wait_s=failover_wait_s(access),
        **cluster_options(url, access, options),
    )


def failover_wait_s(access: RedisSettings | None) -> float:
    """How long a cluster client's command waits out a failover (the setting's default
    where no settings are given)."""
    from dagwright.settings import RedisSettings

    return (access or RedisSettings()).cluster_failover_wait_s


def redact_url(url: str) -> str:
    """The URL with its password replaced, for messages and logs. Split by hand, not by
    ``urlsplit``, which refuses a Sentinel URL's hosts beside an IPv6 one on some 3.11s."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username, colon, password = userinfo.partition(":")
    if not sep or not at or not colon or not password:
        return url
    return f"{scheme}://{username}:***@{hosts}{slash}{tail}"


@contextmanager
def translate_redis_errors(url: str) -> Iterator[None]:
    """Turn redis connection failures into BrokerUnavailableError."""
    import redis

    try:
        yield
    except redis.AuthenticationError as exc:
        raise ConfigurationError(
            f"Redis at {redact_url(url)} refused the credentials: check the user and "
            "password in DAGWRIGHT_REDIS_URL (or DAGWRIGHT_REDIS_USERNAME / "
            "DAGWRIGHT_REDIS_PASSWORD)"
        ) from exc
    except redis.exceptions.InvalidResponse as exc:  # what answers there speaks no RESP
        raise not_redis(url, exc) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise BrokerUnavailableError(
            f"cannot reach Redis at {redact_url(url)} ({exc}); {unreachable_hint(exc)}"
        ) from exc


TLS_HINT = (
    "the TLS handshake failed: check DAGWRIGHT_REDIS_TLS_CA_FILE (the CA of the server's "
    "certificate) and, if the server asks for one, DAGWRIGHT_REDIS_TLS_CERT_FILE / _KEY_FILE"
)


def unreachable_hint(exc: BaseException) -> str:
    """What to check when a connection failed: TLS settings after a failed handshake,
    else whether the server runs."""
    if failed_tls_handshake(exc):
        return TLS_HINT
    return "is it running? (`dagwright up` starts a local one)"


def failed_tls_handshake(exc: BaseException) -> bool:
    import ssl

    seen: BaseException | None = exc
    while seen is not None:
        # redis-py words an SSLError into a ConnectionError's message, losing the cause.
        if isinstance(seen, ssl.SSLError) or "[SSL" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
