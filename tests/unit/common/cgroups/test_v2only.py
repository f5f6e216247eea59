"""common/cgroups/v2only.py: the pure parts of making a host cgroup-v2-only and back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.cgroups import v2only
from common.cgroups.errors import CgroupSetupError, HierarchyHeld

HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/freezer cgroup rw,relatime,freezer 0 0
cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
V2_ONLY = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"


def test_the_plan_takes_the_controller_hierarchies_and_leaves_memory_and_named_ones() -> None:
    unified, take = v2only.plan_switch(HYBRID, lambda mp: [])
    assert unified == "/sys/fs/cgroup/unified"
    assert [m.mountpoint for m in take] == [
        "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/freezer",
        "/sys/fs/cgroup/blkio"]  # fmt: skip
    assert take[0].options == "rw,relatime,cpu"
    rec = v2only.SwitchRecord(unified, take)
    # cpuacct and freezer have no cgroup2 controller; blkio is cgroup2's io
    assert rec.v2_controllers() == ["cpu", "io"]


def test_a_hierarchy_with_groups_is_refused_in_one_line_naming_them() -> None:
    groups = {"/sys/fs/cgroup/freezer": ["cosched", "docker"]}
    with pytest.raises(CgroupSetupError) as e:
        v2only.plan_switch(HYBRID, lambda mp: groups.get(mp, []))
    msg = str(e.value)
    assert "\n" not in msg
    assert "/sys/fs/cgroup/freezer (freezer) has groups (cosched, docker)" in msg
    assert "cosched clean" in msg


def test_no_cgroup2_is_refused_and_a_v2_only_host_needs_nothing() -> None:
    with pytest.raises(CgroupSetupError, match="no cgroup2 hierarchy is mounted"):
        v2only.plan_switch("cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n", lambda mp: [])
    assert v2only.plan_switch(V2_ONLY, lambda mp: []) == ("/sys/fs/cgroup", [])


def test_the_checks_after_each_step() -> None:
    _, take = v2only.plan_switch(HYBRID, lambda mp: [])
    rec = v2only.SwitchRecord("/sys/fs/cgroup/unified", take)
    assert v2only.missing_after_switch(rec, ["cpuset", "cpu", "hugetlb"]) == ["io"]
    assert v2only.missing_after_switch(rec, ["cpu", "io", "pids"]) == []
    # restored: every recorded mount point is a v1 mount with its controllers again
    assert v2only.not_restored(rec, HYBRID) == []
    without_cpu = "".join(ln + "\n" for ln in HYBRID.splitlines() if "/cpu " not in ln)
    assert v2only.not_restored(rec, without_cpu) == ["/sys/fs/cgroup/cpu"]
    wrong = HYBRID.replace("rw,relatime,blkio", "rw,relatime,pids")
    assert v2only.not_restored(rec, wrong) == ["/sys/fs/cgroup/blkio"]


def test_the_record_round_trips_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    _, take = v2only.plan_switch(HYBRID, lambda mp: [])
    path = tmp_path / "rec.json"
    assert v2only.load_record(str(path)) is None
    rec = v2only.SwitchRecord("/sys/fs/cgroup/unified", take)
    path.write_text(json.dumps(rec.to_dict()))
    assert v2only.load_record(str(path)) == rec
    path.write_text("{")
    with pytest.raises(CgroupSetupError, match="unreadable") as e:
        v2only.load_record(str(path))
    assert "\n" not in str(e.value)


def test_the_state_line() -> None:
    hybrid = v2only.HostState("/sys/fs/cgroup/unified", ["/sys/fs/cgroup/cpu"], ["hugetlb"], None)
    assert not hybrid.v2_only
    assert hybrid.describe().startswith("hybrid: v1 hierarchies at /sys/fs/cgroup/cpu")
    rec = v2only.SwitchRecord("/sys/fs/cgroup/unified", [v2only.V1Mount("/x", "rw,cpu", ("cpu",))])
    switched = v2only.HostState("/sys/fs/cgroup/unified", [], ["cpu", "io"], rec)
    assert switched.v2_only and "cosched host cgroups restore" in switched.describe()
    native = v2only.HostState("/sys/fs/cgroup", [], ["cpu"], None)
    assert native.describe() == "cgroup-v2-only: cgroup2 at /sys/fs/cgroup offers cpu"
    assert "v1 only" in v2only.HostState(None, ["/a"], [], None).describe()


PROC_CGROUPS = """\
#subsys_name	hierarchy	num_cgroups	enabled
cpuset	106	6	1
cpu	105	1	1
cpuacct	103	1	1
memory	4	81	1
hugetlb	0	1	1
"""


def test_groups_removed_but_not_yet_freed_hold_the_unmount_back() -> None:
    """The kernel kills an unmounted v1 hierarchy only if it had no children at the
    unmount, and a removed group stays a child until freed: such a hierarchy lived on
    with its controllers (5 minutes here), so the switch waits for the counts."""
    counts = v2only.groups_per_controller(PROC_CGROUPS)
    assert counts == {"cpuset": 6, "cpu": 1, "cpuacct": 1, "memory": 81, "hugetlb": 1}
    assert v2only.not_yet_freed(v2only.V1Mount("/c/cpuset", "rw,cpuset", ("cpuset",)), counts) == 5
    assert v2only.not_yet_freed(v2only.V1Mount("/c/cpu", "rw,cpu", ("cpu",)), counts) == 0
    both = v2only.V1Mount("/c/cpu,cpuacct", "rw,cpu,cpuacct", ("cpu", "cpuacct"))
    assert v2only.not_yet_freed(both, counts) == 0


def test_a_busy_unmount_is_retried_and_then_names_its_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = v2only.V1Mount("/sys/fs/cgroup/cpu", "rw,cpu", ("cpu",))
    answers = ["umount: /sys/fs/cgroup/cpu: target is busy.", "umount: ... target is busy.", None]
    calls: list[list[str]] = []

    def run(argv: list[str]) -> str | None:
        calls.append(argv)
        return answers.pop(0)

    monkeypatch.setattr(v2only, "_run", run)
    monkeypatch.setattr(v2only.time, "sleep", lambda s: None)
    assert v2only._umount(m) is None
    assert calls == [["umount", "/sys/fs/cgroup/cpu"]] * 3

    # still busy when the time is up: the complaint names who holds it
    monkeypatch.setattr(v2only, "_run", lambda argv: "umount: target is busy.")
    monkeypatch.setattr(v2only, "_users", lambda mp: (f"[users of {mp}]", True))
    err = v2only._umount(m, busy_s=0.0)
    assert err == "umount: target is busy. [users of /sys/fs/cgroup/cpu]"

    # busy, and nothing this host can see holds it: "cannot be switched", exit status 3
    monkeypatch.setattr(v2only, "_users", lambda mp: ("[descriptors not readable: 1]", False))
    with pytest.raises(HierarchyHeld, match="stays busy and nothing here holds it") as held:
        v2only._umount(m, busy_s=0.0)
    assert held.value.exit_code == 3 and isinstance(held.value, CgroupSetupError)

    # any other failure is not retried
    calls.clear()
    monkeypatch.setattr(v2only, "_run", lambda argv: calls.append(argv) or "not mounted")
    assert v2only._umount(m) == "not mounted" and len(calls) == 1


def test_a_held_hierarchy_leaves_no_record_and_mounts_back_what_it_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "host-cgroup-v2only.json"
    monkeypatch.setattr(v2only.os, "geteuid", lambda: 0)
    monkeypatch.setattr(v2only, "_mounts", lambda: HYBRID)
    monkeypatch.setattr(v2only, "_children", lambda mp: [])
    monkeypatch.setattr(v2only, "_wait_freed", lambda m: None)
    unmounted: list[str] = []

    def umount(m: v2only.V1Mount, busy_s: float = 0.0) -> str | None:
        if m.mountpoint.endswith("/cpuacct"):
            raise HierarchyHeld("held")
        unmounted.append(m.mountpoint)
        return None

    given_back: list[list[str]] = []
    monkeypatch.setattr(v2only, "_umount", umount)
    monkeypatch.setattr(
        v2only, "_give_back", lambda ms, unified: given_back.append([m.mountpoint for m in ms])
    )
    with pytest.raises(HierarchyHeld):
        v2only.switch_to_v2(str(record))
    assert unmounted == ["/sys/fs/cgroup/cpu"]
    assert given_back == [["/sys/fs/cgroup/cpu"]]
    assert not record.exists()
