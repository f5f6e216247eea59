"""The whole suite's rules: tiers, the fast tier's guard, loud skips on CI, footprints.

* Every test is marked from where it lives and what it uses (tests/support/tiers.py):
  ``live`` outside the fast directories, ``root`` in the root directories or when it
  uses a ``root_*`` fixture, ``slow`` and ``v2only`` from the lists there. ``make
  check`` runs ``-m "not live and not root and not slow"``; ``make test`` runs all.
* A fast-tier test that starts a process or opens a socket fails, saying where it
  belongs (tests/live/ or tests/integration/).
* On CI as root (``CI=true``), a skip fails the test unless its reason matches
  tests/support/allowed_skips.py: a tier that silently stopped running is a break.
* Every live test, as root, leaves the host as it found it: namespaces, root links,
  cgroups, mounts and its own child processes (tests/support/host.py).
* Hypothesis: profile ``ci`` (derandomized, so a failure replays by running the test
  again; the failing example and its ``@reproduce_failure`` blob printed) when
  ``CI=true``, else ``dev`` (random, the blob printed). ``HYPOTHESIS_PROFILE`` picks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.support import tiers
from tests.support.allowed_skips import allowed
from tests.support.fixtures import free_host, root_cluster_env, root_host  # noqa: F401

ON_CI = os.environ.get("CI") == "true"
IS_ROOT = os.geteuid() == 0

settings.register_profile("ci", derandomize=True, print_blob=True, database=None)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if ON_CI else "dev"))


# ---- marking ----------------------------------------------------------------------------


def _rel(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        rel = _rel(item)
        tier = tiers.tier_dir(rel)
        names = set(getattr(item, "fixturenames", ()))
        target = getattr(item, "callspec", None)
        live_param = bool(target and getattr(target.params.get("target"), "live", False))
        if tier in tiers.ROOT_DIRS or any(n.startswith("root_") for n in names):
            item.add_marker(pytest.mark.root)
        if tier in tiers.LIVE_DIRS or item.get_closest_marker("root") or live_param:
            item.add_marker(pytest.mark.live)
        if tiers.listed(item.nodeid, tiers.SLOW):
            item.add_marker(pytest.mark.slow)
        if tiers.listed(item.nodeid, tiers.V2ONLY):
            item.add_marker(pytest.mark.v2only)
        if not IS_ROOT and item.get_closest_marker("root"):
            item.add_marker(pytest.mark.skip(reason="needs root (real cgroups, namespaces)"))


# ---- loud skips on CI -----------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if not (ON_CI and IS_ROOT and rep.skipped) or hasattr(rep, "wasxfail"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    if allowed(reason):
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

    before = host.footprint()
    yield
    left = host.wait_for_footprint(before)
    assert not left, f"{request.node.nodeid} left {left}"


@pytest.fixture(scope="module", autouse=True)
def _module_leaves_no_trace(request: pytest.FixtureRequest) -> Iterator[None]:
    """The same for a module's shared fixtures (a module-scoped cluster)."""
    live = any(
        tiers.tier_dir(str(request.path.relative_to(tiers.REPO))) in tiers.LIVE_DIRS for _ in (0,)
    )
    if not (IS_ROOT and live):
        yield
        return
    from tests.support import host

    before = host.footprint()
    yield
    left = host.wait_for_footprint(before)
    assert not left, f"{request.path.name}'s shared fixtures left {left}"
