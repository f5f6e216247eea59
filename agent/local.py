"""The agent's local scheduler for communication-driven coscheduling (Yu & Byun 2011).

Ties the NIC emulation (agent/nic.py), the ERL exchange (agent/gossip.py) and
a scheme (agent/cdc/schemes.py) into the agent's event loop:

* every ``tick`` (a decision point for every scheme) it reads what is pending,
  updates this node's ERL (eq. 1) and lets the scheme pick the boost holder;
* arrivals the kernel reports on the duplicated sockets, and collective
  entry/exit events, are decision points for the schemes that react to them
  (DCS, IB, SB and CC-B; HYBRID);
* the decision itself -- counting the decision point and a boost conflict
  (BCR, docs/cdc.md), asking the scheme, eq. (1) -- is agent/cdc/node.py's,
  the code the simulator drives too (testbed/sim/cdc/engine.py);
* the boost is a CPU weight: the holder's job gets ``BOOST_WEIGHT``, every
  other job the default.

While a scheme is active the agent owns the job weights; the controller's
quantum command still freezes, thaws and collects CPU time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import resource
import selectors
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent import nicproto
from agent.cdc.node import Counters, NodeCdc
from agent.cdc.schemes import SCHEMES, Event, ProcView, Scheme, make_scheme
from agent.gossip import ErlGossip
from agent.jobs import Job
from agent.nic import NicServer
from agent.nicguard import JobView
from agent.switchcost import measure_cost_switch_us
from common.cgroups import DEFAULT_WEIGHT, CgroupError
from common.names import AGENT_PORT

log = logging.getLogger("agent.local")

BOOST_WEIGHT = 10000  # the top of the v2 scale (cpu.shares 102400 on v1)
GOSSIP_PORT = AGENT_PORT + 2
ED_WINDOW_S = 0.5  # how often ED is re-measured from /proc/<pid>/schedstat
BOOSTS = ("weight", "freeze")
# "freeze": the holder's competitors are frozen while it holds the boost, for at
# most this many consecutive ticks, then thawed for one tick (nothing starves).
FREEZE_MAX_TICKS = 5
# A quiet node (nothing pending, no holder) evaluates a tick at least this often; the
# ticks between are counted, not evaluated (docs/cdc.md, "What the agent pays").
QUIET_S = 0.1
# How often the exporter's copy of status() is refreshed.
STATUS_S = 0.1


def _process_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class LocalPolicyError(ValueError):
    pass


#: The shortest decision interval an agent takes (ms); below it a Python loop only burns CPU.
MIN_TICK_MS = 0.1
DEFAULT_TICK_MS = 10.0


@dataclass(frozen=True)
class LocalConfig:
    scheme: str
    mpl: int = 5
    tick_s: float = DEFAULT_TICK_MS / 1e3
    spin_us: float = 150.0
    boost: str = "weight"
    peers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def from_request(
        cls, d: Mapping[str, Any], default_tick_ms: float = DEFAULT_TICK_MS
    ) -> LocalConfig:
        """From a ``local_policy`` request; without ``tick_ms`` the node's own decision
        interval (the agent's ``--decision-interval-ms``, set by ``cosched cluster up``)."""
        scheme = d.get("scheme")
        if scheme not in SCHEMES and scheme != "none":
            raise LocalPolicyError(
                f"unknown local scheme {scheme!r}; valid schemes: none, {', '.join(SCHEMES)}"
            )
        mpl, tick_ms = d.get("mpl", 5), d.get("tick_ms")
        if tick_ms is None:
            tick_ms = default_tick_ms
        spin_us, boost, peers = (
            d.get("spin_us", 150.0),
            d.get("boost", "weight"),
            d.get("peers", {}),
        )
        if not isinstance(mpl, int) or isinstance(mpl, bool) or not 1 <= mpl <= 64:
            raise LocalPolicyError(f"mpl must be an integer in 1..64, got {mpl!r}")
        if (
            isinstance(tick_ms, bool)
            or not isinstance(tick_ms, int | float)
            or not MIN_TICK_MS <= tick_ms <= 1000.0
        ):
            raise LocalPolicyError(
                f"tick_ms (the decision interval) must be in {MIN_TICK_MS:g}..1000 ms, got "
                f"{tick_ms!r}"
            )
        if not isinstance(spin_us, int | float) or not 0 <= spin_us <= 1e6:
            raise LocalPolicyError(f"spin_us must be in 0..1e6, got {spin_us!r}")
        if boost not in BOOSTS:
            raise LocalPolicyError(f"boost must be one of {', '.join(BOOSTS)}, got {boost!r}")
        if not isinstance(peers, dict) or not all(
            isinstance(n, str) and isinstance(v, dict) and isinstance(v.get("ctl"), str)
            for n, v in peers.items()
        ):
            raise LocalPolicyError("peers must map node -> {'ctl': ip, 'data': ip}")
        return cls(str(scheme), mpl, float(tick_ms) / 1e3, float(spin_us), boost, peers)


class Loop(Protocol):
    """The agent's selector: the local scheduler's sockets wake the agent's loop."""

    def register(self, fileobj: Any, events: int, data: Any = None) -> Any: ...

    def unregister(self, fileobj: Any) -> Any: ...


class JobGroups(Protocol):
    """The cgroup operations the local scheduler makes on the node's jobs."""

    def set_weight(self, path: str, weight: int) -> None: ...

    def freeze_many(self, paths: Iterable[str]) -> dict[str, float]: ...

    def thaw_many(self, paths: Iterable[str]) -> dict[str, float]: ...

    def pids(self, path: str) -> list[int]: ...


@dataclass(frozen=True)
class LocalHost:
    """What the local scheduler gets from its agent: who and where it is, the node's jobs
    (read; the agent adds and ends them), the loop to watch its sockets in, and the job
    cgroups it boosts, freezes and thaws."""

    node: str
    key: bytes  # the cluster key (the ERL exchange signs with it)
    listen_ip: str  # the agent's control address (the ERL exchange binds there)
    run_dir: Callable[[], Path]  # where the NIC socket goes
    jobs: Mapping[str, Job]
    loop: Loop
    cgroups: JobGroups
    default_tick_ms: float = DEFAULT_TICK_MS  # the node's decision interval (cluster option)


class _Tag:
    """Selector data of the local scheduler's file objects."""

    def __init__(self, kind: str, conn: socket.socket | None = None) -> None:
        self.kind = kind
        self.conn = conn


class LocalScheduler:
    def __init__(self, host: LocalHost, clock: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.clock = clock
        self.cfg: LocalConfig | None = None
        self.core: NodeCdc | None = None  # scheme, counters and ERL (agent/cdc/node.py)
        self.nic: NicServer | None = None
        self.gossip: ErlGossip | None = None
        self._counters = Counters()  # before any scheme is set
        self.cost_switch_us: float | None = None
        self.holder: str | None = None
        self.boosted_job: str | None = None
        self.boost_frozen: set[str] = set()  # jobs frozen by a "freeze" boost (not the controller)
        self._held_ticks = 0
        self.next_tick = 0.0
        # The first tick not evaluated while the node rests (None: every tick is evaluated).
        self._quiet_from: float | None = None
        self._stirred = False  # the scheduler's own I/O happened while resting
        self._status_next = 0.0
        self._epoll_watched = False
        self._ed_prev: dict[int, tuple[int, int]] = {}
        self._ed_next = 0.0
        self._data_node: dict[str, str] = {}
        self.decision_cost_s = 0.0  # time spent deciding, for the benchmark
        self._cpu_base = _process_cpu_s()  # the agent's CPU when the counters were reset
        self.gossip_port = GOSSIP_PORT  # tests use 0 (any free port)
        # status() as of the last tick, for the exporter thread (never iterates live dicts)
        self.last_status: dict[str, Any] = {}

    @property
    def active(self) -> bool:
        return self.core is not None

    @property
    def default_tick_ms(self) -> float:
        return self.host.default_tick_ms

    @property
    def scheme(self) -> Scheme | None:
        return self.core.scheme if self.core is not None else None

    @property
    def counters(self) -> Counters:
        return self.core.counters if self.core is not None else self._counters

    @property
    def erl_us(self) -> float:
        return self.core.erl_us if self.core is not None else 0.0

    @property
    def ed_us(self) -> float:
        return self.core.ed_us if self.core is not None else 0.0

    @property
    def enp(self) -> int:
        return self.core.enp if self.core is not None else 0

    # ---- configuration (the local_policy request) ----------------------------------
    def configure(self, cfg: LocalConfig) -> dict[str, Any]:
        if cfg.scheme == "none":
            self.stop()
            return self.reply()
        if self.cost_switch_us is None:
            self.cost_switch_us = measure_cost_switch_us()
            log.info("Cost_switch measured: %.2f us", self.cost_switch_us)
        self._data_node = {
            v["data"]: n for n, v in cfg.peers.items() if isinstance(v.get("data"), str)
        }
        if self.nic is None:
            self._open_nic()
        self._open_gossip(cfg)
        if self.cfg is None or self.cfg.scheme != cfg.scheme or self.cfg.mpl != cfg.mpl:
            core = NodeCdc(make_scheme(cfg.scheme, cfg.mpl, cfg.tick_s), self.cost_switch_us or 0.0)
            if self.core is not None:  # the node's ERL survives a change of scheme
                core.ed_us, core.enp, core.erl_us = self.core.ed_us, self.core.enp, self.core.erl_us
            self.core = core
            self._cpu_base = _process_cpu_s()
            self._set_holder(None)
        elif self.core is not None:
            self.core.scheme.tick_s = cfg.tick_s
        self.cfg = cfg
        assert self.nic is not None
        self.nic.scheme = cfg.scheme
        self._quiet_from = None
        self._watch_arrivals(self._reacts_to_arrivals())
        self.next_tick = self.clock()
        self.refresh_status()
        log.info(
            "local scheme %s (MPL %d, tick %.1f ms, spin %.0f us, %d peers)",
            cfg.scheme,
            cfg.mpl,
            cfg.tick_s * 1e3,
            cfg.spin_us,
            len(cfg.peers),
        )
        return self.reply()

    def reply(self) -> dict[str, Any]:
        return {
            "scheme": self.cfg.scheme if self.active and self.cfg else "none",
            "cost_switch_us": self.cost_switch_us,
            "erl_us": self.erl_us,
        }

    def _open_nic(self) -> None:
        h = self.host
        nic = NicServer(
            h.run_dir() / "nic.sock",
            h.node,
            authorize=self._authorize,
            peer_erl=self._peer_erl,
            node_of_addr=self._data_node.get,
            on_event=self._on_event,
            delay_of_job=self._delay_of_job,
            clock=self.clock,
        )
        nic.open()
        nic.unwatch = self._unwatch
        assert nic.listener is not None
        h.loop.register(nic.listener, selectors.EVENT_READ, _Tag("listen"))
        self.nic = nic
        self._epoll_watched = False

    def _open_gossip(self, cfg: LocalConfig) -> None:
        h = self.host
        peers = {n: (v["ctl"], self.gossip_port or GOSSIP_PORT) for n, v in cfg.peers.items()}
        if self.gossip is not None:
            self.gossip.peers = {n: p for n, p in peers.items() if n != h.node}
            return
        try:
            g = ErlGossip(h.node, h.key, (h.listen_ip, self.gossip_port), peers)
        except OSError as e:
            log.warning("ERL exchange off (cannot bind udp %s: %s)", h.listen_ip, e)
            return
        h.loop.register(g.sock, selectors.EVENT_READ, _Tag("gossip"))
        self.gossip = g

    def _reacts_to_arrivals(self) -> bool:
        return self.scheme is not None and Event.ARRIVAL in self.scheme.reacts_to

    def _watch_arrivals(self, on: bool) -> None:
        """Wake on arrivals only for schemes that decide on them (an "interrupt").

        The others look at the sockets at their ticks only: on a host where a
        wake-up is dear, waking for arrivals nobody acts on would be the
        agent's largest cost (benchmarks/nic_cost.py).
        """
        if self.nic is None or on == self._epoll_watched:
            return
        fd = self.nic.epoll.fileno()
        if on:
            self.host.loop.register(fd, selectors.EVENT_READ, _Tag("epoll"))
        else:
            with contextlib.suppress(KeyError, ValueError):
                self.host.loop.unregister(fd)
        self._epoll_watched = on

    def stop(self) -> None:
        self._quiet_from = None
        self._watch_arrivals(False)
        self._set_holder(None)
        self._thaw_competitors()  # nothing stays frozen by a boost
        if self.core is not None:
            self._counters = self.core.counters
        self.core = None
        self.cfg = None

    def close(self) -> None:
        self.stop()
        loop = self.host.loop
        if self.gossip is not None:
            with contextlib.suppress(KeyError, ValueError):
                loop.unregister(self.gossip.sock)
            self.gossip.close()
            self.gossip = None
        if self.nic is not None:
            if self.nic.listener is not None:
                with contextlib.suppress(KeyError, ValueError):
                    loop.unregister(self.nic.listener)
            self.nic.close()
            self.nic = None

    # ---- what jobs get ------------------------------------------------------------
    def job_env(self) -> dict[str, str]:
        if not self.active or self.cfg is None or self.scheme is None or self.nic is None:
            return {}
        return {
            "COSCHED_NIC_SOCK": str(self.nic.path),
            "COSCHED_WAIT": self.scheme.recv_wait,
            "COSCHED_SEND_WAIT": self.scheme.send_wait,
            "COSCHED_SPIN_US": f"{self.cfg.spin_us:g}",
            "COSCHED_SCHEME": self.cfg.scheme,
        }

    # ---- loop integration ---------------------------------------------------------------
    def owns(self, data: object) -> bool:
        return isinstance(data, _Tag)

    def timeout(self) -> float:
        if not self.active:
            return math.inf
        return max(0.0, self.next_tick - self.clock())

    def ready(self, tag: _Tag) -> None:
        nic = self.nic
        if tag.kind != "gossip":
            # an arrival, a registration or a collective event: a resting node wakes up
            self._stirred = True
        if tag.kind == "listen" and nic is not None:
            conn = nic.accept()
            while conn is not None:
                self.host.loop.register(conn, selectors.EVENT_READ, _Tag("conn", conn))
                conn = nic.accept()
        elif tag.kind == "conn" and nic is not None and tag.conn is not None:
            nic.readable(tag.conn)
        elif tag.kind == "epoll" and nic is not None:
            nic.epoll_ready()
        elif tag.kind == "gossip" and self.gossip is not None:
            self.gossip.readable()

    def _unwatch(self, conn: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.host.loop.unregister(conn)

    def poll(self) -> None:
        """Run the tick when it is due (called by the agent loop after every select)."""
        if not self.active:
            return
        assert self.cfg is not None and self.core is not None
        now = self.clock()
        if self._quiet_from is not None:
            if now < self.next_tick and not self._stirred:
                return
            self._wake(now)
        if now < self.next_tick:
            return
        tick = self.cfg.tick_s
        self.next_tick += tick
        if self.next_tick <= now:  # late (a busy host): skip, do not catch up in a burst
            self.next_tick = now + tick
        if self.boost_frozen:
            self._held_ticks += 1
            if self._held_ticks > FREEZE_MAX_TICKS:
                # Bounded: the others run again; the holder keeps only its weight
                # until the boost moves (a new holder may freeze them again).
                self._thaw_competitors()
        views = self._decide(Event.TICK, None)
        if views is not None and self._can_rest(now, views):
            self._rest()
        if now >= self._status_next:  # the exporter's copy
            self._status_next = now + STATUS_S
            self.refresh_status()

    # ---- resting: the idle node's ticks, counted without waking --------------------
    def _can_rest(self, now: float, views: Mapping[str, ProcView]) -> bool:
        """Whether the coming ticks would repeat this one until something wakes the agent.

        True when no process has a pending message or sits in a collective,
        nothing holds the boost, every data socket is drained and re-armed (so
        the kernel wakes the agent at the next arrival) and the scheme says
        its decision on these views is stable (Scheme.tick_stable_until).
        """
        if self.holder is not None or self.boost_frozen or self.nic is None:
            return False
        if any(v.pending or v.in_collective for v in views.values()):
            return False
        if not self.nic.drained() or self.scheme is None:
            return False
        return self.scheme.tick_stable_until(now, views) == math.inf

    def _rest(self) -> None:
        """Sleep until an arrival, a registration or event, or QUIET_S, whichever is first."""
        assert self.cfg is not None
        tick = self.cfg.tick_s
        k = round(QUIET_S / tick)
        if k < 2:
            return  # ticks this far apart: nothing to save
        self._quiet_from = self.next_tick
        self.next_tick = self._quiet_from + (k - 1) * tick
        self._stirred = False
        self._watch_arrivals(True)

    def _wake(self, now: float) -> None:
        """Leave the rest: count the ticks that passed unevaluated (their outcome is known:
        nothing pending, no holder), and go on with the same tick grid."""
        assert self.cfg is not None and self.core is not None and self._quiet_from is not None
        tick, first = self.cfg.tick_s, self._quiet_from
        due = now >= self.next_tick  # the rest's own end: that tick is evaluated now
        passed = math.floor((now - first) / tick + 1e-9) + 1 if now >= first else 0
        if due:  # next_tick stays: the tick path evaluates it and moves on along the grid
            self.core.skip_ticks(max(0, passed - 1), 0)
        else:
            # Woken by I/O: the ticks before it saw nothing; the next is on the grid.
            self.core.skip_ticks(passed, 0)
            self.next_tick = first + passed * tick
        self._quiet_from = None
        self._stirred = False
        self._watch_arrivals(self._reacts_to_arrivals())

    # ---- decisions -------------------------------------------------------------------
    def _on_event(self, key: str, event: Event) -> None:
        self.counters.events += 1
        if self.core is not None and self.core.is_decision(event):
            self._decide(event, key)

    def _decide(self, event: Event, subject: str | None) -> dict[str, ProcView] | None:
        core, nic = self.core, self.nic
        if core is None or nic is None:
            return None
        t0 = time.perf_counter()
        now = self.clock()
        views = nic.views(rearm=event is Event.TICK)
        if event is Event.TICK:
            self._update_erl(views, now)
        self._set_holder(core.decide(now, event, subject, views))
        self.decision_cost_s += time.perf_counter() - t0
        return views

    def _update_erl(self, views: Mapping[str, ProcView], now: float) -> None:
        assert self.nic is not None and self.core is not None
        ed = None
        if now >= self._ed_next:
            self._ed_next = now + ED_WINDOW_S
            ed = self._measure_ed()
        enp = sum(1 for v in views.values() if v.pending)
        erl = self.core.update_erl(enp, ed)
        self.nic.set_erl(erl)
        if self.gossip is not None:
            self.gossip.maybe_send(erl)

    def _measure_ed(self) -> float | None:
        """ED: CPU time per timeslice of the registered processes (/proc/<pid>/schedstat)."""
        assert self.nic is not None
        run = slices = 0
        seen: dict[int, tuple[int, int]] = {}
        for pid in self.nic.pids().values():
            try:
                with open(f"/proc/{pid}/schedstat", "rb") as f:
                    r, _wait, s = (int(x) for x in f.read().split()[:3])
            except (OSError, ValueError):
                continue
            seen[pid] = (r, s)
            prev = self._ed_prev.get(pid)
            if prev is not None and s > prev[1]:
                run += r - prev[0]
                slices += s - prev[1]
        self._ed_prev = seen
        return run / slices / 1e3 if slices else None

    def _set_holder(self, key: str | None) -> None:
        job = None
        if key is not None and self.nic is not None and key in self.nic.procs:
            job = self.nic.job_of(key)
        self.holder = key
        if job == self.boosted_job:
            return
        jobs, cgroups = self.host.jobs, self.host.cgroups
        for jid in (self.boosted_job, job):
            j = jobs.get(jid) if jid is not None else None
            if j is None or j.ended:
                continue
            w = BOOST_WEIGHT if jid == job else DEFAULT_WEIGHT
            try:
                cgroups.set_weight(j.cgroup, w)
                j.weight = w
            except (CgroupError, OSError) as e:
                log.warning("boost of job %s: %s", jid, e)
        self.boosted_job = job
        if self.cfg is not None and self.cfg.boost == "freeze":
            self._thaw_competitors()
            if job is not None:
                self._freeze_competitors(job)

    def _freeze_competitors(self, holder: str) -> None:
        """The "freeze" boost: stop every other thawed job of the node until the next decision."""
        others = [
            j
            for j in self.host.jobs.values()
            if j.job_id != holder and not j.ended and not j.frozen
        ]
        try:
            done = self.host.cgroups.freeze_many([j.cgroup for j in others])
        except (CgroupError, OSError) as e:
            log.warning("freeze boost: %s", e)
            done = getattr(e, "done", {})
        by_cg = {j.cgroup: j.job_id for j in others}
        self.boost_frozen = {by_cg[c] for c in done if c in by_cg}
        self._held_ticks = 0

    def _thaw_competitors(self) -> None:
        if not self.boost_frozen:
            return
        jobs = self.host.jobs
        cgs = [jobs[j].cgroup for j in self.boost_frozen if j in jobs and not jobs[j].ended]
        try:
            self.host.cgroups.thaw_many(cgs)
        except (CgroupError, OSError) as e:
            log.error("freeze boost: cannot thaw %s: %s", cgs, e)
        self.boost_frozen = set()

    # ---- NIC callbacks -----------------------------------------------------------
    def _authorize(self, job_id: str) -> JobView | str:
        """What registrations for ``job_id`` are checked against (agent/nicguard.py)."""
        job = self.host.jobs.get(job_id)
        if job is None or job.ended:
            return f"no running job {job_id!r} on node {self.host.node}"
        return JobView(job_id, dict(job.pids), lambda: self.host.cgroups.pids(job.cgroup),
                       job.peers, job.port)  # fmt: skip

    def _peer_erl(self, node: str | None) -> float:
        if node == self.host.node:
            return self.erl_us
        return self.gossip.erl_of(node) if self.gossip is not None else 0.0

    def _delay_of_job(self, job_id: str) -> float:
        job = self.host.jobs.get(job_id)
        return job.net_delay_s if job is not None else 0.0

    # ---- reporting -------------------------------------------------------------------
    def refresh_status(self) -> None:
        """Copy status() for the exporter thread (called from the loop every STATUS_S)."""
        self.last_status = self.status()

    def status(self) -> dict[str, Any]:
        md = self.nic.md_totals() if self.nic is not None else None
        c = self.counters
        return {
            "scheme": self.cfg.scheme if self.active and self.cfg else "none",
            "mpl": self.cfg.mpl if self.cfg else None,
            "tick_ms": self.cfg.tick_s * 1e3 if self.cfg else None,
            "decisions": c.decisions,
            "conflicts": c.conflicts,
            "boosts": c.boosts,
            "ticks": c.ticks,
            "events": c.events,
            "md_count": md.count if md else 0,
            "md_sum_s": md.sum_ns / 1e9 if md else 0.0,
            "md_buckets": list(md.buckets) if md else [],
            "md_bounds_s": [b for b in nicproto.MD_BUCKETS_S if math.isfinite(b)],
            "erl_us": self.erl_us,
            "ed_us": self.ed_us,
            "enp": self.enp,
            "cost_switch_us": self.cost_switch_us,
            "registered": len(self.nic.procs) if self.nic else 0,
            "holder": self.holder,
            "arrival_events": self.nic.arrival_events if self.nic else 0,
            "nic_refused": self.nic.refused if self.nic else 0,
            "nic_claims_rejected": self.nic.claims_rejected if self.nic else 0,
            "erl_rejected": self.gossip.rejected if self.gossip else 0,
            "decision_cost_s": self.decision_cost_s,
            # The agent's own CPU since the counters were reset (what the scheme costs it).
            "agent_cpu_s": _process_cpu_s() - self._cpu_base,
        }
