"""The local cluster on fakes: namespaces, links and tc as dicts (FakeNet), agents and
systemd nodes in memory, an Env wired to them and a FakeCgroupFS, and the check that
nothing is left."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from common.cgroups.fake import FakeCgroupFS, fake_v1
from testbed.cluster import cluster as cl
from testbed.cluster import nspawn, rootfs
from testbed.cluster import state as state_mod
from testbed.cluster.profiles import parse_profile
from testbed.cluster.shaping import HtbParams, NetemParams, handle_str
from testbed.cluster.sshd import SshHost
from testbed.cluster.state import AgentRecord

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

    def processes_in(self, names: list[str]) -> list[str]:
        return []  # the fake's namespaces hold no process

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


class FakeAgents:
    def __init__(self, fail_on: str | None = None) -> None:
        self.running: dict[int, AgentRecord] = {}
        self.fail_on = fail_on
        self.next_pid = 1000
        self.awaited: list[list[str]] = []  # the nodes of each await_agents call

    def start(
        self, node: str, netns: str, cmd: list[str], procs: list[str], log: str
    ) -> AgentRecord:
        if node == self.fail_on:
            raise RuntimeError(f"agent for {node} exited with status 1")
        self.next_pid += 1
        rec = AgentRecord(node=node, pid=self.next_pid, start_time=1.0, cmd=cmd, log=log)
        self.running[rec.pid] = rec
        return rec

    def stop(self, rec: AgentRecord) -> bool:
        return self.running.pop(rec.pid, None) is not None

    def await_all(self, recs: list[AgentRecord]) -> None:
        self.awaited.append([r.node for r in recs])

    def stop_all(self, recs: list[AgentRecord]) -> list[AgentRecord]:
        return [r for r in recs if self.stop(r)]


def make_env(
    tmp_path: Path,
    net: FakeNet | None = None,
    fs: FakeCgroupFS | None = None,
    agents: FakeAgents | None = None,
    root: bool = True,
    agent_ok: bool = True,
) -> cl.Env:
    net = net or FakeNet()
    fs = fs or fake_v1(tmp_path / "cg")
    agents = agents or FakeAgents()
    fake = fs
    return cl.Env(
        net=net,
        cg_fs=fs,
        detect_cgroups=lambda prefer, _fs: fake.layout(prefer),
        is_root=lambda: root,
        cores=lambda: [0, 1],
        agent_available=lambda: agent_ok,
        start_agent=agents.start,
        stop_agent=agents.stop,
        spawn_agent=agents.start,
        await_agents=agents.await_all,
        stop_agents=agents.stop_all,
        kill=fs.kill,
        state_dir=str(tmp_path / "state"),
        scan_layout=lambda prefer, _fs: fake.layout(prefer),
        nspawn_run_dirs=(str(tmp_path / "run/systemd"), str(tmp_path / "run/systemd/nspawn")),
        nspawn_in_use=lambda: False,
        v2only_record=lambda: None,
    )


def config(nodes: int = 2, link: str = "fast-ethernet", **kw: Any) -> cl.ClusterConfig:
    return cl.ClusterConfig(nodes=nodes, profile=parse_profile(link), **kw)


def assert_pristine(env: cl.Env) -> None:
    assert isinstance(env.net, FakeNet) and isinstance(env.cg_fs, FakeCgroupFS)
    assert env.net.footprint() == {"netns": [], "root_links": []}
    assert env.cg_fs.footprint() == []
    sdir = env.sdir()
    assert not os.path.exists(state_mod.state_path(sdir))
    assert not os.path.exists(state_mod.key_path(sdir))


class FakeNodes:
    """Stands in for rootfs.ensure and nspawn.start/wait_booted/stop."""

    def __init__(self, fail_wait: str | None = None) -> None:
        self.booted: dict[str, nspawn.ContainerRecord] = {}
        self.stopped: list[str] = []
        self.fail_wait = fail_wait
        self.specs: dict[str, nspawn.NodeSpec] = {}

    def rootfs(self, log: Any = None) -> rootfs.Rootfs:
        return rootfs.Rootfs("/cache/bookworm-x", False, 120.0, 0.01, "http://m")

    def boot(self, spec: nspawn.NodeSpec, tree: str, unified: str, cgroup: str,
             binds: list[str], log: str) -> nspawn.ContainerRecord:  # fmt: skip
        assert os.path.isdir(f"{unified}/{cgroup}") and tree == "/cache/bookworm-x"
        self.specs[spec.name] = spec
        rec = nspawn.ContainerRecord(spec.name, 5000 + len(self.booted), 1.0, cgroup, log)
        self.booted[spec.name] = rec
        return rec

    def wait(self, unified: str, rec: nspawn.ContainerRecord, started: float,
             spec: nspawn.NodeSpec) -> None:  # fmt: skip
        if rec.node == self.fail_wait:
            raise RuntimeError(f"{rec.node}: systemd says 'degraded'")
        rec.state, rec.boot_s, rec.leader = "running", 1.5, 7000

    def stop(self, recs: list[nspawn.ContainerRecord]) -> list[str]:
        self.stopped += [r.node for r in recs]
        return []


def v2_host(tmp_path: Path) -> FakeCgroupFS:
    # a host made v2-only: cgroup2 offers what the v1 hierarchies gave back
    return FakeCgroupFS(
        tmp_path / "cg", kind="v2", v2_controllers="cpuset cpu io hugetlb pids"
    ).build()


def systemd_env(tmp_path: Path, fs: FakeCgroupFS, nodes: FakeNodes) -> cl.Env:
    env = make_env(tmp_path, fs=fs)
    env.nspawn_available = lambda: None
    env.rootfs = nodes.rootfs
    env.boot_node = nodes.boot
    env.wait_node = nodes.wait
    env.stop_nodes = nodes.stop
    return env


def sd_config(nodes: int = 2, **kw: Any) -> cl.ClusterConfig:
    return config(nodes, systemd=True, ssh=True, start_agents=False, **kw)


HOSTS = [
    SshHost("head", "10.212.0.254", None),
    SshHost("n0", "10.212.0.1", "cosched-n0", "10.211.0.1"),
    SshHost("n1", "10.212.0.2", "cosched-n1", "10.211.0.2"),
]
