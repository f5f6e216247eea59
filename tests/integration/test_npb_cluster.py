"""NPB-like kernels as jobs of a real 2-node local cluster, under strict gang and CC-B.

The controller starts each rank inside the agents' per-job cgroups over the
data network (COSCHED_PEERS); the kernel must still verify. Under gang the
two jobs share the two nodes by time slices (frozen and thawed as gangs);
under CC-B (MPL 2) they run side by side with the agents' boosts.
"""

from __future__ import annotations

import glob
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live import Live, own_controller, shared_cluster

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """One 2-node cluster for both policies; each test runs its own controller on it."""
    with shared_cluster(tmp_path_factory, cpus_per_node=None) as lv:
        yield lv


@pytest.fixture
def live(cluster: Live, tmp_path: Path) -> Iterator[Live]:
    with own_controller(cluster, tmp_path) as lv:
        yield lv


def _rank0_output(job_id: str, since: float) -> str:
    """Rank 0's report (each launch has a directory of its own: job-<id>.<instance>)."""
    paths = [
        Path(p)
        for p in glob.glob(f"/var/lib/cosched/jobs/n*/job-{job_id}.*/rank-0.out")
        if Path(p).stat().st_mtime >= since
    ]
    assert paths, f"no fresh rank-0 output of job {job_id}"
    return paths[0].read_text().rsplit(" NAS Parallel Benchmarks", 1)[-1]


@pytest.mark.root
@pytest.mark.parametrize(("policy", "extra"), [("gang", ()), ("cc-b", ("--mpl", "2"))])
def test_cg_and_ft_verify_as_cluster_jobs(live: Live, policy: str, extra: tuple[str, ...]) -> None:
    began = time.time()
    live.start(policy, *extra, quantum=0.1)
    jobs = {
        "cg": [sys.executable, "-m", "apps.npb.cg", "--class", "S", "--reps", "3"],
        "ft": [sys.executable, "-m", "apps.npb.ft", "--class", "S", "--reps", "3"],
    }
    ids = {
        k: live.req("submit", spec={"size": 2, "argv": argv, "name": k, "cwd": str(REPO)})["job_id"]
        for k, argv in jobs.items()
    }
    deadline = time.monotonic() + 90
    while True:
        recs = {r["job_id"]: r for r in live.req("jobs", all=True)}
        if all(recs[j]["state"] in ("done", "failed", "killed") for j in ids.values()):
            break
        assert time.monotonic() < deadline, (recs, live.log_text()[-2000:])
        time.sleep(0.3)
    for k, j in ids.items():
        assert recs[j]["state"] == "done", (k, recs[j])
        assert sorted(recs[j]["nodes"]) == ["n0", "n1"]
        out = _rank0_output(j, began)
        assert " Verification    =  VERIFIED" in out, out
        assert " Ranks           =  2 (ours)" in out
    for j in ids.values():  # the agents' job output directories
        for d in glob.glob(f"/var/lib/cosched/jobs/n*/job-{j}.*"):
            shutil.rmtree(d, ignore_errors=True)
