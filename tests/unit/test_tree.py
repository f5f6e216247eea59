"""The test tree's layout (tests/support/tiers.py's docstring): tests/unit/ and
tests/live/ mirror the source tree, helpers live in tests/support/, no test module
imports another, and every directory is a package (same-named modules in two
directories must not clash). The rules run on the real tree and on small trees made
here, so a rule that stopped finding anything fails too."""

from __future__ import annotations

from pathlib import Path

from tests.support import tiers


def test_the_repositorys_test_tree_has_nothing_out_of_place() -> None:
    bad = tiers.misplaced()
    assert not bad, "\n".join(map(str, bad))


def _repo(root: Path, files: dict[str, str]) -> Path:
    """A repository with one source package (agent/daemon.py) and ``files`` under tests/."""
    for rel in ("agent/__init__.py", "agent/daemon.py", "agent/cdc/__init__.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    (root / "agent/cdc/schemes.py").write_text("")
    for rel, body in files.items():
        assert not Path(rel).is_absolute(), rel
        p = root / "tests" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body)
    return root


def _found(root: Path) -> dict[str, str]:
    """Each misplaced file and every reason given for it."""
    out: dict[str, str] = {}
    for m in tiers.misplaced(root / "tests", root):
        out[m.path] = f"{out[m.path]}; {m.why}" if m.path in out else m.why
    return out


# Relative paths under tests/ (a leading "/" would make pathlib write at the root).
PACKAGES = {
    str(Path(d, "__init__.py")): ""
    for d in ("", "unit", "unit/agent", "unit/agent/cdc", "live", "live/agent", "support")
}


def test_a_mirrored_tree_passes(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            **PACKAGES,
            "unit/agent/test_daemon.py": "from tests.support.x import y\n",
            "unit/agent/test_daemon_restart.py": "",  # test_<module>_<topic>.py
            "unit/agent/cdc/test_schemes.py": "",
            "unit/agent/test_cdc.py": "",  # a subpackage as a whole
            "live/agent/test_daemon.py": "",  # the same name in another directory
            "unit/test_tree.py": "",  # allowed at the top by name
            "support/x.py": "",
        },
    )
    assert _found(root) == {}


def test_each_misplaced_file_is_named_with_why(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            **PACKAGES,
            "unit/test_daemon.py": "",  # flat, not mirrored
            "unit/agent/test_nothing.py": "",  # no such module
            "live/agent/test_cdc_x.py": "import tests.unit.agent.test_daemon\n",
            "unit/agent/helpers.py": "",  # a helper outside support
            "unit/agent/test_daemon_rel.py": "from .helpers import f\n",  # relative import
            "support/test_x.py": "",  # a test in support
            "unit/controller/test_x.py": "",  # not a source package, no __init__.py
            "test_top.py": "",  # outside the tiers
            "stray/test_x.py": "",
        },
    )
    found = _found(root)
    assert set(found) == {
        "tests/unit/test_daemon.py",
        "tests/unit/agent/test_nothing.py",
        "tests/live/agent/test_cdc_x.py",
        "tests/unit/agent/helpers.py",
        "tests/unit/agent/test_daemon_rel.py",
        "tests/support/test_x.py",
        "tests/unit/controller/test_x.py",
        "tests/test_top.py",
        "tests/stray/test_x.py",
    }
    assert "mirrors the source tree" in found["tests/unit/test_daemon.py"]
    assert "it has cdc, daemon" in found["tests/unit/agent/test_nothing.py"]
    assert "imports tests.unit.agent.test_daemon" in found["tests/live/agent/test_cdc_x.py"]
    assert "move it to tests/support/" in found["tests/unit/agent/helpers.py"]
    assert "(relative) helpers" in found["tests/unit/agent/test_daemon_rel.py"]
    assert "helpers, not tests" in found["tests/support/test_x.py"]
    assert "controller/ is not a source package" in found["tests/unit/controller/test_x.py"]
    assert "controller/__init__.py is missing" in found["tests/unit/controller/test_x.py"]


def test_a_directory_without_init_is_named(tmp_path: Path) -> None:
    files = {**PACKAGES, "unit/agent/test_daemon.py": ""}
    del files["unit/agent/__init__.py"]
    found = _found(_repo(tmp_path, files))
    assert found == {"tests/unit/agent/test_daemon.py": "tests/unit/agent/__init__.py is missing"}
