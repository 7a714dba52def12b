"""Webhook signatures: HMAC-SHA256 over ``"<timestamp>.<body>"``, as Stripe and Standard
Webhooks sign theirs, so a receiver can check both who sent a body and when.

Headers of every delivery::

    Dagwright-Delivery: <delivery id>          (the same on every attempt: deduplicate on it)
    Dagwright-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>

Only the standard library: a receiver installs dagwright for ``verify_signature`` and
imports nothing else of it.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from typing import Any

SIGNATURE_HEADER = "Dagwright-Signature"
DELIVERY_HEADER = "Dagwright-Delivery"
SCHEME = "v1"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """The value of ``Dagwright-Signature`` for ``body`` sent at ``timestamp``."""
    return f"t={timestamp},{SCHEME}={signature(secret, timestamp, body)}"


def verify_signature(
    secret: str,
    headers: Mapping[str, Any],
    body: bytes,
    tolerance_s: float = 300,
    now: float | None = None,
) -> bool:
    """True if ``body`` (the raw bytes received) was signed with ``secret`` by dagwright
    less than ``tolerance_s`` ago (or ahead, for clock skew). ``headers``: any mapping
    of the request's headers (a dict, ``http.server``'s, Starlette's...). Compares in
    constant time; a missing or malformed header is False, never an exception."""
    value = _header(headers, SIGNATURE_HEADER)
    if not value:
        return False
    parts = dict(item.split("=", 1) for item in value.split(",") if "=" in item)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    expected = signature(secret, timestamp, body)
    return hmac.compare_digest(expected, parts.get(SCHEME, ""))


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    """A header by name, whatever the case of the mapping's keys."""
    value = headers.get(name)
    if value is None:
        lowered = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lowered), None)
    return None if value is None else str(value)
