"""Which IP addresses a fetch of untrusted URLs may connect to (pure functions, no I/O).

The rule is an explicit deny list, written out here from the IANA special-purpose address
registries (IPv4 and IPv6) plus multicast and the IPv6 space outside global unicast, so the
answer is the same on every Python: ``ipaddress``'s ``is_global`` / ``is_private`` tables have
changed between releases (3.11 and 3.12 call ``192.0.0.192``, in the IETF protocol block that
cloud metadata services use, global; 3.13 does not), and none of them are consulted. IPv4
addresses embedded in IPv6 ones (IPv4-mapped, 6to4, NAT64) are judged as the IPv4 address they
carry. `vhd.collect.netguard` applies this at every connection.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _table(rows: Iterable[tuple[str, str]]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(net), phrase) for net, phrase in rows)


DENIED_IPV4: Final = _table(
    [
        ("0.0.0.0/32", "unspecified"),
        ("0.0.0.0/8", "'this network' (unspecified)"),
        ("10.0.0.0/8", "private network"),
        ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private network"),
        ("192.0.0.0/24", "IETF protocol assignment (not public)"),
        ("192.0.2.0/24", "documentation (TEST-NET-1)"),
        ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
        ("192.168.0.0/16", "private network"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation (TEST-NET-2)"),
        ("203.0.113.0/24", "documentation (TEST-NET-3)"),
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255/32", "limited broadcast"),
        ("240.0.0.0/4", "reserved"),
    ]
)
"""IPv4 networks never fetched from, with the phrase a refusal names (first match wins)."""

_MAPPED: Final = ipaddress.ip_network("::ffff:0:0/96")
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
_SIXTOFOUR: Final = ipaddress.ip_network("2002::/16")
_GLOBAL_UNICAST: Final = ipaddress.ip_network("2000::/3")

DENIED_IPV6: Final = _table(
    [
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation"),
        ("100::/64", "discard-only"),
        ("100:0:0:1::/64", "dummy prefix"),
        ("2001::/23", "IETF protocol assignment (Teredo, benchmarking, ORCHID; not fetched)"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing (SRv6) SIDs"),
        ("fc00::/7", "private network (unique local)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    ]
)
"""IPv6 networks never fetched from (first match wins); besides these, every address outside
global unicast (``2000::/3``) is refused as reserved, apart from the IPv4-mapped and NAT64 forms,
which are judged by the IPv4 address they carry."""


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip in _MAPPED or ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIXTOFOUR:
        return ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)
    return None


def _first_match(ip: IPAddress, table: tuple[tuple[IPNetwork, str], ...]) -> str | None:
    return next((phrase for net, phrase in table if ip in net), None)


def address_problem(address: str | IPAddress) -> str | None:
    """Return why an address is not a public internet address, or None when it is.

    Args:
        address: An IPv4 or IPv6 address (text or object; an IPv6 zone such as ``%eth0`` makes
            it link-local).

    Returns:
        A short phrase (``"loopback"``, ``"private network"``, ``"link-local"``...), or None for
        a public (globally routable unicast) address.

    Raises:
        ValueError: ``address`` is not an IP address.

    Example:
        >>> address_problem("127.0.0.1"), address_problem("192.0.0.192"), address_problem("8.8.8.8")
        ('loopback', 'IETF protocol assignment (not public)', None)
    """
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv4Address):
        return _first_match(ip, DENIED_IPV4)
    if ip.scope_id:
        return "link-local (scoped IPv6)"
    inner = _embedded_ipv4(ip)
    if inner is not None:
        problem = _first_match(inner, DENIED_IPV4)
        return f"{problem} (IPv4 {inner} inside IPv6)" if problem else None
    problem = _first_match(ip, DENIED_IPV6)
    if problem is None and ip not in _GLOBAL_UNICAST:
        problem = "reserved"
    return problem


def parse_networks(values: Iterable[str]) -> list[IPNetwork]:
    """Parse CIDR networks (``10.1.2.0/24``, ``::1/128``) or single addresses.

    Raises:
        ValueError: A value is neither a network nor an address (the message names it).
    """
    out: list[IPNetwork] = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"{value!r} is not an IP network such as 10.1.2.0/24 ({exc})") from exc
    return out


class AddressGuard:
    """Decides which resolved addresses may be connected to.

    Args:
        allow_private: Allow every address (the guard only resolves).
        allow_networks: Networks allowed even though they are not public.
    """

    def __init__(self, *, allow_private: bool = False, allow_networks: Sequence[IPNetwork] = ()) -> None:
        self.allow_private = allow_private
        self.allow_networks = list(allow_networks)

    def problem(self, address: str) -> str | None:
        """Return why connecting to ``address`` is refused, or None when it is allowed."""
        if self.allow_private:
            return None
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if any(ip.version == net.version and ip in net for net in self.allow_networks):
            return None
        return address_problem(ip)
