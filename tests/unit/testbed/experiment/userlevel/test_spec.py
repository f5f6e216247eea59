"""The paired-userlevel spec (testbed/experiment/userlevel/spec.py): the committed spec,
its --quick variant, the comm job's command line, and one line for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.experiment import registry
from testbed.experiment.fields import SpecError
from testbed.experiment.userlevel.run import configs

REPO = Path(__file__).resolve().parents[5]
SPEC = REPO / "experiments" / "paired-userlevel.toml"


def test_the_committed_spec_and_its_quick_variant() -> None:
    study, spec = registry.load(SPEC)
    assert study.kind == "paired-userlevel" and spec.nodes == 2 and spec.cpus_per_node == 1
    assert spec.partners["io"][0].label == "block"
    assert spec.partners["io"][-1].label == "spin"
    assert len(configs(spec)) == spec.runs_per_repeat()
    q = study.quick(spec)
    assert q.name == "paired-userlevel-quick" and q.repeats == 1 and list(q.partners) == ["io"]
    assert [c.label for c in configs(q)] == [
        "gang block alone", "paired-gang block+io", "paired-gang spin+io", "gang block+io",
    ]  # fmt: skip


def test_the_comm_jobs_command_line_carries_its_waiting_action() -> None:
    _study, spec = registry.load(SPEC)
    argv = spec.comm.with_wait(spec.partners["io"][1]).argv(8.0)
    assert argv[argv.index("--wait") + 1] == "spinblock"
    assert argv[argv.index("--spin-us") + 1] == "50"
    assert argv[-2:] == ["--duration", "8"] and "--comm" in argv


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ('"spinblock:50"', '"spinblock:fast"', r"\[partners\]\.io: waiting action"),
        ('"spinblock:50"', '"block"', r"\[partners\]\.io: a value appears twice"),
        ('alone_waits = ["block", "spin"]', 'alone_waits = ["spin"]', "needs block"),
        ('matching = "best-fit"', 'matching = "worst"', r"\[controller\]\.matching: one of"),
        ("nodes = 2", "nodes = 1", r"\[cluster\]\.nodes"),
        ("weight = 10000", "weight = 20000", r"\[cluster\]\.weight"),
        ("[jobs.compute]", "[jobs.disk]", r"\[jobs\]\.disk: unknown key"),
    ],
)
def test_mistakes_are_one_line(tmp_path: Path, old: str, new: str, match: str) -> None:
    text = SPEC.read_text()
    assert old in text
    p = tmp_path / "s.toml"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(SpecError, match=match) as e:
        registry.load(p)
    assert "\n" not in str(e.value)
