"""apps/presets.py and the synthetic program's preset flags (Wiseman & Feitelson 2003
§4.1.1-§4.2.3)."""

from __future__ import annotations

import pytest

from apps import synthetic
from apps.presets import (
    fine_compute_s,
    gcomp_for,
    paper_seconds,
    preset,
    qcrd_phases,
)


def test_paper_times() -> None:
    assert paper_seconds(2_500_000) == pytest.approx(0.075)  # a compute barrier
    assert paper_seconds(25_000) == pytest.approx(0.00075)  # §4.2.1's fine grain
    io = preset("io")
    assert (io.gio, io.nbytes) == (20, 8_193)
    assert io.gio * io.device_latency == pytest.approx(preset("compute").compute_s)
    assert preset("fine").block and not preset("compute").block
    with pytest.raises(ValueError, match="use one of compute, io, fine, qcrd"):
        preset("medium")


def test_gcomp_scales_by_time() -> None:
    assert gcomp_for(0.075, 30.0) == 2_500_000  # the paper's machine
    assert gcomp_for(0.075, 75.0) == 1_000_000  # a slower interpreter: fewer iterations
    assert gcomp_for(0.0, 75.0) == 0


def test_fine_solves_for_the_target_share() -> None:
    x = fine_compute_s(barrier_s=1.0e-3, barrier_cpu_s=0.1e-3)
    assert (x + 0.1e-3) / (x + 1.0e-3) == pytest.approx(0.45)
    assert fine_compute_s(1.0e-3, 0.6e-3) == 0.0  # the barrier alone is above 45 %


def test_qcrd_is_12_pairs_and_a_long_tail_scaled_to_a_duration() -> None:
    ph = qcrd_phases(1.0, 4.0, 8.0)
    assert [p.kind for p in ph] == ["io", "cpu"] * 12 + ["io"]
    assert sum(p.seconds for p in ph) == pytest.approx(68.0)
    half = qcrd_phases(1.0, 4.0, 8.0, duration=34.0)
    assert [p.seconds for p in half] == pytest.approx([p.seconds / 2 for p in ph])
    with pytest.raises(ValueError, match="CPU phase length must be > 0"):
        qcrd_phases(1.0, 0.0, 8.0)


def cfg(*argv: str, size: int = 1) -> synthetic.Config:
    args = synthetic.build_parser().parse_args(list(argv))
    return synthetic.config_from(args, {"COSCHED_SIZE": str(size), "COSCHED_PORT": "7000"})


def test_presets_set_the_workload_and_flags_override() -> None:
    c = cfg("--preset", "compute")
    assert c.ns_per_iteration and c.gcomp == gcomp_for(0.075, c.ns_per_iteration)
    assert cfg("--preset", "compute", "--gcomp", "5").gcomp == 5
    io = cfg("--preset", "io", "--device-latency", "0")
    assert (io.gcomp, io.gio, io.device_latency) == (0, 20, 0.0)
    fine = cfg("--preset", "fine", size=2)
    assert fine.fine_probe and fine.wait.recv == "block"
    assert cfg("--preset", "fine", "--wait", "spin", size=2).wait.recv == "spin"
    assert not cfg("--preset", "fine", "--gcomp", "100", size=2).fine_probe
    q = cfg("--preset", "qcrd", "--qcrd-phases", "1,2,3", "--duration", "9")
    assert len(q.qcrd) == 25 and sum(p.seconds for p in q.qcrd) == pytest.approx(9.0)
    plain = cfg()
    assert (plain.gcomp, plain.gio, plain.preset) == (2_500_000, 0, None)


@pytest.mark.parametrize(
    ("argv", "size", "needle"),
    [
        (("--preset", "fine"), 1, "needs 2 or more ranks"),
        (("--preset", "qcrd", "--qcrd-phases", "1,2"), 1, "want three lengths"),
        (("--preset", "qcrd", "--qcrd-phases", "1,-2,3"), 1, "must be > 0"),
        (("--qcrd-phases", "1,2,3"), 1, "needs --preset qcrd"),
    ],
)
def test_bad_preset_input_is_one_line(argv: tuple[str, ...], size: int, needle: str) -> None:
    with pytest.raises(synthetic.ConfigError, match=needle):
        cfg(*argv, size=size)
