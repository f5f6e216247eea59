"""Every command group answers bad input with one line on stderr, never a traceback.

Each case runs the console-script entry ``testbed.cli.main`` (or a daemon's
``main``) in-process and checks: non-zero status, exactly one line on stderr,
``<prog>: error: ...``, and no "Traceback" anywhere in the output.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.cluster import cluster as cluster_mod
from tests.support.cli import key_file, one_line
from tests.support.cluster_fakes import make_env


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No controller here, no cluster state here: never the host's /run/cosched.
    monkeypatch.setenv("COSCHED_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("COSCHED_STATE_DIR", str(tmp_path / "state"))


# -- simulate, policies ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--policy", "easy", "--workload", "swf:/nonexistent/trace.swf"], "No such file"),
        (["--policy", "easy", "--workload", "/nonexistent/spec.toml"], "spec.toml"),
        (["--policy", "no-such-policy"], "unknown policy 'no-such-policy'"),
        (["--policy", "gang", "--param", "colour=red"], "no parameter 'colour'"),
        (["--policy", "gang", "--param", "noequals"], "expected KEY=VALUE"),
        (["--policy", "gang", "--param", "max_slots=many"], "max_slots"),
        (["--policy", "gang", "--nodes", "0"], "--nodes must be >= 1"),
        (["--policy", "gang", "--loads", "0.5,lots"], "lots"),
        (["--policy", "cc-b"], "the CDC schemes run Yu & Byun 2011 Table 3's workloads"),
        (["--policy", "cc-b,easy"], "run in their own simulator"),
    ],
)
def test_simulate(argv: list[str], words: str, tmp_path: Path, capsys: Any) -> None:
    rc = main(["simulate", *argv, "--jobs", "5", "--quiet", "--out", str(tmp_path / "o")])
    assert rc == 2
    assert words in one_line(capsys)


def test_simulate_unwritable_out(tmp_path: Path, capsys: Any) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc = main(["simulate", "--policy", "easy", "--jobs", "5", "--out", str(blocker / "o")])
    assert rc == 1
    assert "cannot create --out" in one_line(capsys)


# -- cluster ------------------------------------------------------------------------


def test_cluster_up_without_root(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["cluster", "up", "--nodes", "2", "--no-agents"]) == 2
    assert "needs root" in one_line(capsys)


def test_cluster_up_impossible_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    env = make_env(tmp_path)
    monkeypatch.setattr(cluster_mod, "Env", lambda: env)
    assert main(["cluster", "up", "--nodes", "100000", "--no-agents"]) == 2
    assert "--nodes must be between 1 and" in one_line(capsys)


def test_cluster_up_bad_link(capsys: Any) -> None:
    assert main(["cluster", "up", "--nodes", "2", "--link", "carrier-pigeon"]) == 2
    assert "carrier-pigeon" in one_line(capsys)


def test_cluster_up_twice_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # The reported failure: the second `up` printed a traceback around a good
    # message, because only `python -m testbed.cluster` caught ClusterError.
    env = make_env(tmp_path)
    monkeypatch.setattr(cluster_mod, "Env", lambda: env)
    assert main(["cluster", "up", "--nodes", "2", "--no-agents"]) == 0
    capsys.readouterr()
    assert main(["cluster", "up", "--nodes", "2", "--no-agents"]) == 2
    line = one_line(capsys)
    assert "already up" in line and "cosched cluster down" in line
    cluster_mod.down(env)


# -- controller and jobs, no controller running ----------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["controller", "status"],
        ["controller", "stop"],
        ["controller", "checkpoint"],
        ["controller", "set", "quantum=0.5"],
        ["jobs"],
        ["matrix"],
        ["slice", "--size", "2"],
        ["kill", "3"],
        ["class", "3", "standby"],
        ["submit", "--size", "2", "--", "true"],
    ],
)
def test_no_controller_running(argv: list[str], capsys: Any) -> None:
    assert main(argv) == 2
    line = one_line(capsys)
    assert "no controller answers on" in line and "cosched controller start" in line


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ('[job]\nsize = "two"\nargv = ["true"]\n', "size must be a whole number"),
        ("[job]\nsize = 2\nnodes = 3\n", "unknown keys ['nodes']"),
        ("size = = 2\n", "is not valid TOML"),
        ("[job]\nsize = 2\n", "nothing to run"),
    ],
)
def test_submit_bad_spec(spec: str, words: str, tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "job.toml"
    path.write_text(spec)
    assert main(["submit", "--spec", str(path)]) == 2
    assert words in one_line(capsys)


def test_submit_missing_spec(capsys: Any) -> None:
    assert main(["submit", "--spec", "/nonexistent/job.toml"]) == 2
    assert "cannot read --spec /nonexistent/job.toml" in one_line(capsys)


def test_tcp_key_file_must_be_private(tmp_path: Path, capsys: Any) -> None:
    key = key_file(tmp_path, 0o644)
    assert main(["jobs", "--tcp", "127.0.0.1:7000", "--key-file", key]) == 2
    assert f"chmod 600 {key}" in one_line(capsys)


# -- experiment --------------------------------------------------------------------------


def test_experiment_missing_spec(capsys: Any) -> None:
    assert main(["experiment", "run", "/nonexistent/exp.toml"]) == 2
    assert "/nonexistent/exp.toml" in one_line(capsys)


def test_experiment_bad_override(capsys: Any) -> None:
    spec = Path(__file__).parents[3] / "experiments" / "paired-vs-gang.toml"
    assert main(["experiment", "run", str(spec), "--configs", "nope"]) == 2
    assert "--configs: unknown 'nope'" in one_line(capsys)


# -- the daemons ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--policy", "gang", "--param", "band"], "--param: want key=value"),
        (["--policy", "gang", "--quantum", "0"], "--quantum must be >="),
        (["--policy", "gang", "--agents", "n0"], "--agents: want name=host:port"),
        (["--policy", "gang", "--agents", "n0=nohost"], "want HOST:PORT"),
        (["--policy", "gang", "--cluster-state", "/nonexistent.json"], "cosched cluster up"),
        (["--policy", "gang", "--agents", "n0=127.0.0.1:1"], "give --key-file"),
        (["--policy", "gang", "--agents", "n0=127.0.0.1:1", "--key-file", "/nonexistent"],
         "cannot read key file /nonexistent"),
        (["--policy", "gang", "--log-level", "LOUD"], "unknown level 'LOUD'"),
        (["--policy", "cc-x"], "unknown policy 'cc-x'; valid policies: fcfs"),
        (["--policy", "gang", "--mpl", "3"], "--mpl applies to the space-sharing policies"),
        (["--policy", "dcs", "--mpl", "0"], "mpl must be a whole number >= 1, got 0"),
        (["--policy", "dcs", "--mpl", "many"], "mpl: expected an integer, got 'many'"),
        (["--policy", "dcs", "--mpl", "2", "--param", "mpl=3"], "both given"),
        (["--policy", "batch", "--mpl", "5"], "its MPL is 1, got 5"),
        (["--policy", "cc-b", "--boost", "nice"], "boost: expected one of weight, freeze"),
        (["--policy", "cc-b", "--tick-ms", "0"], "must be in 0.1..1000 ms"),
        (["--policy", "cc-s", "--spin-us", "-1"], "spin_us must be >= 0"),
    ],
)  # fmt: skip
def test_controller_daemon_bad_config(argv: list[str], words: str, capsys: Any) -> None:
    from controller.__main__ import main as controller_main

    assert controller_main(argv) != 0
    assert words in one_line(capsys, "controller")


def test_agent_daemon_refuses_a_readable_key(tmp_path: Path, capsys: Any) -> None:
    from agent.__main__ import main as agent_main

    key = key_file(tmp_path, 0o640)
    assert agent_main(["--node", "n0", "--listen", "127.0.0.1:0", "--key-file", key]) == 1
    assert f"chmod 600 {key}" in one_line(capsys, "agent")
