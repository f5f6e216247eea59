"""N + 1 gangs on hand-made cases: the vector predictor (eq. (1) per device) and the
matching (controller/policies/devices.py, nplus1.py)."""

from __future__ import annotations

import pytest

from controller.policies.base import PolicyError
from controller.policies.devices import MEASURED, VectorPredictor, check_devices, check_n
from controller.policies.nplus1 import dominant, fits_all, nplus1_match

DEV = ("cpu", "disk", "net")
COMPUTE = (0.60, 0.05, 0.00)
DISK = (0.20, 0.70, 0.00)
NET = (0.15, 0.00, 0.60)


def test_eq1_per_device_with_the_short_history_rule() -> None:
    p = VectorPredictor(DEV)
    assert p.is_new(1) and p.predict(1) == (1.0, 1.0, 1.0)  # §2.3: a new job runs alone
    p.observe(1, {"cpu": 0.5, "disk": 0.2})  # net not given: 0 used
    assert p.predict(1) == pytest.approx((0.5, 0.2, 0.0))
    p.observe(1, {"cpu": 0.4, "disk": 0.3, "net": 0.1})
    # two quanta: (0.4 * newest + 0.3 * older) / 0.7, per device
    assert p.predict(1) == pytest.approx(
        ((0.4 * 0.4 + 0.3 * 0.5) / 0.7, (0.4 * 0.3 + 0.3 * 0.2) / 0.7, (0.4 * 0.1) / 0.7)
    )
    for u in (0.4, 0.4, 0.4, 0.4):
        p.observe(1, {"cpu": u, "disk": 0.3, "net": 0.1})
    assert p.predict(1) == pytest.approx((0.4, 0.3, 0.1))  # four quanta: weights sum to 1


def test_a_sharp_change_on_any_device_runs_the_job_alone() -> None:
    p = VectorPredictor(DEV)
    p.observe(7, {"cpu": 0.3, "disk": 0.1})
    p.observe(7, {"cpu": 0.3, "disk": 0.5})  # the disk jumped by 0.4 > 0.2
    assert p.predict(7) == (1.0, 1.0, 1.0)
    assert p.estimate(7)[1] == pytest.approx((0.4 * 0.5 + 0.3 * 0.1) / 0.7)
    p.observe(7, {"cpu": 0.3, "disk": 0.5})
    assert p.predict(7)[1] < 1.0
    p.forget(7)
    assert p.is_new(7)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: check_devices(["cpu", "gpu"]),
         "unknown device 'gpu': the agents measure cpu, disk, net"),
        (lambda: check_devices(["disk", "cpu"]), "devices must start with 'cpu'"),
        (lambda: check_devices(["cpu", "disk", "disk"]), "named twice"),
        (lambda: check_n(3, ["cpu", "disk", "net"]),
         "N = 3, but the I/O devices configured are disk, net (N from 1 to 2)"),
        (lambda: check_n(1, ["cpu"]), "configured are none"),
        (lambda: VectorPredictor(["cpu", "disk"]).observe(1, {"net": 0.2}),
         "unknown device 'net'; configured: cpu, disk"),
    ],
)  # fmt: skip
def test_bad_devices_and_n_give_one_line_naming_the_valid(call: object, needle: str) -> None:
    with pytest.raises(PolicyError) as err:
        call()  # type: ignore[operator]
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert MEASURED == DEV


def test_three_kinds_run_together_when_every_device_fits() -> None:
    demands = {1: COMPUTE, 2: DISK, 3: NET}
    assert nplus1_match(demands, 1, 2) == (2, 3)  # disk 0.70 before net 0.60: best fit first
    assert nplus1_match(demands, 2, 2) == (3, 1)  # 0.60 each: the last of equals first (§2.4)
    assert fits_all([COMPUTE, DISK, NET], 0.01)  # cpu 0.95, disk 0.75, net 0.60


def test_two_gangs_with_the_same_dominant_device_never_share_a_quantum() -> None:
    # a second disk gang fits every device (disk 0.35 + 0.35) but has the same dominant
    demands = {1: (0.1, 0.35, 0.0), 2: (0.1, 0.35, 0.0), 3: COMPUTE}
    assert nplus1_match(demands, 1, 2) == (3,)


def test_a_partner_that_would_overload_one_device_is_refused() -> None:
    # the net gang also writes: disk 0.70 + 0.35 > 1, so it may not join the disk gang
    net_writer = (0.10, 0.35, 0.50)
    demands = {1: DISK, 2: net_writer}
    assert nplus1_match(demands, 1, 2) == ()
    # the CPU, too: 0.60 + 0.45 > 1
    demands = {1: COMPUTE, 2: (0.45, 0.0, 0.5)}
    assert nplus1_match(demands, 1, 2) == ()
    # at the margin: CPU 0.5 + 0.49 + 0.01 is not below 1
    assert nplus1_match({1: (0.5, 0.0, 0.0), 2: (0.49, 0.0, 0.5)}, 1, 2, 0.01) == ()
    assert nplus1_match({1: (0.5, 0.0, 0.0), 2: (0.48, 0.0, 0.5)}, 1, 2, 0.01) == (2,)


def test_n_bounds_the_group_and_n_one_is_paired_gang() -> None:
    demands = {1: COMPUTE, 2: DISK, 3: NET}
    # N = 1: one partner, the CPU alone decides: 0.60 + 0.20 fits, the disk is not checked
    assert nplus1_match(demands, 1, 1) == (2,)
    assert nplus1_match({1: (0.1, 0.9), 2: (0.1, 0.9)}, 1, 1) == (2,)  # paired gang's §4.1.2
    with pytest.raises(PolicyError, match="N = 3 needs 3 I/O devices, the vectors have 2"):
        nplus1_match(demands, 1, 3)
    with pytest.raises(PolicyError, match="N must be >= 1"):
        nplus1_match(demands, 1, 0)


def test_dominant_ties_go_to_the_cpu() -> None:
    assert dominant((0.5, 0.5, 0.1)) == 0
    assert dominant((0.1, 0.5, 0.5)) == 1
    with pytest.raises(PolicyError):
        dominant(())
