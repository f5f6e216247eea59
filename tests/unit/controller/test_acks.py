"""Folding acks (controller/acks.py): per group and merged, the figures the per-node
accounting gives (controller.quantum.job_utilization, controller.telemetry.command_skew_s)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from controller.acks import AckFolder, AckSummary
from controller.quantum import job_utilization
from controller.telemetry import command_skew_s

NODES = [f"n{i}" for i in range(7)]
CAPACITY = {n: 0.5 + 0.1 * i for i, n in enumerate(NODES)}


def quantum_acks(rng: random.Random, t_ns: dict[str, int], timed: bool) -> dict[str, Any]:
    acks: dict[str, Any] = {}
    for n in NODES:
        if rng.random() < 0.05:
            acks[n] = None  # no ack from this node
            continue
        t_ns[n] += rng.randint(90_000_000, 110_000_000)
        ack: dict[str, Any] = {
            "cpu_ns": {
                str(j): rng.randint(0, 60_000_000) for j in (1, 2, 3) if rng.random() < 0.95
            },
            "applied_monotonic_ns": t_ns[n],
            "thawed_realtime_ns": t_ns[n] + rng.randint(0, 400_000),
            "freeze_confirm_s": rng.random() / 1000,
            "errors": {"2": "weight failed"} if rng.random() < 0.1 else {},
        }
        if timed:
            ack.update(
                mode="time-triggered", lateness_s=rng.random() / 1e4, late=rng.random() < 0.2
            )
        acks[n] = ack
    return acks


@pytest.mark.parametrize("seed", range(8))
def test_two_relays_summaries_merge_to_the_per_node_figures(seed: int) -> None:
    rng = random.Random(seed)
    whole = AckFolder(CAPACITY)
    halves = [AckFolder(CAPACITY), AckFolder(CAPACITY)]
    groups = [NODES[:3], NODES[3:]]
    t_ns = {n: 10**12 + rng.randint(0, 10**6) for n in NODES}
    prev_applied: dict[str, int] = {}
    placement: dict[int, list[str]] = {}
    some_util = False
    for q in range(12):
        commands = {n: {str(j): 100 for j in (1, 2, 3) if rng.random() < 0.7} for n in NODES}
        acks = quantum_acks(rng, t_ns, timed=q % 2 == 1)
        s = whole.fold(commands, acks)
        m = AckSummary()
        for folder, names in zip(halves, groups, strict=True):
            part = folder.fold({n: commands[n] for n in names}, {n: acks[n] for n in names})
            m.add(AckSummary.from_wire(part.to_wire()))  # as it crosses the wire
        # the per-node accounting the scheduler did before summaries
        got = {n: a for n, a in acks.items() if a is not None}
        applied = {n: a["applied_monotonic_ns"] for n, a in got.items()}
        elapsed = {n: t - prev_applied[n] for n, t in applied.items() if n in prev_applied}
        cpu = {n: {int(j): v for j, v in a["cpu_ns"].items()} for n, a in got.items()}
        want_util = job_utilization(cpu, elapsed, CAPACITY, placement)
        for summary in (s, m):
            assert summary.answered == len(got)
            assert summary.utilization(placement) == pytest.approx(want_util)
            assert summary.skew_s(summary.applied) == command_skew_s(applied)
            thawed = {n: a["thawed_realtime_ns"] for n, a in got.items()}
            assert summary.skew_s(summary.thawed) == command_skew_s(thawed)
            assert summary.cpu_total_ns == sum(sum(c.values()) for c in cpu.values())
            offered = sum(e * CAPACITY[n] for n, e in elapsed.items())
            assert summary.offered_total_ns == pytest.approx(offered)
            assert sorted(summary.freeze_confirms) == sorted(
                a["freeze_confirm_s"] for a in got.values()
            )
            assert sorted(summary.late) == sorted(n for n, a in got.items() if a.get("late"))
            assert set(summary.ack_errors) == {n for n, a in got.items() if a["errors"]}
            for j in (1, 2, 3):
                assert summary.cpu_ns.get(j, 0) == sum(c.get(j, 0) for c in cpu.values())
        some_util = some_util or bool(want_util)
        prev_applied = {n: applied[n] for n in applied}
        placement = {}
        for n, jobs in commands.items():
            for j in jobs:
                placement.setdefault(int(j), []).append(n)
    assert some_util, "the draw should leave some jobs with every node's data"


def test_a_malformed_summary_raises_value_error() -> None:
    with pytest.raises((ValueError, TypeError)):
        AckSummary.from_wire({"cpu_ns": {"x": 1}})
    with pytest.raises((ValueError, TypeError)):
        AckSummary.from_wire({"applied": [1, 2]})


def test_disk_demand_is_bytes_over_the_quantum_times_the_disk_rate() -> None:
    """issue 31: a job's block I/O bytes over what its nodes' disks could move."""
    folder = AckFolder({"n0": 1.0, "n1": 1.0})
    commands = {"n0": {"1": 100, "2": 100}, "n1": {"1": 100}}
    first = {n: {"cpu_ns": {}, "applied_monotonic_ns": 1_000_000_000} for n in ("n0", "n1")}
    folder.fold(commands, first)
    acks = {
        "n0": {
            "cpu_ns": {"1": 1, "2": 1},
            "io_bytes": {"1": [10_000_000, 10_000_000], "2": [0, 0], "9": "junk"},
            "applied_monotonic_ns": 1_200_000_000,  # a 0.2 s quantum
        },
        "n1": {
            "cpu_ns": {"1": 1},
            "io_bytes": {"1": [0, 0]},
            "applied_monotonic_ns": 1_200_000_000,
        },
    }
    s = folder.fold(commands, acks)
    placement = {1: ["n0", "n1"], 2: ["n0"]}
    # job 1: 20 MB over 2 x 0.2 s x 100 MB/s = 40 MB; job 2 none
    assert s.device_demand("disk", placement, 100e6) == pytest.approx({1: 0.5, 2: 0.0})
    assert s.device_demand("disk", placement, 10e6) == {1: 1.0, 2: 0.0}  # clamped
    # a relay's summary carries it: the merge of two halves gives the same figure
    back = AckSummary.from_wire(s.to_wire())
    assert back.device_demand("disk", placement, 100e6) == pytest.approx({1: 0.5, 2: 0.0})
    # a node that reports no bytes (no accounting there): the job's disk is unknown
    del acks["n1"]["io_bytes"]
    acks["n0"]["applied_monotonic_ns"] = acks["n1"]["applied_monotonic_ns"] = 1_400_000_000
    s = folder.fold(commands, acks)
    assert s.device_demand("disk", placement, 100e6) == pytest.approx({2: 0.0})
