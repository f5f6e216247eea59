"""The Feitelson & Rudolph 1996 study: a tiny [dhc] spec runs end to end and writes its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.experiment.dhc import study as dhcstudy

SPEC = """
[dhc]
name = "dhc-tiny"
pes = 8
gangs = 150
loads = [0.3]
point_loads = [0.515]
waste_pes = [32]
waste_rounds = 300
waste_table_pes = 64
workers = 1
"""


def test_tiny_study_writes_report_plots_and_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "dhc.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    assert dhcstudy.main([str(spec), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "reproduced:" in printed or "differs:" in printed
    report = (out / "report.md").read_text()
    for heading in ("## Findings beside the paper's", "## Table 1", "Fig. 4", "Fig. 9", "Fig. 11",
                    "Fig. 19", "## §4.1", "## Fig. 18"):  # fmt: skip
        assert heading in report, heading
    for png in ("fig2-3", "fig4", "fig6-7", "fig9", "fig10-12", "fig11", "fig18", "fig19"):
        assert (out / f"{png}.png").stat().st_size > 1000
    doc = json.loads((out / "results.json").read_text())
    families = {p["family"] for p in doc["points"]}
    assert families == {"balancing-any", "balancing-pe0", "mapping", "algorithms", "distributions"}
    # --report-only rebuilds from results.json
    assert dhcstudy.main([str(spec), "--out", str(out), "--report-only"]) == 0
    # and so does `cosched experiment report`, like every other experiment's results
    from testbed.cli import main as cli

    (out / "report.md").unlink()
    capsys.readouterr()
    assert cli(["experiment", "report", str(out / "results.json")]) == 0
    assert "## Table 1" in (out / "report.md").read_text()
    assert (
        "Read at load 0.515, the nearest run to the paper's 0.645"
        in (out / "report.md").read_text()
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[dhc]\npes = 12\n", "power of two"),
        ("[dhc]\nloads = [0.3, -1]\n", "[dhc].loads: want a list of numbers > 0"),
        ("[dhc]\nspeed = 3\n", "[dhc].speed: unknown field"),
        ("[nothing]\n", "no [dhc] table"),
    ],
)
def test_bad_specs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                words: str) -> None:  # fmt: skip
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    assert dhcstudy.main([str(spec), "--out", str(tmp_path / "o")]) != 0
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err, err
