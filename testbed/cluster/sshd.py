"""``cosched cluster up --ssh``: an sshd in every node, and an Ansible inventory for them.

Real nodes are reached over SSH (Ansible, ``cosched remote``); the local
cluster's nodes are made reachable the same way so the same playbook and the same
``cosched remote`` run against them (issue 10). Per cluster, under
``<state dir>/ssh`` (0700, made by us, so no one else can plant a link in it):

* one host key (every node presents it: the nodes are one machine) and one
  client key pair, made by ``ssh-keygen``; ``authorized_keys`` holds the
  client's public key, ``known_hosts`` the host key for every address;
* ``sshd-<name>.conf`` per node, its pidfile and its log.

Beside them, ``<state dir>/inventory.yml`` (groups controller, agents,
monitor) and ``<state dir>/ssh_config`` (``ssh -F <state dir>/ssh_config n0``).

Each node's sshd listens on the node's control address, port 22, inside the
node's network namespace, and sits in the node's agent cgroup leaf: a daemon
started over SSH (the playbook's agent) lands where ``cluster up`` puts its
own agents, and ``cosched clean`` finds it by cgroup membership. It is entered
with ``setns`` only (as the agents are), not with ``ip netns exec``: that also
remounts ``/sys`` in a mount namespace of its own, which hides
``/sys/fs/cgroup`` from every session, and an agent deployed over SSH would
find no cgroups. The controller/monitor host ``head`` is the host itself (the
controller reaches the agents from the root namespace through ``csc-host``),
so its sshd listens on the host's control address in the root namespace.

Everything pure (configuration, inventory, ssh_config rendering) is apart
from the I/O at the bottom, and unit-tested in tests/unit/testbed/cluster/test_sshd.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import psutil

from common.private import append_private, write_private

from .agents import log_tail, same_process
from .errors import ClusterError
from .netns import NetnsEnterer

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
# sshd's privilege-separation directory, a path compiled into Debian's sshd.
PRIVSEP_DIR = "/run/sshd"
SSH_PORT = 22
SSH_SUBDIR = "ssh"
INVENTORY_FILE = "inventory.yml"
SSH_CONFIG_FILE = "ssh_config"
HEAD = "head"  # the inventory name of the host: controller and monitor
PYTHON = "/usr/bin/python3"  # the nodes' interpreter (platform notes: no discovery)
START_TIMEOUT_S = 5.0


# ----------------------------------------------------------------- pure parts


@dataclass(frozen=True)
class SshHost:
    """One machine of the inventory: a node (in its netns) or the head (root netns)."""

    name: str
    ctl_ip: str
    netns: str | None  # None: the host's root namespace (the head)
    data_ip: str | None = None  # the head has no data address


@dataclass(frozen=True)
class SshPaths:
    """Where every file of the cluster's SSH set-up lives, below one state dir."""

    state_dir: str

    @property
    def dir(self) -> str:
        return os.path.join(self.state_dir, SSH_SUBDIR)

    @property
    def host_key(self) -> str:
        return os.path.join(self.dir, "host_ed25519_key")

    @property
    def client_key(self) -> str:
        return os.path.join(self.dir, "id_ed25519")

    @property
    def authorized_keys(self) -> str:
        return os.path.join(self.dir, "authorized_keys")

    @property
    def known_hosts(self) -> str:
        return os.path.join(self.dir, "known_hosts")

    @property
    def inventory(self) -> str:
        return os.path.join(self.state_dir, INVENTORY_FILE)

    @property
    def ssh_config(self) -> str:
        return os.path.join(self.state_dir, SSH_CONFIG_FILE)

    def conf(self, name: str) -> str:
        return os.path.join(self.dir, f"sshd-{name}.conf")

    def pidfile(self, name: str) -> str:
        return os.path.join(self.dir, f"sshd-{name}.pid")

    def log(self, name: str) -> str:
        return os.path.join(self.dir, f"sshd-{name}.log")


def hosts_from_state(nodes: list[dict[str, Any]], host_ctl_ip: str) -> list[SshHost]:
    """The head first, then every node, from the cluster state's node plans."""
    out = [SshHost(HEAD, host_ctl_ip, None)]
    out += [SshHost(n["name"], n["ctl_ip"], n["netns"], n.get("data_ip")) for n in nodes]
    return out


def path_is_safe(path: str, lstat: Callable[[str], os.stat_result] = os.lstat) -> bool:
    """True when sshd's StrictModes would accept files below ``path``: it and every
    directory above it owned by root and writable by no one else (sshd checks the
    same up to /). A private state dir below /tmp (1777) is not, so there
    StrictModes must be off; our own 0700 directory and 0600 files are what
    StrictModes would have protected."""
    p = os.path.abspath(path)
    while True:
        try:
            st = lstat(p)
        except OSError:
            return False
        if st.st_uid != 0 or stat.S_IMODE(st.st_mode) & 0o022:
            return False
        parent = os.path.dirname(p)
        if parent == p:
            return True
        p = parent


def render_sshd_config(host: SshHost, paths: SshPaths, strict_modes: bool) -> str:
    """One node's sshd_config: its control address only, key login only, root only."""
    return "\n".join(
        [
            f"# cosched cluster up --ssh: the sshd of {host.name} "
            f"({'netns ' + host.netns if host.netns else 'host, root namespace'})",
            f"ListenAddress {host.ctl_ip}:{SSH_PORT}",
            f"HostKey {paths.host_key}",
            f"PidFile {paths.pidfile(host.name)}",
            f"AuthorizedKeysFile {paths.authorized_keys}",
            # Only the cluster's key, only for root: the file serves every user otherwise.
            "AllowUsers root",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            f"StrictModes {'yes' if strict_modes else 'no'}",
            "X11Forwarding no",
            "PrintMotd no",
            # Ansible copies modules over sftp; no external sftp-server needed.
            "Subsystem sftp internal-sftp",
            # Ansible opens several connections per host at once.
            "MaxStartups 64:30:128",
            "LogLevel INFO",
            "",
        ]
    )


def render_known_hosts(hosts: list[SshHost], host_pub: str) -> str:
    """The one host key, for every address and name (``ssh -F ssh_config n0`` looks up
    the address, Ansible the ``ansible_host``)."""
    key = " ".join(host_pub.split()[:2])  # type and base64, without the comment
    return "".join(f"{h.ctl_ip},{h.name} {key}\n" for h in hosts)


def ssh_options(paths: SshPaths) -> list[str]:
    """The ``-o`` options every client (ssh, Ansible, fabric) uses for the cluster."""
    return [
        f"UserKnownHostsFile={paths.known_hosts}",
        "GlobalKnownHostsFile=/dev/null",
        "StrictHostKeyChecking=yes",
        "IdentitiesOnly=yes",
        "PasswordAuthentication=no",
        "BatchMode=yes",
    ]


def render_ssh_config(hosts: list[SshHost], paths: SshPaths) -> str:
    lines = [f"# cosched cluster up --ssh: `ssh -F {paths.ssh_config} n0`", ""]
    for h in hosts:
        lines += [
            f"Host {h.name}",
            f"    HostName {h.ctl_ip}",
            f"    Port {SSH_PORT}",
            "    User root",
            f"    IdentityFile {paths.client_key}",
            *[f"    {o.replace('=', ' ', 1)}" for o in ssh_options(paths)],
            "",
        ]
    return "\n".join(lines)


def _y(value: object) -> str:
    """A YAML scalar: JSON's quoted strings and numbers are YAML too."""
    return json.dumps(value)


def render_inventory(
    hosts: list[SshHost], paths: SshPaths, systemd_vars: dict[str, Any] | None = None
) -> str:
    """The Ansible inventory of the local cluster (groups controller, agents, monitor;
    variable names of ansible/inventory/example/hosts.yml). ``systemd_vars``: the nodes
    are systemd containers (testbed/cluster/nspawn.py), each with its own file system,
    and these variables fit the playbook to them."""
    common = " ".join(f"-o {o}" for o in ssh_options(paths))
    head = next(h for h in hosts if h.name == HEAD)
    nodes = [h for h in hosts if h.name != HEAD]
    if systemd_vars is None:
        about = [
            "# The local cluster's nodes share this host's file system, processes and users;",
            "# each has its own network namespace and its sshd on its control address.",
        ]
        # One kernel for every node: `cosched remote clean` must not run `cosched clean`
        # on one of them (it would take the whole local cluster down).
        extra = ["    cosched_local_cluster: true"]
    else:
        about = [
            "# systemd nodes (`cluster up --systemd`): Debian containers with systemd as",
            "# PID 1, each in its node's network namespace and cgroup, with a file system",
            "# of its own; the cosched checkout is bound in read-only.",
        ]
        extra = [f"    {k}: {_y(v)}" for k, v in systemd_vars.items()]
    out = [
        "---",
        "# Written by `cosched cluster up --ssh`; removed by `cosched cluster down`.",
        *about,
        "all:",
        "  vars:",
        "    ansible_user: root",
        f"    ansible_port: {SSH_PORT}",
        f"    ansible_ssh_private_key_file: {_y(paths.client_key)}",
        f"    ansible_ssh_common_args: {_y(common)}",
        f"    ansible_python_interpreter: {_y(PYTHON)}",
        *extra,
        "  children:",
        "    controller:",
        "      hosts:",
        f"        {head.name}:",
        f"          ansible_host: {_y(head.ctl_ip)}",
        f"          cosched_control_address: {_y(head.ctl_ip)}",
        f"          cosched_node_name: {_y(head.name)}",
        "    monitor:",
        "      hosts:",
        f"        {head.name}:",
        "    agents:",
        "      hosts:",
    ]
    for h in nodes:
        out += [
            f"        {h.name}:",
            f"          ansible_host: {_y(h.ctl_ip)}",
            f"          cosched_control_address: {_y(h.ctl_ip)}",
            f"          cosched_data_address: {_y(h.data_ip)}",
            f"          cosched_node_name: {_y(h.name)}",
        ]
    return "\n".join(out) + "\n"


def sshd_command(paths: SshPaths, name: str, sshd: str = SSHD) -> list[str]:
    # -D: stay in the foreground, so the PID we start is the daemon's (recorded with
    # its start time); -e: log to stderr, our 0600 log file.
    return [sshd, "-D", "-e", "-f", paths.conf(name)]


@dataclass
class SshdRecord:
    node: str
    pid: int
    start_time: float  # psutil create_time(): never signal a reused PID
    cmd: list[str]
    log: str
    ready_s: float = 0.0  # from start to accepting connections


@dataclass
class SshState:
    """What ``up --ssh`` made (the ledger's ``ssh`` entry): written before each step."""

    dir: str
    inventory: str
    ssh_config: str
    made_privsep_dir: bool = False
    sshds: list[SshdRecord] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SshState:
        d = dict(d)
        recs = [SshdRecord(**r) for r in d.pop("sshds", None) or []]
        known = set(cls.__dataclass_fields__)
        st = cls(**{k: v for k, v in d.items() if k in known})
        st.sshds = recs
        return st


# ------------------------------------------------------------------------ I/O


def sshd_available(sshd: str = SSHD) -> str | None:
    """None when sshd and ssh-keygen can run here, else what is missing and how to get it."""
    if not os.access(sshd, os.X_OK):
        return f"{sshd} is missing — install it: apt-get install openssh-server"
    if shutil.which(SSH_KEYGEN) is None:
        return "ssh-keygen is missing — install it: apt-get install openssh-client"
    return None


def _private_dir(path: str) -> None:
    """Make ``path`` 0700, or accept it only if it is already ours, 0700, not a link."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise ClusterError(
            f"{path} is not a directory of ours",
            fix="remove it (or pick another COSCHED_STATE_DIR) and retry",
        )
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)


def _keygen(path: str, comment: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path + ".pub")
    r = subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise RuntimeError(f"ssh-keygen for {path} failed: {r.stderr.strip()}")
    os.chmod(path, 0o600)  # ssh-keygen makes it 0600; say so rather than trust it


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def write_files(
    hosts: list[SshHost], paths: SshPaths, systemd_vars: dict[str, Any] | None = None
) -> None:
    """Keys, sshd configs, authorized_keys, known_hosts, ssh_config, inventory.
    With ``systemd_vars`` (systemd nodes run their own sshd) no sshd configs."""
    _private_dir(paths.dir)
    _keygen(paths.host_key, "cosched-cluster-host")
    _keygen(paths.client_key, "cosched-cluster-client")
    write_private(paths.authorized_keys, _read(paths.client_key + ".pub"))
    write_private(paths.known_hosts, render_known_hosts(hosts, _read(paths.host_key + ".pub")))
    if systemd_vars is None:
        strict = path_is_safe(paths.dir)
        for h in hosts:
            write_private(paths.conf(h.name), render_sshd_config(h, paths, strict))
    write_private(paths.ssh_config, render_ssh_config(hosts, paths))
    write_private(paths.inventory, render_inventory(hosts, paths, systemd_vars))


def _wait_listening(ip: str, proc: subprocess.Popen[bytes], log: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(
                f"sshd on {ip} exited with status {proc.returncode}; see {log}: {_tail(log)}"
            )
        with contextlib.suppress(OSError), socket.create_connection((ip, SSH_PORT), timeout=0.2):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"sshd on {ip}:{SSH_PORT} not listening after {timeout:g} s")
        time.sleep(0.02)


def _tail(path: str, nbytes: int = 600) -> str:
    """The log's end on one line (for a one-line error)."""
    return log_tail(path, nbytes).strip().replace("\n", " | ")


CLONE_NEWUTS = 0x04000000


class _NodeEnterer:
    """``preexec_fn``: the node's netns and cgroups (NetnsEnterer), then a UTS
    namespace of its own named after the node, so sessions (``hostname``, Ansible's
    facts, testinfra) see ``n0`` as the node's agents and jobs do (agent/uts.py).
    Everything the child calls is resolved here in the parent (see NetnsEnterer)."""

    def __init__(self, netns: str, name: str, cgroup_procs: list[str]) -> None:
        self.net = NetnsEnterer(netns, [(p, "") for p in cgroup_procs])
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._name = name.encode()

    def __call__(self) -> None:
        self.net()
        if self._libc.unshare(CLONE_NEWUTS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
        if self._libc.sethostname(self._name, len(self._name)) != 0:
            raise OSError(ctypes.get_errno(), "sethostname")

    def close(self) -> None:
        self.net.close()


def start_sshd(
    host: SshHost, paths: SshPaths, cgroup_procs: list[str], timeout: float = START_TIMEOUT_S
) -> SshdRecord:
    """Start one sshd (in ``host.netns`` and the given cgroups) and wait until it listens."""
    cmd = sshd_command(paths, host.name)
    t0 = time.monotonic()
    enter = _NodeEnterer(host.netns, host.name, cgroup_procs) if host.netns else None
    try:
        with append_private(paths.log(host.name)) as log:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=enter,
                start_new_session=True,
                close_fds=True,
            )
    finally:
        if enter is not None:
            enter.close()
    rec = SshdRecord(host.name, proc.pid, psutil.Process(proc.pid).create_time(), cmd,
                     paths.log(host.name))  # fmt: skip
    try:
        _wait_listening(host.ctl_ip, proc, rec.log, timeout)
    except BaseException:
        stop_sshd(rec)
        raise
    rec.ready_s = time.monotonic() - t0
    return rec


def stop_sshd(rec: SshdRecord, timeout_s: float = 3.0) -> bool:
    """SIGTERM the recorded listener (its sessions end with it: they are its children
    and lose their connection), SIGKILL after ``timeout_s``. True if it ran."""
    if not same_process(rec.pid, rec.start_time):
        return False
    # The listener's session children (one per open connection) are killed too:
    # they are in its session (start_new_session) and sshd would leave them.
    try:
        children = psutil.Process(rec.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    with contextlib.suppress(ProcessLookupError):
        os.kill(rec.pid, signal.SIGTERM)
    for c in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            if c.name() == "sshd":  # only sshd's own session processes, found as its children
                c.terminate()
    deadline = time.monotonic() + timeout_s
    while same_process(rec.pid, rec.start_time) and time.monotonic() < deadline:
        time.sleep(0.02)
    if same_process(rec.pid, rec.start_time):
        with contextlib.suppress(ProcessLookupError):
            os.kill(rec.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(rec.pid, os.WNOHANG)
    return True


def remove_files(paths: SshPaths) -> list[str]:
    """Remove the SSH directory, the inventory and ssh_config. Returns what was removed."""
    removed = []
    for path in (paths.inventory, paths.ssh_config):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed.append(path)
    if os.path.lexists(paths.dir):
        st = os.lstat(paths.dir)
        if stat.S_ISDIR(st.st_mode):
            # an sshd just sent SIGTERM unlinks its own pidfile while we walk the tree
            shutil.rmtree(paths.dir, onerror=_gone_is_fine)
        else:
            os.unlink(paths.dir)
        removed.append(paths.dir)
    return removed


def _gone_is_fine(func: Callable[..., object], path: str, exc_info: object) -> None:
    """rmtree's error hook: a file that vanished under us is what we wanted."""
    err = sys.exc_info()[1]
    if not isinstance(err, FileNotFoundError):
        raise err if err is not None else OSError(f"cannot remove {path}")


def stray_sshds(paths: SshPaths) -> list[int]:
    """sshd processes started from a config in ``paths.dir``, found by their pidfiles
    (for ``clean`` without a state file): the pidfile's process must run sshd with
    one of our config files on its command line, so a reused PID is never hit."""
    found: list[int] = []
    try:
        names = os.listdir(paths.dir)
    except OSError:
        return found
    for name in names:
        if not (name.startswith("sshd-") and name.endswith(".pid")):
            continue
        node = name[len("sshd-") : -len(".pid")]
        try:
            pid = int(_read(os.path.join(paths.dir, name)).strip())
            proc = psutil.Process(pid)
            exe = proc.exe()
            # sshd rewrites its title to one string: "sshd: /usr/sbin/sshd -D -e -f CONF
            # [listener] ...", so look for the config among its words
            words = " ".join(proc.cmdline()).split()
        except (OSError, ValueError, psutil.Error):
            continue
        if paths.conf(node) in words and os.path.basename(exe) == "sshd":
            found.append(pid)
    return found


def up(
    st_ssh: SshState,
    hosts: list[SshHost],
    paths: SshPaths,
    cgroup_procs: Callable[[SshHost], list[str]],
    save: Callable[[], None],
) -> None:
    """Write the files, then start one sshd per host, recording each before the next step."""
    problem = sshd_available()
    if problem:
        raise RuntimeError(problem)
    write_files(hosts, paths)
    if not os.path.isdir(PRIVSEP_DIR):
        st_ssh.made_privsep_dir = True
        save()
        os.mkdir(PRIVSEP_DIR, 0o755)
    st_ssh.sshds = []
    for h in hosts:
        rec = start_sshd(h, paths, cgroup_procs(h))
        st_ssh.sshds.append(rec)
        save()


def down(st_ssh: SshState) -> list[str]:
    """Stop every recorded sshd, remove the files and the privsep dir we made."""
    problems: list[str] = []
    paths = SshPaths(os.path.dirname(st_ssh.dir))
    for rec in reversed(st_ssh.sshds or []):
        try:
            stop_sshd(rec)
        except Exception as err:  # keep going: the rest must still go
            problems.append(f"stop sshd {rec.node} pid {rec.pid}: {err}")
    for pid in stray_sshds(paths):  # started but not yet recorded (a crash mid-up)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    try:
        remove_files(paths)
    except OSError as err:
        problems.append(f"ssh files: {err}")
    if st_ssh.made_privsep_dir:
        with contextlib.suppress(FileNotFoundError):
            try:
                os.rmdir(PRIVSEP_DIR)
            except OSError as err:
                problems.append(f"{PRIVSEP_DIR}: {err}")
    return problems
