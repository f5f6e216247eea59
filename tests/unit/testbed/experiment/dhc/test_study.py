"""The Feitelson & Rudolph 1996 study: a tiny [dhc] spec runs end to end and writes its report."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main as cli


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('kind = "dhc-sim"\n[dhc]\npes = 12\n', "power of two"),
        ('kind = "dhc-sim"\n[dhc]\nloads = [0.3, -1]\n', "[dhc].loads: every value must be > 0"),
        ('kind = "dhc-sim"\n[dhc]\nspeed = 3\n', "[dhc].speed: unknown key"),
        ('kind = "dhc-sim"\n[dhc]\nfamilies = ["tables"]\n', "[dhc].families: unknown 'tables'"),
        ('kind = "dhc-sim"\n[dhc]\norigins = ["pe1"]\n', "[dhc].origins: unknown 'pe1'"),
        ('kind = "dhc-sim"\n[nothing]\n', "nothing: unknown key"),
        ("[dhc]\n", "no `kind = ...` at the top"),
        ('kind = "dhc-sim"\n[dhc]\nworkers = 2\n', "[dhc].workers: moved to the [executor] table"),
        ('kind = "dhc-sim"\n[dhc]\n[executor]\nworkers = 0\n', "[executor].workers = 0"),
        ('kind = "dhc-sim"\n[dhc]\n[executor]\nthreads = 2\n', "[executor].threads: unknown field"),
    ],
)
def test_bad_specs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                words: str) -> None:  # fmt: skip
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    assert cli(["experiment", "run", str(spec), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and err.startswith("cosched: error:"), err
