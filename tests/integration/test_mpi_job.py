"""An unmodified mpi4py program as a cosched job (apps/mpilaunch.py, issue 8): on a
2-node local cluster under strict gang, beside a competing job, its processes are in
the job's cgroups on both nodes, it is frozen and thawed as one gang, and it finishes
with the right answer."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.live import Live, own_controller, shared_cluster

REPO = Path(__file__).resolve().parents[2]
PROGRAM = """\
import sys
from mpi4py import MPI
c = MPI.COMM_WORLD
for _ in range(int(sys.argv[1])):
    s = c.allreduce(c.rank + 1)
print(f"{sys.argv[2]} rank {c.rank} of {c.size} on {MPI.Get_processor_name()}: sum={s}", flush=True)
"""
SPIN = [sys.executable, "-c", "while True: pass"]

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the local cluster"),
    pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI (mpirun) not installed"),
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py not installed"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """One 2-node cluster for the module; each test runs its own controller on it."""
    with shared_cluster(tmp_path_factory) as lv:
        yield lv


@pytest.fixture
def live(cluster: Live, tmp_path: Path) -> Iterator[Live]:
    with own_controller(cluster, tmp_path) as lv:
        yield lv


def _in_job(node: str, job: int) -> set[str]:
    """The command names of the processes in the job's freezer group on ``node``."""
    path = Path(f"/sys/fs/cgroup/freezer/cosched/{node}/job-{job}/cgroup.procs")
    names = set()
    with contextlib.suppress(OSError):
        for pid in path.read_text().split():
            with contextlib.suppress(psutil.Error):
                names.add(" ".join(psutil.Process(int(pid)).cmdline()))
    return names


@pytest.mark.root
@pytest.mark.timeout(300)
def test_unmodified_mpi_program_is_gang_scheduled(live: Live, tmp_path: Path) -> None:
    prog = tmp_path / "allreduce.py"
    prog.write_text(PROGRAM)
    live.start("gang", quantum=0.2)
    spin = live.req("submit", spec={"size": 2, "argv": SPIN, "name": "spin"})["job_id"]
    tag = secrets.token_hex(4)  # output files append: only this run's lines count
    # 10,000 allreduces: 3 s beside the spinner at load 0.9, 81 samples both THAWED and
    # 100 both FROZEN, 0 split (40,000 gave 241 and 247 and took 45 s); the bound is 5
    argv = [sys.executable, "-m", "apps.mpilaunch", "--", sys.executable, str(prog), "10000", tag]
    mpi = live.req("submit", spec={"size": 2, "argv": argv, "name": "mpi", "cwd": str(REPO)})[
        "job_id"
    ]
    both = {"THAWED": 0, "FROZEN": 0}
    split = 0
    seen_in_cgroup = {"n0": False, "n1": False}
    deadline = time.monotonic() + 150
    while True:
        rec = {r["job_id"]: r for r in live.req("jobs", all=True)}[mpi]
        if rec["state"] in ("done", "failed", "killed"):
            break
        assert time.monotonic() < deadline, (rec, live.log_text()[-2000:])
        st = live.freezer_states()
        a, b = st.get(("n0", f"job-{mpi}")), st.get(("n1", f"job-{mpi}"))
        if a in both and a == b:
            both[a] += 1
        elif a in both and b in both:
            split += 1
        for node in seen_in_cgroup:
            if any(str(prog) in cmd for cmd in _in_job(node, mpi)):
                seen_in_cgroup[node] = True  # the MPI process itself, in the job's group
        time.sleep(0.01)
    print(f"mpi job: {both} samples together, {split} split, in cgroups {seen_in_cgroup}")
    assert rec["state"] == "done", (rec, live.log_text()[-2000:])
    # the MPI processes of both nodes ran inside the job's cgroups
    assert seen_in_cgroup == {"n0": True, "n1": True}
    # one gang: frozen together and thawed together (a sample may fall in a switch)
    assert both["THAWED"] > 5 and both["FROZEN"] > 5, (both, split)
    assert split <= 0.1 * (both["THAWED"] + both["FROZEN"]), (both, split)
    ranks = live.req("job", job_id=mpi)["ranks"]
    out = Path(ranks[0]["stdout"]).read_text()
    assert f"{tag} rank 0 of 2 on n0: sum=3" in out and f"{tag} rank 1 of 2 on n1: sum=3" in out
    live.req("kill", job_id=spin)


@pytest.mark.root
@pytest.mark.timeout(300)
def test_npb_cg_over_open_mpi_verifies_as_a_cluster_job(live: Live) -> None:
    """One kernel, two transports: the same CG over real MPI, across the emulated nodes."""
    live.start("gang", quantum=0.2)
    argv = [sys.executable, "-m", "apps.mpilaunch", "--", sys.executable, "-m", "apps.npb.cg",
            "--class", "S", "--transport", "mpi", "--reps", "3"]  # fmt: skip
    job = live.req("submit", spec={"size": 2, "argv": argv, "name": "cg-mpi", "cwd": str(REPO)})[
        "job_id"
    ]
    deadline = time.monotonic() + 150
    while (rec := {r["job_id"]: r for r in live.req("jobs", all=True)}[job])["state"] not in (
        "done", "failed", "killed",
    ):  # fmt: skip
        assert time.monotonic() < deadline, live.log_text()[-2000:]
        time.sleep(0.2)
    assert rec["state"] == "done", rec
    out = Path(live.req("job", job_id=job)["ranks"][0]["stdout"]).read_text()
    last = out.rsplit("NAS Parallel Benchmarks", 1)[-1]
    assert " Ranks           =  2 (mpi)" in last and " Verification    =  VERIFIED" in last, last


@pytest.mark.root
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("policy", "extra"), [("paired-gang", ()), ("cc-b", ("--mpl", "2"))])
def test_mpi_program_runs_under_the_other_schedulers(
    live: Live, tmp_path: Path, policy: str, extra: tuple[str, ...]
) -> None:
    prog = tmp_path / "allreduce.py"
    prog.write_text(PROGRAM)
    live.start(policy, *extra, quantum=0.2)
    tag = secrets.token_hex(4)
    argv = [sys.executable, "-m", "apps.mpilaunch", "--", sys.executable, str(prog), "5000", tag]
    job = live.req("submit", spec={"size": 2, "argv": argv, "name": "mpi", "cwd": str(REPO)})[
        "job_id"
    ]
    deadline = time.monotonic() + 150
    while (rec := {r["job_id"]: r for r in live.req("jobs", all=True)}[job])["state"] not in (
        "done", "failed", "killed",
    ):  # fmt: skip
        assert time.monotonic() < deadline, live.log_text()[-2000:]
        time.sleep(0.2)
    assert rec["state"] == "done", rec
    out = Path(live.req("job", job_id=job)["ranks"][0]["stdout"]).read_text()
    assert f"{tag} rank 0 of 2 on n0: sum=3" in out and f"{tag} rank 1 of 2 on n1: sum=3" in out
