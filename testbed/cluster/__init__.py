"""The local cluster: network namespaces, shaped links, per-node CPU capacity.

Modules, one concept each (after Mininet's layout): ``names`` (prefixes and
addresses), ``profiles`` (link figures and parsing), ``shaping`` (HTB/netem),
``netns`` and ``links`` (pyroute2), ``cgroups`` (the only file-system access to
/sys/fs/cgroup), ``cpu`` (per-node capacity), ``state`` (the ledger),
``agents`` (node daemons), ``cluster`` (up/down/status), ``clean`` and ``cli``.
"""

from .errors import ClusterError

__all__ = ["ClusterError"]
