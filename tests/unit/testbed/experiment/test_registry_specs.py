"""Every spec in experiments/ goes through the framework: a study spec loads and says what it
would run (`--dry-run`, and its `--quick` variant too); the other TOML files are inputs of
other commands, which read them, and the framework refuses them in one line. The simulated
studies' --quick variants run here; the live ones in tests/integration/test_studies_live.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main
from testbed.experiment import registry
from testbed.experiment.fields import read_toml

REPO = Path(__file__).resolve().parents[4]
SPECS = sorted((REPO / "experiments").glob("*.toml"))


@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_every_spec_goes_through_the_framework(
    path: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = read_toml(path)
    if "kind" not in doc:
        # not a study: the framework says what it is, its own command reads it
        assert main(["experiment", "run", str(path), "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert "not a study spec" in err and err.count("\n") == 1
        if "model" in doc:
            from testbed.sim.calibration import load_calibration

            assert 0 <= load_calibration(path).interference < 1
        else:
            from testbed.sim.workloads.spec import load_workload_spec

            assert load_workload_spec(path) is not None
        return
    study, _spec = registry.load(path)
    assert str(path.relative_to(REPO)) in study.specs, "list the spec in its study's specs"
    out = tmp_path / "never"
    assert main(["experiment", "run", str(path), "--dry-run", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"kind {study.kind}" in printed and f"report in {out}/" in printed
    assert not out.exists()  # a dry run runs nothing
    if study.has_quick:
        assert main(["experiment", "run", str(path), "--dry-run", "--quick"]) == 0
        assert "-quick/" in capsys.readouterr().out


def test_every_study_spec_is_listed_by_its_study() -> None:
    listed = {spec for s in registry.studies() for spec in s.specs}
    studies = {str(p.relative_to(REPO)) for p in SPECS if "kind" in read_toml(p)}
    assert listed == studies


def test_every_kind_is_in_the_docs_table_with_its_specs() -> None:
    """docs/experiments.md's table of kinds names every kind and each of its specs."""
    rows = {
        line.split("|")[1].strip().strip("`"): line
        for line in (REPO / "docs" / "experiments.md").read_text().splitlines()
        if line.startswith("| `")
    }
    assert set(rows) == set(registry.KINDS), "kinds missing from (or extra in) the table"
    for study in registry.studies():
        for spec in study.specs:
            assert f"`{Path(spec).name}`" in rows[study.kind], f"{study.kind}: {spec}"
