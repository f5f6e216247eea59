"""The tests of tests/unit/testbed/experiment/rajaei/test_study.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main as cli_main
from testbed.experiment.rajaei.study import (
    DEFAULT_SPEC,
)


def test_quick_study_through_the_cli_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    rc = cli_main(["experiment", "run", str(DEFAULT_SPEC), "--quick", "--out", str(out)])
    assert rc == 0
    text = (out / "report.md").read_text()
    for fig in ("fig5", "fig6", "fig7", "fig8", "fig9"):
        assert (out / f"{fig}.png").stat().st_size > 1000
        assert f"({fig}.png)" in text
    assert "## Findings of Rajaei et al. 2008 §6, checked" in text and "## Every comparison" in text
    assert text.count("| §6, Fig.") >= 8
    printed = capsys.readouterr().out
    assert "Fig. 5 (gang-greedy)" in printed and "Fig. 8 (gang-greedy)" in printed
    assert (out / "results.json").read_text().startswith('{\n "kind": "rajaei-sim"')
