"""NPB-like kernels, in process: generator, kernel table, verification logic, bad input."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np
import pytest

from apps.mp import Comm
from apps.npb import KERNELS, NpbError, check_class, check_ranks, runner, table2_shares
from apps.npb import cg as cgmod
from apps.npb.adi import SoloTransport
from apps.npb.bt import BT
from apps.npb.cg import CG
from apps.npb.ft import FT
from apps.npb.is_ import IS
from apps.npb.randdp import MOD, SEED, Randlc, skip, vranlc, vranlc_ints
from apps.npb.sp import SP
from apps.npb.transport import OursTransport, Transport


def test_vranlc_is_randlc_and_skip_jumps_exactly() -> None:
    r = Randlc(SEED)
    scalar = [r.next() for _ in range(3000)]
    assert vranlc(3000, SEED).tolist() == scalar
    ints = vranlc_ints(3000, SEED)
    assert skip(SEED, 2999) * 1220703125 % MOD == int(ints[-1])
    # A rank's share starts where the previous one stopped.
    assert vranlc(1000, skip(SEED, 2000)).tolist() == scalar[2000:]
    assert all(0.0 < x < 1.0 for x in scalar)


def test_kernel_table_follows_yu_byun_tables_2_and_3() -> None:
    assert set(KERNELS) == {"bt", "sp", "ft", "is", "cg"}
    for info in KERNELS.values():
        assert abs(sum(e.share for e in info.table2) - 100.0) <= 1.0, info.name
    assert [n for n in range(1, 17) if KERNELS["bt"].allows(n)] == [1, 4, 9, 16]
    assert [n for n in range(1, 17) if KERNELS["cg"].allows(n)] == [1, 2, 4, 8, 16]
    assert KERNELS["is"].pattern == "AA" and KERNELS["cg"].pattern == "NN"


@pytest.mark.parametrize(
    ("name", "ranks"), [("bt", 8), ("sp", 2), ("cg", 6), ("ft", 12), ("is", 0)]
)
def test_a_rank_count_the_kernel_cannot_use_is_one_clear_error(name: str, ranks: int) -> None:
    with pytest.raises(NpbError) as e:
        check_ranks(name, ranks)
    msg = str(e.value)
    assert str(ranks) in msg and ("square" in msg or "power of two" in msg) and "\n" not in msg


def test_unknown_class_and_kernel_are_refused() -> None:
    assert check_class("cg", "s") == "S"
    with pytest.raises(NpbError, match=r"has no class 'Q'.*S, W, A"):
        check_class("cg", "Q")
    with pytest.raises(NpbError, match="unknown NPB kernel 'lu'"):
        check_ranks("lu", 4)


def test_table2_shares_count_calls_by_category() -> None:
    shares = dict((e.label, s) for e, s in table2_shares("ft", {"checksum": 1, "transpose": 2}))
    assert shares == {"8": pytest.approx(100 / 3), "1048 K": pytest.approx(200 / 3)}


def _args(k: runner.Kernel, *argv: str) -> argparse.Namespace:
    a = runner.build_parser(k).parse_args(list(argv))
    runner.check_inputs(k, a, 1)
    return a


def _solo(k: runner.Kernel, *argv: str) -> tuple[dict[str, Any], runner.Rep]:
    t = OursTransport(Comm(0, 1).open())
    report, rep = runner.run_rank(k, _args(k, *argv), t)
    assert report is not None
    return report, rep


@pytest.mark.parametrize("kernel", [CG(), FT(), IS()])
def test_serial_class_s_verifies_against_npb(kernel: runner.Kernel) -> None:
    report, _ = _solo(kernel)
    assert report["verified"] is True
    assert report["iterations"] > 0 and report["seconds"] > 0
    assert report["cpu_ratio"] > 0  # (threads: checked in the multi-process tests)


def test_a_wrong_reference_is_unsuccessful(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: the same run against a zeta 1e-9 off."""
    c = cgmod.CLASSES["S"]
    monkeypatch.setitem(
        cgmod.CLASSES, "S", cgmod.CgClass(c.na, c.nonzer, c.niter, c.shift, c.zeta * (1 + 1e-9))
    )
    report, rep = _solo(CG())
    assert report["verified"] is False and rep.detail["relative_error"] > 1e-10


def test_changed_iteration_count_is_not_verified() -> None:
    report, _ = _solo(CG(), "--niter", "3")
    assert report["verified"] is None and report["iterations"] == 3


def test_repetitions_repeat_the_verified_run() -> None:
    report, _ = _solo(IS(), "--reps", "3")
    assert report["reps"] == 3 and report["iterations"] == 30 and report["verified"] is True


@pytest.mark.parametrize("kernel", [BT, SP])
def test_adi_residual_and_error_fall_towards_the_exact_steady_state(kernel: type[BT | SP]) -> None:
    k = kernel()
    k.configure(SoloTransport(), 12)
    short = k.run_steps(2)
    k.reset()
    longer = k.run_steps(30)
    assert np.all(longer[5:10] < short[5:10]) and np.all(longer[10:] < short[10:])
    assert np.all(longer[5:10] < 0.1 * longer[:5])


def test_bt_block_solver_solves_its_block_tridiagonal_system() -> None:
    k = BT()
    k.configure(SoloTransport(), 12)
    cell = k.cells[0]
    rng = np.random.default_rng(1)
    r = rng.standard_normal((12, 144, 5))
    r[0] = r[-1] = 0.0  # boundary rows are du = 0
    f, _ = k.forward(cell, 1, r, None)
    x, _ = k.backward(cell, 1, f, None)
    # Rebuild the operator for one line and multiply back.
    from apps.npb.adi import M
    from apps.npb.bt import K

    line = 7
    w = k.line_w(cell, 1)[:, line]
    s = k.dt * w / k.h**2
    out = np.zeros((12, 5))
    for i in range(12):
        if i in (0, 11):
            out[i] = x[i, line]
            continue
        b = np.eye(5) + 2 * s[i] * K - k.dt * M / 3
        out[i] = b @ x[i, line] - s[i] * K @ (x[i - 1, line] + x[i + 1, line])
    assert np.allclose(out, r[:, line], atol=1e-12)


def test_adi_rejects_cells_thinner_than_the_ghost_layers() -> None:
    k = BT()
    a = runner.build_parser(k).parse_args(["--class", "S"])
    a.cls = "S"
    with pytest.raises(NpbError, match="thinner"):
        k.check_args(a, 49)  # 12 points over 7 cells
    k.check_args(a, 36)


def test_ft_grid_must_split_over_the_rank_grid() -> None:
    k = FT()
    a = runner.build_parser(k).parse_args(["--class", "W"])
    k.check_args(a, 16)
    with pytest.raises(NpbError, match="cannot be split"):
        k.check_args(a, 2048)  # a 32 x 64 grid: nz = 32 does not split 64 ways


def test_cg_process_grid_is_npbs() -> None:
    assert cgmod.grid(1) == (1, 1)
    assert cgmod.grid(2) == (1, 2)
    assert cgmod.grid(8) == (2, 4)
    assert cgmod.grid(16) == (4, 4)
    assert math.log2(cgmod.grid(32)[1]) == 3


def test_adi_serial_check_catches_a_run_the_serial_code_does_not_reproduce() -> None:
    class Drifting(BT):
        """A BT whose distributed run differs from its serial one (as a wrong exchange would)."""

        def configure(self, t: Transport, n: int) -> None:
            super().configure(t, n)
            if not isinstance(t, SoloTransport):
                for c in self.cells:
                    c.gex = c.gex * (1 + 1e-6)

    report, rep = _solo(Drifting(), "--steps", "3")
    assert report["verified"] is False
    assert rep.detail["serial_max_relative_difference"] > 1e-10
    report, _ = _solo(BT(), "--steps", "3")
    assert report["verified"] is True


def test_rank_argv_is_one_rank_of_a_job() -> None:
    argv = KERNELS["is"].rank_argv("python3", "W", "mpi", 70.0)
    assert argv == ["python3", "-m", "apps.npb.is_", "--class", "W", "--transport", "mpi",
                    "--duration", "70"]  # fmt: skip
