"""The synthetic program's presets and the QCRD model (Wiseman & Feitelson 2003 §4.1.1, §4.2.1,
§4.2.3).

Pure: what each preset asks of ``apps/synthetic.py``, scaled from the paper's machine
to this one by the measured cost of one compute iteration (docs/apps.md).

**The paper's iteration cost.** Wiseman & Feitelson 2003 never states its machine's speed, but
§4.2.1
fixes it: the fine-grain jobs ran N = 600 x sec barriers (600 per second, 1.67 ms
each) with G_comp = 25,000 at "about 45 percent" CPU, so 25,000 iterations took about
0.45 x 1.67 ms = 0.75 ms: :data:`PAPER_NS_PER_ITERATION` = 30 ns. We scale by
*time*, not by iteration count: a preset's compute part takes here what it took there.

* ``compute`` (§4.1.1): G_comp = 2,500,000 -> 75 ms of compute per barrier, no I/O.
* ``io`` (§4.1.1): G_IO = 20 files of B = 8,193 bytes per barrier, no compute; the
  paper chose these for "approximately similar times for a compute barrier and an I/O
  barrier", so each write waits on an emulated device for 75 ms / 20 = 3.75 ms (this
  VM's fsync costs CPU: see ``--device-latency``).
* ``fine`` (§4.2.1): "we started by measuring the time for the communication involved
  in a barrier synchronization and setting the loop in the compute part to take
  slightly less time, so that the CPU utilization will be about 45 percent". We do the
  same at start-up: every rank times :data:`FINE_PROBE_BARRIERS` empty barriers (wall
  ``b`` and its own CPU ``c`` per barrier) and solves (x + c) / (x + b) = 0.45 for the
  compute time x (:func:`fine_compute_s`). Waiting blocks (the paper's barrier used
  Unix IPC, where a waiting process sleeps) unless ``--wait``/``COSCHED_WAIT`` say
  otherwise. A one-rank job has no barrier to wait for and is refused.
* ``qcrd`` (§4.2.3): "12 short I/O-bound phases alternating with 12 longer CPU-bound
  phases. The final part of the application is a relatively long I/O-bound phase."
  Each phase runs ``io``- or ``compute``-preset barriers until its time is up (rank
  0's clock decides at a barrier, so every rank changes phase at the same barrier).
  The paper gives no phase lengths; ours default to 1 s I/O, 4 s CPU, 8 s final (68
  s in all, Yu & Byun's jobs ran 66-73 s) and are parameters; with ``--duration`` the
  phases are scaled so the whole run takes that long, as Wiseman & Feitelson 2003 shrank QCRD to
  each
  Lublin job's run time.
"""

from __future__ import annotations

from dataclasses import dataclass

PAPER_NS_PER_ITERATION = 30.0
PAPER_GCOMP = 2_500_000
PAPER_GIO = 20
PAPER_BYTES = 8_193
FINE_GCOMP = 25_000
FINE_CPU_TARGET = 0.45
FINE_PROBE_BARRIERS = 40  # the first few are discarded (connections warming up)
QCRD_DEFAULT = (1.0, 4.0, 8.0)  # short I/O phase, CPU phase, final I/O phase (s)
QCRD_PAIRS = 12
PRESETS = ("compute", "io", "fine", "qcrd")


@dataclass(frozen=True)
class Preset:
    """What a preset sets, in seconds of this machine's time per barrier."""

    name: str
    compute_s: float
    gio: int
    nbytes: int
    device_latency: float
    block: bool = False  # waits block (fine) unless the user chose a waiting action


def paper_seconds(gcomp: int) -> float:
    """What ``gcomp`` iterations took on Wiseman & Feitelson's machine."""
    return gcomp * PAPER_NS_PER_ITERATION * 1e-9


def preset(name: str) -> Preset:
    """The preset ``name`` (ValueError names the valid ones)."""
    compute_s = paper_seconds(PAPER_GCOMP)  # 75 ms
    if name == "compute":
        return Preset(name, compute_s, 0, PAPER_BYTES, 0.0)
    if name == "io":
        return Preset(name, 0.0, PAPER_GIO, PAPER_BYTES, compute_s / PAPER_GIO)
    if name == "fine":
        # compute_s is the paper's 0.75 ms; fine_compute_s replaces it once measured
        return Preset(name, paper_seconds(FINE_GCOMP), 0, PAPER_BYTES, 0.0, block=True)
    if name == "qcrd":
        return Preset(name, compute_s, 0, PAPER_BYTES, 0.0)  # its phases use compute/io
    raise ValueError(f"unknown preset {name!r}: use one of {', '.join(PRESETS)}")


def gcomp_for(seconds: float, ns_per_iteration: float) -> int:
    """Iterations of our compute loop that take ``seconds`` here."""
    if seconds <= 0:
        return 0
    return max(1, round(seconds / (ns_per_iteration * 1e-9)))


def fine_compute_s(
    barrier_s: float, barrier_cpu_s: float, target: float = FINE_CPU_TARGET
) -> float:
    """Compute time x per barrier for CPU share ``target``: (x + c) / (x + b) = target.

    ``b`` is a barrier's wall time, ``c`` the CPU a rank spends in it. 0 when the
    barrier alone already uses at least ``target`` of the CPU (the report then shows
    the share this host allows).
    """
    if not 0 < target < 1:
        raise ValueError(f"target CPU share {target} is outside (0, 1)")
    return max(0.0, (target * barrier_s - barrier_cpu_s) / (1 - target))


@dataclass(frozen=True)
class Phase:
    kind: str  # "io" or "cpu"
    seconds: float


def qcrd_phases(
    io_s: float = QCRD_DEFAULT[0],
    cpu_s: float = QCRD_DEFAULT[1],
    final_s: float = QCRD_DEFAULT[2],
    duration: float | None = None,
) -> list[Phase]:
    """12 x (short I/O, longer CPU), then a long I/O phase; scaled to ``duration``."""
    for name, v in (("I/O", io_s), ("CPU", cpu_s), ("final I/O", final_s)):
        if not v > 0:
            raise ValueError(f"QCRD {name} phase length must be > 0 seconds, got {v}")
    total = QCRD_PAIRS * (io_s + cpu_s) + final_s
    k = 1.0 if duration is None else duration / total
    phases: list[Phase] = []
    for _ in range(QCRD_PAIRS):
        phases += [Phase("io", io_s * k), Phase("cpu", cpu_s * k)]
    phases.append(Phase("io", final_s * k))
    return phases
