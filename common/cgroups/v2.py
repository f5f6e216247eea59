"""cgroup v2 files: one tree; cgroup.freeze/events/kill and cpu.stat are core.

cpu.weight, cpu.max and cpuset.cpus exist in a group only when its parent
enables the controller in ``cgroup.subtree_control``; the driver does that on
the way down (common/cgroups/driver.py), respecting the "no internal
processes" rule (Documentation/admin-guide/cgroup-v2.rst).
"""

from __future__ import annotations

from common.cgroups.base import clamp_weight
from common.cgroups.fs import CgroupFS


def _events(fs: CgroupFS, d: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in fs.read(d + "/cgroup.events").splitlines():
        k, _, v = line.partition(" ")
        out[k] = v.strip()
    return out


class V2Freezer:
    version = 2

    def __init__(self, fs: CgroupFS) -> None:
        self.fs = fs

    def events_file(self, d: str) -> str:
        return d + "/cgroup.events"

    def request_file(self, d: str, frozen: bool) -> tuple[str, str]:
        """The file a freeze or thaw request is written to, and the value."""
        return d + "/cgroup.freeze", "1" if frozen else "0"

    def request(self, d: str, frozen: bool) -> None:
        self.fs.write(*self.request_file(d, frozen))

    def frozen(self, d: str) -> bool:
        # "frozen 1" only once every task is stopped (not just asked to).
        return _events(self.fs, d).get("frozen") == "1"

    def thawed(self, d: str) -> bool:
        return _events(self.fs, d).get("frozen") == "0"

    def needs_thaw(self, d: str) -> bool:
        try:
            return self.fs.read(d + "/cgroup.freeze").strip() != "0"
        except FileNotFoundError:
            return False  # the root has no cgroup.freeze

    def kill(self, d: str) -> bool:
        """cgroup.kill (kernel >= 5.14): SIGKILL the subtree, frozen tasks included."""
        f = d + "/cgroup.kill"
        if not self.fs.exists(f):
            return False
        self.fs.write(f, "1")
        return True


class V2Cpu:
    version = 2

    def __init__(self, fs: CgroupFS) -> None:
        self.fs = fs

    def set_weight(self, d: str, weight: int) -> bool:
        f = d + "/cpu.weight"
        if not self.fs.exists(f):
            return False
        self.fs.write(f, str(clamp_weight(weight)))
        return True

    def get_weight(self, d: str) -> int | None:
        f = d + "/cpu.weight"
        return int(self.fs.read(f)) if self.fs.exists(f) else None

    def set_max(self, d: str, quota_us: int | None, period_us: int) -> None:
        self.fs.write(d + "/cpu.max", f"{quota_us if quota_us is not None else 'max'} {period_us}")

    def get_max(self, d: str) -> tuple[int | None, int]:
        quota, period = self.fs.read(d + "/cpu.max").split()
        return (None if quota == "max" else int(quota)), int(period)

    def describe_max(self, d: str) -> str:
        return "cpu.max=" + self.fs.read(d + "/cpu.max").strip()

    def rt_runtime(self, d: str) -> int | None:
        return None  # v2 has no per-group real-time budget

    def set_rt_runtime(self, d: str, us: int) -> None:
        raise OSError("cgroup v2 has no per-group real-time budget")


class V2Acct:
    version = 2

    def __init__(self, fs: CgroupFS) -> None:
        self.fs = fs

    def usage_file(self, d: str) -> str:
        return d + "/cpu.stat"

    def usage_ns(self, f: str) -> int:
        for line in self.fs.read(f).splitlines():
            key, _, val = line.partition(" ")
            if key == "usage_usec":
                return int(val) * 1000
        raise OSError(f"no usage_usec in {f}")


class V2Cpuset:
    version = 2

    def __init__(self, fs: CgroupFS) -> None:
        self.fs = fs

    def init_child(self, d: str) -> None:
        return  # an empty cpuset.cpus means "the parent's" in v2

    def set_cpus(self, d: str, cpus: str) -> None:
        self.fs.write(d + "/cpuset.cpus", cpus)

    def effective(self, d: str) -> str:
        return self.fs.read(d + "/cpuset.cpus.effective").strip()
