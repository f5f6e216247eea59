"""The devices a job's demand is measured on, and eq. (1) over all of them (Wiseman &
Feitelson 2003 §2.2 eq. (1), extended from the CPU to a vector as §5 suggests for N + 1
gangs on N I/O devices).

A job's *demand* on a device in a quantum is the fraction of that device it used: CPU
time ÷ the quantum on the CPU (as paired gang measures it), bytes ÷ the bytes the device
can move in the quantum on the disk and the network. Each component is predicted by
eq. (1) on its own history (predictor.py: weights 0.4, 0.3, 0.2, 0.1, the short-history
renormalisation, clamping to [0, 1]).

Choices where §5 is silent:

* A job never measured, or flagged by a sharp change on *any* device (§4.2.3's rule per
  component), is predicted 1.0 on every device: it runs alone for a quantum, as a new
  job does under paired gang (§2.3). At N = 1 only the CPU's flag counts, as under
  paired gang (``predict(..., any_device=False)``), so that N = 1 decides as it does.
* The CPU is always the first device; the others are the I/O devices, so N is their
  number. Device names are those the agents measure (:data:`MEASURED`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.policies.base import PolicyError
from controller.policies.predictor import UtilizationPredictor

CPU = "cpu"
DISK = "disk"
NET = "net"
#: the devices a demand vector may name: CPU time, the cgroup's block I/O bytes
#: (common/cgroups/iostat.py), the job's network bytes
MEASURED: tuple[str, ...] = (CPU, DISK, NET)


def check_devices(devices: Sequence[str]) -> tuple[str, ...]:
    """``devices`` as a tuple, CPU first: one line naming the valid ones otherwise."""
    out = tuple(devices)
    for d in out:
        if d not in MEASURED:
            raise PolicyError(f"unknown device {d!r}: the agents measure {', '.join(MEASURED)}")
    if not out or out[0] != CPU:
        raise PolicyError(f"devices must start with {CPU!r} (got {', '.join(out) or 'none'})")
    if len(set(out)) != len(out):
        raise PolicyError(f"a device is named twice in {', '.join(out)}")
    return out


def check_n(n: int, devices: Sequence[str]) -> int:
    """N (the I/O devices used) within what ``devices`` configures: one line otherwise."""
    io = [d for d in devices if d != CPU]
    if not 1 <= n <= len(io):
        raise PolicyError(
            f"N = {n}, but the I/O devices configured are {', '.join(io) or 'none'} "
            f"(N from 1 to {len(io)})"
        )
    return n


class VectorPredictor:
    """Eq. (1) per device; a job's prediction is a tuple in ``devices`` order."""

    def __init__(self, devices: Sequence[str], *, sharp_change: float | None = 0.20) -> None:
        self.devices = check_devices(devices)
        self._per = {d: UtilizationPredictor(sharp_change=sharp_change) for d in self.devices}

    def observe(self, job_id: int, demand: Mapping[str, float]) -> None:
        """One quantum's measured demand of a job; a device not given counts as 0 used,
        a device not configured is one line naming the configured ones."""
        for d in demand:
            if d not in self._per:
                raise PolicyError(
                    f"job {job_id}: unknown device {d!r}; configured: {', '.join(self.devices)}"
                )
        for d, p in self._per.items():
            p.observe(job_id, demand.get(d, 0.0))

    def is_new(self, job_id: int) -> bool:
        return self._per[CPU].is_new(job_id)

    def estimate(self, job_id: int) -> tuple[float, ...]:
        """Eq. (1) on each device's history (no sharp-change override)."""
        return tuple(self._per[d].estimate(job_id) for d in self.devices)

    def predict(self, job_id: int, *, any_device: bool = True) -> tuple[float, ...]:
        """The demand expected next quantum: 1.0 everywhere if new or flagged anywhere
        (``any_device=False``: flagged on the CPU, paired gang's rule, for N = 1)."""
        if self.is_new(job_id):
            return tuple(1.0 for _ in self.devices)
        flagged = (
            any(p.is_flagged(job_id) for p in self._per.values())
            if any_device
            else self._per[CPU].is_flagged(job_id)
        )
        if flagged:
            return tuple(1.0 for _ in self.devices)
        return self.estimate(job_id)

    def history(self, job_id: int, device: str = CPU) -> tuple[float, ...]:
        """Up to four last measurements on ``device``, most recent first."""
        return self._per[device].history(job_id)

    def forget(self, job_id: int) -> None:
        for p in self._per.values():
            p.forget(job_id)
