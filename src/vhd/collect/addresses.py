"""Which IP addresses a fetch of untrusted URLs may connect to (pure functions, no I/O).

Loopback, private, link-local, shared (carrier-grade NAT), multicast, reserved and unspecified
addresses are not public; neither are IPv4 addresses of those kinds embedded in IPv6 ones
(mapped, 6to4, NAT64, Teredo). `vhd.collect.netguard` applies this at every connection.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_SHARED: Final = ipaddress.ip_network("100.64.0.0/10")
_NAT64: Final = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in net for net in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_problem(address: str | IPAddress) -> str | None:
    """Return why an address is not a public internet address, or None when it is.

    Args:
        address: An IPv4 or IPv6 address (text or object).

    Returns:
        A short phrase (``"loopback"``, ``"private network"``, ``"link-local"``...), or None for
        a public (globally routable unicast) address.

    Raises:
        ValueError: ``address`` is not an IP address.

    Example:
        >>> address_problem("127.0.0.1"), address_problem("8.8.8.8")
        ('loopback', None)
    """
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "link-local (scoped IPv6)"
        inner = _embedded_ipv4(ip)
        if inner is not None:
            problem = address_problem(inner)
            return f"{problem} (IPv4 {inner} inside IPv6)" if problem else None
        if ip.is_site_local:
            return "site-local"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return "shared address space (carrier-grade NAT)"
    if ip.is_private:
        return "private network"
    if ip.is_reserved:
        return "reserved"
    if not ip.is_global:
        return "not a public address"
    return None


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
