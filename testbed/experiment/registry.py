"""The kinds of study, and the spec files that declare them.

Every spec in experiments/ begins with ``kind = "..."``; :func:`load` reads that, finds
the study (:data:`KINDS`) and has it read the rest. ``cosched experiment list`` prints
this table.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from testbed.experiment.fields import SpecError, Table, read_toml
from testbed.experiment.protocol import Study

#: kind -> the module whose ``STUDY`` implements it
KINDS: dict[str, str] = {
    "paired-live": "testbed.experiment.paired",
    "paired-sim": "testbed.experiment.pairedsim",
    "paired-scale": "testbed.experiment.pairedscale",
    "paired-trace": "testbed.experiment.pairedtrace",
    "paired-decompose": "testbed.experiment.pairedscale.decompose",
    "paired-capacity": "testbed.experiment.pairedscale.capacity",
    "paired-resident": "testbed.experiment.pairedscale.resident",
    "sim-vs-live": "testbed.experiment.simvslive",
    "cdc-live": "testbed.experiment.cdc",
    "rajaei-sim": "testbed.experiment.rajaei",
    "rajaei-live": "testbed.experiment.rajaei.live",
    "dhc-sim": "testbed.experiment.dhc",
    "dhc-live": "testbed.experiment.dhclive",
    "cdc-sim": "testbed.experiment.cdcsim",
    "cdc-sim-vs-live": "testbed.experiment.cdcsim.vslive",
    "nplus1-sim": "testbed.experiment.nplus1sim",
    "nplus1-live": "testbed.experiment.nplus1live",
    "paired-userlevel": "testbed.experiment.userlevel",
}

# TOML files in experiments/ that are inputs of other commands, recognised by their table
NOT_STUDIES = {
    "workload": "a workload for `cosched simulate --workload`",
    "model": "the execution model `cosched calibrate` measured (the simulator reads it)",
}


def study(kind: str) -> Study:
    if kind not in KINDS:
        raise SpecError(f"unknown kind {kind!r}", fix="kinds: " + ", ".join(KINDS))
    s: Study = importlib.import_module(KINDS[kind]).STUDY
    return s


def studies() -> list[Study]:
    return [study(k) for k in KINDS]


def kind_of(doc: dict[str, Any], path: Path) -> str:
    """The kind a spec declares (its first key), or one line saying what the file is."""
    kind = doc.get("kind")
    if kind is None:
        for table, what in NOT_STUDIES.items():
            if isinstance(doc.get(table), dict):
                raise SpecError(
                    f"{path}: {what}, not a study spec", fix="cosched experiment list shows them"
                )
        raise SpecError(
            f"{path}: no `kind = ...` at the top: which study is it?",
            fix="start the file with kind = one of " + ", ".join(f'"{k}"' for k in KINDS),
        )
    if not isinstance(kind, str) or kind not in KINDS:
        raise SpecError(f"{path}: kind = {kind!r} is not a study", fix="kinds: " + ", ".join(KINDS))
    return kind


def load(path: str | Path) -> tuple[Study, Any]:
    """The study a spec declares and the spec as it reads it."""
    p = Path(path)
    doc = read_toml(p)
    s = study(kind_of(doc, p))
    table = Table.document(doc, p)
    # [executor]: where simulated runs execute (testbed/sweep/cli.py reads it; docs/sweeps.md)
    table.only({"kind", "executor", *s.spec_tables})
    return s, s.load(table)
