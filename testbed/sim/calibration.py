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

The simulator uses the committed file, ``experiments/calibration.toml``, by
default (docs/simulator.md, "Calibration"); ``--calibration PATH`` takes
another and ``--calibration none`` the built-in constants.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from common.errors import UsageError

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "experiments" / "calibration.toml"
BUILTIN_INTERFERENCE = (
    0.05  # Wiseman & Feitelson 2003 §4.1: "a few percent" for a compute job beside an I/O job
)
BUILTIN_CONTEXT_SWITCH = 0.0


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

    def describe(self) -> str:
        """One line for the command's header."""
        return (
            f"execution model from {self.source}: interference {self.interference:.3f}, "
            f"context switch {self.context_switch * 1000:.1f} ms"
        )


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
    return Calibration(
        interference=interference,
        context_switch=context_switch,
        quantum=number("quantum", 1e-6, 3600.0, required=False),
        fine_grain_utilization=number("fine_grain_utilization", 0.0, 1.0 + 1e-9, required=False),
        source=str(p),
    )


def resolve_calibration(choice: str | None) -> Calibration:
    """``None``: the committed file if present, else built-in; ``"none"``: built-in; else a path."""
    if choice is not None and choice.strip().lower() in ("none", "builtin", "built-in"):
        return BUILTIN
    if choice is None:
        return load_calibration(DEFAULT_PATH) if DEFAULT_PATH.is_file() else BUILTIN
    return load_calibration(choice)
