"""The paired-trace study's quick variant end to end, from a given live trace and a
calibration (live: the results envelope runs git)."""

from __future__ import annotations

from pathlib import Path

from testbed.experiment import pipeline, registry
from testbed.sweep import SweepOptions
from tests.support.pairedtrace import study_spec


def test_quick_study_runs_reports_and_judges(tmp_path: Path) -> None:
    spec = study_spec(tmp_path, fig13_live=True)
    out = tmp_path / "out"
    opts = SweepOptions(progress=False)
    study, res, _ = pipeline.run(
        spec, command="test", out=out, quick=True, sweep=opts, say=lambda s: None
    )
    assert res.kind == "paired-trace"
    ids = {c.id for c in study.claims(res.data)}
    assert ids == {"wiseman2003/fig3/prediction", "wiseman2003/fig13/sharp-change-cost",
                   "wiseman2003/fig13/cpu-alone", "wiseman2003/fig13/sharp-change-cost-live",
                   "wiseman2003/fig13/cpu-alone-live"}  # fmt: skip
    seeds = {r["seed"] for r in res.data["fig13"]}
    assert seeds == {0, 1, 2}  # the exact copies and the quick seeds
    text = (out / "report.md").read_text()
    assert "| exact copies | none |" in text and "## The paper beside ours" in text
    assert "## Fig. 13 live" in text and "run 2: +1.50 %" in text
    assert (out / "fig3.png").exists() and (out / "fig13.png").exists()
    # the report is rebuilt from the file alone
    again = pipeline.read(out / "results.json")
    assert registry.study(again.kind).render(again.data)["report.md"] in text
