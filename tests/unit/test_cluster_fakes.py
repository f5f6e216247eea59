"""In-memory fakes of the kernel-facing interfaces of testbed.cluster (no root needed).

Imported by the other test_cluster_* modules; the few tests here check the fakes
themselves behave like the kernel in the ways the cluster code relies on.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from common.cgroups.fake import fake_v1
from testbed.cluster.shaping import HtbParams, NetemParams, handle_str

HTB_CLASS = 0x10010


class InjectedFailure(RuntimeError):
    pass


class FakeNet:
    """Namespaces, links and tc as dicts. ``fail_at`` makes the n-th mutating call raise."""

    def __init__(self, features: dict[str, bool] | None = None, fail_at: int | None = None):
        self.netns: dict[str, dict[str, dict[str, Any]]] = {}
        self.root: dict[str, dict[str, Any]] = {"lo": {}, "eth0": {}}
        self.features = features or {
            "netns": True,
            "veth": True,
            "bridge": True,
            "htb": True,
            "netem": False,
        }
        self.fail_at = fail_at
        self.calls = 0
        self.log: list[str] = []

    def _mut(self, what: str) -> None:
        self.calls += 1
        self.log.append(what)
        if self.fail_at is not None and self.calls == self.fail_at:
            raise InjectedFailure(f"injected failure at call {self.calls} ({what})")

    def _links(self, ns: str | None) -> dict[str, dict[str, Any]]:
        if ns is None:
            return self.root
        if ns not in self.netns:
            raise FileNotFoundError(ns)
        return self.netns[ns]

    def list_netns(self) -> list[str]:
        return sorted(self.netns)

    def create_netns(self, name: str) -> None:
        self._mut(f"create_netns {name}")
        if name in self.netns:
            raise FileExistsError(name)
        self.netns[name] = {"lo": {}}

    def remove_netns(self, name: str) -> bool:
        if name not in self.netns:
            return False
        # Destroying a namespace destroys its veths, and so their peers elsewhere.
        for ifname, link in list(self.netns[name].items()):
            peer = link.get("peer")
            if peer:
                pns, pname = peer
                self._links(pns).pop(pname, None) if (pns is None or pns in self.netns) else None
            del self.netns[name][ifname]
        del self.netns[name]
        return True

    def add_bridge(self, netns: str, name: str) -> None:
        self._mut(f"add_bridge {netns} {name}")
        self._links(netns)[name] = {"kind": "bridge"}

    def add_veth(self, netns: str | None, ifname: str, peer_netns: str, peer_ifname: str) -> None:
        self._mut(f"add_veth {netns} {ifname}")
        links, peers = self._links(netns), self._links(peer_netns)
        if ifname in links or peer_ifname in peers:
            raise FileExistsError(ifname)
        links[ifname] = {"kind": "veth", "peer": (peer_netns, peer_ifname), "tc": []}
        peers[peer_ifname] = {"kind": "veth", "peer": (netns, ifname), "tc": []}

    def set_master(self, netns: str, ifname: str, bridge: str) -> None:
        self._mut(f"set_master {netns} {ifname}")
        self._links(netns)[ifname]["master"] = bridge

    def add_address(self, netns: str | None, ifname: str, address: str, prefixlen: int) -> None:
        self._mut(f"add_address {netns} {ifname}")
        self._links(netns)[ifname]["addr"] = f"{address}/{prefixlen}"

    def set_up(self, netns: str | None, ifname: str) -> None:
        self._mut(f"set_up {netns} {ifname}")
        self._links(netns)[ifname]["up"] = True

    def set_down(self, netns: str | None, ifname: str) -> None:
        self._mut(f"set_down {netns} {ifname}")
        self._links(netns)[ifname]["up"] = False

    def delete_link(self, netns: str | None, ifname: str) -> bool:
        try:
            links = self._links(netns)
        except FileNotFoundError:
            return False
        link = links.pop(ifname, None)
        if link is None:
            return False
        peer = link.get("peer")
        if peer and (peer[0] is None or peer[0] in self.netns):
            self._links(peer[0]).pop(peer[1], None)
        return True

    def list_links(self, netns: str | None) -> list[str]:
        return sorted(self._links(netns))

    def add_htb(self, netns: str, ifname: str, params: HtbParams) -> None:
        self._mut(f"add_htb {netns} {ifname}")
        tc = self._links(netns)[ifname]["tc"]
        tc.append({"type": "qdisc", "kind": "htb", "handle": "1:", "parent": "root"})
        tc.append(
            {
                "type": "class",
                "kind": "htb",
                "handle": handle_str(HTB_CLASS),
                "parent": "1:",
                "rate_bps": params.rate_bytes * 8,
                "ceil_bps": params.ceil_bytes * 8,
            }
        )

    def add_netem(self, netns: str, ifname: str, params: NetemParams) -> None:
        self._mut(f"add_netem {netns} {ifname}")
        if not self.features.get("netem"):
            raise OSError(2, "No such file or directory")
        self._links(netns)[ifname]["tc"].append(
            {
                "type": "qdisc",
                "kind": "netem",
                "handle": "10:",
                "parent": "1:10",
                "delay_us": params.delay_us,
                "jitter_us": params.jitter_us,
            }
        )

    def get_tc(self, netns: str, ifname: str) -> list[dict[str, Any]]:
        return list(self._links(netns)[ifname].get("tc", []))

    def probe_features(self) -> dict[str, bool]:
        return dict(self.features)

    # helpers for assertions
    def footprint(self) -> dict[str, Any]:
        """Everything that differs from a pristine host."""
        return {
            "netns": sorted(self.netns),
            "root_links": sorted(set(self.root) - {"lo", "eth0"}),
        }


def test_fake_net_veth_dies_with_namespace() -> None:
    net = FakeNet()
    net.create_netns("a")
    net.create_netns("b")
    net.add_veth("a", "x", "b", "y")
    net.add_veth(None, "h", "b", "hp")
    assert "y" in net.list_links("b")
    net.remove_netns("a")
    assert "y" not in net.list_links("b")
    net.remove_netns("b")
    assert net.footprint() == {"netns": [], "root_links": []}


def test_fake_net_fails_at_requested_call() -> None:
    net = FakeNet(fail_at=2)
    net.create_netns("a")
    with pytest.raises(InjectedFailure):
        net.create_netns("b")


def test_fake_cgroup_frozen_task_survives_kill(tmp_path: Path) -> None:
    fs = fake_v1(tmp_path)
    fs.make("freezer", "cosched/n0")
    fs.add_proc("freezer", "cosched/n0", 42)
    fs.set_knob("freezer", "cosched", "freezer.state", "FROZEN")
    fs.kill(42, signal.SIGKILL)
    assert fs.procs("freezer", "cosched/n0") == [42]
    with pytest.raises(OSError):
        fs.rmdir(tmp_path / "freezer/cosched/n0")
