"""The address guard's judgement of resolved addresses (pure)."""

import logging

import pytest

from webhooks.sender.netguard import is_public_address


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.0.1", "172.31.255.255",
        "192.168.1.1", "169.254.169.254", "169.254.0.1", "100.64.0.1", "0.0.0.0",
        "224.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1",
        "::1", "::", "fe80::1", "fe80::1%eth0", "fc00::1", "fd12:3456::1", "ff02::1",
        "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
        "64:ff9b::7f00:1", "2002:7f00:1::1", "2001:db8::1",
    ],
)
def test_non_public_addresses_are_refused(address):
    assert not is_public_address(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_are_allowed(address):
    assert is_public_address(address)


@pytest.mark.parametrize("address", ["10.1.2.3", "fd00::5", "169.254.169.254"])
def test_a_refusal_names_no_address_to_the_tenant_and_logs_it_for_operators(address, caplog):
    from webhooks.sender.netguard import describe_refusal

    caplog.set_level(logging.WARNING, logger="webhooks.netguard")
    message = describe_refusal(address)
    assert address not in message and "not a public address" in message
    logged = [r for r in caplog.records if r.name == "webhooks.netguard" and r.levelno == logging.WARNING]
    assert len(logged) == 1 and address in logged[0].getMessage()


# IPv6 ranges Python 3.11 calls global, though no public endpoint lives in them.
@pytest.mark.parametrize("address", [
    "fec0::1", "feff::1",                          # site-local fec0::/10
    "::7f00:1", "::a00:1", "::808:808",           # IPv4-compatible ::/96
    "::ffff:0:7f00:1", "::ffff:0:808:808",        # IPv4-translated (SIIT) ::ffff:0:0:0/96
    "64:ff9b:1::7f00:1", "64:ff9b:1::808:808",    # local-use NAT64 64:ff9b:1::/48
    "::ffff:0.0.0.0", "::ffff:127.0.0.1", "::ffff:192.168.1.1",  # IPv4-mapped, private inside
    "64:ff9b::10.0.0.1", "64:ff9b::192.168.0.1",  # NAT64 embedding a private IPv4
    "2002:a00:1::1", "2002:c0a8:101::1", "2002:7f00:1::1",  # 6to4 embedding a private IPv4
    "3fff::1", "5f00::1",                         # documentation, SRv6
])
def test_special_ipv6_ranges_are_refused(address):
    assert not is_public_address(address)


@pytest.mark.parametrize("address", ["::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1"])
def test_an_ipv6_address_embedding_a_public_ipv4_is_judged_by_it(address):
    assert is_public_address(address)
