"""Time-triggered switches on the controller side: plans sent ahead with their instant,
the figures the acks bring back, and a quantum grid that does not drift."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from controller.daemon import Daemon, DaemonConfig
from controller.nodes import NodeInfo, QuantumResult
from controller.operator import OperatorConfig
from controller.scheduler import Scheduler
from tests.support.controller_fakes import BUSY, Clock, FakePool


def make(policy: str = "gang") -> tuple[Scheduler, FakePool, Clock]:
    pool = FakePool(2)
    clock = Clock()
    return Scheduler(policy, {}, pool, wall=clock, mono=clock), pool, clock


def test_tick_passes_the_instant_and_accounts_the_acks_figures() -> None:
    s, pool, clock = make()
    s.submit(BUSY, "alice")
    s.submit(BUSY, "bob")
    pool.skew_ns = 40_000  # the second node thaws 40 us after the first
    pool.lateness_s = 0.00003
    for k in range(4):
        clock.t += 0.1
        s.tick(at=1000.0 + k * 0.1)
    assert pool.ats == [1000.0, 1000.1, 1000.2, 1000.3]
    assert s.telemetry.counters.timed_quanta == 4 and s.telemetry.counters.late_plans == 0
    sw = s.telemetry.switch_percentiles()
    assert sw["thaw_skew_p99_s"] == pytest.approx(40e-6)
    assert sw["lateness_p50_s"] == pytest.approx(30e-6)
    assert sw["freeze_confirm_p99_s"] == pytest.approx(0.0002)
    pool.late = True
    clock.t += 0.1
    s.tick(at=1000.4)
    assert s.telemetry.counters.late_plans == 2  # one per node
    assert s.telemetry.drain().late_plans == 2  # what the exporter has not counted yet


def test_utilization_feedback_is_the_same_in_both_modes() -> None:
    """The policy sees the same utilization whether quanta are time-triggered or not."""
    seen: list[dict[int, float]] = []
    for timed in (False, True):
        s, pool, clock = make("paired-gang")
        s.submit(BUSY, "alice")
        s.submit(BUSY, "bob")
        pool.busy = {"1": 1.0, "2": 0.25}
        for k in range(6):
            clock.t += 0.1
            s.tick(at=500.0 + k * 0.1 if timed else None)
        assert pool.ats == ([500.0 + k * 0.1 for k in range(6)] if timed else [None] * 6)
        seen.append(dict(s.last_utilization))
    assert seen[0] and seen[0] == seen[1]


class _Server:
    def owns(self, tag: object) -> bool:
        return False

    def sweep(self) -> None:
        pass

    def close(self) -> None:
        pass


class _RecordingPool(FakePool):
    """Stops the daemon after ``n`` rounds; records when each was sent and its instant."""

    def __init__(self, daemon: Daemon, n: int) -> None:
        super().__init__(2)
        self.daemon = daemon
        self.n = n
        self.sent: list[tuple[float, float | None]] = []  # (wall at send, at)

    def quantum(
        self,
        q: int,
        commands: dict[str, dict[str, int]],
        at: float | None = None,
        *,
        measure: Sequence[str] | None = None,
    ) -> dict[str, QuantumResult]:
        self.sent.append((time.time(), at))
        if len(self.sent) >= self.n:
            self.daemon.stopping = True
        return super().quantum(q, commands, at, measure=measure)

    def close(self) -> None:
        pass


def run_daemon(tmp_path: Path, policy: str, quantum: float, lead_ms: float, n: int) -> Any:
    node = NodeInfo("n0", ("127.0.0.1", 9), "127.0.0.1")
    cfg = DaemonConfig(
        policy=policy,
        params={},
        nodes=[node],
        key=b"k" * 32,
        run_dir=str(tmp_path),
        quantum=quantum,
        lead_ms=lead_ms,
        fifo_priority=0,
    )
    d = Daemon(cfg)
    pool = _RecordingPool(d, n)
    d.pool = pool  # type: ignore[assignment]
    d.sched = Scheduler(policy, {}, pool, config=OperatorConfig(quantum=quantum))
    d.server = _Server()  # type: ignore[assignment]
    try:
        d.loop()
        return d, pool
    finally:
        d.close()


def test_daemon_sends_each_plan_lead_ahead_on_a_grid(tmp_path: Path) -> None:
    q = 0.05
    d, pool = run_daemon(tmp_path, "gang", q, 10.0, 12)
    ats = [at for _, at in pool.sent]
    assert all(at is not None for at in ats)
    for (sent, at), k in zip(pool.sent, range(len(ats)), strict=True):
        assert at - sent <= 0.010 + 0.002  # never more than the lead ahead
        # On the grid of the first instant: whole quanta apart (a skipped one is allowed).
        steps = (at - ats[0]) / q
        assert abs(steps - round(steps)) < 0.02, (k, steps)
    assert all(b > a for a, b in itertools.pairwise(ats))
    st = d.status_extra()
    assert st["switch_mode"] == "time-triggered" and st["lead_ms"] == pytest.approx(10.0)
    assert st["timed_quanta"] == 12 and st["late_plans"] == 0


def test_lead_is_capped_at_half_the_quantum_and_zero_means_immediate(tmp_path: Path) -> None:
    d, pool = run_daemon(tmp_path, "gang", 0.01, 20.0, 3)
    assert d.lead_s() == pytest.approx(0.005)
    d, pool = run_daemon(tmp_path, "gang", 0.05, 0.0, 3)
    assert [at for _, at in pool.sent] == [None] * 3
    assert d.status_extra()["switch_mode"] == "immediate"
    # Families whose quanta switch nothing stay immediate whatever the flag says.
    d, pool = run_daemon(tmp_path, "easy", 0.05, 20.0, 3)
    assert [at for _, at in pool.sent] == [None] * 3 and d.lead_s() == 0.0


def test_a_round_past_the_next_boundary_skips_whole_quanta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d, _ = run_daemon(tmp_path, "gang", 0.1, 20.0, 1)
    now = [50.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    assert d._next_boundary(50.0, 0.02) == pytest.approx(50.1)  # on time
    now[0] = 50.25  # the round overran two boundaries
    assert d._next_boundary(50.0, 0.02) == pytest.approx(50.3)
    assert d.sched.telemetry.counters.missed_boundaries == 2
    assert d._next_boundary(50.0, 0.0) == pytest.approx(50.35)  # immediate: re-anchored


@pytest.mark.parametrize("bad", ["-1", "nan", "1001"])
def test_bad_lead_is_one_line(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    from controller.__main__ import main

    assert main(["--policy", "gang", "--lead-ms", bad, "--agents", "n0=127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("controller: error: --lead-ms must be in 0..1000 ms") and "\n" not in err
