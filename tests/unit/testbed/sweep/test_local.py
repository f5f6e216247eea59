"""testbed.sweep: the run key and the in-process executor (order, failures recorded)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.sweep import RunSpec, SweepOptions, run_sweep


def square(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    if params.get("fail"):
        raise ValueError("asked to fail")
    return {"y": params["x"] ** 2 + seed}


def test_key_depends_on_study_params_and_seed_not_on_dict_order() -> None:
    a = RunSpec("s", {"x": 1, "z": 2}, 0, square)
    assert a.key == RunSpec("s", {"z": 2, "x": 1}, 0, square).key
    assert a.key != RunSpec("s", {"x": 1, "z": 2}, 1, square).key
    assert a.key != RunSpec("t", {"x": 1, "z": 2}, 0, square).key
    assert a.key != RunSpec("s", {"x": 2, "z": 2}, 0, square).key


def test_results_in_order_and_a_failure_does_not_stop_the_sweep() -> None:
    specs = [RunSpec("s", {"x": x, "fail": x == 2}, 1, square) for x in range(4)]
    out = run_sweep(specs, SweepOptions(progress=False))
    assert out.results == [{"y": 1}, {"y": 2}, None, {"y": 10}]
    assert [f.spec.params["x"] for f in out.failed] == [2]
    assert out.failed[0].error == "ValueError: asked to fail"
    assert not out.ok()
