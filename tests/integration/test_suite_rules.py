"""The suite's own rules (tests/conftest.py), run on small test trees in a fresh pytest
process as CI runs it (CI=true, root): a skip whose reason is not on the allow-list
fails; an allowed one stays a skip, in its stage only; the fast tier refuses a
process; a live test that leaves a process behind fails itself."""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest

from tests.support import tiers

CONFTEST = """
from tests.conftest import (  # the repository's rules, in this tree
    _fast_tier_guard, _leaves_no_trace, _module_leaves_no_trace,
    pytest_collection_modifyitems, pytest_runtest_makereport,
)
"""


def _tree(pytester: pytest.Pytester, files: dict[str, str]) -> None:
    # No __init__.py: the repository's `tests` package must stay the one imported.
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "conftest.py").write_text(CONFTEST)
    for rel, body in files.items():
        p = pytester.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(body))
    marks = "".join(
        f"    {m}: the suite's tier\n" for m in ("root", "live", "slow", "fast", "v2only")
    )
    (pytester.path / "pytest.ini").write_text(f"[pytest]\nmarkers =\n{marks}")


def _run(pytester: pytest.Pytester, stage: str = "hybrid") -> pytest.RunResult:
    env = {"CI": "true", "COSCHED_TEST_STAGE": stage, "PYTHONPATH": str(tiers.REPO)}
    for k, v in env.items():
        os.environ[k] = v  # pytester's subprocess inherits the environment
    try:
        return pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "tests")
    finally:
        for k in env:
            os.environ.pop(k, None)


def test_a_skip_on_ci_fails_unless_allowed_in_its_stage(pytester: pytest.Pytester) -> None:
    _tree(
        pytester,
        {
            "tests/unit/test_skips.py": """
                import pytest

                def test_tool_missing():
                    pytest.skip("promtool not installed")

                def test_leftovers():
                    pytest.skip("host already has cosched objects: {'netns': ['cosched-n0']}")

                def test_allowed_in_hybrid():
                    pytest.skip("cgroup2 at /sys/fs/cgroup/unified offers no cpu controller here")
            """,
        },
    )
    r = _run(pytester)
    r.assert_outcomes(failed=2, skipped=1)
    assert "not on the allow-list" in r.stdout.str()
    assert "promtool not installed" in r.stdout.str()
    # the same skip in the v2-only stage means cgroup2 did not get the cpu controller
    _run(pytester, "v2only").assert_outcomes(failed=3)


def test_the_fast_tier_refuses_a_process(pytester: pytest.Pytester) -> None:
    body = """
        import subprocess

        def test_spawn():
            subprocess.run(["true"], check=True)
    """
    _tree(pytester, {"tests/unit/test_pure.py": body, "tests/live/test_pure_spawn.py": body})
    r = _run(pytester)
    r.assert_outcomes(passed=1, failed=1)
    r.stdout.fnmatch_lines(["*FAILED tests/unit/test_pure.py::test_spawn*"])
    assert "the fast tier starts no process" in r.stdout.str()


def test_a_live_test_that_leaves_a_process_fails_itself(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    _tree(
        pytester,
        {
            "tests/live/test_leak.py": f"""
                import subprocess

                def test_leaks():
                    p = subprocess.Popen(["sleep", "60"])
                    open({str(pidfile)!r}, "w").write(str(p.pid))
            """,
            "tests/live/test_next.py": "def test_after():\n    pass\n",
        },
    )
    try:
        r = _run(pytester)
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
    # the leak is the leaking test's error, not a skip or failure of the test after it
    r.assert_outcomes(passed=2, errors=1)
    r.stdout.fnmatch_lines(["*ERROR tests/live/test_leak.py::test_leaks*"])
    assert "sleep 60" in r.stdout.str()
