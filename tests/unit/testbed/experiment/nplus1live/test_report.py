"""The live N + 1 study's spec and report on hand-made runs (testbed/experiment/nplus1live;
the live --quick variant: tests/integration/test_studies_live.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testbed.experiment import registry
from testbed.experiment.fields import SpecError
from testbed.experiment.nplus1live import report
from testbed.experiment.nplus1live.study import runs_of

REPO = Path(__file__).resolve().parents[5]


def _job(kind: str, jid: int, elapsed: float, work: float, response: float) -> dict[str, Any]:
    return {
        "kind": kind, "job_id": jid, "state": "done", "response_s": response, "wait_s": 0.0,
        "elapsed_s": elapsed, "units": int(work) if kind == "compute" else 10,
        "bytes": 0 if kind == "compute" else int(work), "cpu_s": 0.1,
    }  # fmt: skip


def _q(t: float, ran: list[str], **shares: tuple[float, float, float]) -> dict[str, Any]:
    return {
        "t": t, "quanta": int(t * 10), "ran": ran,
        "shares": {k: dict(zip(("cpu", "disk", "net"), v, strict=True)) for k, v in shares.items()},
    }  # fmt: skip


C, D, N = (0.9, 0.0, 0.0), (0.04, 0.8, 0.0), (0.04, 0.0, 0.8)


def _run(policy: str, repeat: int, scale: float, trace: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "policy": policy, "repeat": repeat, "quanta": len(trace), "wall_s": 5.0,
        "other_cores": 0.5, "loadavg": [1.0, 1.0, 1.0], "trace": trace,
        "jobs": [
            _job("compute", 1, 4.0 / scale, 100, 4.0 / scale),
            _job("disk", 2, 4.0 / scale, 4e9, 4.0 / scale),
            _job("net", 3, 4.0 / scale, 4e7, 4.0 / scale),
        ],
    }  # fmt: skip


GANG = [_q(0.1, ["compute"], compute=C), _q(0.3, ["disk"], disk=D), _q(0.5, ["net"], net=N)]
TRIPLE = [
    _q(0.1, ["compute"], compute=C),  # a new job alone
    _q(0.3, ["compute", "disk", "net"], compute=C, disk=D, net=N),
    _q(0.5, ["compute", "disk", "net"], compute=C, disk=(0.04, 0.3, 0.0), net=N),
    _q(0.7, ["net"], net=N),
    _q(
        0.9,
        [],
    ),
]


def _data() -> dict[str, Any]:
    runs = []
    for rep, wobble in ((1, 1.0), (2, 1.1), (3, 0.95)):
        runs += [
            _run("gang", rep, 1.0 * wobble, GANG),
            _run("paired-gang", rep, 1.5 * wobble, GANG),
            _run("nplus1", rep, 2.0 * wobble, TRIPLE),
        ]
    spec = {
        "name": "t", "nodes": 2, "cpus_per_node": 1.0, "cpu_mechanism": "cpuset",
        "link": "fast-ethernet", "quantum": 0.2, "policies": ["gang", "paired-gang", "nplus1"],
        "solo_seconds": 4.0,
        "jobs": {k: {"duty": 0.8, "block": 1 << 20, "loops": 10} for k in report.KINDS},
    }  # fmt: skip
    return {"spec": spec, "calibration": {}, "runs": runs}


def test_differences_are_taken_repeat_by_repeat() -> None:
    v = report.verdicts(_data())
    d = v["disk throughput vs gang"]
    assert d is not None and d.values == pytest.approx((100.0, 100.0, 100.0))
    assert d.beyond_spread()
    c = v["compute throughput vs paired-gang"]
    assert c is not None and c.mean == pytest.approx(100 * (2 / 1.5 - 1))
    r = v["all mean response vs gang"]
    assert r is not None and r.mean == pytest.approx(-50.0)


def test_groups_count_what_ran_together_while_all_three_were_in() -> None:
    runs = [r for r in runs_of(_data()) if r.policy == "nplus1"]
    c, n = report.groups(runs)
    assert n == 12 and c["compute+disk+net"] == 6 and c["net"] == 3
    full, m = report.groups(runs, full=True)  # from disk's first quantum to disk's last
    assert m == 6 and set(full) == {"compute+disk+net"}


def test_sharp_changes_are_counted_on_the_devices_the_policy_reads() -> None:
    runs = [r for r in runs_of(_data()) if r.policy == "nplus1"]
    assert report.sharp_changes(runs, "disk", ("cpu", "disk", "net")) == (6, 3)  # 0.8 -> 0.3
    assert report.sharp_changes(runs, "disk", ("cpu",)) == (6, 0)


def test_device_use_sums_the_shares_of_the_jobs_that_ran() -> None:
    (run,) = [r for r in runs_of(_data()) if r.policy == "nplus1" and r.repeat == 1]
    t, use = report.device_series(run)[1]
    assert t == 0.3 and use == pytest.approx({"cpu": 0.98, "disk": 0.8, "net": 0.8})


def test_the_report_states_the_target_and_every_policy() -> None:
    text = report.markdown(_data())
    assert "**Target**" in text and "the bound of a 10 % loss met" in text
    for name in report.NAMES.values():
        assert name in text
    assert "strict gang" in report.summary(_data())


def test_the_committed_spec_and_its_quick_variant_load() -> None:
    study, spec = registry.load(REPO / "experiments" / "nplus1-live.toml")
    assert study.kind == "nplus1-live" and spec.repeats >= 3 and spec.cpus_per_node == 1.0
    quick = study.quick(spec)
    assert quick.repeats < spec.repeats and quick.solo_seconds < spec.solo_seconds
    assert quick.jobs == spec.jobs and spec.params("nplus1") == {"n": "2"}


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        (("duty = 0.8", "duty = 1.5"), "duty"),
        (('policies = ["gang"', 'policies = ["dhc"'), "policies"),
        (("repeats = 3", "repeats = 0"), "repeats"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_key(
    tmp_path: Path, edit: tuple[str, str], names: str
) -> None:
    text = (REPO / "experiments" / "nplus1-live.toml").read_text()
    assert edit[0] in text
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(*edit, 1))
    with pytest.raises(SpecError, match=names) as e:
        registry.load(path)
    assert "\n" not in str(e.value)
