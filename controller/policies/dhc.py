"""Distributed Hierarchical Control: gang scheduling over a buddy tree of controllers
(Feitelson & Rudolph 1996, Feitelson & Rudolph).

P = 2**k PEs; the controller at level ``i``, index ``j`` spans the block of PEs
``[j * 2**i, (j + 1) * 2**i)`` and its two children are ``(i-1, 2j)`` and
``(i-1, 2j+1)`` (§2, Fig. 1). A new gang of ``s`` threads climbs from the PE its
request came from to level ``ceil(lg s)`` (§3.2 step 1); the controllers of that
level balance the load among themselves (step 2: none, random, ring, cube, from
root); the chosen controller maps the threads down its subtree (step 3: strive for
balance, or minimize fragmentation) and controls the gang for its whole life. No
thread migrates.

Scheduling (§3.3) is a round of length Q = 1 in waves from the root: a controller
runs its own gangs for its share of the time window it is given, then its two
children run, in parallel, in what is left. With selective disabling, while a
controller runs one of its gangs, every subtree holding none of that gang's threads
runs its own schedule in that slot too. The shares:

* between a controller and its subordinates — ``uniform``: with ``m`` the longest
  chain of gang counts from the controller down and ``k`` its own gangs, it takes
  ``k / m`` of the window; ``weight``: ``s1 / (s1 + s2)`` with ``s1`` the threads of
  its own gangs and ``s2`` those of all gangs below it (frustration between the two
  is the same as weight, §3.3);
* among a controller's own gangs — ``uniform`` ``1/n``; ``weight`` ``s_i / S``;
  ``frustration`` ``1 / (S - s_i)``, normalised (S = the threads of its gangs).

The paper's four algorithms are uniform/uniform, weight/uniform, weight/weight and
weight/frustration (:data:`ALGORITHMS`).

Choices where the paper is silent: docs/dhc.md. DhcPolicy (dhcpolicy.py) puts the tree
behind the gang-policy contract.

Pure: no clock, no I/O; random choices come from the seeded generator passed in.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate

BALANCING = ("none", "random", "ring", "cube", "root")
ORIGINS = ("any", "pe0")
MAPPINGS = ("balance", "fragmentation")
BETWEEN = ("uniform", "weight")
WITHIN = ("uniform", "weight", "frustration")
ALGORITHMS: dict[str, tuple[str, str]] = {
    "uniform/uniform": ("uniform", "uniform"),
    "weight/uniform": ("weight", "uniform"),
    "weight/weight": ("weight", "weight"),
    "weight/frustration": ("weight", "frustration"),
}

Ctl = tuple[int, int]  # (level, index)


class DhcError(ValueError):
    """A bad parameter or request (one line, names what is wrong)."""


@dataclass(frozen=True)
class DhcConfig:
    """The design choices of §3 (defaults: the paper's best-performing ones)."""

    pes: int = 32
    balancing: str = "cube"
    origin: str = "any"
    mapping: str = "fragmentation"
    between: str = "weight"
    within: str = "uniform"
    selective: bool = True

    def __post_init__(self) -> None:
        if self.pes < 1 or self.pes & (self.pes - 1):
            raise DhcError(f"dhc: pes must be a power of two >= 1, got {self.pes}")
        for name, value, allowed in (
            ("balancing", self.balancing, BALANCING),
            ("origin", self.origin, ORIGINS),
            ("mapping", self.mapping, MAPPINGS),
            ("between", self.between, BETWEEN),
            ("within", self.within, WITHIN),
        ):
            if value not in allowed:
                raise DhcError(f"dhc: {name} must be one of {', '.join(allowed)}, got {value!r}")

    @property
    def levels(self) -> int:
        return self.pes.bit_length() - 1


@dataclass(frozen=True)
class Gang:
    """A mapped gang: its controller and the PE of each thread."""

    gang_id: int
    size: int
    controller: Ctl
    pes: tuple[int, ...]


@dataclass(frozen=True)
class Slot:
    """One gang running from ``start`` for ``length`` of a round of length 1."""

    start: float
    length: float
    gang_id: int
    controller: Ctl


def level_for(size: int) -> int:
    """The level whose blocks fit ``size`` threads: ceil(lg size) (§3.2 step 1)."""
    return max(0, (size - 1).bit_length())


@dataclass
class DhcTree:
    """The controller tree with its gangs: placement and the round's schedule."""

    cfg: DhcConfig
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    gangs: dict[int, Gang] = field(default_factory=dict)
    pe_load: list[int] = field(default_factory=list)
    own: dict[Ctl, list[int]] = field(default_factory=dict)  # controller -> its gangs
    # Per controller, gangs and threads controlled in its subtree (itself included):
    # kept on place/remove so a round visits only subtrees that hold gangs (P = 4096).
    sub_gangs: dict[Ctl, int] = field(default_factory=dict)
    sub_size: dict[Ctl, int] = field(default_factory=dict)
    # Each gang's untouched subtrees (selective disabling) depend only on its PEs and on
    # which subtrees of its controller hold gangs: kept across rounds until a subtree below
    # the controller gains its first gang or loses its last (``_changed``, per controller).
    _epoch: int = field(default=0, init=False, repr=False)
    _changed: dict[Ctl, int] = field(default_factory=dict, init=False, repr=False)
    _untouched_of: dict[int, tuple[int, list[Ctl]]] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        if not self.pe_load:
            self.pe_load = [0] * self.cfg.pes

    # ---- structure ----------------------------------------------------------------------
    def block(self, c: Ctl) -> range:
        lvl, idx = c
        return range(idx << lvl, (idx + 1) << lvl)

    def load(self, c: Ctl) -> int:
        """Threads mapped to the PEs of ``c``'s block."""
        r = self.block(c)
        return sum(self.pe_load[r.start : r.stop])

    @staticmethod
    def children(c: Ctl) -> tuple[Ctl, Ctl] | None:
        lvl, idx = c
        return None if lvl == 0 else ((lvl - 1, 2 * idx), (lvl - 1, 2 * idx + 1))

    @property
    def root(self) -> Ctl:
        return (self.cfg.levels, 0)

    def _up(self, c: Ctl, gangs: int, size: int) -> None:
        """Add to the subtree counts of ``c`` and every controller above it."""
        lvl, idx = c
        moved = False  # a subtree gained its first gang or lost its last: here and above
        while lvl <= self.cfg.levels:
            k = (lvl, idx)
            n = self.sub_gangs.get(k, 0) + gangs
            if (n != 0) != (k in self.sub_gangs) and not moved:
                moved = True
                self._epoch += 1
            if moved:
                self._changed[k] = self._epoch
            if n:
                self.sub_gangs[k] = n
                self.sub_size[k] = self.sub_size.get(k, 0) + size
            else:
                self.sub_gangs.pop(k, None)
                self.sub_size.pop(k, None)
            lvl, idx = lvl + 1, idx >> 1

    def _has_below(self, c: Ctl) -> bool:
        return self.sub_gangs.get(c, 0) > len(self.own.get(c, ()))

    # ---- mapping (§3.2) -------------------------------------------------------------------
    def origin_pe(self) -> int:
        """Where the next request comes from (the request-origin model)."""
        if self.cfg.origin == "pe0" or self.cfg.pes == 1:
            return 0
        total = sum(self.pe_load)
        if total == 0:
            return self.rng.randrange(self.cfg.pes)
        k = self.rng.randrange(total)  # a thread drawn uniformly: its PE
        return bisect_right(list(accumulate(self.pe_load)), k)  # first PE whose sum > k

    def choose_controller(self, size: int, origin: int) -> Ctl:
        """Step 2: the controller at the gang's level that takes it."""
        lvl = level_for(size)
        if lvl > self.cfg.levels:
            raise DhcError(f"dhc: a gang of {size} threads exceeds the {self.cfg.pes} PEs")
        n = self.cfg.pes >> lvl
        home = origin >> lvl
        b = self.cfg.balancing
        if b == "none":
            return (lvl, home)
        if b == "random":
            return (lvl, self.rng.randrange(n))
        if b == "root":
            c = self.root
            while c[0] > lvl:
                kids = self.children(c)
                assert kids is not None
                c = min(kids, key=lambda k: (self.load(k), k[1]))
            return c
        if b == "ring":
            cands = [home, (home - 1) % n, (home + 1) % n]
        else:  # cube: the hypercube neighbours of this level
            cands = [home, *(home ^ (1 << d) for d in range(n.bit_length() - 1))]
        order = {idx: pos for pos, idx in reversed(list(enumerate(cands)))}
        best = min(order, key=lambda idx: (self.load((lvl, idx)), order[idx]))
        return (lvl, best)

    def map_threads(self, c: Ctl, s: int) -> list[int]:
        """Step 3: the PEs of ``s`` threads under ``c``, one thread per PE."""
        lvl, idx = c
        if s == 0:
            return []
        if lvl == 0:
            assert s == 1
            return [idx]
        if s == 1 << lvl:  # a full block: both rules give every PE (a shortcut, P = 4096)
            return list(self.block(c))
        kids = self.children(c)
        assert kids is not None
        cap = 1 << (lvl - 1)
        t1, t2 = self.load(kids[0]), self.load(kids[1])
        d = abs(t1 - t2)
        if self.cfg.mapping == "balance" and d <= s and d <= cap:
            # s1 + t1 = s2 + t2 (+-1): the less loaded child takes the odd thread
            light = (s + t2 - t1 + (1 if t1 <= t2 else 0)) // 2
            s1 = min(cap, max(0, light))
            s2 = s - s1
            if s2 > cap:
                s1, s2 = s - cap, cap
        else:  # minimize fragmentation: fill the less loaded child
            first = 0 if t1 <= t2 else 1
            take = min(s, cap)
            s1, s2 = (take, s - take) if first == 0 else (s - take, take)
        return self.map_threads(kids[0], s1) + self.map_threads(kids[1], s2)

    def place(self, gang_id: int, size: int, origin: int | None = None) -> Gang:
        """Map a new gang (all three steps); ``origin`` overrides the origin model."""
        if gang_id in self.gangs:
            raise DhcError(f"dhc: gang {gang_id} is already mapped")
        if size < 1:
            raise DhcError(f"dhc: a gang needs >= 1 thread, got {size}")
        c = self.choose_controller(size, self.origin_pe() if origin is None else origin)
        pes = tuple(sorted(self.map_threads(c, size)))
        return self.record(Gang(gang_id, size, c, pes))

    def pin(self, gang_id: int, pes: tuple[int, ...]) -> Gang:
        """Record a gang exactly where its threads already run (a controller restart):
        its controller is the smallest block at its level or above holding them all."""
        if gang_id in self.gangs:
            raise DhcError(f"dhc: gang {gang_id} is already mapped")
        if not pes or len(set(pes)) != len(pes) or not all(0 <= p < self.cfg.pes for p in pes):
            raise DhcError(f"dhc: gang {gang_id}: bad PEs {pes}")
        pes = tuple(sorted(pes))
        lvl = level_for(len(pes))
        while (pes[0] >> lvl) != (pes[-1] >> lvl):
            lvl += 1
        c = (lvl, pes[0] >> lvl)
        return self.record(Gang(gang_id, len(pes), c, pes))

    def record(self, g: Gang) -> Gang:
        """Enter a gang already mapped (its controller and sorted PEs chosen)."""
        self.gangs[g.gang_id] = g
        self.own.setdefault(g.controller, []).append(g.gang_id)
        self._up(g.controller, 1, g.size)
        self._add_load(g.pes, 1)
        return g

    def _add_load(self, pes: tuple[int, ...], d: int) -> None:
        pl = self.pe_load
        a, b = pes[0], pes[-1] + 1
        if b - a == len(pes):  # sorted and distinct, so one run: a slice (P = 4096)
            pl[a:b] = [x + d for x in pl[a:b]]
        else:
            for pe in pes:
                pl[pe] += d

    def remove(self, gang_id: int) -> None:
        g = self.gangs.pop(gang_id, None)
        if g is None:
            raise DhcError(f"dhc: no gang {gang_id}")
        self._untouched_of.pop(gang_id, None)
        self.own[g.controller].remove(gang_id)
        if not self.own[g.controller]:
            del self.own[g.controller]
        self._up(g.controller, -1, -g.size)
        self._add_load(g.pes, -1)

    # ---- the round (§3.3) -----------------------------------------------------------------
    def _chain(self, c: Ctl) -> int:
        """The longest chain of gang counts from ``c`` down (uniform between)."""
        here = len(self.own.get(c, ()))
        kids = self.children(c)
        if kids is None or not self._has_below(c):
            return here
        return here + max(self._chain(k) for k in kids)

    def _own_share(self, c: Ctl) -> float:
        mine = self.own.get(c, [])
        if not mine:
            return 0.0
        if self.cfg.between == "uniform":
            return len(mine) / self._chain(c)
        s1 = sum(self.gangs[g].size for g in mine)
        return s1 / self.sub_size[c]  # s1 + the threads of the gangs below

    def _within(self, c: Ctl) -> list[tuple[int, float]]:
        mine = self.own.get(c, [])
        sizes = [self.gangs[g].size for g in mine]
        if self.cfg.within == "uniform" or len(mine) == 1:
            w = [1.0] * len(mine)
        elif self.cfg.within == "weight":
            w = [float(s) for s in sizes]
        else:  # frustration: 1 / (threads blocked while it runs)
            total = sum(sizes)
            w = [1.0 / (total - s) for s in sizes]
        tot = sum(w)
        return [(g, x / tot) for g, x in zip(mine, w, strict=True)]

    def _untouched(self, c: Ctl, pes: tuple[int, ...]) -> list[Ctl]:
        """Maximal subtrees of ``c`` holding none of ``pes`` (sorted) that control a
        gang (selective disabling; a subtree without gangs has nothing to run), left to
        right."""
        out: list[Ctl] = []
        sub = self.sub_gangs
        n = len(pes)

        def visit(lvl: int, idx: int) -> None:
            if lvl == 0:
                return
            lvl -= 1
            for j in (2 * idx, 2 * idx + 1):
                k = (lvl, j)
                if k not in sub:
                    continue
                start = j << lvl
                i = bisect_left(pes, start)
                if i == n or pes[i] >= start + (1 << lvl):
                    out.append(k)
                else:
                    visit(lvl, j)

        visit(*c)
        return out

    def untouched(self, gang_id: int) -> list[Ctl]:
        """:meth:`_untouched` of a gang's controller and PEs, kept while no subtree of
        that controller gains its first gang or loses its last."""
        g = self.gangs[gang_id]
        stamp = self._changed.get(g.controller, 0)
        hit = self._untouched_of.get(gang_id)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        subs = self._untouched(g.controller, g.pes)
        self._untouched_of[gang_id] = (stamp, subs)
        return subs

    def raw_round(self) -> list[tuple[float, int, int, int, float]]:
        """The round as tuples ``(start, controller code, gang, n, length)``, sorted as
        :meth:`round` sorts its slots; the controller code is ``level * P + index``
        (ordered as the ``(level, index)`` pairs) and ``n`` the slot's place in the wave
        order, so ties are broken as a stable sort breaks them.

        The same arithmetic as the plain recursion of §3.3 (each length is
        ``frac * (share * window)``, each start a running sum), so every slot is
        the same float; it only computes once per round what does not change within
        a round: each controller's own share and division among its gangs, and each
        gang's untouched subtrees (a round can hold 10^4-10^5 slots when one
        controller holds many gangs: Fig. 3's requests from PE #1 with no balancing).
        """
        pes, selective = self.cfg.pes, self.cfg.selective
        sub_gangs = self.sub_gangs
        # per controller: its own share, and each own gang's fraction and untouched subtrees
        div: dict[Ctl, tuple[float, list[tuple[int, float, list[Ctl]]]]] = {}
        untouched = self.untouched
        out: list[tuple[float, int, int, int, float]] = []
        append = out.append

        def schedule(c: Ctl, t0: float, window: float) -> None:
            if window <= 0.0 or c not in sub_gangs:
                return
            d = div.get(c)
            if d is None:
                share, within = self._division(c)
                d = div[c] = (share, [(g, f, untouched(g) if selective else []) for g, f in within])
            mine = d[0] * window
            lvl, idx = c
            code = lvl * pes + idx
            t = t0
            for g, frac, subs in d[1]:
                length = frac * mine
                append((t, code, g, len(out), length))
                for u in subs:
                    schedule(u, t, length)
                t += length
            if lvl:
                rest = window - mine
                start = t0 + mine
                for k in ((lvl - 1, 2 * idx), (lvl - 1, 2 * idx + 1)):
                    if k in sub_gangs:  # (what schedule would check first)
                        schedule(k, start, rest)

        schedule(self.root, 0.0, 1.0)
        out.sort()
        return out

    def _division(self, c: Ctl) -> tuple[float, list[tuple[int, float]]]:
        """A controller's own share of a window and its division among its gangs."""
        mine = self.own.get(c)
        if not mine:
            return 0.0, []
        return self._own_share(c), self._within(c)

    def round(self) -> list[Slot]:
        """One scheduling round of length 1: every gang's slots, by start time."""
        pes = self.cfg.pes
        return [Slot(t, ln, g, divmod(code, pes)) for t, code, g, _, ln in self.raw_round()]

    def run_fractions(self) -> dict[int, float]:
        """Each gang's share of the round: its rate of progress (1/slowdown)."""
        rf = dict.fromkeys(self.gangs, 0.0)
        for s in self.round():
            rf[s.gang_id] += s.length
        return rf

    def front(self, at: float) -> list[Ctl]:
        """The controllers scheduling a gang at instant ``at`` of the round (0 <= at < 1)."""
        return sorted({s.controller for s in self.round() if s.start <= at < s.start + s.length})


def pe_busy(slots: Iterable[Slot], tree: DhcTree) -> list[float]:
    """Per PE, the share of the round it runs a thread (1 - its idle share)."""
    busy = [0.0] * tree.cfg.pes
    for s in slots:
        for pe in tree.gangs[s.gang_id].pes:
            busy[pe] += s.length
    return busy


def reference_round(t: DhcTree) -> list[Slot]:
    """The round as first written: §3.3's recursion making a :class:`Slot` per gang slot,
    then sorted. Slow; kept as the oracle that :meth:`DhcTree.round` and
    :meth:`DhcTree.raw_round` are tested and benchmarked against."""
    out: list[Slot] = []

    def schedule(c: Ctl, t0: float, window: float) -> None:
        if window <= 0.0 or c not in t.sub_gangs:
            return
        mine = t._own_share(c) * window
        at = t0
        for g, frac in t._within(c):
            length = frac * mine
            out.append(Slot(at, length, g, c))
            if t.cfg.selective:
                for u in t._untouched(c, t.gangs[g].pes):
                    schedule(u, at, length)
            at += length
        kids = t.children(c)
        if kids is not None:
            for k in kids:
                schedule(k, t0 + mine, window - mine)

    schedule(t.root, 0.0, 1.0)
    out.sort(key=lambda s: (s.start, s.controller, s.gang_id))
    return out
