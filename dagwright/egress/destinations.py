"""Where a request a user or a model aimed may go: the check of a URL at submit time
(address literals in any spelling, ``localhost``, metadata names) and of the addresses
its host resolves to at send time.

Refused unless allow-listed: every address Python does not call global (loopback,
private, link-local, unique-local, shared, reserved, unspecified, documentation), every
multicast address, and an IPv6 address that carries a refused IPv4 one (IPv4-mapped,
IPv4-compatible, NAT64 ``64:ff9b::/96``, 6to4, Teredo). An IPv4 address is read as the C
library reads it (``inet_aton``): ``2130706433``, ``0x7f.0.0.1``, ``0177.1`` and
``127.1`` are all ``127.0.0.1``, and are all refused as such.

Rejected: a list of forbidden networks kept here (it falls behind the registries that
``ipaddress`` follows), and checking names only at submit (DNS answers change: a name is
checked again, on the addresses it resolves to, each time a request is sent).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from dagwright.errors import EgressRefusedError, InputError

if TYPE_CHECKING:
    from dagwright.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
        "metadata.tencentyun.com",
    }
)
"""Names of cloud instance-metadata services (refused by name too: on some hosts they
resolve through a local resolver to an address that looks ordinary)."""

NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
ALLOW_SETTING = "DAGWRIGHT_EGRESS_ALLOW"


@dataclass(frozen=True)
class EgressPolicy:
    """The allow-list: networks and host names that may be reached though refused by
    default (a private receiver, a test's loopback listener). A name listed here is
    trusted whatever it resolves to."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()
    resolve_timeout_s: float = 5.0

    @classmethod
    def of(cls, entries: Sequence[str], resolve_timeout_s: float = 5.0) -> EgressPolicy:
        """From ``DAGWRIGHT_EGRESS_ALLOW``'s entries: each a CIDR, an address or a name."""
        networks, hosts = [], set()
        for entry in entries:
            network = parse_network(entry)
            if network is None:
                hosts.add(normal_host(entry))
            else:
                networks.append(network)
        return cls(tuple(networks), frozenset(hosts), resolve_timeout_s)

    @classmethod
    def from_settings(cls, settings: Settings) -> EgressPolicy:
        return cls.of(settings.egress.allow, settings.egress.resolve_timeout_s)

    def allows_address(self, address: IPAddress) -> bool:
        return refused_kind(address) is None or any(
            address in network for network in self.networks if network.version == address.version
        )


def parse_network(entry: str) -> IPNetwork | None:
    """``entry`` as a network (``10.0.0.0/8``, ``127.0.0.1``, ``fd00::/8``), or None for
    a host name."""
    try:
        return ipaddress.ip_network(entry.strip().strip("[]"), strict=False)
    except ValueError:
        return None


def normal_host(host: str) -> str:
    """A host as compared: lower case, no brackets, no trailing dot (``localhost.`` is
    ``localhost``)."""
    return host.strip().strip("[]").lower().rstrip(".")


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` spells, in any spelling the C library accepts; None for a
    name. An IPv6 zone (``fe80::1%eth0``) is dropped."""
    host = normal_host(host).split("%", 1)[0]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if not host or not all(c.isalnum() or c == "." for c in host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def refused_kind(address: IPAddress) -> str | None:
    """Why ``address`` is refused by default (``loopback``, ``private``, ``loopback via
    127.0.0.1`` for an IPv6 address carrying that IPv4 one...), or None."""
    if isinstance(address, ipaddress.IPv6Address):
        carried = carried_ipv4(address)
        if carried is not None:
            kind = refused_kind(carried)
            return None if kind is None else f"{kind} via {carried}"
    for kind in ("loopback", "link_local", "multicast", "unspecified", "private", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_site_local:
            return "site-local"
        if address in NAT64_LOCAL_USE or address in IPV4_COMPATIBLE:
            return "reserved"
    return None if address.is_global else "non-global"


def carried_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one reaches: mapped, NAT64, 6to4 or Teredo's client."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64_WELL_KNOWN:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def check_url(url: str, policy: EgressPolicy) -> None:
    """What can be said of ``url`` before sending: an http(s) URL whose host is not a
    refused address literal (any spelling), ``localhost`` (or ``*.localhost``) or a
    metadata name, unless allow-listed. EgressRefusedError otherwise; DNS is not asked
    (``checked_addresses`` does that when sending)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise InputError(f"only http and https URLs are accepted, not {parts.scheme or url!r}")
    try:
        parts.port  # noqa: B018 -- a port that is not a number raises here
    except ValueError:
        raise InputError("the URL's port is not a number from 0 to 65535") from None
    check_host(parts.hostname or "", policy)


def check_host(host: str, policy: EgressPolicy) -> None:
    """``check_url`` for a bare host."""
    name = normal_host(host)
    if not name:
        raise InputError("the URL has no host")
    if name in policy.hosts:
        return
    address = literal_address(name)
    if address is not None:
        if not policy.allows_address(address):
            refuse(host, f"is {address} ({refused_kind(address)})")
        return
    if name == "localhost" or name.endswith(".localhost"):
        refuse(host, "is a loopback name")
    if name in METADATA_HOSTS:
        refuse(host, "is a cloud metadata service")


def checked_addresses(host: str, port: int, policy: EgressPolicy) -> list[IPAddress]:
    """The addresses ``host`` resolves to now, every one of them allowed (else
    EgressRefusedError): connect to these, not to the name, so that what was checked is
    what is reached. A name is judged by its addresses here (``localhost`` and metadata
    names by what they resolve to); resolution is bounded by ``resolve_timeout_s``."""
    name = normal_host(host)
    addresses = resolve(name, port, policy.resolve_timeout_s)
    if name in policy.hosts:
        return addresses
    for address in addresses:
        if not policy.allows_address(address):
            refuse(host, f"resolves to {address} ({refused_kind(address)})")
    return addresses


def resolve(host: str, port: int, timeout_s: float) -> list[IPAddress]:
    """``getaddrinfo`` in a thread of its own, given up after ``timeout_s`` (the C call
    cannot be interrupted: a stuck lookup finishes in the background)."""
    outcome: dict[str, object] = {}

    def lookup() -> None:
        try:
            outcome["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=lookup, name="dagwright-resolve", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise OSError(f"resolving {host} took more than {timeout_s:g}s")
    if "error" in outcome:
        raise OSError(f"cannot resolve {host}: {outcome['error']}")
    infos = outcome["infos"]
    assert isinstance(infos, list)
    found = [literal_address(str(info[4][0])) for info in infos]
    return list(dict.fromkeys(a for a in found if a is not None))


def refuse(host: str, why: str) -> None:
    raise EgressRefusedError(
        f"{host!r} {why}: dagwright sends nothing there unless {ALLOW_SETTING} lists it"
    )
