"""The tiers' rules (tests/support/tiers.py, tests/support/allowed_skips.py) and the
lists they read: a listed module or test that was renamed or removed would silently
drop a test out of its tier, so every entry must name something that exists."""

from __future__ import annotations

import ast

import pytest

from tests.support import tiers
from tests.support.allowed_skips import allowed


def _functions(module: str) -> set[str]:
    tree = ast.parse((tiers.REPO / module).read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


@pytest.mark.parametrize("name", ["SLOW", "V2ONLY", "LIVE_MODULES", "V2ONLY_KNOWN_FAILURES"])
def test_every_listed_module_and_test_exists(name: str) -> None:
    missing = []
    for entry in sorted(getattr(tiers, name)):
        module, _, test = entry.partition("::")
        there = (tiers.REPO / module).is_file()
        if not there or (test and test.split("[", 1)[0] not in _functions(module)):
            missing.append(entry)
    assert not missing, f"tests/support/tiers.py {name} names what is not there: {missing}"


def test_tier_dir_and_listing() -> None:
    assert tiers.tier_dir("tests/unit/controller/policies/test_gang.py") == "unit"
    assert tiers.tier_dir("tests/integration/test_cluster.py") == "integration"
    assert tiers.tier_dir("tests/support/host.py") is None
    assert tiers.tier_dir("common/cgroups/fake.py") is None
    names = {"tests/unit/a.py", "tests/unit/b.py::test_x"}
    assert tiers.listed("tests/unit/a.py::test_y[1]", names)
    assert tiers.listed("tests/unit/b.py::test_x[p-q]", names)
    assert not tiers.listed("tests/unit/b.py::test_xy", names)
    assert all(tiers.is_live_module(e) for e in tiers.LIVE_MODULES)
    assert not tiers.is_live_module("tests/unit/controller/policies/test_gang.py::test_z")


def test_allowed_skips_are_per_stage() -> None:
    hybrid_cpu = "cgroup2 at /sys/fs/cgroup/unified offers no cpu controller here"
    assert allowed(hybrid_cpu, "hybrid")
    # in the v2-only stage cgroup2 must offer cpu: the same skip is a failure there
    assert not allowed(hybrid_cpu, "v2only")
    v1 = "needs the cgroup v1 hierarchies (freezer, cpu, cpuacct) and root"
    assert allowed(v1, "v2only") and not allowed(v1, "hybrid")
    for reason in (
        "promtool not installed",
        "host already has cosched objects: {'netns': ['cosched-n0']}",
        "needs root (real cgroups, namespaces)",
        "Open MPI (mpirun) not installed",
    ):
        assert not allowed(reason, "hybrid") and not allowed(reason, "v2only")


def test_root_tests_and_v2only_entries_live_in_the_root_directories() -> None:
    # scripts/test.sh collects the root and v2-only stages from ROOT_DIRS alone
    assert tiers.root_outside_root_dirs("tests/integration/test_x.py", {"root_host"}) is None
    assert tiers.root_outside_root_dirs("tests/live/test_x.py", {"tmp_path"}) is None
    why = tiers.root_outside_root_dirs("tests/live/agent/test_x.py", {"root_host", "tmp_path"})
    assert why is not None and "root_host" in why and "tests/integration" in why
    outside = [e for e in tiers.V2ONLY if tiers.tier_dir(e) not in tiers.ROOT_DIRS]
    assert not outside, f"V2ONLY entries outside {tiers.ROOT_DIRS}: {outside}"


def test_fast_tests_live_in_the_fast_directories() -> None:
    # scripts/test.sh collects the fast tier from FAST_DIRS alone
    assert tiers.fast_outside_fast_dirs("tests/unit/agent/test_x.py") is None
    assert tiers.fast_outside_fast_dirs("tests/property/test_x.py") is None
    why = tiers.fast_outside_fast_dirs("tests/test_x.py")
    assert why is not None and "tests/test_x.py" in why and "tests/unit" in why
