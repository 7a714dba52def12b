"""One door out: every request a user or a model can aim (a webhook, the http_get tool)
leaves through here.

``destinations`` decides where a request may go (standard library only, so a submit can
check a URL without loading an HTTP client): the host resolved, and loopback, link-local,
private, unique-local, multicast, reserved and cloud-metadata addresses refused, whatever
their spelling, unless ``DAGWRIGHT_EGRESS_ALLOW`` lists them. ``transport`` is the httpx
client that connects only to an address it has just checked (no DNS-rebinding gap between
the check and the connection), follows no redirect, reads no proxy from the environment
and is bounded in time.
"""

from dagwright.egress.destinations import (
    EgressPolicy,
    check_url,
    checked_addresses,
    refused_kind,
)

__all__ = ["EgressPolicy", "check_url", "checked_addresses", "refused_kind"]
