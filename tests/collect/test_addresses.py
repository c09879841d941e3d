from __future__ import annotations

import ipaddress

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
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.10", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.254", "benchmarking"),
        ("192.0.0.192", "IETF protocol"),
        ("192.0.0.170", "IETF protocol"),
        ("192.0.0.9", "IETF protocol"),
        ("100.127.255.254", "carrier-grade NAT"),
        ("0.1.2.3", "this network"),
        ("192.88.99.1", "6to4 relay"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.200", "documentation"),
        ("::ffff:192.0.0.192", "(not public) (IPv4 192.0.0.192 inside IPv6)"),
        ("::ffff:100.64.0.1", "carrier-grade NAT) (IPv4 100.64.0.1 inside IPv6)"),
        ("::ffff:198.18.0.1", "benchmarking (IPv4"),
        ("64:ff9b::c000:c0", "(not public) (IPv4 192.0.0.192 inside IPv6)"),
        ("64:ff9b::7f00:1", "loopback (IPv4 127.0.0.1"),
        ("64:ff9b::6440:1", "carrier-grade NAT"),
        ("64:ff9b::a9fe:a9fe", "link-local (IPv4 169.254.169.254"),
        ("2002:c000:c0::1", "(not public) (IPv4 192.0.0.192 inside IPv6)"),
        ("2002:a9fe:a9fe::", "link-local (IPv4 169.254.169.254"),
        ("2002:c0a8:101:5::7", "private network (IPv4 192.168.1.1"),
        ("2002:c612:1::1", "benchmarking"),
        ("64:ff9b:1::a00:1", "local-use"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
        ("2001:2::1", "IETF protocol"),
        ("2001:db8::1", "documentation"),
        ("3fff::1", "documentation"),
        ("5f00::1", "SRv6"),
        ("100::1", "discard-only"),
        ("::7f00:1", "reserved"),
        ("::ffff:0:7f00:1", "reserved"),
        ("4000::1", "reserved"),
        ("e000::1", "reserved"),
    ],
)
def test_non_public_addresses_are_named(address: str, phrase: str) -> None:
    problem = address_problem(address)
    assert problem is not None and phrase in problem


PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "192.0.1.1", "192.0.3.1", "198.20.0.1", "100.128.0.1"]
PUBLIC += ["2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2a00:1450::1"]


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(address) is None


def test_the_guard_does_not_rely_on_the_ipaddress_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # ipaddress's is_global/is_private tables differ between Python releases (192.0.0.192 is
    # global on 3.11 and 3.12): the verdicts must not change when every address claims to be global.
    samples = ["192.0.0.192", "100.64.0.1", "198.18.0.1", "10.0.0.1", "127.0.0.1", "169.254.169.254"]
    samples += ["::ffff:192.0.0.192", "64:ff9b::a00:1", "2002:a00:1::1", "fd00::1", "fe80::1", "2001:db8::1"]
    before = {a: address_problem(a) for a in samples + PUBLIC}
    for cls in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        for name in ("is_global", "is_private", "is_reserved", "is_loopback", "is_link_local", "is_multicast"):
            monkeypatch.setattr(cls, name, property(lambda self, n=name: n == "is_global"))
    assert {a: address_problem(a) for a in samples + PUBLIC} == before
    assert all(before[a] for a in samples) and not any(before[a] for a in PUBLIC)


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
