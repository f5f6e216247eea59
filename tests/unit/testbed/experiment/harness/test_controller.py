"""The live harness's controller (testbed/experiment/harness/controller.py): a run
directory too deep for the controller's unix socket gets a short name."""

from __future__ import annotations

from pathlib import Path

from testbed.experiment.harness.controller import SOCKET_DIR_MAX, command, short_path


def test_a_deep_run_dir_gets_a_short_private_name(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 60) / "runs" / "freezer" / "gang-greedy:3"
    deep.mkdir(parents=True)
    assert len(str(deep / "controller.sock")) > 108  # what AF_UNIX would refuse
    with short_path(deep) as where:
        assert len(str(where / "controller.sock")) < 108 and where != deep
        assert where.resolve() == deep.resolve()
        assert oct(where.parent.stat().st_mode & 0o777) == "0o700"
        (where / "jobs.jsonl").write_text("{}\n")
        cmd = command("state.json", "gang", 0.2, where)
        assert cmd[cmd.index("--run-dir") + 1] == str(where)
    assert (deep / "jobs.jsonl").read_text() == "{}\n"  # the files stay in the run dir
    assert not where.exists() and not where.parent.exists()


def test_a_short_run_dir_is_used_as_it_is(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    assert len(str(run)) <= SOCKET_DIR_MAX
    with short_path(run) as where:
        assert where == run
    assert run.is_dir()
