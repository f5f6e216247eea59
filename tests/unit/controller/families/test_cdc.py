"""The CDC family with a fake agent pool (Yu & Byun 2011): thawed launches, every running job
runnable, MPL rows, the local_policy request to every agent, refusals tolerated,
job environment, restart."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from controller import checkpoint as ckpt
from controller.families import CdcFamily
from controller.launchenv import net_env
from controller.scheduler import Scheduler
from tests.support.controller_fakes import Clock, FakePool, step


def make(
    policy: str = "dcs", n: int = 2, params: dict[str, object] | None = None, **kw: object
) -> tuple[Scheduler, FakePool, Clock]:
    pool = FakePool(n)
    for k, v in kw.items():
        setattr(pool, k, v)
    clock = Clock()
    s = Scheduler(policy, params or {}, pool, wall=clock, mono=clock)
    return s, pool, clock


def job(size: int = 2) -> dict[str, object]:
    return {"size": size, "argv": ["python3", "-m", "apps.synthetic"]}


def test_jobs_launch_thawed_and_share_the_nodes_up_to_the_mpl() -> None:
    s, pool, clock = make("dcs", params={"mpl": 2})
    assert isinstance(s.fam, CdcFamily)
    a, b, c = (s.submit(job(), "alice") for _ in range(3))
    step(s, clock)
    assert {x["start_frozen"] for x in pool.launched} == {False}
    assert s.table.jobs[a].state == "running" and s.table.jobs[b].state == "running"
    assert s.table.jobs[c].state == "queued"  # both nodes hold 2 jobs: the MPL
    # Every running job is runnable on every node it has, with the default weight.
    assert pool.commands[-1] == {"n0": {str(a): 100, str(b): 100}, "n1": {str(a): 100, str(b): 100}}
    assert s.fam.rows() == [[a, a], [b, b]]
    pool.exit(a)
    step(s, clock, 2)
    assert s.table.jobs[a].state == "done" and s.table.jobs[c].state == "running"
    assert s.fam.rows() == [[b, b], [c, c]]  # row k = the k-th job on each node


def test_batch_runs_one_job_per_node() -> None:
    s, pool, clock = make("batch")
    a, b = s.submit(job(), "alice"), s.submit(job(1), "bob")
    step(s, clock)
    assert s.table.jobs[a].state == "running" and s.table.jobs[b].state == "queued"
    pool.exit(a)
    step(s, clock, 2)
    assert s.table.jobs[b].state == "running"


def test_rows_with_uneven_loads_and_the_matrix_view() -> None:
    s, _pool, clock = make("cc-b", n=3)
    a = s.submit(job(2), "alice")  # n0, n1
    b = s.submit(job(2), "bob")  # n2 (load 0), then n0 (load 1, the lower index)
    step(s, clock)
    assert s.policy.placement(b) == (0, 2)  # type: ignore[union-attr]
    assert s.fam.rows() == [[a, a, b], [b, None, None]]
    view = s.matrix_view()
    assert view["policy"] == "cc-b" and view["mpl"] == 5 and view["scheme"] == "cc-b"
    assert view["running"]["slot"] is None and view["slots"] == s.fam.rows()


def test_local_policy_goes_to_every_agent_with_every_peer() -> None:
    s, pool, _ = make("cc-s", n=3, params={"mpl": 3, "tick_ms": 5.0, "spin_us": 100.0})
    assert [r["node"] for r in pool.local_requests] == ["n0", "n1", "n2"]
    req = pool.local_requests[0]
    assert req == {
        "node": "n0",
        "scheme": "cc-s",
        "mpl": 3,
        "tick_ms": 5.0,
        "spin_us": 100.0,
        "boost": "weight",
        "peers": {
            "n0": {"ctl": "127.0.0.1", "data": "10.0.0.1"},
            "n1": {"ctl": "127.0.0.1", "data": "10.0.0.2"},
            "n2": {"ctl": "127.0.0.1", "data": "10.0.0.3"},
        },
    }
    assert s.fam.describe()["local_policy"] == {"n0": "cc-s", "n1": "cc-s", "n2": "cc-s"}
    # A reconnecting agent (restarted or not) is told again.
    pool.reconnect("n1", restarted=True)
    assert pool.local_requests[-1]["node"] == "n1" and len(pool.local_requests) == 4


def test_an_agent_that_refuses_is_logged_once_and_scheduling_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="controller.quantum")
    s, pool, clock = make("cc-b", refuse_local="malformed")
    warnings = [r for r in caplog.records if "did not take local scheme cc-b" in r.getMessage()]
    assert [w.getMessage().split()[1] for w in warnings] == ["n0", "n1"]
    assert "LOCAL behaviour" in warnings[0].getMessage()
    assert s.fam.describe()["local_policy"]["n0"].startswith("refused: unknown message type")
    a = s.submit(job(), "alice")
    step(s, clock, 2)
    assert s.table.jobs[a].state == "running"  # the jobs run all the same
    sent = len(pool.local_requests)
    pool.reconnect("n0")  # the same agent process: not asked again
    assert len(pool.local_requests) == sent
    caplog.clear()
    pool.refuse_local = None
    pool.reconnect("n0", restarted=True)  # a new agent process is asked again
    assert len(pool.local_requests) == sent + 1
    assert s.fam.describe()["local_policy"]["n0"] == "cc-b"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_unreachable_agent_is_a_warning_not_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    pool = FakePool(2)
    pool.up["n1"] = False
    clock = Clock()
    caplog.set_level(logging.WARNING, logger="controller.quantum")
    s = Scheduler("sb", {}, pool, wall=clock, mono=clock)
    assert [r["node"] for r in pool.local_requests] == ["n0"]  # only connected agents
    pool.reconnect("n1")
    assert s.fam.describe()["local_policy"] == {"n0": "sb", "n1": "sb"}
    assert not caplog.records


def test_gang_hands_back_an_agent_a_cdc_controller_left_running_a_scheme() -> None:
    pool = FakePool(2)
    pool.cdc_status["n0"] = {"scheme": "cc-b"}
    pool.cdc_status["n1"] = {"scheme": "none"}
    clock = Clock()
    Scheduler("gang", {}, pool, wall=clock, mono=clock)
    assert pool.local_requests == []  # gang asks nothing at construction...
    pool.reconnect("n0")
    pool.reconnect("n1")
    assert [(r["node"], r["scheme"]) for r in pool.local_requests] == [("n0", "none")]


def test_every_rank_knows_its_peers_and_the_emulated_link() -> None:
    pool = FakePool(3)
    clock = Clock()
    env = {"COSCHED_NET_DELAY_US": "7", "COSCHED_NET_RATE_BPS": "2000000000"}
    s = Scheduler("local", {}, pool, wall=clock, mono=clock, job_env=env)
    s.submit(job(1), "alice")  # n0
    b = s.submit(job(2), "bob")  # n1, n2
    step(s, clock)
    ranks = [x["env"] for x in pool.launched if x["job_id"] == str(b)]
    assert [e["COSCHED_PEERS"] for e in ranks] == ["10.0.0.2,10.0.0.3"] * 2
    assert [e["COSCHED_RANK0_ADDR"] for e in ranks] == ["10.0.0.2"] * 2
    assert all(e["COSCHED_NET_DELAY_US"] == "7" for e in ranks)
    assert all(e["COSCHED_NET_RATE_BPS"] == "2000000000" for e in ranks)


@pytest.mark.parametrize(
    ("mechanism", "profile", "want"),
    [
        (
            "userspace",
            {"rate_bps": 2_000_000_000, "delay_us": 7.0, "jitter_us": 0.0, "loss_pct": 0.0},
            {
                "COSCHED_NET_DELAY_US": "7",
                "COSCHED_NET_JITTER_US": "0",
                "COSCHED_NET_LOSS_PCT": "0",
                "COSCHED_NET_RATE_BPS": "2000000000",
            },
        ),
        (
            "userspace",
            {"rate_bps": 10**9, "delay_us": 0.0, "jitter_us": 5.5, "loss_pct": 0.1},
            {
                "COSCHED_NET_DELAY_US": "0",
                "COSCHED_NET_JITTER_US": "5.5",
                "COSCHED_NET_LOSS_PCT": "0.1",
                "COSCHED_NET_RATE_BPS": "1000000000",
            },
        ),
        ("userspace", {"rate_bps": 10**9, "delay_us": 0.0}, {}),  # nothing to add
        ("netem", {"rate_bps": 10**9, "delay_us": 50.0}, {}),  # the kernel adds it
    ],
)
def test_net_env_from_the_cluster_state(
    mechanism: str, profile: dict[str, float], want: dict[str, str]
) -> None:
    assert net_env({"delay_mechanism": mechanism, "profile": profile}) == want


def test_restart_readopts_running_jobs_where_they_run(tmp_path: Path) -> None:
    s, pool, clock = make("hybrid", n=3, params={"mpl": 2})
    ids = [s.submit(job(size), "alice") for size in (2, 1, 3, 2)]
    step(s, clock, 2)
    before = {j: s.policy.placement(j) for j in ids}  # type: ignore[union-attr]
    path = str(tmp_path / "c.json")
    ckpt.write(path, s.to_payload())
    sent = len(pool.local_requests)
    s2 = Scheduler("hybrid", {"mpl": 2}, pool, wall=clock, mono=clock)
    assert len(pool.local_requests) == sent + 3  # a new controller tells every agent
    s2.restore(ckpt.read(path))
    assert len(pool.local_requests) == sent + 3  # the restore's family: already told
    s2.reconcile()
    assert {j: s2.policy.placement(j) for j in ids} == before  # type: ignore[union-attr]
    assert s2.fam.rows() == s.fam.rows()
    step(s2, clock)
    assert {j for j in ids if s2.table.jobs[j].state == "running"} == {
        j for j in ids if s.table.jobs[j].state == "running"
    }


def test_the_real_pool_drops_an_agent_that_closed_on_the_frame_and_retries_at_once() -> None:
    from agent.client import AgentError
    from controller.nodes import AgentPool, NodeInfo

    t = [50.0]
    pool = AgentPool([NodeInfo("n0", ("127.0.0.1", 1), "10.0.0.1")], b"k" * 32, clock=lambda: t[0])

    class Client:
        def __init__(self, code: str) -> None:
            self.code = code
            self.hello = {"node": "n0", "pid": 7}
            self.events: list[object] = []

        def request(self, *a: object, **k: object) -> object:
            raise AgentError(self.code, "unknown message type 'local_policy'")

        def close(self) -> None:
            pass

    for code, dropped in (("bad_request", False), ("malformed", True)):
        pool.clients["n0"] = Client(code)  # type: ignore[assignment]
        assert pool.agent_info("n0") == {"node": "n0", "pid": 7}
        with pytest.raises(AgentError):
            pool.local_policy("n0", {"node": "n0", "scheme": "cc-b"})
        assert (pool.clients["n0"] is None) is dropped
    assert pool._next_try["n0"] == 50.0 and pool.agent_info("n0") == {}
