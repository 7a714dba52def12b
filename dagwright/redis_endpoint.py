"""What a Redis URL points at, and the options that reach it: TLS, ACL user, Sentinel.

The state store (redis-py, ``dagwright.connection``) and the broker (kombu,
``dagwright.app``) both read their URL through here, so one URL and one set of
``redis_*`` settings mean the same server, the same way, to both.

URLs understood:

- ``redis://[user:password@]host[:port][/db]``; ``rediss://`` the same over TLS, checked
  against ``redis_tls_ca_file`` (client certificate: ``redis_tls_cert_file`` /
  ``redis_tls_key_file``);
- ``unix:///path?db=N`` (the embedded Valkey);
- ``sentinel://[user:password@]host:26379[,host2:26379...]/primary-name[/db]``: the
  Sentinels to ask, and the name of the primary they monitor. ``user:password`` are the
  primary's; the Sentinels' own password is ``redis_sentinel_password``.
  ``sentinels://`` speaks TLS to the Sentinels and the primary alike;
- ``redis+cluster://[user:password@]host:port[,host2:port...]``: a Redis/Valkey Cluster
  (the state store only: kombu has no cluster transport, so the broker is a plain
  Redis/Valkey or RabbitMQ). The nodes named are where the client starts; it learns
  the rest from them. ``rediss+cluster://`` the same over TLS; ``valkey+cluster://`` and
  ``valkeys+cluster://`` are the same URLs. No database: a cluster has only 0.

Credentials in the URL win; a TCP URL without them takes ``redis_username`` /
``redis_password``.

Rejected: kombu's own Sentinel spelling (``sentinel://h1:26379;sentinel://h2:26379``
with a ``master_name`` transport option). redis-py has none, and the primary's name
would live apart from the URL that the state store, the broker, ``doctor`` and the
stack file all pass around; dagwright writes kombu's form from this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from dagwright.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from dagwright.settings import RedisSettings

SENTINEL_SCHEMES = ("sentinel", "sentinels")  # the second with TLS
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster", "valkey+cluster", "valkeys+cluster")
TLS_SCHEMES = ("rediss", "sentinels", "rediss+cluster", "valkeys+cluster")
TCP_SCHEMES = ("redis", "rediss", *SENTINEL_SCHEMES, *CLUSTER_SCHEMES)
DEFAULT_REDIS_PORT = 6379
CLUSTER_URL_FORM = "redis+cluster://[user:password@]host:port[,host2:port...]"
DEFAULT_SENTINEL_PORT = 26379
SENTINEL_URL_FORM = "sentinel://[user:password@]host:26379[,host2:26379...]/primary-name[/db]"


@dataclass(frozen=True)
class SentinelTarget:
    """A primary found through Sentinels (from a ``sentinel://`` URL)."""

    sentinels: tuple[tuple[str, int], ...]
    primary_name: str
    db: int
    username: str | None
    password: str | None
    tls: bool


def is_sentinel_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


def is_cluster_url(url: str | None) -> bool:
    """Whether ``url`` names a Redis/Valkey Cluster (``redis+cluster://``...)."""
    return bool(url) and str(url).partition("://")[0].lower() in CLUSTER_SCHEMES


@dataclass(frozen=True)
class ClusterTarget:
    """The nodes a ``redis+cluster://`` URL names to start from, and its credentials."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    tls: bool


def parse_cluster_url(url: str) -> ClusterTarget:
    """The start nodes and credentials of a cluster URL (split by hand, as a Sentinel
    URL's: several hosts in one netloc)."""
    scheme, _, rest = url.partition("://")
    netloc, _, tail = rest.partition("/")
    userinfo, _, hosts = netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    path = tail.split("?")[0].split("#")[0].strip("/")
    if not hosts:
        raise bad_cluster_url("it names no node")
    if path not in ("", "0"):
        raise bad_cluster_url(f"a cluster has only database 0, not {path!r}")
    return ClusterTarget(
        nodes=tuple(
            host_address(host, DEFAULT_REDIS_PORT, bad_cluster_url) for host in hosts.split(",")
        ),
        username=unquote(username) or None,
        password=unquote(password) or None,
        tls=scheme.lower() in TLS_SCHEMES,
    )


def bad_cluster_url(why: str) -> ConfigurationError:
    return ConfigurationError(f"invalid cluster URL: {why}; write it as {CLUSTER_URL_FORM}")


def uses_tls(url: str) -> bool:
    return url.partition("://")[0].lower() in TLS_SCHEMES


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The Sentinels, primary name and database of a ``sentinel://`` URL. Split by hand:
    ``urlsplit`` refuses several hosts beside a bracketed IPv6 one on some Python 3.11
    releases (Debian's 3.11.2: "Invalid IPv6 URL")."""
    scheme, _, rest = url.partition("://")
    netloc, _, tail = rest.partition("/")
    userinfo, _, hosts = netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    path = [segment for segment in tail.split("?")[0].split("#")[0].split("/") if segment]
    if not hosts or not 1 <= len(path) <= 2:
        raise bad_sentinel_url("it needs the Sentinels and the primary's name")
    return SentinelTarget(
        sentinels=tuple(
            host_address(host, DEFAULT_SENTINEL_PORT, bad_sentinel_url) for host in hosts.split(",")
        ),
        primary_name=unquote(path[0]),
        db=database_number(path[1] if len(path) == 2 else "0"),
        username=unquote(username) or None,
        password=unquote(password) or None,
        tls=scheme.lower() == "sentinels",
    )


def host_address(
    host_port: str, default_port: int, bad_url: Callable[[str], ConfigurationError]
) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` of a URL naming several hosts (a
    cluster's nodes, the Sentinels) as (host, port); ``bad_url`` makes the error that says
    how to write that URL."""
    text = host_port.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    if not host:
        raise bad_url(f"{host_port!r} names no host")
    if not port:
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise bad_url(f"{port!r} is not a port")
    return host, int(port)


def database_number(text: str) -> int:
    if not text.isdigit():
        raise bad_sentinel_url(f"the database {text!r} is not a number")
    return int(text)


def bad_sentinel_url(why: str) -> ConfigurationError:
    # Not the URL itself: it may hold a password (and redaction sits above this module).
    return ConfigurationError(f"invalid Sentinel URL: {why}; write it as {SENTINEL_URL_FORM}")


# Options, in redis-py's names (kombu passes them on to redis-py unchanged).


def tls_options(access: RedisSettings) -> dict[str, Any]:
    """The ``ssl_*`` options of a TLS connection."""
    options: dict[str, Any] = {
        "ssl_cert_reqs": access.tls_cert_reqs,
        "ssl_check_hostname": access.tls_check_hostname and access.tls_cert_reqs != "none",
    }
    files = {
        "ssl_ca_certs": access.tls_ca_file,
        "ssl_certfile": access.tls_cert_file,
        "ssl_keyfile": access.tls_key_file,
    }
    options.update({name: str(path) for name, path in files.items() if path is not None})
    return options


def credential_options(url: str, access: RedisSettings | None) -> dict[str, Any]:
    """``username`` / ``password`` from the settings, for a URL of a TCP server that
    carries none. Not for a ``unix://`` socket: that is the embedded Valkey, which has no
    password (and a password set for a remote server must not be sent to it)."""
    if access is None or url.partition("://")[0].lower() not in TCP_SCHEMES:
        return {}
    if any(url_credentials(url)):
        return {}
    options: dict[str, Any] = {}
    if access.username:
        options["username"] = access.username
    if access.password is not None:
        options["password"] = access.password.get_secret_value()
    return options


def sentinel_options(access: RedisSettings | None, tls: bool) -> dict[str, Any]:
    """The options of the connections to the Sentinels themselves."""
    options: dict[str, Any] = {}
    if access is not None and access.sentinel_password is not None:
        options["password"] = access.sentinel_password.get_secret_value()
    if tls:
        options.update(ssl=True, **(tls_options(access) if access is not None else {}))
    return options


def url_credentials(url: str) -> tuple[str | None, str | None]:
    """The (username, password) written in a URL."""
    if is_sentinel_url(url):
        target = parse_sentinel_url(url)
        return target.username, target.password
    if is_cluster_url(url):
        cluster = parse_cluster_url(url)
        return cluster.username, cluster.password
    parts = urlsplit(url)
    return parts.username and unquote(parts.username), parts.password and unquote(parts.password)


def with_credentials(url: str, username: str | None, password: str | None) -> str:
    """``url`` with ``username:password@`` written in (it has none)."""
    if not username and not password:
        return url
    scheme, _, rest = url.partition("://")
    userinfo = quote(username or "", safe="")
    if password:
        userinfo += ":" + quote(password, safe="")
    return f"{scheme}://{userinfo}@{rest}"
