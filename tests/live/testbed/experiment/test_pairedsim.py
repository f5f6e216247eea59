"""The tests of tests/unit/testbed/experiment/test_pairedsim.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.experiment import pipeline
from tests.support.pairedsim import SPEC, _cal


def test_experiment_run_dispatches_a_study_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from testbed.cli import main

    spec_path = tmp_path / "study.toml"
    spec_path.write_text(SPEC.format(cal=_cal(tmp_path)))
    out = tmp_path / "out"
    assert main(["experiment", "run", str(spec_path), "--quick", "--out", str(out)]) == 0
    assert (out / "report.md").is_file() and (out / "fig11.png").is_file()
    res = pipeline.read(out / "results.json")
    assert res.kind == "paired-sim" and res.made.command.endswith("--quick --out " + str(out))
    capsys.readouterr()
    assert main(["experiment", "run", str(spec_path), "--mixes", "1"]) == 2
    assert "--mixes: not for a paired-sim spec" in capsys.readouterr().err
