"""The local cluster: plan, bring up (with rollback), status, tear down.

Topology (Mininet-like, but every kernel object is prefixed and recorded)::

    cosched-n0 ── csd0 ═══ csd-n0 ─┐                        (data: shaped)
    cosched-n1 ── csd0 ═══ csd-n1 ─┴ csbr0 in cosched-data
    cosched-n0 ── csc0 ═══ csc-n0 ─┐                        (control: unshaped)
    cosched-n1 ── csc0 ═══ csc-n1 ─┼ csbr0 in cosched-ctl
    host ──── csc-host ═══ csc-hostp┘

Only ``csc-host`` lives in the root namespace; everything else disappears with
its namespace. ``up`` writes each object into the ledger *before* creating it,
so on any failure the same :func:`teardown` that ``down`` uses removes exactly
what exists (deletes are idempotent: a recorded-but-never-made object is a no-op).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common.cgroups import (
    CgroupError,
    CgroupFS,
    Cgroups,
    Layout,
    base_join,
    detect_layout,
    prepare_base,
    resolve_base,
    v2only,
)
from common.cgroups.layout import systemd_running
from common.cgroups.v2only import SwitchRecord

from . import agents as agent_mod
from . import cpu as cpu_mod
from . import nspawn as nspawn_mod
from . import rootfs as rootfs_mod
from . import sshd as sshd_mod
from . import state as state_mod
from .errors import ClusterError
from .links import NetBackend, Pyroute2Backend
from .names import (
    BRIDGE,
    CGROUP_ROOT,
    CTL_NETNS,
    DATA_NETNS,
    HEAD,
    HEAD_NETNS,
    HOST_CTL_IF,
    HOST_CTL_PEER,
    MAX_NODES,
    NODE_CTL_IF,
    NODE_DATA_IF,
    AddressPlan,
    ctl_port,
    data_port,
    is_our_netns,
    node_cgroup,
    node_name,
    node_netns,
)
from .profiles import LinkProfile
from .shaping import (
    HtbParams,
    NetemParams,
    check_applied,
    delay_mechanism,
    htb_params,
    netem_params,
    params_dict,
    shape_interface,
    summarize_tc,
)
from .state import AgentRecord, ClusterState

REQUIRED_FEATURES = ("netns", "veth", "bridge", "htb")
MIN_DECISION_MS = 0.1  # as agent/local.py's MIN_TICK_MS
AGENT_LEAF = "agent"


def _detect(prefer: str, fs: CgroupFS) -> Layout:
    return resolve_base(detect_layout(prefer, fs=fs), fs)


def _scan_layout(prefer: str, fs: CgroupFS) -> Layout:
    return detect_layout(prefer, fs=fs)


def _nspawn_in_use() -> bool:
    """Whether systemd-nspawn's run directories are someone else's: systemd runs the
    host, or a systemd-nspawn process does."""
    return systemd_running() or bool(nspawn_mod.running())


@dataclass(frozen=True)
class ClusterConfig:
    nodes: int
    profile: LinkProfile
    cpus_per_node: float | None = None
    cpu_mechanism: str = "auto"  # auto | cpuset | shared | cfs (testbed/cluster/cpu.py)
    cfs_period_us: int = cpu_mod.CFS_PERIOD_US
    cgroup: str = "auto"  # auto | v1 | v2: which cgroup hierarchies (common/cgroups/layout.py)
    addresses: AddressPlan = field(default_factory=AddressPlan.build)
    start_agents: bool = True
    python: str = sys.executable
    switch: str = "freezer"  # the agents' switch mechanism: freezer | signals (agent/signals.py)
    ssh: bool = False  # an sshd per node and an Ansible inventory (testbed/cluster/sshd.py)
    # Every node (and a head node) boots Debian with systemd as PID 1 (testbed/cluster/
    # nspawn.py); implies ssh and no agents from here: the playbook deploys them.
    systemd: bool = False
    speeds: tuple[float, ...] | None = None  # per node, of cpus_per_node (testbed/cluster/cpu.py)
    # how often the agents' local CDC schemes decide unless a controller says (None: 10 ms)
    decision_interval_ms: float | None = None


@dataclass(frozen=True)
class NodePlan:
    index: int
    name: str
    netns: str
    data_ip: str
    ctl_ip: str
    data_port: str
    ctl_port: str
    cgroup: str  # the node's group, below the layout's base
    agent_cgroup: str  # the agent's leaf inside it (cgroup v2: no processes in inner groups)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ClusterPlan:
    nodes: tuple[NodePlan, ...]
    addresses: AddressPlan
    profile: LinkProfile
    htb: HtbParams
    netem: NetemParams | None
    cpu: cpu_mod.CpuPlan
    head: NodePlan | None = None  # --systemd: the head node (control network only)


def build_plan(config: ClusterConfig, cores: list[int], cgroup_base: str = "") -> ClusterPlan:
    """Everything ``up`` will create, computed without touching the kernel.

    Raises ValueError for impossible requests, before anything exists.
    """
    if not 1 <= config.nodes <= MAX_NODES:
        raise ValueError(f"--nodes must be between 1 and {MAX_NODES} (got {config.nodes})")
    addrs = config.addresses
    if config.nodes > addrs.capacity():
        raise ValueError(f"{config.nodes} nodes do not fit the subnets {addrs.to_dict()}")
    addrs.validate(config.nodes)
    cpu = cpu_mod.plan_cpu(
        config.nodes,
        config.cpus_per_node,
        cores,
        config.cpu_mechanism,
        config.cfs_period_us,
        config.speeds,
    )
    d = config.decision_interval_ms
    if d is not None and not MIN_DECISION_MS <= d <= 1000.0:
        raise ValueError(
            f"--decision-interval-ms {d:g} is outside {MIN_DECISION_MS:g}..1000 ms: the agents' "
            "tick, e.g. 1, 2, 5 or 10"
        )
    nodes = []
    for i in range(config.nodes):
        name = node_name(i)
        nodes.append(
            NodePlan(
                index=i,
                name=name,
                netns=node_netns(name),
                data_ip=str(addrs.data_ip(i)),
                ctl_ip=str(addrs.ctl_ip(i)),
                data_port=data_port(name),
                ctl_port=ctl_port(name),
                cgroup=base_join(cgroup_base, node_cgroup(name)),
                agent_cgroup=base_join(cgroup_base, node_cgroup(name), AGENT_LEAF),
            )
        )
    head = None
    if config.systemd:
        head = NodePlan(
            index=-1,
            name=HEAD,
            netns=HEAD_NETNS,
            data_ip="",
            ctl_ip=str(addrs.head_ctl_ip(config.nodes)),
            data_port="",
            ctl_port=ctl_port(HEAD),
            cgroup=base_join(cgroup_base, node_cgroup(HEAD)),
            agent_cgroup="",
        )
    return ClusterPlan(
        nodes=tuple(nodes),
        addresses=addrs,
        profile=config.profile,
        htb=htb_params(config.profile.rate_bps),
        netem=netem_params(config.profile),
        cpu=cpu,
        head=head,
    )


@dataclass
class Env:
    """Everything with side effects, injectable so unit tests run without root."""

    net: NetBackend = field(default_factory=Pyroute2Backend)
    cg_fs: CgroupFS = field(default_factory=CgroupFS)
    # prefer ("auto" | "v1" | "v2") -> the host's layout, base included
    detect_cgroups: Callable[[str, CgroupFS], Layout] = _detect
    is_root: Callable[[], bool] = lambda: os.geteuid() == 0
    cores: Callable[[], list[int]] = lambda: sorted(os.sched_getaffinity(0))
    agent_available: Callable[[], bool] = agent_mod.agent_available
    agent_command: Callable[..., list[str]] = agent_mod.agent_command
    start_agent: Callable[..., AgentRecord] = agent_mod.start_agent
    stop_agent: Callable[[AgentRecord], bool] = agent_mod.stop_agent
    # a cluster's agents start side by side (one grace for all) and stop side by side
    spawn_agent: Callable[..., AgentRecord] = agent_mod.spawn_agent
    await_agents: Callable[[list[AgentRecord]], None] = agent_mod.await_agents
    stop_agents: Callable[[list[AgentRecord]], list[AgentRecord]] = agent_mod.stop_agents
    # Used only on PIDs found inside our own cgroups (see cgroups.remove_tree).
    kill: Callable[[int, int], None] = os.kill
    sshd_available: Callable[[], str | None] = sshd_mod.sshd_available
    ssh_up: Callable[..., None] = sshd_mod.up
    ssh_down: Callable[[sshd_mod.SshState], list[str]] = sshd_mod.down
    # --systemd: the cached root file system and the containers (testbed/cluster/nspawn.py)
    nspawn_available: Callable[[], str | None] = nspawn_mod.available
    rootfs: Callable[..., rootfs_mod.Rootfs] = rootfs_mod.ensure
    boot_node: Callable[..., nspawn_mod.ContainerRecord] = nspawn_mod.start
    wait_node: Callable[..., None] = nspawn_mod.wait_booted
    stop_nodes: Callable[[list[nspawn_mod.ContainerRecord]], list[str]] = nspawn_mod.stop
    log: Callable[[str], None] = lambda line: None  # progress lines of a long `up`
    state_dir: str | None = None
    # What `clean` reads of the host besides cgroups and links (a unit test's fakes):
    # the layout from the hierarchy roots (no base), systemd-nspawn's run directories
    # and whether anything else uses them, the record of a v2-only switch.
    scan_layout: Callable[[str, CgroupFS], Layout] = _scan_layout
    nspawn_run_dirs: tuple[str, ...] = nspawn_mod.RUN_DIRS
    nspawn_in_use: Callable[[], bool] = _nspawn_in_use
    v2only_record: Callable[[], SwitchRecord | None] = v2only.load_record

    def sdir(self) -> str:
        return self.state_dir or state_mod.state_dir()

    def cgroups(self, prefer: str = "auto", layout: Layout | None = None) -> Cgroups:
        """The cgroup layer, on the recorded ``layout`` or on what the host has now."""
        return Cgroups(layout or self.detect_cgroups(prefer, self.cg_fs), fs=self.cg_fs)


# --------------------------------------------------------------------------- up


def preflight(config: ClusterConfig, env: Env) -> tuple[ClusterPlan, dict[str, bool], Cgroups]:
    """All checks that can refuse ``up`` before anything is created."""
    if not env.is_root():
        raise ClusterError("cosched cluster up needs root (network namespaces, tc, cgroups)")
    try:
        cg = env.cgroups(config.cgroup)
    except CgroupError as err:
        raise ClusterError(str(err)) from err
    try:
        plan = build_plan(config, env.cores(), cg.layout.base)
    except ValueError as err:
        raise ClusterError(str(err)) from err
    existing = describe_existing(env)
    if existing:
        raise ClusterError(
            "a cosched cluster is already up (found: "
            + ", ".join(existing)
            + "); run `cosched cluster down`, or `cosched clean` after a crash"
        )
    for resource in cg.missing(cpu_mod.required_for(plan.cpu)):
        raise ClusterError(str(cg.explain_missing(resource)))
    try:
        cg.check_enable(_root_cgroup(cg), cpu_mod.controllers_for(plan.cpu))
    except CgroupError as err:
        raise ClusterError(str(err)) from err
    if config.start_agents and not env.agent_available():
        raise ClusterError(
            "the agent package cannot be started (`python -m agent` missing); "
            "use --no-agents to bring up the network and cgroups only"
        )
    if config.ssh and not config.systemd and (problem := env.sshd_available()):
        raise ClusterError(f"--ssh needs sshd: {problem}")
    if config.systemd:
        _preflight_systemd(config, env, cg)
    features = env.net.probe_features()
    missing = [f for f in REQUIRED_FEATURES if not features.get(f)]
    if missing:
        raise ClusterError(f"kernel lacks needed network features: {', '.join(missing)}")
    return plan, features, cg


def _preflight_systemd(config: ClusterConfig, env: Env, cg: Cgroups) -> None:
    """What systemd nodes need beyond any cluster: nspawn, and cgroup2 with controllers."""
    if config.start_agents:
        raise ClusterError(
            "--systemd nodes get their agents from the playbook, not from `cluster up`",
            fix="add --no-agents, then `ansible-playbook -i $COSCHED_STATE_DIR/inventory.yml "
            "site.yml` (docs/deploy.md)",
        )
    if (problem := env.nspawn_available()) is not None:
        raise ClusterError(f"--systemd needs systemd-nspawn: {problem}")
    lay = cg.layout
    if lay.mode != "v2" or "cpu" not in lay.v2_controllers:
        bound = ", ".join(f"{c} at {m}" for c, m in sorted(lay.bound_v1.items())) or "none"
        why = (
            f"v1 hierarchies hold {bound}"
            if lay.bound_v1
            else f"cgroup2 at {lay.unified} offers no cpu controller"
            if lay.unified
            else "no cgroup2 is mounted"
        )
        raise ClusterError(
            "--systemd nodes need a cgroup-v2-only host whose cgroup2 offers cpu "
            f"(their systemd delegates it to Delegate=yes units), but {why}",
            fix="make this host v2-only first with `sudo cosched host cgroups v2-only` "
            "(`cosched host cgroups restore` gives v1 back), or boot with "
            "systemd.unified_cgroup_hierarchy=1",
        )


def _pass_on(cg: Cgroups, path: str, controllers: tuple[str, ...]) -> None:
    """On cgroup2, enable ``controllers`` (those offered) in every group from the layout's
    base down to ``path`` itself, so that the groups below ``path`` are offered them (a
    container's systemd delegates what it is offered). Never above the base: systemd's."""
    unified = cg.layout.unified
    if unified is None:
        return
    base = cg.layout.base
    rel = path[len(base) :].strip("/") if base and path.startswith(base) else path
    d = f"{unified}/{base}" if base else unified
    for comp in ["", *rel.split("/")] if rel else [""]:
        d = f"{d}/{comp}" if comp else d
        enabled = cg.fs.read(f"{d}/cgroup.subtree_control").split()
        offered = cg.fs.read(f"{d}/cgroup.controllers").split()
        want = [c for c in controllers if c in offered and c not in enabled]
        if want:
            cg.fs.write(f"{d}/cgroup.subtree_control", " ".join(f"+{c}" for c in want))


def systemd_inventory_vars(python: str, key_path: str) -> dict[str, Any]:
    """Inventory variables that fit ansible/site.yml to the systemd nodes (docs/deploy.md):
    cosched from the checkout bound into every node, no packages or sysctls (no mirror is
    reachable from the nodes; /proc/sys is read-only in a container), the tree's own
    Prometheus on the head, no Grafana (Debian has no package), the cluster key the
    playbook generates kept with the cluster's SSH files (removed with them)."""
    return {
        "cosched_key_generate_path": key_path,
        "service_manager": "systemd",
        "cosched_local_cluster": False,
        "cosched_install_from": "none",
        "cosched_venv_python": python,
        "cosched_venv": os.path.dirname(os.path.dirname(python)),
        "cosched_manage_packages": False,
        "cosched_manage_sysctls": False,
        "cosched_prometheus_manage_package": False,
        "cosched_grafana_enabled": False,
    }


def _root_cgroup(cg: Cgroups) -> str:
    """``cosched`` below the layout's base (the root, or a systemd-delegated unit)."""
    return base_join(cg.layout.base, CGROUP_ROOT)


def describe_existing(env: Env) -> list[str]:
    """Traces of a cluster that is (or was) up: state file, namespaces, cgroups."""
    from .clean import node_groups  # clean imports this module

    found = []
    if os.path.exists(state_mod.state_path(env.sdir())):
        found.append(state_mod.state_path(env.sdir()))
    found += [n for n in env.net.list_netns() if is_our_netns(n)]
    found += [f"cgroup {g}" for g in node_groups(env)]
    return found


def up(config: ClusterConfig, env: Env | None = None) -> ClusterState:
    """Create the cluster. On any failure, remove what was made and raise ClusterError."""
    env = env or Env()
    plan, features, cg = preflight(config, env)
    tree = None
    if config.systemd:
        # before anything exists: a first build takes minutes and may fail on its own
        tree = env.rootfs(log=env.log)
        env.log(tree.describe())
    st = ClusterState(
        nodes=[n.to_dict() for n in plan.nodes],
        addresses=plan.addresses.to_dict(),
        profile=plan.profile.to_dict(),
        htb=params_dict(plan.htb) or {},
        netem=params_dict(plan.netem) if features.get("netem") else None,
        delay_mechanism=delay_mechanism(features.get("netem", False)),
        cpu=plan.cpu.to_dict(),
        features=features,
        cgroup_layout=cg.layout.to_dict(),
        decision_interval_ms=config.decision_interval_ms,
    )
    if tree is not None:
        st.systemd = {
            "rootfs": tree.path,
            "rootfs_built_now": tree.built_now,
            "rootfs_build_s": round(tree.build_s, 1),
            "rootfs_lookup_s": round(tree.lookup_s, 2),
            "head": plan.head.to_dict() if plan.head else None,
            "containers": [],
        }
    try:
        _create(plan, config, st, env, cg)
    except BaseException as err:
        problems = teardown(st, env)
        extra = f" (cleanup problems: {'; '.join(problems)})" if problems else ""
        if isinstance(err, KeyboardInterrupt | SystemExit):
            raise
        raise ClusterError(f"cluster up failed: {err}; everything was rolled back{extra}") from err
    st.status = "up"
    state_mod.save(st, env.sdir())
    return st


def _create(
    plan: ClusterPlan, config: ClusterConfig, st: ClusterState, env: Env, cg: Cgroups
) -> None:
    net, sdir = env.net, env.sdir()

    def record_netns(name: str) -> None:
        st.netns.append(name)
        state_mod.save(st, sdir)
        net.create_netns(name)

    prefix_data = plan.addresses.data_subnet.prefixlen
    prefix_ctl = plan.addresses.ctl_subnet.prefixlen

    for bridge_ns in (DATA_NETNS, CTL_NETNS):
        record_netns(bridge_ns)
        net.add_bridge(bridge_ns, BRIDGE)

    for n in plan.nodes:
        record_netns(n.netns)
        for ifname, bridge_ns, port, ip, plen in (
            (NODE_DATA_IF, DATA_NETNS, n.data_port, n.data_ip, prefix_data),
            (NODE_CTL_IF, CTL_NETNS, n.ctl_port, n.ctl_ip, prefix_ctl),
        ):
            net.add_veth(n.netns, ifname, bridge_ns, port)
            net.set_master(bridge_ns, port, BRIDGE)
            net.add_address(n.netns, ifname, ip, plen)
            net.set_up(n.netns, ifname)

    if plan.head is not None:
        # the head node (--systemd): on the control network only, like a real head
        h = plan.head
        record_netns(h.netns)
        net.add_veth(h.netns, NODE_CTL_IF, CTL_NETNS, h.ctl_port)
        net.set_master(CTL_NETNS, h.ctl_port, BRIDGE)
        net.add_address(h.netns, NODE_CTL_IF, h.ctl_ip, prefix_ctl)
        net.set_up(h.netns, NODE_CTL_IF)

    # The controller's door into the control network.
    st.root_links.append(HOST_CTL_IF)
    state_mod.save(st, sdir)
    net.add_veth(None, HOST_CTL_IF, CTL_NETNS, HOST_CTL_PEER)
    net.set_master(CTL_NETNS, HOST_CTL_PEER, BRIDGE)
    net.add_address(None, HOST_CTL_IF, str(plan.addresses.host_ctl_ip), prefix_ctl)
    net.set_up(None, HOST_CTL_IF)

    netem = plan.netem if st.delay_mechanism == "netem" else None
    for n in plan.nodes:
        # Egress of the node end shapes traffic leaving the node; egress of the
        # bridge port shapes traffic going into it (no IFB needed).
        shape_interface(net, n.netns, NODE_DATA_IF, plan.htb, netem)
        shape_interface(net, DATA_NETNS, n.data_port, plan.htb, None)
        for ns, ifname in ((n.netns, NODE_DATA_IF), (DATA_NETNS, n.data_port)):
            problems = check_applied(net.get_tc(ns, ifname), plan.htb)
            if problems:
                raise RuntimeError(f"shaping on {ns}/{ifname} not as asked: {problems}")

    # cgroups: <base>/cosched, one group per node with the agent in a leaf of its
    # own (cgroup v2 enables controllers only above leaves), and the node's
    # capacity written on the node group.
    enable = cpu_mod.controllers_for(plan.cpu)
    root = _root_cgroup(cg)
    prepare_base(cg)
    st.cgroups.append(root)
    state_mod.save(st, sdir)
    cg.ensure_parent(root, enable)
    if config.systemd:
        # every controller cgroup2 offers, down to the node groups: systemd-nspawn
        # passes them on to its container, whose systemd delegates them
        _pass_on(cg, root, nspawn_mod.NODE_CONTROLLERS)
    for n in plan.nodes:
        st.cgroups.append(n.cgroup)
        state_mod.save(st, sdir)
        if config.systemd:
            # systemd-nspawn starts in the node's group and enables its controllers
            # itself, after it has moved out into <node>/supervisor
            cg.ensure_parent(n.cgroup, ())
            cpu_mod.apply_node(cg, plan.cpu, n.index, n.cgroup)
            continue
        # cpu for the weights of the jobs the agent makes below the node.
        cg.ensure_parent(n.cgroup, ("cpu",) if "cpuset" not in enable else ("cpu", "cpuset"))
        # Limits before the leaf: a v1 cpuset may not shrink below a child's CPUs.
        cpu_mod.apply_node(cg, plan.cpu, n.index, n.cgroup)
        cg.create(n.agent_cgroup)
    if plan.head is not None:
        st.cgroups.append(plan.head.cgroup)
        state_mod.save(st, sdir)
        cg.ensure_parent(plan.head.cgroup, ())

    if config.systemd:
        st.cpu["rt_runtime_us_per_node"] = "none (cgroup2 has no per-group RT budget)"
        _boot_systemd_nodes(plan, config, st, env, cg)
        return

    try:
        rt = cpu_mod.grant_rt_runtime(cg, root, [[n.cgroup, n.agent_cgroup] for n in plan.nodes])
        st.cpu["rt_runtime_us_per_node"] = (
            rt if rt is not None else "none (no per-group RT budget; agents try SCHED_FIFO)"
        )
    except OSError as err:
        # Not fatal: agents then run SCHED_OTHER (they warn about it).
        st.cpu["rt_runtime_us_per_node"] = f"not granted: {err}"

    st.key_file = state_mod.key_path(sdir)
    state_mod.save(st, sdir)
    state_mod.write_key(sdir)

    if config.start_agents:
        for n in plan.nodes:
            cmd = env.agent_command(
                n.name,
                n.ctl_ip,
                st.key_file,
                n.cgroup,
                python=config.python,
                cgroup_version="v2" if cg.layout.mode == "v2" else "auto",
                switch=config.switch,
                decision_interval_ms=config.decision_interval_ms,
            )
            procs = cg.procs_files(n.agent_cgroup)
            log = os.path.join(sdir, f"agent-{n.name}.log")
            rec = env.spawn_agent(n.name, n.netns, cmd, procs, log)
            st.agents.append(rec)
            state_mod.save(st, sdir)  # recorded before the next one: a rollback stops it
        env.await_agents(st.agents)

    if config.ssh:
        paths = sshd_mod.SshPaths(sdir)
        ssh = sshd_mod.SshState(paths.dir, paths.inventory, paths.ssh_config)
        agent_leaf = {n.name: n.agent_cgroup for n in plan.nodes}

        def save() -> None:
            st.ssh = ssh.to_dict()
            state_mod.save(st, sdir)

        def leaf_procs(h: sshd_mod.SshHost) -> list[str]:
            # A node's sshd in its agent leaf: what it starts runs where agents run.
            return cg.procs_files(agent_leaf[h.name]) if h.netns else []

        save()
        hosts = sshd_mod.hosts_from_state(st.nodes, str(plan.addresses.host_ctl_ip))
        env.ssh_up(ssh, hosts, paths, leaf_procs, save)


def _boot_systemd_nodes(
    plan: ClusterPlan, config: ClusterConfig, st: ClusterState, env: Env, cg: Cgroups
) -> None:
    """The SSH files and one booted container per node and for the head (nspawn.py)."""
    sdir, sd = env.sdir(), st.systemd
    assert sd is not None and plan.head is not None and cg.layout.unified is not None
    paths = sshd_mod.SshPaths(sdir)
    st.ssh = sshd_mod.SshState(paths.dir, paths.inventory, paths.ssh_config, sshds=[]).to_dict()
    state_mod.save(st, sdir)
    members = [plan.head, *plan.nodes]
    hosts = [sshd_mod.SshHost(n.name, n.ctl_ip, n.netns, n.data_ip or None) for n in members]
    key = os.path.join(paths.dir, "cluster.key")
    sshd_mod.write_files(hosts, paths, systemd_inventory_vars(config.python, key))
    with open(paths.client_key + ".pub", encoding="utf-8") as f:
        client_pub = f.read()
    specs = []
    for n in members:
        node_dir = os.path.join(paths.dir, f"node-{n.name}")
        spec = nspawn_mod.NodeSpec(n.name, n.netns, n.ctl_ip, node_dir)
        nspawn_mod.write_node_files(spec, paths.host_key, client_pub)
        specs.append((spec, n))
    sd["made_run_dirs"] = nspawn_mod.missing_run_dirs(env.nspawn_run_dirs)
    state_mod.save(st, sdir)
    binds = nspawn_mod.software_binds()
    t0 = time.monotonic()
    booting = []
    for spec, n in specs:
        log = os.path.join(sdir, f"node-{n.name}.log")
        rec = env.boot_node(spec, sd["rootfs"], cg.layout.unified, n.cgroup, binds, log)
        sd["containers"].append(rec.to_dict())
        state_mod.save(st, sdir)
        booting.append((rec, spec))
    for i, (rec, spec) in enumerate(booting):
        try:
            env.wait_node(cg.layout.unified, rec, t0, spec)
        finally:
            sd["containers"][i] = rec.to_dict()
            state_mod.save(st, sdir)
    sd["boot_s"] = round(time.monotonic() - t0, 2)
    env.log(f"{len(booting)} systemd node(s) booted in {sd['boot_s']:.1f} s "
            f"({', '.join(f'{r.node} {r.boot_s:.1f} s' for r, _ in booting)})")  # fmt: skip


# --------------------------------------------------------------------- teardown


def teardown(st: ClusterState, env: Env) -> list[str]:
    """Remove exactly what ``st`` records, in reverse dependency order.

    Idempotent: objects already gone are skipped. Keeps going after errors and
    returns them, so one stuck object never hides the rest.
    """
    problems: list[str] = []

    def attempt(what: str, fn: Callable[..., object], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as err:  # report and continue: partial cleanup beats none
            problems.append(f"{what}: {err}")

    sd = st.systemd or {}
    if sd.get("containers"):
        # First the systemd nodes, in order (their systemd stops its units); the
        # node groups' removal below takes whatever outlived that.
        recs = [nspawn_mod.ContainerRecord.from_dict(c) for c in sd["containers"]]
        try:
            for line in env.stop_nodes(recs):
                env.log(line)
        except Exception as err:
            problems.append(f"systemd nodes: {err}")

    if st.ssh:
        # First: nothing new may be started over SSH while the rest goes.
        try:
            problems += env.ssh_down(sshd_mod.SshState.from_dict(st.ssh))
        except Exception as err:
            problems.append(f"sshd: {err}")

    if st.agents:
        pids = ", ".join(f"{r.node} pid {r.pid}" for r in st.agents)
        attempt(f"stop agents ({pids})", env.stop_agents, list(reversed(st.agents)))

    # Deepest cgroups first; remove_tree also takes anything the agent made below
    # a node. The shared ``cosched`` root goes only if nothing else lives in it.
    # Thaw first, in every node: a frozen task cannot die, and the cpu/cpuacct
    # passes would wait on tasks frozen through the freezer.
    if st.cgroups:
        try:
            cg = env.cgroups(layout=Layout.from_dict(st.cgroup_layout))
        except (KeyError, TypeError, ValueError) as err:
            problems.append(f"cgroups: the state's layout is unreadable ({err}); run cosched clean")
        else:
            root = st.cgroups[0]
            for path in st.cgroups[1:]:
                attempt(f"thaw {path}", cg.thaw_subtree, path)
            for path in sorted(st.cgroups[1:], key=lambda p: p.count("/"), reverse=True):
                attempt(f"cgroup /{path}", cg.remove_tree, path, env.kill)
            attempt(f"cgroup /{root}", cg.remove_if_empty, root)

    if sd.get("made_run_dirs"):
        attempt("systemd-nspawn's run directories", nspawn_mod.remove_run_dirs,
                sd["made_run_dirs"])  # fmt: skip

    for link in reversed(st.root_links):
        attempt(f"link {link}", env.net.delete_link, None, link)

    for ns in reversed(st.netns):
        attempt(f"netns {ns}", env.net.remove_netns, ns)

    if st.key_file:
        attempt("key file", _unlink, st.key_file)
    if st.emulated:
        attempt("emulated nodes file", _unlink, st.emulated.get("nodes_file"))
    if not problems:
        attempt("state file", state_mod.remove, env.sdir())
    return problems


def _unlink(path: str | None) -> None:
    if path:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def down(env: Env | None = None) -> tuple[bool, list[str]]:
    """Tear down the recorded cluster. Returns (there was one, problems)."""
    env = env or Env()
    st = state_mod.load(env.sdir())
    if st is None:
        return False, []
    return True, teardown(st, env)


# ----------------------------------------------------------------------- status


def restart_agent(node: str, env: Env | None = None) -> AgentRecord:
    """Start ``node``'s agent again with its recorded command (stopping it first if it
    still runs). Its jobs keep running meanwhile and the new agent reattaches them
    (agent/jobs.py); the fault suite uses it after a SIGKILL."""
    env = env or Env()
    st = state_mod.load(env.sdir())
    if st is None or st.emulated is not None:
        raise ClusterError("no local cluster is up", fix="`cosched cluster up --nodes N`")
    rec = next((a for a in st.agents if a.node == node), None)
    plan = next((n for n in st.nodes if n.get("name") == node), None)
    if rec is None or plan is None:
        names = ", ".join(a.node for a in st.agents)
        raise ClusterError(f"no agent for node {node!r}", fix=f"one of {names}")
    env.stop_agent(rec)
    cg = env.cgroups(layout=Layout.from_dict(st.cgroup_layout))
    new = env.start_agent(node, plan["netns"], rec.cmd, cg.procs_files(plan["agent_cgroup"]),
                          rec.log)  # fmt: skip
    st.agents = [new if a.node == node else a for a in st.agents]
    state_mod.save(st, env.sdir())
    return new


def partition(node: str, heal: bool = False, network: str = "control",
              env: Env | None = None) -> list[str]:  # fmt: skip
    """Cut (or, with ``heal``, restore) ``node``'s link to the control or data bridge,
    or both: the bridge-side port goes down, so packets are dropped both ways while the
    node keeps its address and the agent keeps running. A fault-injection tool (issue
    13): a node cut off from the control network longer than the fail-safe timeout thaws
    its jobs on its own. Returns the ports changed."""
    env = env or Env()
    st = state_mod.load(env.sdir())
    if st is None or st.emulated is not None:
        raise ClusterError("no local cluster is up", fix="`cosched cluster up --nodes N`")
    plan = next((n for n in st.nodes if n.get("name") == node), None)
    if plan is None:
        names = ", ".join(n["name"] for n in st.nodes)
        raise ClusterError(f"no node {node!r} in the cluster", fix=f"one of {names}")
    if network not in ("control", "data", "both"):
        raise ClusterError(f"unknown network {network!r}", fix="control, data or both")
    ports = []
    if network in ("control", "both"):
        ports.append((CTL_NETNS, plan["ctl_port"]))
    if network in ("data", "both"):
        ports.append((DATA_NETNS, plan["data_port"]))
    for ns, port in ports:
        (env.net.set_up if heal else env.net.set_down)(ns, port)
    return [f"{ns}/{port}" for ns, port in ports]


def status(env: Env | None = None, probe: bool = True) -> dict[str, Any] | None:
    """A report of the recorded cluster as the kernel sees it now, or None."""
    env = env or Env()
    st = state_mod.load(env.sdir())
    if st is None:
        return None
    if st.emulated is not None:
        from testbed.cluster import emulated

        return emulated.status(st)
    present = set(env.net.list_netns())
    cpu_plan = cpu_mod.CpuPlan.from_dict(st.cpu) if st.cpu else None
    cg = env.cgroups(layout=Layout.from_dict(st.cgroup_layout)) if st.cgroup_layout else None
    agents = {a.node: a for a in st.agents}
    nodes: list[dict[str, Any]] = []
    for n in st.nodes:
        entry: dict[str, Any] = {
            "name": n["name"],
            "netns": n["netns"],
            "netns_present": n["netns"] in present,
            "data_ip": n["data_ip"],
            "ctl_ip": n["ctl_ip"],
        }
        entry["tc_node"] = _tc(env, n["netns"], NODE_DATA_IF, present)
        entry["tc_bridge"] = _tc(env, DATA_NETNS, n["data_port"], present)
        if cpu_plan is not None and cg is not None:
            entry["cpu"] = cpu_mod.read_back(cg, cpu_plan, n["cgroup"])
            if cpu_plan.speeds:  # what the quota read back stands for
                i = len(nodes)
                entry["cpu"] += f" (speed {cpu_plan.speeds[i]:g})"
        rec = agents.get(n["name"])
        if rec is None and st.systemd:
            entry["agent"] = "not started here: the playbook deploys it as a systemd unit"
        elif rec is None:
            entry["agent"] = "not started"
        else:
            alive = agent_mod.same_process(rec.pid, rec.start_time)
            entry["agent"] = f"pid {rec.pid} {'alive' if alive else 'DEAD'}"
            if probe:
                entry["metrics"] = agent_mod.probe_metrics(n["ctl_ip"])
        nodes.append(entry)
    return {
        "state_file": state_mod.state_path(env.sdir()),
        "status": st.status,
        "profile": st.profile,
        "htb": st.htb,
        "delay_mechanism": st.delay_mechanism,
        "netem": st.netem,
        "cpu_mechanism": st.cpu.get("mechanism", "none"),
        "cpus_per_node": st.cpu.get("cpus_per_node"),
        "speeds": st.cpu.get("speeds"),
        "decision_interval_ms": st.decision_interval_ms,
        "rt_runtime_us_per_node": st.cpu.get("rt_runtime_us_per_node"),
        "cgroups": cg.layout.describe() if cg is not None else "unknown",
        "weights_enforced": cg.capabilities.weights_enforced if cg is not None else None,
        "host_ctl_ip": st.addresses.get("host_ctl_ip"),
        "addresses": st.addresses,
        "key_file": st.key_file,
        "ssh": _ssh_status(st.ssh),
        "systemd": _systemd_status(st.systemd, probe),
        "nodes": nodes,
    }


def _systemd_status(sd: dict[str, Any] | None, probe: bool) -> dict[str, Any] | None:
    """Each systemd node's container now: nspawn alive, and what its systemd says."""
    if not sd:
        return None
    out: dict[str, str] = {}
    for c in sd.get("containers", []):
        rec = nspawn_mod.ContainerRecord.from_dict(c)
        if not agent_mod.same_process(rec.pid, rec.start_time):
            out[rec.node] = f"systemd-nspawn pid {rec.pid} DEAD"
            continue
        state = rec.state or "?"
        if probe and agent_mod.same_process(rec.leader, rec.leader_start):
            try:
                r = nspawn_mod.in_node(rec, ["systemctl", "is-system-running"], timeout=5)
                state = r.stdout.strip() or r.stderr.strip()
            except (OSError, subprocess.TimeoutExpired) as err:
                state = f"unknown ({err})"
        out[rec.node] = f"systemd-nspawn pid {rec.pid}, systemd (pid {rec.leader}) {state}"
    return {
        "rootfs": sd.get("rootfs"),
        "rootfs_build_s": sd.get("rootfs_build_s"),
        "boot_s": sd.get("boot_s"),
        "head": (sd.get("head") or {}).get("ctl_ip"),
        "containers": out,
    }


def _ssh_status(ssh: dict[str, Any] | None) -> dict[str, Any] | None:
    if not ssh:
        return None
    s = sshd_mod.SshState.from_dict(ssh)
    alive = {r.node: agent_mod.same_process(r.pid, r.start_time) for r in s.sshds or []}
    return {"inventory": s.inventory, "ssh_config": s.ssh_config, "sshd_alive": alive}


def _tc(env: Env, ns: str, ifname: str, present: set[str]) -> str:
    if ns not in present:
        return "(namespace missing)"
    try:
        return summarize_tc(env.net.get_tc(ns, ifname))
    except Exception as err:  # status must always print something
        return f"(unreadable: {err})"


def _rt(value: object) -> str:
    return f"{value} us/s" if isinstance(value, int) else str(value)


def _ssh_line(ssh: dict[str, Any] | None, systemd: bool = False) -> str:
    if ssh and systemd:
        return f"ssh: each systemd node's own sshd; inventory {ssh['inventory']}; " + (
            f"`ssh -F {ssh['ssh_config']} n0`"
        )
    if not ssh:
        return "ssh: no (`cosched cluster up --ssh` runs an sshd per node)"
    alive = ssh.get("sshd_alive", {})
    dead = [n for n, ok in alive.items() if not ok]
    state = f"{len(alive) - len(dead)}/{len(alive)} sshd running" + (
        f" (DEAD: {', '.join(dead)})" if dead else ""
    )
    return f"ssh: yes, {state}; inventory {ssh['inventory']}; `ssh -F {ssh['ssh_config']} n0`"


def _systemd_lines(sd: dict[str, Any] | None) -> list[str]:
    if not sd:
        return []
    return [
        f"systemd nodes: Debian with systemd as PID 1 (systemd-nspawn), booted in "
        f"{sd.get('boot_s') or 0:.1f} s; root file system {sd['rootfs']} "
        f"(built in {sd.get('rootfs_build_s') or 0:.1f} s)",
        *(f"  {node}: {line}" for node, line in sd["containers"].items()),
        f"  head (controller, monitoring) at {sd.get('head')}: deploy with "
        "`ansible-playbook -i <inventory> ansible/site.yml`",
    ]


def format_status(report: dict[str, Any]) -> str:
    if report.get("emulated"):
        from testbed.cluster import emulated

        return emulated.format_status(report)
    p = LinkProfile.from_dict(report["profile"])
    lines = [
        f"cluster: {report['status']}  (state {report['state_file']})",
        f"link profile: {p.describe()}",
        f"  source: {p.source}",
        f"  htb: {report['htb']}",
        f"delay mechanism: {report['delay_mechanism']}"
        + (
            ""
            if report["delay_mechanism"] == "netem"
            else " (kernel has no netem; the message library injects delay/jitter/loss)"
        ),
        f"cpu capacity: {report['cpu_mechanism']}"
        + (f" ({report['cpus_per_node']:g} CPUs/node)" if report["cpus_per_node"] else "")
        + (
            f", speeds {','.join(f'{s:g}' for s in report['speeds'])}"
            if report.get("speeds")
            else ""
        )
        + f"; real-time budget per node: {_rt(report.get('rt_runtime_us_per_node'))}",
        "agents' decision interval (local CDC schemes): "
        + f"{report.get('decision_interval_ms') or 10:g} ms"
        + ("" if report.get("decision_interval_ms") else " (default)"),
        f"cgroups: {report.get('cgroups')}"
        + ("" if report.get("weights_enforced") is not False else " (job weights NOT enforced)"),
        f"controller (host) address: {report['host_ctl_ip']} on {HOST_CTL_IF}",
        f"shared key: {report['key_file']}",
        _ssh_line(report.get("ssh"), bool(report.get("systemd"))),
        *_systemd_lines(report.get("systemd")),
        "nodes:",
    ]
    for n in report["nodes"]:
        lines.append(
            f"  {n['name']}: netns {n['netns']}{'' if n['netns_present'] else ' (MISSING)'}"
            f"  data {n['data_ip']}  ctl {n['ctl_ip']}"
        )
        lines.append(f"    tc out: {n['tc_node']}")
        lines.append(f"    tc in:  {n['tc_bridge']}")
        if "cpu" in n:
            lines.append(f"    cpu: {n['cpu']}")
        agent = f"    agent: {n['agent']}"
        if "metrics" in n:
            agent += f"; metrics: {n['metrics']}"
        lines.append(agent)
    return "\n".join(lines)
