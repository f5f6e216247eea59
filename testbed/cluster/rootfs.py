"""The Debian root file system the systemd nodes boot (``cosched cluster up --systemd``).

Built once with ``debootstrap`` from Debian's own packages and kept in a cache
(``/var/cache/cosched/rootfs/<suite>-<key>``, ``COSCHED_ROOTFS_CACHE`` moves
it); the key is a hash of the suite, the package list and :data:`RECIPE`, so a
change to either builds a new tree beside the old one. Every node boots the
same tree read-only under an overlay of its own (``systemd-nspawn
--volatile=overlay``, testbed/cluster/nspawn.py): nothing a node writes reaches
the cache or another node, and nothing is left on disk when it stops.

The tree is built in a temporary directory and renamed into place only when
complete (a marker file records what it holds and how long it took), under an
exclusive lock, so two builds never meet and a failed one leaves nothing.
``debootstrap`` mounts ``/proc`` and ``/sys`` inside the tree while it works;
after a failure whatever it left mounted there is unmounted before the tree
is removed.

What is changed after ``debootstrap`` (:func:`customise`): no SSH host keys
(every cluster brings its own, bound in at ``/etc/cosched-node``) and an sshd
drop-in that includes the node's configuration from there; an empty
``/etc/machine-id`` (each boot gets its own), no ``/etc/hostname`` (bound in
per node); Prometheus (only the head runs it: the role enables it there),
the package timers and the console getty disabled; the downloaded packages
removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import ClusterError

SUITE = "bookworm"
# What a node needs: systemd as PID 1 (and D-Bus for systemctl), sshd for Ansible
# and `cosched remote`, Python 3 for Ansible's modules, iproute2 (tc, ss) and procps
# (ps) for the roles and pytest-testinfra, Prometheus for the head's monitoring role.
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "python3",
    "iproute2",
    "procps",
    "prometheus",
)
# Bumped whenever customise() changes, so the cache key changes with it.
RECIPE = 1
DEFAULT_CACHE = "/var/cache/cosched/rootfs"
CACHE_ENV = "COSCHED_ROOTFS_CACHE"
MIRROR_ENV = "COSCHED_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
MARKER = ".cosched-rootfs.json"
NODE_CONF_DIR = "/etc/cosched-node"  # where each node's own files are bound (read-only)
DEBOOTSTRAP = "debootstrap"
BUILD_TIMEOUT_S = 1800.0
# Units a node does not need (each would cost CPU on a shared 2-core host).
MASK = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "console-getty.service",
    "getty@tty1.service",
)
DISABLE = ("prometheus.service",)


@dataclass(frozen=True)
class Rootfs:
    """A ready tree: where, whether this call built it, and how long the build took."""

    path: str
    built_now: bool
    build_s: float  # the build's own time (recorded when it was built)
    lookup_s: float  # this call's time: the build, or finding it in the cache
    mirror: str

    def describe(self) -> str:
        if self.built_now:
            return f"root file system built in {self.build_s:.1f} s: {self.path}"
        return (
            f"root file system from the cache in {self.lookup_s:.2f} s "
            f"(built in {self.build_s:.1f} s): {self.path}"
        )


# ----------------------------------------------------------------- pure parts


def cache_key(
    suite: str = SUITE, packages: tuple[str, ...] = PACKAGES, recipe: int = RECIPE
) -> str:
    h = hashlib.sha256(json.dumps([suite, sorted(packages), recipe]).encode()).hexdigest()
    return f"{suite}-{h[:12]}"


def mirror_from_sources(texts: list[str], suite: str = SUITE) -> str | None:
    """The first Debian archive URI the host's APT sources use for ``suite`` main.

    Reads both formats: deb822 stanzas (``URIs:``/``Suites:``/``Components:``) and
    one-line ``deb URI SUITE COMPONENTS`` entries.
    """
    for text in texts:
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                k, _, v = line.partition(":")
                fields[k.strip().lower()] = v.strip()
            if (
                "deb" in fields.get("types", "").split()
                and suite in fields.get("suites", "").split()
                and "main" in fields.get("components", "").split()
            ):
                uris = fields.get("uris", "").split()
                if uris:
                    return uris[0].rstrip("/")
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if words[:1] == ["deb"]:
                rest = [w for w in words[1:] if not w.startswith("[")]
                if len(rest) >= 3 and rest[1] == suite and "main" in rest[2:]:
                    return rest[0].rstrip("/")
    return None


def debootstrap_command(target: str, mirror: str, suite: str = SUITE,
                        packages: tuple[str, ...] = PACKAGES) -> list[str]:  # fmt: skip
    return [DEBOOTSTRAP, "--variant=minbase", f"--include={','.join(packages)}", suite,
            target, mirror]  # fmt: skip


SSHD_DROPIN = (
    "# cosched systemd node: the node's own sshd settings, bound in read-only by\n"
    "# `cosched cluster up --systemd` (testbed/cluster/nspawn.py). First match wins,\n"
    "# and this file is read before the rest of sshd_config.\n"
    f"Include {NODE_CONF_DIR}/sshd_config\n"
)


def mounts_below(mounts_text: str, root: str) -> list[str]:
    """Mount points at or below ``root``, deepest first (to unmount in that order)."""
    root = root.rstrip("/")
    found = []
    for line in mounts_text.splitlines():
        f = line.split()
        if len(f) >= 2:
            mp = f[1].replace("\\040", " ")
            if mp == root or mp.startswith(root + "/"):
                found.append(mp)
    return sorted(found, key=lambda p: p.count("/"), reverse=True)


# ------------------------------------------------------------------------ I/O


def cache_dir() -> str:
    return os.environ.get(CACHE_ENV) or DEFAULT_CACHE


def host_mirror() -> str:
    """``COSCHED_DEBIAN_MIRROR``, else the host's own APT sources, else deb.debian.org."""
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV]
    texts = []
    listed = sorted(str(p) for p in Path("/etc/apt/sources.list.d").glob("*"))
    paths = ["/etc/apt/sources.list", *listed]
    for p in paths:
        if p.endswith((".list", ".sources")):
            with contextlib.suppress(OSError):
                texts.append(Path(p).read_text())
    return mirror_from_sources(texts) or DEFAULT_MIRROR


def available() -> str | None:
    """None when a tree can be built here, else what is missing and how to get it."""
    if shutil.which(DEBOOTSTRAP) is None:
        return "debootstrap is missing — install it: apt-get install debootstrap"
    return None


@contextlib.contextmanager
def _locked(directory: str) -> Iterator[None]:
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd = os.open(os.path.join(directory, ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read_marker(path: str) -> dict[str, object] | None:
    try:
        with open(os.path.join(path, MARKER), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _unmount_below(root: str) -> None:
    with open("/proc/self/mounts", encoding="utf-8") as f:
        text = f.read()
    for mp in mounts_below(text, root):
        subprocess.run(["umount", "--lazy", mp], capture_output=True, check=False, timeout=30)


def _remove_tree(root: str) -> None:
    if os.path.lexists(root):
        _unmount_below(root)
        shutil.rmtree(root, ignore_errors=True)


def _systemctl_root(root: str, verb: str, units: tuple[str, ...]) -> None:
    """``systemctl --root=ROOT mask|disable``: the tree's unit links, changed offline."""
    r = subprocess.run(["systemctl", f"--root={root}", "--quiet", verb, *units],
                       capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    if r.returncode != 0:
        raise RuntimeError(f"systemctl --root {verb} {' '.join(units)}: {r.stderr.strip()}")


def customise(root: str) -> None:
    """What a node needs beyond debootstrap's tree (see the module docstring)."""
    r = Path(root)
    for key in (r / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (r / "etc/ssh/sshd_config.d").mkdir(parents=True, exist_ok=True)
    (r / "etc/ssh/sshd_config.d/00-cosched-node.conf").write_text(SSHD_DROPIN)
    (r / "etc/machine-id").write_text("")
    with contextlib.suppress(FileNotFoundError):
        (r / "var/lib/dbus/machine-id").unlink()
    with contextlib.suppress(FileNotFoundError):
        (r / "etc/hostname").unlink()
    (r / NODE_CONF_DIR.lstrip("/")).mkdir(mode=0o700, exist_ok=True)
    _systemctl_root(root, "mask", MASK)
    _systemctl_root(root, "disable", DISABLE)
    for deb in (r / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()


def ensure(
    log: Callable[[str], None] = lambda s: None,
    directory: str | None = None,
    mirror: str | None = None,
) -> Rootfs:
    """The cached tree, built first if there is none. ClusterError when it cannot be."""
    t0 = time.monotonic()
    directory = directory or cache_dir()
    key = cache_key()
    final = os.path.join(directory, key)
    mirror = mirror or host_mirror()
    with _locked(directory):
        marker = _read_marker(final)
        if marker is not None:
            return Rootfs(final, False, float(str(marker.get("build_s", 0.0))),
                          time.monotonic() - t0, str(marker.get("mirror", mirror)))  # fmt: skip
        if (problem := available()) is not None:
            raise ClusterError(f"cannot build the nodes' root file system: {problem}")
        _remove_tree(final)  # a tree without its marker is a build that did not finish
        tmp = os.path.join(directory, f".build-{key}-{os.getpid()}")
        _remove_tree(tmp)
        build_log = os.path.join(directory, f"{key}.log")
        log(f"building the nodes' root file system with debootstrap ({SUITE}, {mirror}); "
            f"log {build_log}")  # fmt: skip
        try:
            with open(build_log, "w", encoding="utf-8") as out:
                r = subprocess.run(debootstrap_command(tmp, mirror), stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   check=False, timeout=BUILD_TIMEOUT_S)  # fmt: skip
            if r.returncode != 0:
                tail = Path(build_log).read_text(errors="replace").strip().splitlines()[-1:]
                raise ClusterError(
                    f"debootstrap failed (exit status {r.returncode}): "
                    f"{tail[0] if tail else 'no output'}",
                    fix=f"see {build_log}; set {MIRROR_ENV} to a reachable Debian mirror",
                )
            customise(tmp)
            build_s = time.monotonic() - t0
            with open(os.path.join(tmp, MARKER), "w", encoding="utf-8") as f:
                json.dump({"suite": SUITE, "packages": list(PACKAGES), "recipe": RECIPE,
                           "mirror": mirror, "build_s": round(build_s, 1),
                           "built_at": time.time()}, f)  # fmt: skip
            os.rename(tmp, final)
        except BaseException:
            _remove_tree(tmp)
            raise
    return Rootfs(final, True, build_s, build_s, mirror)
