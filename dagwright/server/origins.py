"""What a browser may do on another site's behalf: nothing that changes state.

Bearer tokens are sent only by code that holds them. Three credentials are attached by a
browser on its own, so a page of another site could make a visitor's browser use them:
the session cookie (SameSite=Strict already withholds it from cross-site requests), HTTP
Basic credentials the browser cached after a prompt, and the session a one-time login
link of a loopback ``dagwright up`` opened (an admin's: any page the user opens could
post to ``http://127.0.0.1:8400``). Two checks close that:

- **Fetch metadata.** Browsers mark every request with ``Sec-Fetch-Site`` (and a cross-
  origin POST with ``Origin``): a change asked by another site (``cross-site``,
  ``same-site``) or from a foreign ``Origin`` is refused. Tools (curl, scripts) send
  neither header and are not affected. This is OWASP's resource-isolation policy.
- **Host for a local login.** A DNS-rebinding page reaches a loopback server under its
  own name, where every request is same-origin: a one-time login link
  (``local_access.py``) is taken only from a request addressed to a loopback host, spelt
  exactly: ``localhost``, an IPv4 literal of 127.0.0.0/8 or ``[::1]``, each with an
  optional port. ``evil.localhost``, ``x@127.0.0.1``, ``127.1`` or a trailing dot are not.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # the CLI reads is_loopback without loading FastAPI
    from fastapi import Request

FOREIGN_FETCH_SITES = frozenset({"cross-site", "same-site"})
IPV6_LOOPBACK = ipaddress.IPv6Address("::1")
# A Host header: a bracketed IPv6 literal, or a name or IPv4 literal; then maybe a port.
HOST_HEADER = re.compile(r"(?:\[(?P<ipv6>[0-9a-f:]+)\]|(?P<name>[0-9a-z.-]+))(?::[0-9]{1,5})?")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to listen on, no port) is ``localhost``, an IPv4
    literal of 127.0.0.0/8 or ``::1`` (bracketed or not)."""
    host = host.lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host == "localhost" or _loopback_literal(host)


def host_is_loopback(host_header: str) -> bool:
    """Whether a Host header names a loopback host, parsed strictly: ``localhost``, an
    IPv4 literal of 127.0.0.0/8 or ``[::1]``, with an optional port; nothing else."""
    match = HOST_HEADER.fullmatch(host_header.lower())
    if match is None:
        return False
    if match["ipv6"] is not None:
        return _loopback_literal(match["ipv6"], version=6)
    return match["name"] == "localhost" or _loopback_literal(match["name"], version=4)


def _loopback_literal(text: str, version: int | None = None) -> bool:
    """Whether ``text`` is a canonical-enough IP literal of a loopback address (Python's
    parser refuses ``127.1``, ``0x7f.0.0.1`` and leading zeros)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    if version is not None and address.version != version:
        return False
    return address == IPV6_LOOPBACK if address.version == 6 else address.is_loopback


def addressed_to_loopback(request: Request) -> bool:
    """Whether the request's Host names a loopback host (what DNS rebinding cannot fake)."""
    return host_is_loopback(request.headers.get("host", ""))


def asked_by_another_site(request: Request) -> bool:
    """Whether a browser sent this request for a page of another origin."""
    if request.headers.get("sec-fetch-site", "").lower() in FOREIGN_FETCH_SITES:
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return False
    # Host against host only: behind a TLS-terminating proxy the scheme seen here is not
    # the browser's.
    return urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower()
