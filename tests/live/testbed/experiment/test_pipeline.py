"""The tests of tests/unit/testbed/experiment/test_pipeline.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import json
from pathlib import Path

from testbed.experiment import pipeline, results


def test_the_envelope_records_kind_schema_command_commit_and_host(tmp_path: Path) -> None:
    made = results.made_now("cosched experiment run experiments/dhc.toml")
    assert made.host["cores"] >= 1 and made.host["kernel"] and made.host["cgroup_mode"]
    assert made.commit is None or len(made.commit) == 40
    path = results.write(tmp_path / "results.json", results.Results("dhc-sim", {"a": [1]}, made))
    doc = json.loads(path.read_text())
    assert doc["kind"] == "dhc-sim" and doc["schema"] == 1 and doc["data"] == {"a": [1]}
    assert doc["made"]["command"] == "cosched experiment run experiments/dhc.toml"
    back = pipeline.read(path)
    assert back.made == made and back.data == {"a": [1]}
    assert "cosched experiment run experiments/dhc.toml" in made.line()
