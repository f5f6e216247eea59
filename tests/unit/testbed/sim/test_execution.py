"""The three-device rule of the execution model (testbed/sim/execution.py, issue 31)."""

from __future__ import annotations

import pytest

from testbed.sim.execution import gang_rates

CPU = {1: 0.9, 2: 0.04, 3: 0.04}
DISK = {1: 0.0, 2: 0.8, 3: 0.8}
NET = {1: 0.0, 2: 0.0, 3: 0.0}


def test_an_over_subscribed_disk_slows_only_the_jobs_using_it() -> None:
    rates = gang_rates([(1, 2, 3)], CPU.__getitem__, 0.0, DISK.__getitem__, NET.__getitem__)
    assert rates[1] == pytest.approx(1.0)  # the compute job does not wait for the disk
    assert rates[2] == pytest.approx(1 / 1.6) and rates[3] == pytest.approx(1 / 1.6)


def test_without_the_network_term_the_node_wide_rule_is_kept() -> None:
    rates = gang_rates([(1, 2, 3)], CPU.__getitem__, 0.0, DISK.__getitem__)
    assert all(r == pytest.approx(1 / 1.6) for r in rates.values())


def test_a_gang_goes_at_its_slowest_node_and_interference_applies() -> None:
    net = {1: 0.0, 2: 0.0, 3: 0.7, 4: 0.6}
    cpu = {1: 0.5, 2: 0.1, 3: 0.1, 4: 0.1}
    disk = dict.fromkeys(cpu, 0.0)
    rates = gang_rates([(1, 3, 4), (1, 2)], cpu.__getitem__, 0.1, disk.__getitem__, net.__getitem__)
    assert rates[3] == pytest.approx(0.9 / 1.3) and rates[4] == pytest.approx(0.9 / 1.3)
    assert rates[1] == pytest.approx(0.9) and rates[2] == pytest.approx(0.9)
