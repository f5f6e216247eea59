"""``cosched app list|run`` (testbed/commands/app.py, apps/catalog.py): local ranks,
no scheduler; bad input is one line before any process starts."""

from __future__ import annotations

import json

import pytest

from apps.catalog import catalog, check
from testbed.cli import main


def test_list_shows_every_app_with_its_ranks_and_classes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["app", "list", "--json"]) == 0
    apps = json.loads(capsys.readouterr().out)
    assert set(apps) == {"synthetic", "pingpong", "bt", "sp", "ft", "is", "cg"}
    assert apps["bt"]["ranks"].startswith("squares") and apps["cg"]["classes"] == ["S", "W", "A"]
    assert apps["synthetic"]["presets"] == ["compute", "io", "fine", "qcrd"]
    assert main(["app", "list"]) == 0
    assert "powers of two" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["app", "run", "cg", "--ranks", "3"], "cg cannot run on 3 ranks: it takes powers of two"),
        (["app", "run", "bt", "--ranks", "2"], "bt cannot run on 2 ranks: it takes squares"),
        (["app", "run", "cg", "--ranks", "2", "--class", "Z"], "no class 'Z'"),
        (["app", "run", "nope", "--ranks", "2"], "no app 'nope'"),
        (["app", "run", "synthetic", "--ranks", "2", "--transport", "mpi"], "runs over ours only"),
        (["app", "run", "synthetic", "--ranks", "1", "--preset", "fine"], "needs 2 or more"),
        (["app", "run", "pingpong", "--ranks", "1"], "needs at least 2 ranks"),
        (["app", "run", "cg", "--ranks", "2", "--preset", "io"], "cg has no preset 'io'"),
    ],
)
def test_bad_input_is_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err, err


def test_check_is_pure_and_agrees_with_the_kernel_table() -> None:
    apps = catalog()
    assert check(apps["sp"], 4, "S", "ours", None) is None
    assert check(apps["ft"], 8, "W", "mpi", None) is None
    assert check(apps["synthetic"], 3, None, "ours", "qcrd") is None
