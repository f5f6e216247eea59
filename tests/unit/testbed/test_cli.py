"""The `cosched` command: simulate, policies, and its answers to bad input."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from controller.policies.registry import names
from testbed.cli import build_parser, main
from tests.support.swf_trace import write_trace


def test_policies_lists_every_policy_with_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    for name in names():
        assert name in out
    assert "margin=0.01" in out and "band=0.2" in out


def test_unknown_policy_is_one_line_listing_the_valid_ones(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc = main(["simulate", "--policy", "nope", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1
    assert "unknown policy 'nope'" in err and "easy" in err and "paired-gang" in err


def test_unknown_parameter_lists_valid_parameters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc = main(
        ["simulate", "--policy", "paired-gang", "--param", "colour=red", "--out", str(tmp_path)]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "no parameter 'colour'" in err and "margin" in err


def test_bad_parameter_value_is_explained(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc = main(["simulate", "--policy", "gang", "--param", "max_slots=many", "--out", str(tmp_path)])
    assert rc == 2
    assert "max_slots: expected an integer, got 'many'" in capsys.readouterr().err


def test_malformed_swf_line_names_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = write_trace(tmp_path / "t.swf", [(0, 10, 4, 20, 0)], bad="7 oops 0 1\n")
    rc = main(
        ["simulate", "--policy", "easy", "--workload", f"swf:{trace}", "--out", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{trace}:3:" in err

    rc = main(
        [
            "simulate",
            "--policy",
            "easy",
            "--workload",
            f"swf:{trace}",
            "--skip-bad-lines",
            "--out",
            str(tmp_path / "o"),
            "--quiet",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0
    assert "skipped 1 malformed lines" in captured.err
    assert json.loads((tmp_path / "o" / "summary-easy.json").read_text())["completed"] == 1


def test_impossible_sim_config_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc = main(
        ["simulate", "--policy", "gang", "--jobs", "5", "--quantum", "0", "--out", str(tmp_path)]
    )
    assert rc == 2
    assert "quantum must be > 0" in capsys.readouterr().err


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Any]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((" ".join((*path, name)), sub))
                found += _commands(sub, (*path, name))
    return found


def test_every_command_help_has_a_description_and_an_example() -> None:
    commands = _commands(build_parser())
    assert {"simulate", "policies", "cluster up", "controller start", "submit"} <= {
        name for name, _ in commands
    }
    for name, sub in commands:
        text = sub.format_help()
        assert sub.description, name
        assert "example" in text and "cosched " in text.split("example")[1], name
