from __future__ import annotations

import pytest

from vhd.collect.addresses import AddressGuard, address_problem, parse_networks


@pytest.mark.parametrize(
    ("address", "phrase"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("10.255.1.2", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.254", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("fec0::1", "site-local"),
        ("::ffff:127.0.0.1", "loopback (IPv4 127.0.0.1 inside IPv6)"),
        ("::ffff:10.0.0.1", "private"),
        ("2002:7f00:1::1", "loopback"),
        ("64:ff9b::a00:1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "private"),
        ("240.0.0.1", ""),
        ("192.0.2.10", ""),
        ("198.18.0.1", ""),
    ],
)
def test_non_public_addresses_are_named(address: str, phrase: str) -> None:
    problem = address_problem(address)
    assert problem is not None and phrase in problem


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(address) is None


def test_not_an_address_raises() -> None:
    with pytest.raises(ValueError):
        address_problem("localhost")


def test_guard_policy() -> None:
    default = AddressGuard()
    assert default.problem("127.0.0.1") == "loopback" and default.problem("8.8.8.8") is None
    assert AddressGuard(allow_private=True).problem("169.254.169.254") is None
    narrow = AddressGuard(allow_networks=parse_networks(["127.0.0.1", "10.1.0.0/16"]))
    assert narrow.problem("127.0.0.1") is None and narrow.problem("10.1.2.3") is None
    assert narrow.problem("127.0.0.2") == "loopback" and narrow.problem("::1") == "loopback"
    assert narrow.problem("10.2.0.1") == "private network"
    with pytest.raises(ValueError, match="not an IP network"):
        parse_networks(["10.0.0.0/33"])
