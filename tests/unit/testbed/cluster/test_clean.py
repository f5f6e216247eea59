"""``cosched clean``'s report (testbed/cluster/clean.py); its runs are in test_sshd.py and
tests/integration."""

from __future__ import annotations

from testbed.cluster.clean import CleanReport


def test_clean_names_each_killed_pid_once() -> None:
    # v1: a process sits in several hierarchies and remove_tree kills it in each
    rep = CleanReport(killed=[5268, 5264, 5268])
    assert "killed PIDs left in cosched cgroups: [5264, 5268]" in rep.format()
