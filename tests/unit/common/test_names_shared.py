"""common/names, common/addr, common/keys and the daemon flags declared once."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from common import names
from common.addr import AddressError, format_addr, parse_addr
from common.errors import CoschedError
from common.keys import KeyFileError, read_key, write_key
from controller.flags import DAEMON_FLAGS, add_daemon_flags, daemon_argv
from tests.support.daemon_parsers import _daemon_parser, _start_parser

# -- names ----------------------------------------------------------------------------


def test_directories_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSCHED_RUN_DIR", "/tmp/r")
    monkeypatch.setenv("COSCHED_STATE_DIR", "")  # empty counts as unset
    assert names.run_dir() == "/tmp/r"
    assert names.controller_socket() == "/tmp/r/controller.sock"
    assert names.state_dir() == "/run/cosched"
    assert names.cluster_state_path("/x") == "/x/cluster.json"


def test_job_classes_agree_with_the_controller() -> None:
    from controller import classes, jobs

    assert names.CLASSES == jobs.CLASSES
    assert set(classes.RANK) == set(names.CLASSES)


# -- addresses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "addr"),
    [("10.0.0.1:7070", ("10.0.0.1", 7070)), ("[::1]:80", ("::1", 80)), ("h:0", ("h", 0))],
)
def test_parse_and_format_addr(text: str, addr: tuple[str, int]) -> None:
    assert parse_addr(text) == addr
    assert format_addr(addr) == text


@pytest.mark.parametrize("text", ["nohost", ":7070", "h:", "h:port", "h:70000", ""])
def test_bad_addr_is_a_usage_error(text: str) -> None:
    with pytest.raises(AddressError) as info:
        parse_addr(text)
    assert isinstance(info.value, ValueError) and info.value.exit_code == 2
    assert "want HOST:PORT" in str(info.value)


def test_default_host() -> None:
    assert parse_addr(":7070", default_host="0.0.0.0") == ("0.0.0.0", 7070)


# -- keys --------------------------------------------------------------------------------


def test_write_then_read_key(tmp_path: Path) -> None:
    path = write_key(str(tmp_path / "d" / "k"))
    assert os.stat(path).st_mode & 0o777 == 0o600
    key = read_key(path)
    assert len(key) == 64 and bytes.fromhex(key.decode())


def test_write_key_replaces_a_symlink_without_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "k").symlink_to(victim)
    write_key(str(tmp_path / "k"))
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "k").is_symlink()


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: p.write_text("x" * 32) or p.chmod(0o644), "chmod 600"),
        (lambda p: p.write_text("x" * 32) or p.chmod(0o620), "chmod 600"),
        (lambda p: p.write_text("short\n") or p.chmod(0o600), "fewer than 16 bytes"),
        (lambda p: p.mkdir(), "not a regular file"),
        (lambda p: None, "cannot read key file"),
    ],
)
def test_unsafe_keys_are_refused(make, words: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "key"
    make(path)
    with pytest.raises(KeyFileError) as info:
        read_key(str(path))
    assert words in str(info.value) and "\n" not in str(info.value)
    assert isinstance(info.value, CoschedError)


def test_symlinked_key_is_refused(tmp_path: Path) -> None:
    real = Path(write_key(str(tmp_path / "real")))
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(KeyFileError, match="symlink"):
        read_key(str(tmp_path / "link"))


# -- daemon flags, declared once ----------------------------------------------------------


def test_start_offers_every_daemon_flag() -> None:
    start = _start_parser()
    sub = next(a for a in start._actions if isinstance(a, argparse._SubParsersAction))
    ctl = sub.choices["controller"]
    ctl_sub = next(a for a in ctl._actions if isinstance(a, argparse._SubParsersAction))
    offered = {s for a in ctl_sub.choices["start"]._actions for s in a.option_strings}
    daemon = {s for a in _daemon_parser()._actions for s in a.option_strings}
    assert daemon <= offered
    assert {f.name for f in DAEMON_FLAGS} == daemon - {"-h", "--help"}


def test_start_hands_on_exactly_what_was_given() -> None:
    given = ["--policy", "paired-gang", "--param", "band=0.2", "--param", "margin=0.1",
             "--agents", "n0=10.0.0.1:7070", "--capacity", "1.5", "--key-file", "/k",
             "--listen-tcp", "[::1]:7000", "--metrics", "0.0.0.0:9097", "--checkpoint", "/c",
             "--checkpoint-every", "2", "--restore", "--operator", "ops", "--fifo-priority", "0",
             "--log-level", "DEBUG", "--agent-port", "7171"]  # fmt: skip
    args = _start_parser().parse_args(["controller", "start", *given, "--run-dir", "/tmp/r"])
    argv = daemon_argv(args)
    assert argv[1] in ("-I", "-P") and argv[2:4] == ["-m", "controller"]
    parsed = _daemon_parser().parse_args(argv[4:])
    assert parsed.quantum == 1.0  # start's default, handed on
    assert parsed.run_dir == "/tmp/r"
    assert parsed.listen_tcp == ("::1", 7000) and parsed.metrics == ("0.0.0.0", 9097)
    assert parsed.param == ["band=0.2", "margin=0.1"] and parsed.operator == ["ops"]
    assert (parsed.capacity, parsed.checkpoint_every, parsed.fifo_priority) == (1.5, 2.0, 0)
    assert parsed.restore and parsed.agent_port == 7171 and parsed.log_level == "DEBUG"


def test_add_daemon_flags_on_a_fresh_parser() -> None:
    p = argparse.ArgumentParser()
    add_daemon_flags(p)
    a = p.parse_args(["--policy", "gang"])
    assert a.quantum == 0.1 and a.agent_port == names.AGENT_PORT and a.param == []
