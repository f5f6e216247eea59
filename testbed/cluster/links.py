"""Links (veths, bridges, addresses) and tc, through pyroute2 only.

:class:`NetBackend` is the whole kernel-network surface the cluster uses; the
real implementation is :class:`Pyroute2Backend`, unit tests use a fake. A
``netns`` of ``None`` means the root (host) namespace.

Every call opens a short-lived ``IPRoute`` (about 10 ms): a netlink socket held
open inside a namespace would keep that namespace alive after ``remove``, and
its links with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from . import netns as ns_ops
from .names import PROBE_NETNS
from .shaping import (
    HTB_CLASS_HANDLE,
    HTB_DEFAULT_CLASS,
    HTB_ROOT_HANDLE,
    NETEM_HANDLE,
    HtbParams,
    NetemParams,
    handle_str,
)


class NetBackend(Protocol):
    def list_netns(self) -> list[str]: ...
    def create_netns(self, name: str) -> None: ...
    def remove_netns(self, name: str) -> bool: ...
    def processes_in(self, names: list[str]) -> list[str]: ...
    def add_bridge(self, netns: str, name: str) -> None: ...
    def add_veth(
        self, netns: str | None, ifname: str, peer_netns: str, peer_ifname: str
    ) -> None: ...
    def set_master(self, netns: str, ifname: str, bridge: str) -> None: ...
    def add_address(self, netns: str | None, ifname: str, address: str, prefixlen: int) -> None: ...
    def set_up(self, netns: str | None, ifname: str) -> None: ...
    def set_down(self, netns: str | None, ifname: str) -> None: ...
    def delete_link(self, netns: str | None, ifname: str) -> bool: ...
    def list_links(self, netns: str | None) -> list[str]: ...
    def add_htb(self, netns: str, ifname: str, params: HtbParams) -> None: ...
    def add_netem(self, netns: str, ifname: str, params: NetemParams) -> None: ...
    def get_tc(self, netns: str, ifname: str) -> list[dict[str, Any]]: ...
    def probe_features(self) -> dict[str, bool]: ...


class Pyroute2Backend:
    """The real thing: pyroute2 IPRoute per namespace, pyroute2.netns for namespaces."""

    @contextlib.contextmanager
    def _ipr(self, netns: str | None) -> Iterator[IPRoute]:
        if netns is None:
            ipr = IPRoute()
        else:
            if not ns_ops.netns_exists(netns):
                # IPRoute(netns=...) would silently create it (O_CREAT); refuse.
                raise FileNotFoundError(f"network namespace {netns} does not exist")
            ipr = IPRoute(netns=netns, flags=0)
        try:
            yield ipr
        finally:
            ipr.close()

    @staticmethod
    def _index(ipr: IPRoute, ifname: str) -> int:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            raise LookupError(f"no interface {ifname}")
        return int(found[0])

    def list_netns(self) -> list[str]:
        return ns_ops.list_netns()

    def create_netns(self, name: str) -> None:
        ns_ops.create_netns(name)
        # Loopback up: agents and tests may use 127.0.0.1 inside a node.
        self.set_up(name, "lo")

    def remove_netns(self, name: str) -> bool:
        return ns_ops.remove_netns(name)

    def processes_in(self, names: list[str]) -> list[str]:
        """Processes still inside these namespaces, ``"pid (comm) in <netns>"``."""
        return ns_ops.processes_in(names)

    def add_bridge(self, netns: str, name: str) -> None:
        with self._ipr(netns) as ipr:
            ipr.link("add", ifname=name, kind="bridge")
            ipr.link("set", index=self._index(ipr, name), state="up")

    def add_veth(self, netns: str | None, ifname: str, peer_netns: str, peer_ifname: str) -> None:
        with self._ipr(netns) as ipr:
            ipr.link(
                "add",
                ifname=ifname,
                kind="veth",
                peer={"ifname": peer_ifname, "net_ns_fd": peer_netns},
            )

    def set_master(self, netns: str, ifname: str, bridge: str) -> None:
        with self._ipr(netns) as ipr:
            ipr.link(
                "set",
                index=self._index(ipr, ifname),
                master=self._index(ipr, bridge),
                state="up",
            )

    def add_address(self, netns: str | None, ifname: str, address: str, prefixlen: int) -> None:
        with self._ipr(netns) as ipr:
            ipr.addr("add", index=self._index(ipr, ifname), address=address, prefixlen=prefixlen)

    def set_up(self, netns: str | None, ifname: str) -> None:
        with self._ipr(netns) as ipr:
            ipr.link("set", index=self._index(ipr, ifname), state="up")

    def set_down(self, netns: str | None, ifname: str) -> None:
        with self._ipr(netns) as ipr:
            ipr.link("set", index=self._index(ipr, ifname), state="down")

    def delete_link(self, netns: str | None, ifname: str) -> bool:
        try:
            with self._ipr(netns) as ipr:
                found = ipr.link_lookup(ifname=ifname)
                if not found:
                    return False
                ipr.link("del", index=found[0])
                return True
        except FileNotFoundError:
            return False

    def list_links(self, netns: str | None) -> list[str]:
        with self._ipr(netns) as ipr:
            return [str(link.get_attr("IFLA_IFNAME")) for link in ipr.get_links()]

    def add_htb(self, netns: str, ifname: str, params: HtbParams) -> None:
        with self._ipr(netns) as ipr:
            idx = self._index(ipr, ifname)
            ipr.tc("add", "htb", index=idx, handle=HTB_ROOT_HANDLE, default=HTB_DEFAULT_CLASS)
            ipr.tc(
                "add-class",
                "htb",
                index=idx,
                handle=HTB_CLASS_HANDLE,
                parent=HTB_ROOT_HANDLE,
                rate=params.rate_bytes,
                ceil=params.ceil_bytes,
                burst=params.burst_bytes,
                cburst=params.cburst_bytes,
            )

    def add_netem(self, netns: str, ifname: str, params: NetemParams) -> None:
        with self._ipr(netns) as ipr:
            ipr.tc(
                "add",
                "netem",
                index=self._index(ipr, ifname),
                parent=HTB_CLASS_HANDLE,
                handle=NETEM_HANDLE,
                delay=params.delay_us,
                jitter=params.jitter_us,
                loss=params.loss_pct,
            )

    def get_tc(self, netns: str, ifname: str) -> list[dict[str, Any]]:
        with self._ipr(netns) as ipr:
            idx = self._index(ipr, ifname)
            out = [_describe("qdisc", m) for m in ipr.get_qdiscs(index=idx)]
            out += [_describe("class", m) for m in ipr.get_classes(index=idx)]
        return out

    def probe_features(self) -> dict[str, bool]:
        """Try each needed kernel feature in a throwaway namespace.

        Returns {"netns", "veth", "bridge", "htb", "netem"} -> available. The
        probe namespace is removed before returning, whatever happens.
        """
        feats = dict.fromkeys(("netns", "veth", "bridge", "htb", "netem"), False)
        if ns_ops.netns_exists(PROBE_NETNS):
            ns_ops.remove_netns(PROBE_NETNS)
        try:
            ns_ops.create_netns(PROBE_NETNS)
        except OSError:
            return feats
        feats["netns"] = True
        try:
            with self._ipr(PROBE_NETNS) as ipr:
                feats["bridge"] = _try(lambda: ipr.link("add", ifname="pbr", kind="bridge"))
                feats["veth"] = _try(
                    lambda: ipr.link("add", ifname="pa", kind="veth", peer={"ifname": "pb"})
                )
                if feats["veth"]:
                    idx = self._index(ipr, "pa")
                    feats["htb"] = _try(
                        lambda: ipr.tc("add", "htb", index=idx, handle=HTB_ROOT_HANDLE, default=0)
                    )
                    idx_b = self._index(ipr, "pb")
                    feats["netem"] = _try(
                        lambda: ipr.tc("add", "netem", index=idx_b, handle=NETEM_HANDLE, delay=10)
                    )
        finally:
            ns_ops.remove_netns(PROBE_NETNS)
        return feats


def _try(fn: Any) -> bool:
    try:
        fn()
        return True
    except (NetlinkError, OSError):
        return False


def _describe(kind_of: str, msg: Any) -> dict[str, Any]:
    """Flatten a tc netlink message into the few fields status shows."""
    d: dict[str, Any] = {
        "type": kind_of,
        "kind": msg.get_attr("TCA_KIND"),
        "handle": handle_str(int(msg["handle"])),
        "parent": "root" if msg["parent"] == 0xFFFFFFFF else handle_str(int(msg["parent"])),
    }
    opts = msg.get_attr("TCA_OPTIONS")
    if opts is not None:
        parms = opts.get_attr("TCA_HTB_PARMS")
        if parms is not None:
            d["rate_bps"] = int(parms["rate"]) * 8
            d["ceil_bps"] = int(parms["ceil"]) * 8
        if d["kind"] == "netem":
            d["delay_us"] = opts.get("delay")
            d["jitter_us"] = opts.get("jitter")
    return d
