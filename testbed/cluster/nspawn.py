"""systemd nodes: each emulated node boots Debian with systemd as PID 1 (``systemd-nspawn``).

``cosched cluster up --systemd`` (testbed/cluster/cluster.py) makes the nodes'
namespaces, links and cgroups as for every cluster, then boots one container
per node (and one for the head) from the cached tree of
testbed/cluster/rootfs.py:

* **network**: the node's own namespace (``--network-namespace-path``), so the
  container has the node's data and control addresses and shaped links;
* **cgroups**: ``systemd-nspawn`` is started inside the node's group
  ``cosched/<node>`` of the host's cgroup2 tree; it moves itself into
  ``<node>/supervisor`` and the container into ``<node>/payload``, which is
  the container's cgroup root (a cgroup namespace), and enables every
  controller the tree offers for it. It does that only when it sees a pure
  cgroup2 host, so it runs in a mount namespace of its own in which the
  cgroup2 mount is bound over ``/sys/fs/cgroup`` (on a hybrid host it would
  otherwise give the container cgroup2 without controllers): the container
  then gets what a distribution's v2-only host gives it, ``cpuset cpu io
  pids``, and its systemd delegates them to ``Delegate=yes`` units;
* **file system**: the tree read-only under a tmpfs overlay
  (``--volatile=overlay``: nothing a node writes outlives it or reaches another
  node); the node's own files (sshd settings, host key, authorized_keys,
  hostname) bound read-only at ``/etc/cosched-node``; the cosched checkout,
  its virtualenv and the interpreter the virtualenv was made from bound
  read-only at the same paths, so the playbook can deploy cosched from them
  (``cosched_install_from: none``) as a site with a shared software tree does;
* **sshd** from the tree's Debian package, on the node's control address, with
  the cluster's host key and the client's key: Ansible, pytest-testinfra and
  ``cosched remote`` log in as on a real node.

Stopping: SIGTERM to ``systemd-nspawn`` shuts the container down in order
(systemd's own shutdown); what is still there after the timeout is killed
through the node's cgroup, which ``down`` and ``clean`` then remove with the
supervisor and payload groups below it. The mount namespace (and with it the
overlay and the binds) goes with the last process: nothing is mounted on the
host.

Pure parts (command line, node files) are apart from the I/O below and
unit-tested in tests/unit/testbed/cluster/test_nspawn.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from common.private import append_private, write_private

from .agents import log_tail, same_process
from .netns import NETNS_RUN_DIR
from .rootfs import NODE_CONF_DIR

NSPAWN = "systemd-nspawn"
# what `systemctl is-system-running --wait` answers once boot is over
UP_STATES = ("running", "degraded", "maintenance", "stopping")
UNSHARE = "unshare"
BOOT_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
SSH_PORT = 22
REPO = str(Path(__file__).resolve().parents[2])
# The controllers a node's cgroup passes on to the container (all cgroup2 offers
# here once the host is v2-only; memory stays with its v1 hierarchy on this host).
NODE_CONTROLLERS = ("cpu", "cpuset", "io", "pids", "memory")


# ----------------------------------------------------------------- pure parts


@dataclass(frozen=True)
class NodeSpec:
    """What one container needs: its name, namespace, control address, files."""

    name: str
    netns: str
    ctl_ip: str
    node_dir: str  # on the host: bound read-only at /etc/cosched-node


def software_binds(repo: str = REPO, prefix: str = sys.prefix,
                   base_prefix: str = sys.base_prefix) -> list[str]:  # fmt: skip
    """Host directories bound read-only into every node at the same path: the
    checkout, its virtualenv and the interpreter the virtualenv was made from.
    A directory inside another is covered by it; the node's own ``/usr`` is never
    covered up (a Debian interpreter there is the node's own python3)."""
    out: list[str] = []
    for p in sorted({os.path.realpath(x) for x in (repo, prefix, base_prefix)}, key=len):
        if p in ("/", "/usr") or p.startswith("/usr/"):
            continue
        if not any(p == o or p.startswith(o + "/") for o in out):
            out.append(p)
    return out


def nspawn_command(spec: NodeSpec, rootfs: str, unified: str, binds: list[str]) -> list[str]:
    """The command that boots one node (see the module docstring for each part).

    ``unshare --mount`` gives ``systemd-nspawn`` a private mount namespace in which
    the cgroup2 mount at ``unified`` is bound over ``/sys/fs/cgroup``; the shell
    then execs it (same PID: the one recorded and signalled).
    """
    nspawn = [
        NSPAWN,
        "--quiet",
        "--boot",
        f"--directory={rootfs}",
        "--volatile=overlay",
        f"--machine={spec.name}",
        "--register=no",  # no systemd-machined on the host
        "--keep-unit",  # stay in the node's cgroup, no scope unit (no systemd on the host)
        f"--network-namespace-path={NETNS_RUN_DIR}/{spec.netns}",
        "--console=passive",
        "--resolv-conf=off",
        "--timezone=off",
        "--link-journal=no",
        f"--bind-ro={spec.node_dir}:{NODE_CONF_DIR}",
        f"--bind-ro={spec.node_dir}/hostname:/etc/hostname",
        *[f"--bind-ro={b}" for b in binds],
    ]
    return [
        UNSHARE,
        "--mount",
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        'mount --bind "$0" /sys/fs/cgroup && exec "$@"',
        unified,
        *nspawn,
    ]


def render_node_sshd(spec: NodeSpec) -> str:
    """The node's sshd settings, read before Debian's sshd_config (first match wins)."""
    return "\n".join(
        [
            f"# cosched systemd node {spec.name}: written by `cosched cluster up --systemd`",
            f"ListenAddress {spec.ctl_ip}:{SSH_PORT}",
            f"HostKey {NODE_CONF_DIR}/host_ed25519_key",
            f"AuthorizedKeysFile {NODE_CONF_DIR}/authorized_keys",
            "AllowUsers root",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            # pam_loginuid cannot write the audit login uid from inside a container
            "UsePAM no",
            "X11Forwarding no",
            "MaxStartups 64:30:128",
            "",
        ]
    )


def is_container_init(status_text: str) -> bool:
    """True for the /proc/PID/status of systemd as PID 1 of its own PID namespace (before
    it execs systemd, that PID 1 is still nspawn's own child, named otherwise)."""
    fields = dict(line.split(":", 1) for line in status_text.splitlines() if ":" in line)
    ids = fields.get("NSpid", "").split()
    return fields.get("Name", "").strip() == "systemd" and len(ids) > 1 and ids[-1] == "1"


# ------------------------------------------------------------------------ I/O


@dataclass
class ContainerRecord:
    """One booted node (the ledger's ``systemd.containers`` entries)."""

    node: str
    pid: int  # systemd-nspawn (signalled only while its start time matches)
    start_time: float
    cgroup: str  # the node's cgroup2 group on the host (relative to the mount)
    log: str
    leader: int = 0  # the container's PID 1 (systemd), once found
    leader_start: float = 0.0
    boot_s: float = 0.0  # from start to `systemctl is-system-running` = running
    state: str = ""  # what is-system-running said
    failed_units: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ContainerRecord:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


def available() -> str | None:
    """None when nodes can boot here, else what is missing and how to get it."""
    for tool, package in ((NSPAWN, "systemd-container"), (UNSHARE, "util-linux"),
                          ("nsenter", "util-linux")):  # fmt: skip
        if shutil.which(tool) is None:
            return f"{tool} is missing — install it: apt-get install {package}"
    return None


def write_node_files(spec: NodeSpec, host_key: str, authorized_keys: str) -> None:
    """The node's directory (0700): sshd settings, host key, authorized_keys, hostname."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(spec.node_dir, 0o700)
    os.chmod(spec.node_dir, 0o700)
    write_private(os.path.join(spec.node_dir, "sshd_config"), render_node_sshd(spec), 0o644)
    write_private(os.path.join(spec.node_dir, "host_ed25519_key"), Path(host_key).read_text())
    write_private(os.path.join(spec.node_dir, "authorized_keys"), authorized_keys)
    write_private(os.path.join(spec.node_dir, "hostname"), spec.name + "\n", 0o644)


class _EnterCgroup:
    """``preexec_fn``: the child writes its PID into one cgroup.procs (opened here)."""

    def __init__(self, procs_file: str) -> None:
        self.path = procs_file

    def __call__(self) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)


def start(spec: NodeSpec, rootfs: str, unified: str, cgroup: str, binds: list[str],
          log_path: str) -> ContainerRecord:  # fmt: skip
    """Start booting one node inside ``cgroup`` (relative to ``unified``); returns at once."""
    cmd = nspawn_command(spec, rootfs, unified, binds)
    with append_private(log_path) as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_EnterCgroup(f"{unified}/{cgroup}/cgroup.procs"),
                                start_new_session=True, close_fds=True, cwd="/")  # fmt: skip
    return ContainerRecord(spec.name, proc.pid, psutil.Process(proc.pid).create_time(), cgroup,
                           log_path)  # fmt: skip


def find_leader(unified: str, rec: ContainerRecord) -> int | None:
    """The container's PID 1: the process below ``<node>/payload`` that is PID 1 in its own
    PID namespace (systemd moves itself into the container's ``init.scope``)."""
    for d, _dirs, files in os.walk(f"{unified}/{rec.cgroup}/payload"):
        if "cgroup.procs" not in files:
            continue
        try:
            with open(f"{d}/cgroup.procs", encoding="ascii") as f:
                pids = [int(x) for x in f.read().split()]
        except OSError:
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/status", encoding="utf-8") as f:
                    if is_container_init(f.read()):
                        return pid
            except OSError:
                continue
    return None


def in_node(
    rec: ContainerRecord, argv: list[str], timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` inside the booted node (all its namespaces), as its root."""
    return subprocess.run(["nsenter", f"--target={rec.leader}", "--all", *argv],
                          capture_output=True, text=True, check=False, timeout=timeout)  # fmt: skip


def wait_booted(unified: str, rec: ContainerRecord, started: float, spec: NodeSpec,
                timeout: float = BOOT_TIMEOUT_S) -> None:  # fmt: skip
    """Until the node's systemd says it is up and its sshd listens; RuntimeError if not."""
    deadline = started + timeout
    while rec.leader == 0:
        if not same_process(rec.pid, rec.start_time):
            raise RuntimeError(f"systemd-nspawn for {rec.node} exited; see {rec.log}: "
                               f"{_tail(rec.log)}")  # fmt: skip
        leader = find_leader(unified, rec)
        if leader is not None:
            rec.leader, rec.leader_start = leader, psutil.Process(leader).create_time()
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{rec.node}: no container init after {timeout:g} s; see {rec.log}")
        time.sleep(0.05)
    while True:
        left = max(1.0, deadline - time.monotonic())
        try:
            r = in_node(rec, ["systemctl", "is-system-running", "--wait"], timeout=left)
            rec.state = r.stdout.strip() or r.stderr.strip()
        except subprocess.TimeoutExpired:
            rec.state = f"starting (after {timeout:g} s)"
        # anything else ("offline", "Failed to connect to bus"): asked before its manager
        # answers (systemd has just been exec'd)
        if rec.state in UP_STATES or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if rec.state != "running":
        failed = in_node(rec, ["systemctl", "list-units", "--failed", "--plain", "--no-legend"])
        rec.failed_units = [ln.split()[0] for ln in failed.stdout.splitlines() if ln.split()]
    if rec.state not in ("running", "degraded"):
        raise RuntimeError(
            f"{rec.node}: its systemd says {rec.state!r}"
            + (f" (failed: {', '.join(rec.failed_units)})" if rec.failed_units else "")
            + f"; see {rec.log}"
        )
    while True:
        with contextlib.suppress(OSError), socket.create_connection((spec.ctl_ip, SSH_PORT), 0.5):
            break
        if time.monotonic() > deadline:
            r = in_node(rec, ["systemctl", "status", "--no-pager", "--lines=3", "ssh.service"])
            why = " | ".join(ln.strip() for ln in r.stdout.splitlines()[-3:])
            raise RuntimeError(
                f"{rec.node}: sshd not listening on {spec.ctl_ip}:{SSH_PORT} ({why})"
            )
        time.sleep(0.05)
    rec.boot_s = time.monotonic() - started


def _tail(path: str) -> str:
    return log_tail(path, 600).strip().replace("\n", " | ")


def stop(recs: list[ContainerRecord], timeout_s: float = STOP_TIMEOUT_S,
         sleep: Callable[[float], None] = time.sleep) -> list[str]:  # fmt: skip
    """Shut every node down, all at once: SIGTERM to its systemd-nspawn has the
    container's systemd halt in order; a second SIGTERM halfway through the timeout
    has nspawn end the container at once (the first is lost on a container whose
    systemd has not yet set up its signal handlers: a rolled-back `up`); SIGKILL after
    ``timeout_s`` (the node cgroup's removal, the caller's, then takes whatever still
    runs in the container). Returns a line per node that needed more than the first."""
    alive = [r for r in recs if same_process(r.pid, r.start_time)]
    for r in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(r.pid, signal.SIGTERM)
    if booting := [r for r in alive if r.state not in UP_STATES]:
        # not booted (a rolled-back `up`): its systemd may not yet handle the halt
        # request, so the second SIGTERM (end it now) follows at once
        sleep(0.2)
        for r in booting:
            with contextlib.suppress(ProcessLookupError):
                os.kill(r.pid, signal.SIGTERM)
    start = time.monotonic()
    again = False
    notes: dict[str, str] = {}
    while alive and time.monotonic() - start < timeout_s:
        for r in alive:  # our own children when `up` rolls back: reap them
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(r.pid, os.WNOHANG)
        alive = [r for r in alive if same_process(r.pid, r.start_time)]
        if alive and not again and time.monotonic() - start > timeout_s / 2:
            again = True
            for r in alive:
                notes[r.node] = f"{r.node}: did not halt within {timeout_s / 2:g} s; terminated"
                with contextlib.suppress(ProcessLookupError):
                    os.kill(r.pid, signal.SIGTERM)
        if alive:
            sleep(0.05)
    for r in alive:
        notes[r.node] = (
            f"{r.node}: systemd-nspawn (pid {r.pid}) still ran after {timeout_s:g} s; killed"
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(r.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(r.pid, 0)
    return list(notes.values())


# systemd-nspawn keeps its image locks and mount-propagation directories here; on a
# host without systemd nothing else uses them, and `down` removes what `up` made.
RUN_DIRS = ("/run/systemd", "/run/systemd/nspawn")


def missing_run_dirs(dirs: tuple[str, ...] = RUN_DIRS) -> list[str]:
    return [d for d in dirs if not os.path.lexists(d)]


def remove_run_dirs(made: list[str]) -> None:
    """Remove the run directories ``up`` found missing, with whatever nspawn left in them
    (a killed nspawn leaves its lock and propagation entries). Called once every
    container of ours is gone; on a host without systemd nothing else uses them."""
    for d in sorted(made, key=len, reverse=True):
        if os.path.isdir(d) and not os.path.islink(d):
            shutil.rmtree(d)


def running() -> list[int]:
    """PIDs of systemd-nspawn processes on this host (by executable, to tell whether its
    run directories are in use; never to signal them)."""
    out = []
    for p in psutil.process_iter(["exe"]):
        with contextlib.suppress(psutil.Error):
            if os.path.basename(p.info["exe"] or "") == NSPAWN:
                out.append(p.pid)
    return out
