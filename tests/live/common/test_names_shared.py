"""The tests of tests/unit/common/test_names_shared.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

from controller.flags import daemon_argv
from tests.support.daemon_parsers import _daemon_parser, _start_parser


def test_flags_not_given_take_the_daemons_defaults() -> None:
    args = _start_parser().parse_args(["controller", "start", "--policy", "gang"])
    argv = daemon_argv(args, python="py")
    assert argv == ["py", "-P", "-m", "controller", "--policy", "gang", "--quantum", "1",
                    "--run-dir", args.run_dir]  # fmt: skip
    daemon = _daemon_parser().parse_args(argv[4:])
    assert daemon.fifo_priority == 20 and daemon.checkpoint_every == 5.0
