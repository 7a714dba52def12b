"""What a browser may do on another site's behalf: nothing that changes state.

Bearer tokens are sent only by code that holds them. Three credentials are attached by a
browser on its own, so a page of another site could make a visitor's browser use them:
the session cookie (SameSite=Strict already withholds it from cross-site requests), HTTP
Basic credentials the browser cached after a prompt, and no credential at all on a
loopback ``dagwright up`` (anonymous admin: any page the user opens could post to
``http://127.0.0.1:8400``). Two checks close that:

- **Fetch metadata.** Browsers mark every request with ``Sec-Fetch-Site`` (and a cross-
  origin POST with ``Origin``): a change asked by another site (``cross-site``,
  ``same-site``) or from a foreign ``Origin`` is refused. Tools (curl, scripts) send
  neither header and are not affected. This is OWASP's resource-isolation policy.
- **Host for anonymous access.** A DNS-rebinding page reaches a loopback server under its
  own name, where every request is same-origin: anonymous access is granted only to
  requests addressed to a loopback host (``127.0.0.1``, ``[::1]``, ``localhost``).
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # the CLI reads is_loopback without loading FastAPI
    from fastapi import Request

FOREIGN_FETCH_SITES = frozenset({"cross-site", "same-site"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (no port) is a loopback address or ``localhost``."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def addressed_to_loopback(request: Request) -> bool:
    """Whether the request's Host names a loopback host (what DNS rebinding cannot fake)."""
    host = request.headers.get("host", "")
    return is_loopback(urlsplit(f"//{host}").hostname or "")


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
