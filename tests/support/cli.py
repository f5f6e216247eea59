"""Reading what the CLI printed: the one error line, and ports and keys for daemons
that must fail to start."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.ports import free_port


def one_line(capsys: pytest.CaptureFixture[str], prog: str = "cosched") -> str:
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: error: "), err
    return lines[0]


def key_file(tmp_path: Path, mode: int = 0o600, text: str = "k" * 32) -> str:
    path = tmp_path / f"key-{mode:o}"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def refused_port() -> int:
    # below the ephemeral range: a connect to it can never land on itself
    return free_port()  # nobody listens: connecting is refused


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("cosched: ")
    return err.strip()
