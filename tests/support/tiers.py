"""The test tiers and the test tree's layout: where a test lives says what it may do.

* ``tests/unit/`` mirrors the source tree (``controller/policies/paired.py`` ->
  ``tests/unit/controller/policies/test_paired.py``): pure tests, no root, no
  process, no socket; ``tests/property/`` and ``tests/fuzz/`` are pure too. These
  are the fast tier, what ``make check`` runs.
* ``tests/live/`` mirrors the source tree for tests that start processes or
  sockets (daemons on loopback, rank processes, ansible, promtool) without root.
* ``tests/integration/``, ``tests/faults/``, ``tests/security/``: root, the real
  kernel (cgroups, namespaces, links, clusters).
* ``tests/support/``: the helpers tests share; no test module imports another.

tests/conftest.py marks every test from these rules (``root``, ``live``, ``slow``,
``v2only``) and refuses, at run time, a process or socket in the fast tier;
tests/unit/test_tree.py fails on a file in the wrong place. Pure: no I/O here
but reading the source tree.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
SOURCE_PACKAGES = ("agent", "apps", "common", "controller", "testbed")

FAST_DIRS = ("unit", "property", "fuzz")
LIVE_DIRS = ("live", "integration", "faults", "security")
ROOT_DIRS = ("integration", "faults", "security")
MIRRORED_DIRS = ("unit", "live")
TIER_DIRS = (*FAST_DIRS, *LIVE_DIRS)
# Files allowed directly in tests/unit/ and tests/live/: tests of what is not one source
# module -- the repository as a whole (committed results and the docs' quotes, the test
# tree and its tiers, the controller package's import layout) or files outside the Python
# packages (prometheus/, ansible/, the Vagrantfile). Everything else mirrors its module.
UNIT_TOP_LEVEL = frozenset(
    {
        "test_tree.py",
        "test_tiers.py",
        "test_committed_results.py",
        "test_layout.py",
        "test_prometheus_rules.py",
    }
)
LIVE_TOP_LEVEL = frozenset(
    {
        "test_committed_results.py",
        "test_layout.py",
        "test_prometheus_rules.py",
        "test_ansible.py",
        "test_vagrant.py",
    }
)
TOP_LEVEL = {"unit": UNIT_TOP_LEVEL, "live": LIVE_TOP_LEVEL}

# Tests that bring up a whole cluster or deployment, or run for minutes: `slow`
# (measured with `make durations`: over 20 s on this 2-core host, loaded). Module
# paths (every test in it) or node ids.
SLOW = frozenset(
    {
        "tests/integration/test_deploy_ssh.py",
        "tests/integration/test_deploy_systemd.py",
        "tests/integration/test_npb_cluster.py",
        "tests/integration/test_npb_stream.py",
        "tests/integration/test_calibrate_live.py",
        "tests/integration/test_studies_live.py",
        "tests/integration/test_dashboards_live.py",
        "tests/integration/test_monitor_live.py",
        "tests/integration/test_cdc_live.py",
        "tests/faults/test_partition.py",
        "tests/faults/test_controller_kill.py",
        "tests/faults/test_agent_kill.py",
        "tests/property/test_sim_properties.py::test_same_workload_same_result",
        # the fast tier's four longest (5-9 s each alone, 64 s of CPU for the rest)
        "tests/unit/testbed/sim/test_engine_fastpaths.py::test_fast_swf_reader_agrees_with_the_line_parser",
        "tests/live/testbed/test_cli.py::test_load_sweep_with_plots",
        "tests/live/testbed/experiment/rajaei/test_study.py::test_quick_study_through_the_cli_writes_the_report",
        "tests/live/testbed/experiment/paired/test_report.py::test_sweep_reports",
        # 12 simulated runs against their recorded figures (about 20 s of CPU)
        "tests/live/testbed/sim/cdc/test_run_golden.py",
        # 17 small runs against their bit-exact recorded figures (about 35 s of CPU)
        "tests/live/testbed/sim/cdc/test_engine_golden.py",
    }
)

# What CI runs again on the host made cgroup-v2-only (scripts/test.sh, stage 2): the
# cgroup contract, cluster up, agents, gang and paired gang runs, the v2 freezer paths.
# (tests/integration/test_deploy_systemd.py makes the host v2-only itself, in stage 1.)
V2ONLY = frozenset(
    {
        "tests/integration/test_cgroup_contract.py",
        "tests/integration/test_cluster.py",
        "tests/integration/test_cluster_agents.py",
        "tests/integration/test_agent_live.py",
        "tests/integration/test_controller_live.py",
        "tests/integration/test_timed_switch_live.py",
        "tests/integration/test_nplus1_devices_live.py",  # cgroup2 io.stat, live
    }
)


# Failing in the v2-only stage (scripts/test.sh stage 2): expected failures there
# (xfail, not strict: an XPASS shows the fix), each with what it showed. To be fixed,
# then removed from here. Fixed so far: the contract's no_internal_processes (the
# fake's cgroup2 threaded controllers); two jobs THAWED at once in strict gang (the
# agent, refused SCHED_FIFO on cgroup2, thawed before it froze: docs/cluster.md); the
# absolute late-plan threshold (now against the sender's own stalls).
V2ONLY_KNOWN_FAILURES: dict[str, str] = {}


# What a fast-tier test may not read (tests/conftest.py): the host's cgroups and mounts,
# its process table and netns, cosched's and systemd's run files. Prefixes of absolute
# paths; LISTED_ONLY are refused only as a directory listing (a test may read its own
# /proc/self/stat, not walk the process table).
HOST_PATHS = (
    "/sys/fs/cgroup",
    "/proc/self/mounts",
    "/proc/mounts",
    "/proc/self/mountinfo",
    "/proc/self/cgroup",
    "/run/cosched",
    "/run/netns",
    "/run/systemd",
    "/var/run/netns",
)
LISTED_ONLY = ("/proc",)


def host_path(path: str, listing: bool) -> str | None:
    """Which host state ``path`` is (an entry of HOST_PATHS), or None."""
    for p in HOST_PATHS:
        if path == p or path.startswith(p + "/"):
            return p
    if listing and path in LISTED_ONLY:
        return f"{path} (the process table)"
    return None


# Fast-tier modules that still start a process or open a socket in some tests (found by
# the fast tier's guard, tests/conftest.py): marked live until split into tests/live/.
LIVE_MODULES = frozenset(
    {
        "tests/fuzz/test_fuzz.py::test_fuzz[JSON nesting]",
        "tests/fuzz/test_fuzz.py::test_fuzz[NIC datagrams]",
    }
)


def root_outside_root_dirs(relpath: str, fixturenames: Iterable[str]) -> str | None:
    """Why a test at ``relpath`` using ``fixturenames`` is a root test in the wrong place,
    or None. scripts/test.sh collects the root tier from ROOT_DIRS only (the whole tree
    costs seconds of collection per stage), and the live tier runs ``not root``: a root
    test elsewhere would run in neither."""
    roots = sorted(n for n in fixturenames if n.startswith("root_"))
    if roots and tier_dir(relpath) not in ROOT_DIRS:
        return (
            f"{relpath} uses {', '.join(roots)}: a root test lives in "
            f"{', '.join('tests/' + d for d in ROOT_DIRS)}"
        )
    return None


def fast_outside_fast_dirs(relpath: str) -> str | None:
    """Why a fast-tier test (no root, process or socket) at ``relpath`` is in the wrong
    place, or None: scripts/test.sh collects the fast tier from FAST_DIRS only, and the
    live tier runs ``not fast``, so a fast test elsewhere would run in neither."""
    if tier_dir(relpath) in FAST_DIRS:
        return None
    return (
        f"{relpath} is a fast-tier test (no root, process or socket) outside "
        f"{', '.join('tests/' + d for d in FAST_DIRS)}: move it there"
    )


def is_live_module(nodeid: str) -> bool:
    """A test listed in LIVE_MODULES (module path or id)."""
    return listed(nodeid, LIVE_MODULES)


def listed_key(nodeid: str, names: Iterable[str]) -> str:
    """The entry of ``names`` that lists ``nodeid`` (see :func:`listed`)."""
    module, _, rest = nodeid.partition("::")
    bare = f"{module}::{rest.split('[', 1)[0]}" if rest else module
    return next(n for n in names if n in (module, bare, nodeid))


def tier_dir(relpath: str) -> str | None:
    """``unit``, ``live``, ... for a path relative to the repository, else None."""
    parts = Path(relpath).parts
    if len(parts) >= 2 and parts[0] == "tests" and parts[1] in TIER_DIRS:
        return parts[1]
    return None


def listed(nodeid: str, names: Iterable[str]) -> bool:
    """A node id is listed by its module path or by its id (parameters stripped)."""
    module, _, rest = nodeid.partition("::")
    bare = f"{module}::{rest.split('[', 1)[0]}" if rest else module
    return any(n in (module, bare, nodeid) for n in names)


# ---- the layout of the test tree --------------------------------------------------------


@dataclass(frozen=True)
class Misplaced:
    path: str  # relative to the repository
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


def source_names(pkg_dir: Path) -> set[str]:
    """Modules and subpackages of a source package directory (``paired``, ``npb``, ...)."""
    out = set()
    for e in pkg_dir.iterdir():
        if e.is_file() and e.suffix == ".py" and e.name != "__init__.py":
            out.add(e.stem.rstrip("_"))
        elif e.is_dir() and (e / "__init__.py").exists():
            out.add(e.name)
    return out


def mirror_problem(rel_dir: tuple[str, ...], filename: str, repo: Path = REPO) -> str | None:
    """Why ``tests/<tier>/<rel_dir>/<filename>`` does not mirror a source module, or None."""
    if not rel_dir or rel_dir[0] not in SOURCE_PACKAGES:
        return f"put it in the directory of the package it tests ({', '.join(SOURCE_PACKAGES)})"
    src = repo.joinpath(*rel_dir)
    if not (src / "__init__.py").exists():
        return f"{'/'.join(rel_dir)}/ is not a source package"
    stem = filename.removeprefix("test_").removesuffix(".py")
    names = source_names(src)
    if not any(stem == n or stem.startswith(n + "_") for n in names):
        return (
            f"test_<module>[_topic].py: no module of {'/'.join(rel_dir)}/ starts its name "
            f"(it has {', '.join(sorted(names))})"
        )
    return None


def imported_test_modules(path: Path) -> list[str]:
    """``tests.*`` modules a file imports, other than the support package."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names = [f"(relative) {node.module or ''}"]
        for n in names:
            ours = n == "tests" or n.startswith("tests.")
            if n.startswith("(relative)") or (ours and not n.startswith("tests.support")):
                out.append(n)
    return out


def misplaced(tests: Path = TESTS, repo: Path = REPO) -> list[Misplaced]:
    """Every file of the test tree that breaks the rules of the module docstring."""
    out: list[Misplaced] = []
    for path in sorted(tests.rglob("*.py")):
        rel = path.relative_to(repo)
        parts = path.relative_to(tests).parts
        name = path.name
        if "__pycache__" in parts:
            continue
        if name not in ("__init__.py", "conftest.py") and (bad := imported_test_modules(path)):
            out.append(Misplaced(str(rel), f"imports {', '.join(bad)}: import from tests.support"))
        if len(parts) == 1:
            if name not in ("__init__.py", "conftest.py"):
                out.append(Misplaced(str(rel), "tests/ holds only tier directories"))
            continue
        top = parts[0]
        if top == "support":
            if name.startswith("test_"):
                out.append(Misplaced(str(rel), "tests/support/ holds helpers, not tests"))
            continue
        if top not in TIER_DIRS:
            out.append(
                Misplaced(str(rel), f"not in a tier directory ({', '.join(TIER_DIRS)}, support)")
            )
            continue
        if name in ("__init__.py", "conftest.py"):
            continue
        if not name.startswith("test_"):
            out.append(Misplaced(str(rel), "a helper: move it to tests/support/"))
            continue
        if top in MIRRORED_DIRS:
            inner = parts[1:-1]
            if inner or name not in TOP_LEVEL[top]:
                why = mirror_problem(inner, name, repo)
                if why:
                    out.append(Misplaced(str(rel), f"tests/{top}/ mirrors the source tree: {why}"))
        for d in range(1, len(parts)):
            init = tests.joinpath(*parts[:d]) / "__init__.py"
            if not init.exists():
                out.append(Misplaced(str(rel), f"{init.relative_to(repo)} is missing"))
    return out
