"""The execution model's parameters as measured on a live cluster (``cosched calibrate``).

``cosched calibrate`` (testbed/experiment/execmodel/calibrate.py) runs the synthetic
program on the local cluster alone, paired and under strict gang and writes a
TOML file whose ``[model]`` table holds what the execution model
(testbed/sim/execution.py) needs:

* ``interference`` -- the fraction of speed a process loses while it shares a
  node with a partner whose demand leaves room for it;
* ``context_switch`` -- seconds of a switched-in quantum in which a job makes
  no progress;
* ``quantum`` -- the quantum the measurement used (context_switch is per
  switch, so it carries over to other quanta; kept for the record);
* ``fine_grain_utilization`` -- the measured CPU share of the §4.2.1
  fine-grain job (informative; the workload profiles keep the paper's 45 %).

What ParPar had and the first model lacked (issue 25; each term optional in the
file, each switched on by name, :data:`TERMS`):

* ``launch``, ``launch_cpu``, ``teardown`` -- a job's start-up (seconds of its
  scheduled time, and the CPU share it uses) and the seconds from its last
  barrier until its end is known (term ``launch``);
* full-quantum occupancy (term ``occupancy``): a measured fact of the live
  controller, not a number (ParPar's slots did not end early either);
* ``barrier_wall_base``, ``barrier_wall_per_rank``, ``barrier_cpu_base``,
  ``barrier_cpu_per_rank`` -- the barrier cost fitted over gang sizes
  (testbed/sim/program.py; term ``barrier``: it grows with the size);
* term ``program``: a job's run time from N, G_comp and the barrier cost rather
  than ``runtime = sec`` (needs the barrier figures);
* term ``device``: each node's I/O device is shared (the jobs' phases carry their
  device share, measured per job type: ``[measured]``);
* ``resident_cost`` -- the fraction of a node's speed each job placed on it but frozen
  costs the jobs running there (term ``resident``; ``cosched calibrate --only
  resident``, testbed/experiment/execmodel/residentcal.py: one compute job under strict
  gang beside k frozen standby jobs, rate against k). The file holds the measured mean
  at 1 s quanta, 0 where that mean is negative (more residents cannot speed a job up;
  a negative mean is noise). Like every term it is on only where named (a study's
  ``terms``): at the measured size (+0.066 % ± 0.308 % per resident job, zero within the
  host's resolution) it moves Fig. 10's ratio by less than its spread, so the committed
  studies keep their terms; docs/paired-fidelity.md "A cost per resident job" says what
  it came to and what larger costs would do.

The simulator uses the committed file, ``experiments/calibration.toml``, by
default (docs/simulator.md, "Calibration"); ``--calibration PATH`` takes
another and ``--calibration none`` the built-in constants.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from common.errors import UsageError
from testbed.sim.program import REFERENCE_SIZE, BarrierCost, ProgramModel
from testbed.sim.results import EARLY_END, FULL, SimConfig

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "experiments" / "calibration.toml"
BUILTIN_INTERFERENCE = (
    0.05  # Wiseman & Feitelson 2003 §4.1: "a few percent" for a compute job beside an I/O job
)
BUILTIN_CONTEXT_SWITCH = 0.0
LAUNCH, OCCUPANCY, BARRIER, PROGRAM, DEVICE = "launch", "occupancy", "barrier", "program", "device"
RESIDENT = "resident"
TERMS = (LAUNCH, OCCUPANCY, BARRIER, PROGRAM, DEVICE, RESIDENT)


class CalibrationError(UsageError):
    """A calibration file that cannot be used."""


@dataclass(frozen=True, slots=True)
class Calibration:
    """Execution-model parameters and where they came from."""

    interference: float
    context_switch: float
    quantum: float | None = None
    fine_grain_utilization: float | None = None
    source: str = "built-in"
    launch: float | None = None
    launch_cpu: float | None = None
    teardown: float | None = None
    barrier: BarrierCost | None = None
    resident_cost: float | None = None

    def describe(self, terms: Iterable[str] = ()) -> str:
        """One line for the command's header."""
        text = (
            f"execution model from {self.source}: interference {self.interference:.3f}, "
            f"context switch {self.context_switch * 1000:.1f} ms"
        )
        on = set(terms)
        if LAUNCH in on and self.launch is not None:
            text += f", launch {self.launch:.2f} s, teardown {self.teardown or 0.0:.2f} s"
        if OCCUPANCY in on:
            text += ", full quanta"
        if RESIDENT in on and self.resident_cost is not None:
            text += f", {self.resident_cost * 100:.3f} % per frozen resident job"
        if PROGRAM in on and self.barrier is not None:
            b = self.barrier
            text += f", barrier {b.wall(2) * 1e3:.2f} ms at 2" + (
                f", {b.wall(16) * 1e3:.2f} ms at 16" if BARRIER in on else " (fixed)"
            )
        return text


BUILTIN = Calibration(BUILTIN_INTERFERENCE, BUILTIN_CONTEXT_SWITCH)


def load_calibration(path: str | Path) -> Calibration:
    """Read the ``[model]`` table of a calibration file (one-line error on bad input)."""
    p = Path(path)
    fix = "run `sudo cosched calibrate` to write one, or pass --calibration none"
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as e:
        raise CalibrationError(f"calibration {p}: {e.strerror or e}", fix=fix) from None
    except tomllib.TOMLDecodeError as e:
        raise CalibrationError(f"calibration {p}: not TOML ({e})", fix=fix) from None
    model = data.get("model")
    if not isinstance(model, dict):
        raise CalibrationError(f"calibration {p}: no [model] table", fix=fix)

    def number(key: str, lo: float, hi: float, required: bool = True) -> float | None:
        value = model.get(key)
        if value is None and not required:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CalibrationError(f"calibration {p}: [model] {key} must be a number", fix=fix)
        if not lo <= float(value) < hi:
            raise CalibrationError(
                f"calibration {p}: [model] {key} = {value} is outside [{lo}, {hi})", fix=fix
            )
        return float(value)

    interference = number("interference", 0.0, 1.0)
    context_switch = number("context_switch", 0.0, 10.0)
    assert interference is not None and context_switch is not None
    walls = [number(k, -10.0, 10.0, required=False) for k in _BARRIER_KEYS]
    barrier: BarrierCost | None = None
    if walls[0] is not None or walls[1] is not None:
        if walls[0] is None or walls[1] is None:
            raise CalibrationError(
                f"calibration {p}: [model] needs both {_BARRIER_KEYS[0]} and {_BARRIER_KEYS[1]}",
                fix=fix,
            )
        try:
            barrier = BarrierCost(walls[0], walls[1], walls[2] or 0.0, walls[3] or 0.0)
        except ValueError as e:
            raise CalibrationError(f"calibration {p}: [model] barrier: {e}", fix=fix) from None
    return Calibration(
        interference=interference,
        context_switch=context_switch,
        quantum=number("quantum", 1e-6, 3600.0, required=False),
        fine_grain_utilization=number("fine_grain_utilization", 0.0, 1.0 + 1e-9, required=False),
        source=str(p),
        launch=number("launch", 0.0, 600.0, required=False),
        launch_cpu=number("launch_cpu", 0.0, 1.0 + 1e-9, required=False),
        teardown=number("teardown", 0.0, 600.0, required=False),
        barrier=barrier,
        resident_cost=number("resident_cost", 0.0, 1.0, required=False),
    )


_BARRIER_KEYS = (
    "barrier_wall_base",
    "barrier_wall_per_rank",
    "barrier_cpu_base",
    "barrier_cpu_per_rank",
)


def parse_terms(text: str | Iterable[str]) -> frozenset[str]:
    """Term names from ``"launch,occupancy"`` / a list; ``all`` and ``none`` as said."""
    items = [t.strip() for t in text.split(",")] if isinstance(text, str) else list(text)
    items = [t for t in items if t]
    if items in (["all"], ["none"]):
        return frozenset(TERMS) if items == ["all"] else frozenset()
    bad = [t for t in items if t not in TERMS]
    if bad:
        raise CalibrationError(
            f"unknown model term {bad[0]!r}",
            fix=f"use any of {', '.join(TERMS)}, or all / none",
        )
    terms = frozenset(items)
    if BARRIER in terms and PROGRAM not in terms:
        raise CalibrationError(
            "model term barrier needs program (the barrier cost only enters a job's run time "
            "through the program)",
            fix="add program, or drop barrier",
        )
    return terms


def model_config(
    cal: Calibration,
    terms: Iterable[str],
    *,
    nodes: int,
    quantum: float,
    mode: str = "exact",
) -> SimConfig:
    """The engine's configuration with the calibration's figures and the ``terms`` on."""
    on = set(terms)
    launch = teardown = launch_cpu = 0.0
    if LAUNCH in on:
        if cal.launch is None:
            raise CalibrationError(
                f"calibration {cal.source} has no launch cost",
                fix="run `sudo cosched calibrate` (it measures launch and teardown), "
                "or leave the launch term off",
            )
        launch, teardown, launch_cpu = cal.launch, cal.teardown or 0.0, cal.launch_cpu or 0.0
    resident = 0.0
    if RESIDENT in on:
        if cal.resident_cost is None:
            raise CalibrationError(
                f"calibration {cal.source} has no resident_cost",
                fix="run `sudo cosched calibrate --only resident`, or leave the resident term off",
            )
        resident = cal.resident_cost
    return SimConfig(
        nodes=nodes,
        quantum=quantum,
        context_switch=cal.context_switch,
        interference=cal.interference,
        mode=mode,
        launch=launch,
        launch_cpu=launch_cpu,
        teardown=teardown,
        occupancy=FULL if OCCUPANCY in on else EARLY_END,
        device=DEVICE in on,
        resident_cost=resident,
    )


def program_model(
    cal: Calibration, terms: Iterable[str], reference_size: int = REFERENCE_SIZE
) -> ProgramModel | None:
    """The program model the ``terms`` ask for (None: ``runtime = sec``)."""
    on = set(terms)
    if PROGRAM not in on:
        return None
    if cal.barrier is None:
        raise CalibrationError(
            f"calibration {cal.source} has no barrier cost",
            fix="run `sudo cosched calibrate` (it measures barriers at 2, 4 and 8 nodes), "
            "or leave the program and barrier terms off",
        )
    return ProgramModel(cal.barrier, reference_size=reference_size, grow=BARRIER in on)


def resolve_calibration(choice: str | None) -> Calibration:
    """``None``: the committed file if present, else built-in; ``"none"``: built-in; else a path."""
    if choice is not None and choice.strip().lower() in ("none", "builtin", "built-in"):
        return BUILTIN
    if choice is None:
        return load_calibration(DEFAULT_PATH) if DEFAULT_PATH.is_file() else BUILTIN
    return load_calibration(choice)
