"""What tests/unit/testbed/experiment/simvslive/test_study.py
and tests/live/testbed/experiment/simvslive/test_study.py share."""

from __future__ import annotations

from pathlib import Path

from testbed.experiment.simvslive.study import (
    LiveJob,
    LiveRun,
    Rates,
    SimJobTimes,
    SimRun,
    StreamEntry,
    ValidationResult,
    summarize_rates,
)

REPO = Path(__file__).resolve().parents[2]


SPEC = REPO / "experiments" / "sim-vs-live.toml"


def _rates() -> Rates:
    samples = {
        1: [
            {"iterations": 400.0, "rate": 200.0, "exec_s": 2.30, "cpu": 0.46},
            {"iterations": 400.0, "rate": 200.0, "exec_s": 2.40, "cpu": 0.48},
        ],
        2: [{"iterations": 400.0, "rate": 160.0, "exec_s": 2.80, "cpu": 0.44}],
    }
    return Rates(112.0, 17857, summarize_rates(samples))


def _run(policy: str, jobs: list[tuple[int, float, float]]) -> LiveRun:
    """(size, submit, dedicated) per job; live end = submit + dedicated (not used by run_sim)."""
    return LiveRun(
        policy,
        0.5,
        [
            LiveJob(k, size, 100, d, sub, job_id=k + 1, state="done", submit_s=sub,
                    start_s=sub, end_s=sub + d)
            for k, (size, sub, d) in enumerate(jobs)
        ],
    )  # fmt: skip


def _sim(policy: str, live: LiveRun, scale: float, variant: str = "calibrated") -> SimRun:
    """A simulated run whose every response is ``scale`` times the live one."""
    jobs = []
    for j in live.jobs:
        assert j.submit_s is not None and j.end_s is not None
        end = j.submit_s + scale * (j.end_s - j.submit_s)
        jobs.append(SimJobTimes(j.index, j.dedicated_s, j.submit_s, j.submit_s, end))
    return SimRun(variant, policy, live.load, "x", 0.1, 0.0, {2: 0.45}, jobs, [(0.0, 1)], 0.5)


def _result(scales: dict[str, float]) -> ValidationResult:
    live, sims = [], []
    for policy, scale in scales.items():
        run = _run(policy, [(2, 0.0, 2.0), (2, 1.0, 4.0), (1, 10.0, 1.0)])
        run.rows = [(0.0, 1, 1), (1.0, 2, 2), (5.0, 0, 0), (10.0, 1, 1)]
        run.matching_success_ratio = 0.4 if policy != "gang" else None
        live.append(run)
        sims.append(_sim(policy, run, scale))
        sims.append(_sim(policy, run, 2.0, "other"))
    stream = [StreamEntry(k, float(k), 2, 10.0, 2, 2.0) for k in range(3)]
    return ValidationResult({"spec": {"name": "t"}}, stream, _rates(), live, sims)
