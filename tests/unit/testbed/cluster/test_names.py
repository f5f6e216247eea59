"""Naming and address planning (pure)."""

from __future__ import annotations

import ipaddress

import pytest

from testbed.cluster import names


def test_node_names_and_prefixes() -> None:
    assert names.node_names(3) == ["n0", "n1", "n2"]
    assert names.node_netns("n0") == "cosched-n0"
    assert names.data_port("n199") == "csd-n199"
    assert names.ctl_port("n7") == "csc-n7"
    assert names.node_cgroup("n3") == "cosched/n3"
    assert names.is_our_netns("cosched-data") and not names.is_our_netns("other")
    for link in (names.HOST_CTL_IF, names.HOST_CTL_PEER, names.data_port("n0")):
        assert names.is_our_link(link)
    assert not names.is_our_link("eth0")


def test_ifnames_fit_ifnamsiz() -> None:
    for i in range(names.MAX_NODES):
        n = names.node_name(i)
        assert len(names.data_port(n)) <= 15 and len(names.ctl_port(n)) <= 15
    for ifname in (names.HOST_CTL_IF, names.HOST_CTL_PEER, names.BRIDGE, names.NODE_DATA_IF):
        assert len(ifname) <= 15
    with pytest.raises(ValueError):
        names.data_port("n" + "9" * 20)


def test_default_addresses() -> None:
    a = names.AddressPlan.build()
    assert str(a.data_ip(0)) == "10.211.0.1"
    assert str(a.ctl_ip(1)) == "10.212.0.2"
    assert a.host_ctl_ip == ipaddress.IPv4Address("10.212.0.254")
    assert a.capacity() >= names.MAX_NODES
    a.validate(names.MAX_NODES)
    assert names.AddressPlan.from_dict(a.to_dict()) == a


def test_address_plan_rejects() -> None:
    with pytest.raises(ValueError, match="overlaps"):
        names.AddressPlan.build("10.1.0.0/16", "10.1.2.0/24")
    with pytest.raises(ValueError, match="not a usable"):
        names.AddressPlan.build(host_ip="10.9.9.9")
    with pytest.raises(ValueError, match="bad subnet"):
        names.AddressPlan.build("10.211.0.1/24")
    small = names.AddressPlan.build("10.5.0.0/29", "10.6.0.0/29")
    assert str(small.host_ctl_ip) == "10.6.0.6"
    assert small.capacity() == 5
    with pytest.raises(ValueError):
        small.ctl_ip(5)  # would be the host address
