"""Names and addresses of everything the local cluster creates.

Ownership-based cleanup depends on every kernel object carrying a recognisable
prefix, so all naming lives here: ``clean`` scans for exactly these prefixes.
Linux interface names are limited to 15 characters (IFNAMSIZ - 1), hence the
short ``cs?-`` link prefixes next to the long ``cosched-`` namespace prefix.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

NETNS_PREFIX = "cosched-"
DATA_NETNS = "cosched-data"
CTL_NETNS = "cosched-ctl"
# A short-lived namespace used to probe kernel features (veth, bridge, htb, netem).
PROBE_NETNS = "cosched-probe"

# Link names. Bridge-side ports are "csd-<node>" (data) and "csc-<node>" (control);
# the host end of the controller's veth is "csc-host" in the root namespace.
LINK_PREFIXES = ("csd-", "csc-", "csp-")
BRIDGE = "csbr0"
NODE_DATA_IF = "csd0"
NODE_CTL_IF = "csc0"
HOST_CTL_IF = "csc-host"
HOST_CTL_PEER = "csc-hostp"

CGROUP_ROOT = "cosched"
# `cluster up --systemd`: the head (controller, monitoring) is a node of its own.
HEAD = "head"
HEAD_NETNS = NETNS_PREFIX + HEAD

MAX_NODES = 200
IFNAMSIZ = 15

DEFAULT_DATA_SUBNET = "10.211.0.0/24"
DEFAULT_CTL_SUBNET = "10.212.0.0/24"
# Host (controller) address inside the control subnet: the .254 of a /24.
DEFAULT_HOST_OFFSET = 254


def node_name(index: int) -> str:
    """Name of node ``index`` (``n0``, ``n1``, ...)."""
    if index < 0:
        raise ValueError("node index must be >= 0")
    return f"n{index}"


def node_names(count: int) -> list[str]:
    return [node_name(i) for i in range(count)]


def node_netns(node: str) -> str:
    """Network namespace of a node, e.g. ``cosched-n0``."""
    return NETNS_PREFIX + node


def data_port(node: str) -> str:
    """Bridge-side end of a node's data veth (lives in ``cosched-data``)."""
    return _ifname("csd-" + node)


def ctl_port(node: str) -> str:
    """Bridge-side end of a node's control veth (lives in ``cosched-ctl``)."""
    return _ifname("csc-" + node)


def node_cgroup(node: str) -> str:
    """Per-node parent cgroup, relative to a hierarchy root: ``cosched/n0``."""
    return f"{CGROUP_ROOT}/{node}"


_NODE_RE = re.compile(r"^(n\d+|head)$")


def is_node_cgroup(name: str) -> bool:
    """A child of ``cosched/`` that is a cluster node's parent cgroup (``n0``, ``n17``,
    and ``head``, the head node of ``cluster up --systemd``).

    Other children of ``cosched/`` (an agent run by hand, the agent's own
    integration tests) are not the cluster's and are left alone by ``clean``.
    """
    return bool(_NODE_RE.match(name))


def is_our_netns(name: str) -> bool:
    return name.startswith(NETNS_PREFIX)


def is_our_link(name: str) -> bool:
    return name.startswith(LINK_PREFIXES)


def _ifname(name: str) -> str:
    if len(name) > IFNAMSIZ:
        raise ValueError(f"interface name {name!r} exceeds {IFNAMSIZ} characters")
    return name


@dataclass(frozen=True)
class AddressPlan:
    """Data and control subnets and the host's control address.

    Node ``i`` gets host number ``i + 1`` in both subnets, so ``n0`` is
    ``10.211.0.1`` on data and ``10.212.0.1`` on control by default.
    """

    data_subnet: ipaddress.IPv4Network
    ctl_subnet: ipaddress.IPv4Network
    host_ctl_ip: ipaddress.IPv4Address

    @classmethod
    def build(
        cls,
        data_subnet: str = DEFAULT_DATA_SUBNET,
        ctl_subnet: str = DEFAULT_CTL_SUBNET,
        host_ip: str | None = None,
    ) -> AddressPlan:
        try:
            data = ipaddress.IPv4Network(data_subnet, strict=True)
            ctl = ipaddress.IPv4Network(ctl_subnet, strict=True)
        except ValueError as err:
            raise ValueError(f"bad subnet: {err}") from err
        if data.overlaps(ctl):
            raise ValueError(f"data subnet {data} overlaps control subnet {ctl}")
        if host_ip is None:
            if ctl.num_addresses < DEFAULT_HOST_OFFSET + 2:
                # Smaller than a /24: use the last usable address.
                host = ctl.broadcast_address - 1
            else:
                host = ctl.network_address + DEFAULT_HOST_OFFSET
        else:
            host = ipaddress.IPv4Address(host_ip)
        if host not in ctl or host in (ctl.network_address, ctl.broadcast_address):
            raise ValueError(f"host address {host} is not a usable address of {ctl}")
        return cls(data, ctl, host)

    def capacity(self) -> int:
        """How many nodes fit (host numbers 1.. below the host address and broadcast)."""
        usable = min(self.data_subnet.num_addresses, self.ctl_subnet.num_addresses) - 2
        # The host address takes one of the control slots.
        return max(0, usable - 1)

    def data_ip(self, index: int) -> ipaddress.IPv4Address:
        return self._nth(self.data_subnet, index)

    def ctl_ip(self, index: int) -> ipaddress.IPv4Address:
        addr = self._nth(self.ctl_subnet, index)
        if addr == self.host_ctl_ip:
            raise ValueError(f"node {index} would take the host address {addr}")
        return addr

    @staticmethod
    def _nth(net: ipaddress.IPv4Network, index: int) -> ipaddress.IPv4Address:
        addr = net.network_address + index + 1
        if addr >= net.broadcast_address:
            raise ValueError(f"node {index} does not fit into {net}")
        return addr

    def head_ctl_ip(self, nodes: int) -> ipaddress.IPv4Address:
        """The head node's control address (``cluster up --systemd``): the one below the
        host's, which must not be a node's."""
        addr = self.host_ctl_ip - 1
        if (
            addr not in self.ctl_subnet
            or addr == self.ctl_subnet.network_address
            or (nodes and addr <= self.ctl_ip(nodes - 1))
        ):
            raise ValueError(
                f"no control address left for the head below the host's {self.host_ctl_ip} "
                f"with {nodes} nodes in {self.ctl_subnet}"
            )
        return addr

    def validate(self, nodes: int) -> None:
        for i in range(nodes):
            self.data_ip(i)
            self.ctl_ip(i)

    def to_dict(self) -> dict[str, str]:
        return {
            "data_subnet": str(self.data_subnet),
            "ctl_subnet": str(self.ctl_subnet),
            "host_ctl_ip": str(self.host_ctl_ip),
        }

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> AddressPlan:
        return cls.build(d["data_subnet"], d["ctl_subnet"], d["host_ctl_ip"])
