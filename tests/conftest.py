"""The whole suite's rules: tiers, the fast tier's guard, loud skips on CI, footprints.

* Every test is marked from where it lives and what it uses (tests/support/tiers.py):
  ``live`` outside the fast directories, ``root`` in the root directories or when it
  uses a ``root_*`` fixture, ``slow`` and ``v2only`` from the lists there; ``fast`` on the
  rest. ``make check`` runs ``-m fast`` (in parallel); ``make test`` runs all.
* A fast-tier test that starts a process or opens a socket fails, saying where it
  belongs (tests/live/, mirroring the source tree; or LIVE_MODULES in tests/support/tiers.py);
  so does one that reads the host's cgroups, mounts, process table or cosched's run
  files (tests/support/tiers.py HOST_PATHS): a fake-based test must see the fake only,
  or a cluster someone has up on the host changes its result.
* On CI as root (``CI=true``), a skip fails the test unless its reason matches
  tests/support/allowed_skips.py: a tier that silently stopped running is a break.
* Every live test, as root, leaves the host as it found it: namespaces, root links,
  cgroups, mounts and its own child processes (tests/support/host.py).
* Hypothesis: profile ``ci`` (derandomized, so a failure replays by running the test
  again; the failing example and its ``@reproduce_failure`` blob printed) when
  ``CI=true``, else ``dev`` (random, the blob printed). ``HYPOTHESIS_PROFILE`` picks.
"""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import settings

from tests.support import tiers
from tests.support.allowed_skips import allowed
from tests.support.fixtures import free_host, root_cluster_env, root_host  # noqa: F401
from tests.support.live_agent import make_agent  # noqa: F401

ON_CI = os.environ.get("CI") == "true"
CALL_FAILED = pytest.StashKey[bool]()
STAGE = os.environ.get("COSCHED_TEST_STAGE", "hybrid")  # scripts/test.sh: hybrid, v2only
IS_ROOT = os.geteuid() == 0

settings.register_profile("ci", derandomize=True, print_blob=True, database=None)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if ON_CI else "dev"))


def pytest_configure(config: pytest.Config) -> None:
    """matplotlib builds its font cache on first use by running ``fc-list``: build it here,
    before any test, so that on a fresh machine the first plot in the fast tier is not a
    "started a process" failure (the guard below; a newer matplotlib made every report
    test fail that way on a fresh clone)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.font_manager
    except ImportError:
        pass


# ---- marking ----------------------------------------------------------------------------


def _rel(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        rel = _rel(item)
        tier = tiers.tier_dir(rel)
        names = set(getattr(item, "fixturenames", ()))
        if misplaced := tiers.root_outside_root_dirs(rel, names):
            raise pytest.UsageError(misplaced)
        if tier in tiers.ROOT_DIRS or any(n.startswith("root_") for n in names):
            item.add_marker(pytest.mark.root)
        live = tier in tiers.LIVE_DIRS or tiers.is_live_module(item.nodeid)
        if live or item.get_closest_marker("root"):
            item.add_marker(pytest.mark.live)
        if tiers.listed(item.nodeid, tiers.SLOW):
            item.add_marker(pytest.mark.slow)
        if tiers.listed(item.nodeid, tiers.V2ONLY):
            item.add_marker(pytest.mark.v2only)
            if STAGE == "v2only" and tiers.listed(item.nodeid, tiers.V2ONLY_KNOWN_FAILURES):
                why = tiers.V2ONLY_KNOWN_FAILURES[
                    tiers.listed_key(item.nodeid, tiers.V2ONLY_KNOWN_FAILURES)
                ]
                item.add_marker(pytest.mark.xfail(reason=f"known on cgroup-v2-only: {why}"))
        if not any(item.get_closest_marker(m) for m in ("live", "root", "slow")):
            if misplaced := tiers.fast_outside_fast_dirs(rel):
                raise pytest.UsageError(misplaced)
            item.add_marker(pytest.mark.fast)
        if not IS_ROOT and item.get_closest_marker("root"):
            item.add_marker(pytest.mark.skip(reason="needs root (real cgroups, namespaces)"))


# ---- the fast tier starts no process and opens no socket -------------------------------


@pytest.fixture(scope="session", autouse=True)
def _daemon_probe_once() -> None:
    """The daemons' command line probes the interpreter once (common/daemons.py, cached),
    and agent/plan.py finds libc with ldconfig when first imported: run both here, before
    any test's guard, so building a command line or a plan stays pure in any order."""
    import agent.plan  # noqa: F401  (loads libc: ctypes.util.find_library runs ldconfig)
    from common.daemons import isolation_flags

    isolation_flags(sys.executable)  # the key python_argv uses


# The fast tier's guard on reads of the host: an audit hook cannot be removed, so one is
# installed for the session and consults the running test's record (None: off).
_HOST_READS: list[list[str] | None] = [None]


def _host_read_hook(event: str, args: tuple[Any, ...]) -> None:
    seen = _HOST_READS[0]
    if seen is None or event not in ("open", "os.listdir", "os.scandir") or not args:
        return
    path = args[0]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return  # a descriptor: whoever opened it was checked
    what = tiers.host_path(os.path.abspath(path) if path else os.getcwd(), event != "open")
    if what is not None:
        _HOST_READS[0] = None  # the report below must not trip the hook again
        seen.append(f"reads {what}")
        _HOST_READS[0] = seen
        raise AssertionError(
            f"the fast tier does not read the host ({what}: {path}): give the code under "
            "test the fake's view (an Env field, a path argument), or mark the test live"
        )


sys.addaudithook(_host_read_hook)


@pytest.fixture(autouse=True)
def _fast_tier_guard(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """In tests/unit, property and fuzz (unless marked live), starting a process or
    binding/connecting a socket fails the test, saying where it belongs: the fast tier
    must stay fast and safe to run anywhere, in parallel. socketpair() is allowed
    (asyncio's loops use one)."""
    node = request.node
    if tiers.tier_dir(_rel(node)) not in tiers.FAST_DIRS or node.get_closest_marker("live"):
        yield
        return
    seen: list[str] = []

    def refuse(what: str) -> Callable[..., Any]:
        def guard(*_a: Any, **_k: Any) -> Any:
            seen.append(what)
            raise AssertionError(
                f"the fast tier starts no process and opens no socket ({what}): move "
                f"{node.nodeid} to tests/live/, at the same path (tests/support/tiers.py)"
            )

        return guard

    def sock_guard(name: str) -> Callable[..., Any]:
        orig = getattr(socket.socket, name)

        def guard(self: socket.socket, *a: Any, **k: Any) -> Any:
            if self.family in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
                return refuse(f"socket.{name}")()
            return orig(self, *a, **k)

        return guard

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse("subprocess"))
    monkeypatch.setattr(os, "fork", refuse("os.fork"))
    monkeypatch.setattr(os, "posix_spawn", refuse("os.posix_spawn"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("multiprocessing"))
    for name in ("bind", "connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, sock_guard(name))
    _HOST_READS[0] = seen
    try:
        yield
    finally:
        _HOST_READS[0] = None
    # a test that caught the AssertionError still fails (once: not again when it failed)
    if seen and not node.stash.get(CALL_FAILED, False):
        pytest.fail(f"{node.nodeid} tried {', '.join(sorted(set(seen)))} in the fast tier")


# ---- loud skips on CI -----------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.stash[CALL_FAILED] = rep.failed
    if not (ON_CI and IS_ROOT and rep.skipped) or hasattr(rep, "wasxfail"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    if allowed(reason, STAGE):
        return
    rep.outcome = "failed"
    rep.longrepr = (
        f"skipped on CI as root, and its reason is not on the allow-list "
        f"(tests/support/allowed_skips.py): {reason}"
    )


# ---- every live test leaves the host as it found it --------------------------------------


@pytest.fixture(autouse=True)
def _leaves_no_trace(request: pytest.FixtureRequest) -> Iterator[None]:
    """Root live tests: compare the host's footprint before and after (teardowns included:
    this fixture is set up first and torn down last of the test's function fixtures)."""
    if not (IS_ROOT and request.node.get_closest_marker("live")):
        yield
        return
    from tests.support import host

    # A root test is checked for every kind of trace; a live test that needs no root
    # only for its processes (another session's cluster on a shared host is not its own).
    keys = None if request.node.get_closest_marker("root") else ("processes",)
    before = host.footprint()
    yield
    left = host.wait_for_footprint(before, keys=keys)
    assert not left, f"{request.node.nodeid} left {left}"


@pytest.fixture(scope="module", autouse=True)
def _module_leaves_no_trace(request: pytest.FixtureRequest) -> Iterator[None]:
    """The same for a module's shared fixtures (a module-scoped cluster); outside the root
    directories (tests/live) only for its processes, as for a test."""
    tier = tiers.tier_dir(request.node.nodeid)
    if not (IS_ROOT and tier in tiers.LIVE_DIRS):
        yield
        return
    from tests.support import host

    keys = None if tier in tiers.ROOT_DIRS else ("processes",)
    before = host.footprint()
    yield
    left = host.wait_for_footprint(before, keys=keys)
    assert not left, f"{request.path.name}'s shared fixtures left {left}"
