"""``cosched controller|submit|jobs|matrix|slice|kill|class`` with a fake controller client."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest

from controller.client import ControllerError, ControllerUnavailable
from testbed.cli import main
from testbed.commands import _api
from testbed.commands.controller import add_commands as add_controller_commands
from testbed.commands.controller import daemon_argv
from tests.support.cli import one_line_error


class FakeClient:
    """Records requests; answers from a table of op -> result (or exception)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.closed = 0

    def request(self, op: str, **args: Any) -> Any:
        self.calls.append((op, args))
        answer = self.answers[op]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    client = FakeClient({})
    monkeypatch.setattr(_api, "make_client", lambda args: client)
    return client


def test_submit_sends_the_spec_and_prints_the_id(
    fake: FakeClient, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fake.answers["submit"] = {"job_id": 7}
    argv = ["submit", "--size", "4", "--class", "standby", "--name", "io", "--estimate", "60"]
    argv += ["--exclusive", "--env", "A=1", "--env", "B=x=y", "--cwd", str(tmp_path)]
    argv += ["--", "python", "-m", "apps.synthetic", "--size", "9"]
    assert main(argv) == 0
    assert fake.calls == [
        (
            "submit",
            {
                "spec": {
                    "argv": ["python", "-m", "apps.synthetic", "--size", "9"],
                    "size": 4,
                    "class": "standby",
                    "name": "io",
                    "estimate": 60.0,
                    "cwd": str(tmp_path),
                    "exclusive": True,
                    "env": {"A": "1", "B": "x=y"},
                }
            },
        )
    ]
    assert capsys.readouterr().out == (
        "submitted job 7 (4 nodes): python -m apps.synthetic --size 9\n"
    )
    assert fake.closed == 1


def test_submit_quiet_prints_only_the_id_and_runs_here(
    fake: FakeClient, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.answers["submit"] = {"job_id": 12}
    assert main(["submit", "-q", "--", "true"]) == 0
    assert capsys.readouterr().out == "12\n"
    spec = fake.calls[0][1]["spec"]
    assert spec == {"argv": ["true"], "size": 1, "cwd": os.getcwd()}


def test_submit_from_a_toml_spec_with_flags_on_top(
    fake: FakeClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text(
        '[job]\nname = "cpu"\nsize = 2\nargv = "python -m apps.synthetic --gio 0"\n'
        'class = "production"\nenv = { X = "1" }\ncwd = "/tmp"\n'
    )
    fake.answers["submit"] = {"job_id": 3}
    assert main(["submit", "--spec", str(spec), "--size", "8", "--env", "Y=2"]) == 0
    assert fake.calls[0][1]["spec"] == {
        "name": "cpu",
        "size": 8,
        "argv": ["python", "-m", "apps.synthetic", "--gio", "0"],
        "class": "production",
        "env": {"X": "1", "Y": "2"},
        "cwd": "/tmp",
    }
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["submit", "--size", "2"], "cosched: error: nothing to run: give the command after '--'"),
        (["submit", "--env", "NOEQUALS", "--", "x"], "cosched: error: --env wants KEY=VALUE"),
        (["submit", "--size", "0", "--", "x"], "cosched: error: size must be a whole number >= 1"),
        (["submit", "--spec", "/nonexistent.toml"], "cosched: error: cannot read --spec"),
        (["controller", "set", "quantum"], "cosched: error: set wants KEY=VALUE"),
        (
            ["controller", "set", "speed=3"],
            "cosched: error: unknown setting 'speed'; settable: quantum",
        ),
        (["controller", "set", "max_slots=two"], "cosched: error: max_slots='two': want a whole"),
        (
            ["controller", "set", "quantum=none"],
            "cosched: error: quantum needs a number of seconds",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    fake: FakeClient, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert one_line_error(capsys).startswith(message)
    assert fake.calls == []


def test_bad_toml_names_the_file(fake: FakeClient, tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("size = = 2\n")
    assert main(["submit", "--spec", str(bad)]) == 2
    assert f"--spec {bad} is not valid TOML" in one_line_error(capsys)
    bad.write_text("[job]\nsize = 2\nnodes = 3\n")
    assert main(["submit", "--spec", str(bad)]) == 2
    assert "unknown keys ['nodes']" in one_line_error(capsys)


def test_controller_refusal_is_its_one_line(fake: FakeClient, capsys: Any) -> None:
    fake.answers["kill"] = ControllerError("kill: job 9 belongs to bob; only bob or an operator")
    assert main(["kill", "9"]) == 2
    assert one_line_error(capsys) == (
        "cosched: error: kill: job 9 belongs to bob; only bob or an operator"
    )
    assert fake.closed == 1


def test_unavailable_controller_says_how_to_start_one(fake: FakeClient, capsys: Any) -> None:
    fake.answers["jobs"] = ControllerUnavailable("controller not answering after 30s: refused")
    assert main(["jobs", "--socket", "/tmp/x.sock"]) == 2
    err = one_line_error(capsys)
    assert "no controller answers on /tmp/x.sock" in err
    assert "cosched controller start --policy" in err


def test_missing_socket_fails_at_once_with_the_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("COSCHED_RUN_DIR", str(tmp_path))
    assert main(["matrix", "--retry", "30"]) == 2
    err = one_line_error(capsys)
    assert f"no controller answers on {tmp_path}/controller.sock" in err
    assert "cosched controller start" in err


def test_tcp_needs_a_key_file(capsys: Any, tmp_path: Path) -> None:
    assert main(["jobs", "--tcp", "10.0.0.1:7000"]) == 2
    assert "--tcp needs --key-file" in one_line_error(capsys)
    assert main(["jobs", "--tcp", "nohost"]) == 2
    assert "--tcp wants HOST:PORT" in one_line_error(capsys)
    short = tmp_path / "k"
    short.write_text("short")
    assert main(["jobs", "--tcp", "h:1", "--key-file", str(short)]) == 2
    assert "fewer than 16 bytes" in one_line_error(capsys)


def test_jobs_table_and_all_flag(fake: FakeClient, capsys: Any) -> None:
    fake.answers["jobs"] = [
        {"job_id": 1, "name": "a", "user": "u", "class": "production", "size": 2,
         "state": "done", "wall_s": 4.0, "cpu_s": 8.0, "exit_code": 0}
    ]  # fmt: skip
    fake.answers["status"] = {"policy": "gang", "nodes": ["n0", "n1"]}
    assert main(["jobs", "--all"]) == 0
    assert fake.calls == [("jobs", {"all": True}), ("status", {})]
    assert capsys.readouterr().out == (
        "policy gang\n"
        "ID  NAME  USER  CLASS       SIZE  STATE  CPU_S  WALL_S  UTIL  EXIT\n"
        " 1  a     u     production     2  done     8.0     4.0  1.00     0\n"
    )


def test_jobs_names_the_cdc_policy_its_mpl_and_scheme(fake: FakeClient, capsys: Any) -> None:
    fake.answers["jobs"] = []
    fake.answers["status"] = {
        "policy": "cc-b", "family": "cdc", "mpl": 5, "scheme": "cc-b", "tick_ms": 10.0,
        "spin_us": 150.0, "boost": "weight", "local_policy": {"n0": "cc-b", "n1": "cc-b"},
    }  # fmt: skip
    assert main(["jobs"]) == 0
    assert capsys.readouterr().out == (
        "policy cc-b: MPL 5, scheme cc-b (tick 10 ms, spin 150 us, boost weight)\nno jobs\n"
    )
    assert main(["jobs", "--json"]) == 0
    assert capsys.readouterr().out == "[]\n"  # raw: no policy line


def test_matrix_renders_and_json_is_raw(fake: FakeClient, capsys: Any) -> None:
    fake.answers["matrix"] = {"policy": "gang", "quantum": 1, "nodes": ["n0"], "slots": [[1]],
                              "running": {"slot": 0}, "jobs": {}}  # fmt: skip
    assert main(["matrix"]) == 0
    assert capsys.readouterr().out.startswith("gang  quantum 1 s  1 node  1 slot\n    n0\n>0  1\n")
    assert main(["matrix", "--json"]) == 0
    assert '"policy": "gang"' in capsys.readouterr().out


def test_watch_redraws_until_ctrl_c(
    fake: FakeClient, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.answers["jobs"] = []
    fake.answers["status"] = ControllerError("busy")  # the policy line is left out
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr("testbed.commands.jobs.time.sleep", sleep)
    assert main(["jobs", "--watch", "0.5"]) == 0
    out = capsys.readouterr().out
    assert out.count("\033[H\033[2J") == 3 and out.count("no jobs") == 3
    assert naps == [0.5, 0.5, 0.5]


def test_watch_keeps_going_through_an_error(
    fake: FakeClient, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.answers["matrix"] = ControllerError("busy: restarting")

    def sleep(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("testbed.commands.jobs.time.sleep", sleep)
    assert main(["matrix", "-w"]) == 0
    assert "every 2s: cosched matrix" in capsys.readouterr().out


def test_watch_period_must_be_positive(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["jobs", "--watch", "0"])
    assert exc.value.code == 2
    assert "want a positive number of seconds" in capsys.readouterr().err


def test_slice_uses_node_names_when_the_status_has_them(fake: FakeClient, capsys: Any) -> None:
    fake.answers["slice"] = {"packed": [[1, None]], "free_runs": [[1, 1]], "size": 1, "fits": True}
    fake.answers["status"] = {"nodes": ["n0", "n1"]}
    assert main(["slice", "--size", "1"]) == 0
    assert fake.calls[0] == ("slice", {"size": 1})
    assert capsys.readouterr().out.endswith(
        "free in every row: n1 (1 node)\n"
        "a job of 1 node placed within n1 (1 node) would get 100% of the time\n"
    )


def test_kill_class_status_checkpoint_set_stop(fake: FakeClient, capsys: Any) -> None:
    fake.answers.update(
        kill={"state": "killed"},
        **{"class": {"class": "interactive"}},
        status={"policy": "gang", "nodes": ["n0"], "failsafe": None},
        checkpoint={"path": "/run/cosched/ckpt.json"},
        set={"quantum": 0.5, "max_slots": None},
        shutdown={"path": "/run/cosched/ckpt.json"},
    )
    assert main(["kill", "4"]) == 0
    assert main(["class", "4", "interactive"]) == 0
    assert main(["controller", "status"]) == 0
    assert main(["controller", "checkpoint"]) == 0
    assert main(["controller", "set", "quantum=0.5", "max-slots=none"]) == 0
    assert main(["controller", "stop", "--no-checkpoint"]) == 0
    assert fake.calls == [
        ("kill", {"job_id": 4}),
        ("class", {"job_id": 4, "class": "interactive"}),
        ("status", {}),
        ("checkpoint", {}),
        ("set", {"quantum": 0.5, "max_slots": None}),
        ("shutdown", {"checkpoint": False}),
    ]
    assert capsys.readouterr().out == (
        "job 4: killed\n"
        "job 4: class interactive\n"
        "policy    gang\n"
        'nodes     ["n0"]\n'
        "failsafe  -\n"
        "checkpoint written: /run/cosched/ckpt.json\n"
        "quantum    0.5\n"
        "max_slots  -\n"
        "controller stopping; checkpoint at /run/cosched/ckpt.json\n"
    )


def test_class_refuses_unknown_classes(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main(["class", "4", "urgent"])
    assert "invalid choice: 'urgent'" in capsys.readouterr().err


def test_start_builds_the_daemon_command_line() -> None:
    parser = argparse.ArgumentParser()
    add_controller_commands(parser.add_subparsers())
    args = parser.parse_args(
        ["controller", "start", "--policy", "paired-gang", "--quantum", "0.5", "--param",
         "band=0.2", "--key-file", "/k", "--run-dir", "/tmp/r", "--checkpoint", "/c",
         "--restore"]
    )  # fmt: skip
    argv = daemon_argv(args)
    assert argv[1] in ("-I", "-P")  # never the caller's directory (common/daemons.py)
    assert argv[2:] == [
        "-m", "controller", "--policy", "paired-gang", "--quantum", "0.5", "--run-dir",
        "/tmp/r", "--param", "band=0.2", "--key-file", "/k", "--checkpoint", "/c", "--restore",
    ]  # fmt: skip


def test_start_hands_the_scheme_flags_on() -> None:
    parser = argparse.ArgumentParser()
    add_controller_commands(parser.add_subparsers())
    args = parser.parse_args(
        ["controller", "start", "--policy", "cc-b", "--mpl", "5", "--tick-ms", "5",
         "--spin-us", "100", "--boost", "weight", "--run-dir", "/tmp/r"]
    )  # fmt: skip
    assert daemon_argv(args)[2:] == [
        "-m", "controller", "--policy", "cc-b", "--quantum", "1", "--run-dir", "/tmp/r",
        "--mpl", "5", "--tick-ms", "5", "--spin-us", "100", "--boost", "weight",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "command",
    [
        ["submit"], ["jobs"], ["matrix"], ["slice"], ["kill"], ["class"], ["controller"],
        ["controller", "start"], ["controller", "stop"], ["controller", "status"],
        ["controller", "checkpoint"], ["controller", "set"],
    ],
)  # fmt: skip
def test_every_help_teaches_with_examples(command: list[str], capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "cosched " in out.split("examples:")[1]


def test_set_device_rates_parse_as_bytes_per_second() -> None:
    from testbed.commands._api import CliError
    from testbed.commands.controller import _parse_setting

    assert _parse_setting("disk-bps=2e8") == ("disk_bps", 2e8)
    assert _parse_setting("net_bps=125000000") == ("net_bps", 125e6)
    with pytest.raises(CliError, match="bytes per second"):
        _parse_setting("disk_bps=fast")
    with pytest.raises(CliError, match="bytes per second"):
        _parse_setting("net_bps=none")
