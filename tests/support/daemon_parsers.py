"""What tests/unit/common/test_names_shared.py
and tests/live/common/test_names_shared.py share."""

from __future__ import annotations

import argparse


def _daemon_parser() -> argparse.ArgumentParser:
    from controller.__main__ import build_parser

    return build_parser()


def _start_parser() -> argparse.ArgumentParser:
    from testbed.cli import build_parser

    return build_parser()
