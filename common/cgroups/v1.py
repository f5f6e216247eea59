"""cgroup v1 files: one hierarchy per controller (freezer, cpu, cpuacct, cpuset).

Each class knows the files of one v1 controller and nothing else; the driver
(common/cgroups/driver.py) picks per resource between these and common/cgroups/v2.py.
"""

from __future__ import annotations

import contextlib
import os

from common.cgroups.base import shares_to_weight, weight_to_shares
from common.cgroups.fs import CgroupFS


class V1Freezer:
    version = 1

    def __init__(self, fs: CgroupFS) -> None:
        self.fs = fs

    def state_file(self, d: str) -> str:
        return d + "/freezer.state"

    def request_file(self, d: str, frozen: bool) -> tuple[str, str]:
        """The file a freeze or thaw request is written to, and the value."""
        return self.state_file(d), "FROZEN" if frozen else "THAWED"

    def request(self, d: str, frozen: bool) -> None:
        self.fs.write(*self.request_file(d, frozen))

    def frozen(self, d: str) -> bool:
        # FREEZING while tasks are still on their way into the refrigerator.
        return self.fs.read(self.state_file(d)).strip() == "FROZEN"

    def thawed(self, d: str) -> bool:
        return self.fs.read(self.state_file(d)).strip() == "THAWED"

    def needs_thaw(self, d: str) -> bool:
        try:
            return self.fs.read(self.state_file(d)).strip() != "THAWED"
        except FileNotFoundError:
            return False  # a hierarchy root has no freezer.state

    def kill(self, d: str) -> bool:
        """v1 has no cgroup.kill: the caller signals every task."""
        return False


class V1Cpu:
    version = 1

    def __init__(self, fs: CgroupFS) -> None:
        self.fs = fs

    def set_weight(self, d: str, weight: int) -> bool:
        self.fs.write(d + "/cpu.shares", str(weight_to_shares(weight)))
        return True

    def get_weight(self, d: str) -> int | None:
        return shares_to_weight(int(self.fs.read(d + "/cpu.shares")))

    def set_max(self, d: str, quota_us: int | None, period_us: int) -> None:
        # Period first: keeps the pair consistent at every step.
        self.fs.write(d + "/cpu.cfs_period_us", str(period_us))
        self.fs.write(d + "/cpu.cfs_quota_us", str(quota_us if quota_us is not None else -1))

    def get_max(self, d: str) -> tuple[int | None, int]:
        quota = int(self.fs.read(d + "/cpu.cfs_quota_us"))
        period = int(self.fs.read(d + "/cpu.cfs_period_us"))
        return (quota if quota > 0 else None), period

    def describe_max(self, d: str) -> str:
        q = self.fs.read(d + "/cpu.cfs_quota_us").strip()
        p = self.fs.read(d + "/cpu.cfs_period_us").strip()
        return f"cfs_quota_us={q} cfs_period_us={p}"

    def rt_runtime(self, d: str) -> int | None:
        """cpu.rt_runtime_us, or None when the kernel has no RT group scheduling."""
        try:
            return int(self.fs.read(d + "/cpu.rt_runtime_us"))
        except (OSError, ValueError):
            return None

    def set_rt_runtime(self, d: str, us: int) -> None:
        self.fs.write(d + "/cpu.rt_runtime_us", str(us))


class V1Acct:
    version = 1

    def __init__(self, fs: CgroupFS) -> None:
        self.fs = fs

    def usage_file(self, d: str) -> str:
        return d + "/cpuacct.usage"

    def usage_ns(self, f: str) -> int:
        return int(self.fs.read(f))


class V1Cpuset:
    version = 1

    def __init__(self, fs: CgroupFS) -> None:
        self.fs = fs

    def init_child(self, d: str) -> None:
        """A new v1 cpuset has empty cpus and mems and refuses tasks: copy the parent's."""
        parent = os.path.dirname(d)
        for f in ("cpuset.mems", "cpuset.cpus"):
            with contextlib.suppress(OSError):
                if not self.fs.read(f"{d}/{f}").strip():
                    self.fs.write(f"{d}/{f}", self.fs.read(f"{parent}/{f}").strip())

    def set_cpus(self, d: str, cpus: str) -> None:
        parent = os.path.dirname(d)
        self.fs.write(d + "/cpuset.mems", self.fs.read(parent + "/cpuset.mems").strip())
        self.fs.write(d + "/cpuset.cpus", cpus)

    def effective(self, d: str) -> str:
        return self.fs.read(d + "/cpuset.cpus").strip()
