"""The argparse surface: commands, help, and one clear message for bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from testbed import cli
from testbed.commands import cluster


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSCHED_STATE_DIR", str(tmp_path))


def test_registers_on_foreign_subparsers() -> None:
    parser = argparse.ArgumentParser(prog="cosched")
    sub = parser.add_subparsers(dest="command")
    cluster.add_commands(sub)
    args = parser.parse_args(["cluster", "up", "--nodes", "3", "--link", "gige", "--no-agents"])
    assert args.nodes == 3 and args.link == "gige" and args.agents is False
    assert args.func is cluster.cmd_up
    assert parser.parse_args(["clean"]).func is cluster.cmd_clean
    assert parser.parse_args(["cluster", "status", "--json"]).json is True


@pytest.mark.parametrize(
    "argv", [["--help"], ["cluster", "--help"], ["cluster", "up", "--help"], ["clean", "--help"]]
)
def test_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out


def test_up_help_lists_profiles(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # argparse would wrap "fast-ethernet" at the hyphen
    with pytest.raises(SystemExit):
        cli.main(["cluster", "up", "--help"])
    out = capsys.readouterr().out
    for name in ("myrinet", "gige", "fast-ethernet", "custom:rate="):
        assert name in out


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["cluster", "up", "--nodes", "2", "--link", "custom:rate=0"], "rate must be > 0"),
        (["cluster", "up", "--nodes", "2", "--link", "custom:rate=1gbit,delay=-1us"], "delay"),
        (["cluster", "up", "--nodes", "2", "--data-subnet", "10.212.0.0/24"], "overlaps"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    argv: list[str], msg: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # These fail while parsing options, before any kernel access, so they are
    # safe to run as any user.
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cosched: ") and msg in err and "\n" not in err


def test_status_and_down_without_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cluster", "status"]) == 1
    assert "no cluster" in capsys.readouterr().out
    assert cli.main(["cluster", "down"]) == 0
    assert "nothing to do" in capsys.readouterr().out
