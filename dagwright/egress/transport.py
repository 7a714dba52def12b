"""The HTTP client of the one door out: it connects only to addresses it has just checked.

The check and the connection are one step: the connection pool's network backend
resolves the host (``destinations.checked_addresses``) and opens the socket to the
checked address itself, so a name cannot answer one address to the check and another to
the connection (DNS rebinding). The request keeps its URL's host: the ``Host`` header,
TLS's server name and certificate check are the name's, as if httpx had resolved it.

Rejected: resolving before the request and sending it to the IP with a ``Host`` header
(breaks TLS: the certificate names the host, not the address), and an ``httpx`` event
hook (it runs before the connection is chosen, not when the socket is opened).
"""

from __future__ import annotations

import typing

import httpcore
import httpx

from dagwright.egress.destinations import EgressPolicy, checked_addresses


class CheckedBackend(httpcore.SyncBackend):
    """httpcore's socket opener, given a host only through the egress check."""

    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = checked_addresses(host, port, self.policy)
        except OSError as exc:  # no such name, or no answer in time: httpx's ConnectError
            raise httpcore.ConnectError(str(exc)) from exc
        failure: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return super().connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:  # the next address, as create_connection does
                failure = exc
        raise failure or httpcore.ConnectError(f"{host} has no address")


class CheckedTransport(httpx.HTTPTransport):
    """httpx's transport over a pool whose every connection is opened by CheckedBackend."""

    def __init__(self, policy: EgressPolicy) -> None:
        super().__init__(trust_env=False)
        # httpx takes no network backend: its pool is replaced by the same pool with one.
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=CheckedBackend(policy),
        )


def egress_client(policy: EgressPolicy, timeout_s: float) -> httpx.Client:
    """The client every aimed request is sent with: checked connections, no redirect
    followed, no proxy or ``.netrc`` from the environment (a proxy would reach what the
    check refused), every phase bounded by ``timeout_s``."""
    return httpx.Client(
        transport=CheckedTransport(policy),
        timeout=httpx.Timeout(timeout_s),
        follow_redirects=False,
        trust_env=False,
    )
