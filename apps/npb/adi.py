"""The ADI machinery BT and SP share: multipartition, face exchange, explicit right-hand side.

Yu & Byun 2011 §5.2: BT and SP "solve multiple independent systems of block
tridiagonal and scalar pentadiagonal equations" -- NPB's approximate
factorisation: each time step computes an explicit right-hand side from the
current field and its neighbours' faces, then solves (I - dt A_x)(I - dt A_y)
(I - dt A_z) du = rhs as three sweeps of independent line solves, one per
grid line in x, then y, then z.

**The problem** (ours; NPB's compressible Navier-Stokes fluxes are not
reproduced, the structure is): five coupled fields on an n^3 grid of the
unit cube, h = 1/(n-1),

    du/dt = w(x) K lap_h u + M u - (dssp/dt) sum_d delta_d^4 u + f,

with a spatially varying conductivity w in [1, 1.5], a 5x5 coupling K
(BT: a full SPD matrix, so the implicit blocks are full 5x5; SP: diagonal,
one scalar per component, three distinct values as NPB's lhs, lhsp and
lhsm), a 5x5 reaction M and NPB's fourth-difference dissipation (dssp =
0.05, applied 2..n-3 along each axis as NPB does). The forcing f makes a
known smooth field u_ex the exact discrete steady state, boundaries hold
u_ex (Dirichlet), and the run starts from u_ex damped inside. The
self-check: the residual (rhs) norms fall, the error ||u - u_ex|| falls,
and a serial run of the same code (rank 0 again, alone, no messages)
reproduces every norm to 1e-10.

**Decomposition: NPB's multipartition.** p = q^2 ranks, the grid cut into
q^3 cells; cell (i, j, k) belongs to rank (a, b) = ((j - i) mod q, (k - i)
mod q). Every rank owns one cell in every slab of every direction, so in
each sweep stage s all ranks work (on their slab-s cell) and pass the
elimination carry to a single successor rank. Per time step a rank sends 6
face messages (copy_faces: the two boundary layers of its q-1 cells that
have a neighbour, one message per direction and side), q-1 forward and q-1
backward carries per direction: at 16 ranks 6 : 9 : 9, Yu & Byun 2011 Table 2's
26 % / 37 % / 37 % for both BT and SP. Isend, Irecv, Wait throughout.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from apps.npb import NpbError
from apps.npb.runner import Kernel, Rep
from apps.npb.transport import Recorder, Transport

DSSP = 0.05
GHOST = 2
TOL = 1e-10
ABS_TOL = 1e-14  # a converged norm's round-off (u is of order 1)

# Reaction: mild decay plus rotation between components (5x5, not symmetric).
M = -0.1 * np.eye(5) + 0.05 * (np.eye(5, k=1) - np.eye(5, k=-1))


def u_exact(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The steady state the forcing is built for: five smooth fields, shape (5, ...)."""
    out = []
    for c in range(5):
        out.append(
            1.0
            + 0.2 * c
            + 0.3 * np.sin(math.pi * (x + 2 * y + 3 * z) / (1 + c))
            + 0.1 * (c + 1) * x * y * z
        )
    return np.array(out)


def conductivity(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    w: np.ndarray = 1.0 + 0.5 * x * (1 - y) * (0.5 + z)
    return w


@dataclass
class Cell:
    """One cell of the multipartition on this rank."""

    c: tuple[int, int, int]  # cell coordinates
    lo: tuple[int, int, int]  # first global index per axis
    hi: tuple[int, int, int]  # one past the last
    u: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (5, X, Y, Z)
    gex: np.ndarray = field(default_factory=lambda: np.zeros(0))  # G(u_ex): the forcing
    w: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (X, Y, Z)
    uex: np.ndarray = field(default_factory=lambda: np.zeros(0))
    interior: np.ndarray = field(default_factory=lambda: np.zeros(0))  # bool (X, Y, Z)
    d4mask: list[np.ndarray] = field(default_factory=list)
    ghosts: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)  # (axis, side)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.hi[0] - self.lo[0], self.hi[1] - self.lo[1], self.hi[2] - self.lo[2])


class SoloTransport(Transport):
    """A job of one rank: the serial reference run (never sends)."""

    name = "solo"

    def __init__(self) -> None:
        self.rank, self.size, self.rec = 0, 1, Recorder(enabled=False)

    def _no(self, *a: Any, **k: Any) -> Any:
        raise RuntimeError("a one-rank job sends no messages")

    isend = irecv = waitall = alltoall = alltoallv = reduce = bcast = split = _no

    def allreduce(self, arr: np.ndarray, op: str, kind: str) -> np.ndarray:
        return np.array(arr, copy=True)

    def gather_obj(self, obj: Any) -> list[Any] | None:
        return [obj]


def bounds(n: int, q: int) -> list[int]:
    return [round(k * n / q) for k in range(q + 1)]


class AdiKernel(Kernel):
    """BT and SP: everything but the implicit line solver (``forward`` / ``backward``)."""

    steps_default: ClassVar[dict[str, int]] = {}
    grid_n: ClassVar[dict[str, int]] = {}
    fwd_width = 0  # doubles per line in a forward carry
    bwd_width = 0

    def add_args(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument(
            "--steps",
            type=int,
            default=None,
            metavar="N",
            help="time steps per repetition (default per class: "
            + ", ".join(f"{k} {v}" for k, v in self.steps_default.items())
            + ")",
        )
        ap.add_argument(
            "--check-serial",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="rank 0 repeats the run alone and compares every norm (default on for S and W)",
        )

    def check_args(self, args: argparse.Namespace, ranks: int) -> None:
        q = math.isqrt(ranks)
        n = self.grid_n[args.cls]
        if min(b - a for a, b in zip(bounds(n, q), bounds(n, q)[1:], strict=False)) < GHOST:
            raise NpbError(
                f"{self.name.upper()} class {args.cls} ({n}^3) on {ranks} ranks would make "
                f"cells thinner than {GHOST} points",
                fix="use fewer ranks or a bigger class",
            )
        if args.steps is not None and args.steps < 1:
            raise NpbError(f"--steps must be >= 1, got {args.steps}")

    # ---- set-up ---------------------------------------------------------------------------
    def setup(self, t: Transport, cls: str, args: argparse.Namespace) -> None:
        self.cls = cls
        self.steps = args.steps or self.steps_default[cls]
        check = args.check_serial
        self.check_serial = cls in ("S", "W") if check is None else check
        self.configure(t, self.grid_n[cls])

    def configure(self, t: Transport, n: int) -> None:
        self.t = t
        self.n = n
        self.h = 1.0 / (n - 1)
        self.dt = self.h * self.h  # dt nu / h^2 of order 1: the implicit sweeps carry it
        q = self.q = math.isqrt(t.size)
        self.a, self.b = divmod(t.rank, q)
        bd = bounds(n, q)
        self.cells: list[Cell] = []
        for i in range(q):
            c = (i, (self.a + i) % q, (self.b + i) % q)
            lo = (bd[c[0]], bd[c[1]], bd[c[2]])
            hi = (bd[c[0] + 1], bd[c[1] + 1], bd[c[2] + 1])
            self.cells.append(self._make_cell(c, lo, hi))

    def _coords(self, lo: tuple[int, ...], hi: tuple[int, ...], pad: int) -> list[np.ndarray]:
        axes = [np.arange(lo[d] - pad, hi[d] + pad) * self.h for d in range(3)]
        return list(np.meshgrid(*axes, indexing="ij"))

    def _make_cell(self, c: tuple[int, int, int], lo: tuple[int, ...], hi: tuple[int, ...]) -> Cell:
        cell = Cell(c, (lo[0], lo[1], lo[2]), (hi[0], hi[1], hi[2]))
        x, y, z = self._coords(lo, hi, 0)
        cell.w = conductivity(x, y, z)
        cell.uex = u_exact(x, y, z)
        gidx = [np.arange(lo[d], hi[d]) for d in range(3)]
        inner = [(g >= 1) & (g <= self.n - 2) for g in gidx]
        cell.interior = inner[0][:, None, None] & inner[1][None, :, None] & inner[2][None, None, :]
        masks = [(g >= 2) & (g <= self.n - 3) for g in gidx]
        cell.d4mask = [
            masks[0][:, None, None] & cell.interior,
            masks[1][None, :, None] & cell.interior,
            masks[2][None, None, :] & cell.interior,
        ]
        # The forcing: G(u_ex) from u_ex on the padded cell (analytic, no messages).
        px, py, pz = self._coords(lo, hi, GHOST)
        cell.gex = self._g(cell, u_exact(px, py, pz))
        bump = np.sin(math.pi * x) * np.sin(math.pi * y) * np.sin(math.pi * z)
        cell.u = cell.uex * (1.0 - 0.5 * bump)
        return cell

    # ---- the explicit part ----------------------------------------------------------------
    def diffusion(self, cell: Cell, d2: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _g(self, cell: Cell, p: np.ndarray) -> np.ndarray:
        """dt (w K lap_h u + M u) - dssp sum_d delta_d^4 u at the interior; 0 on the boundary."""
        X, Y, Z = cell.shape
        g = GHOST

        def sh(d: int, k: int) -> np.ndarray:
            s = [slice(None), slice(g, g + X), slice(g, g + Y), slice(g, g + Z)]
            s[d + 1] = slice(g + k, g + k + (X, Y, Z)[d])
            return p[tuple(s)]

        u = sh(0, 0)
        d2 = np.zeros_like(u)
        d4 = np.zeros_like(u)
        for d in range(3):
            m1, p1 = sh(d, -1), sh(d, 1)
            d2 += m1 - 2.0 * u + p1
            d4 += np.where(
                cell.d4mask[d], sh(d, -2) - 4.0 * m1 + 6.0 * u - 4.0 * p1 + sh(d, 2), 0.0
            )
        out = self.dt * (self.diffusion(cell, d2) / self.h**2 + np.einsum("ij,j...->i...", M, u))
        out -= DSSP * d4
        return np.where(cell.interior, out, 0.0)

    def rhs(self, cell: Cell) -> np.ndarray:
        X, Y, Z = cell.shape
        g = GHOST
        p = np.zeros((5, X + 2 * g, Y + 2 * g, Z + 2 * g))
        p[:, g : g + X, g : g + Y, g : g + Z] = cell.u
        for (d, side), data in cell.ghosts.items():
            s = [slice(None), slice(g, g + X), slice(g, g + Y), slice(g, g + Z)]
            n_d = (X, Y, Z)[d]
            s[d + 1] = slice(0, g) if side < 0 else slice(g + n_d, 2 * g + n_d)
            p[tuple(s)] = data
        out: np.ndarray = self._g(cell, p) - cell.gex
        return out

    # ---- neighbours -----------------------------------------------------------------------
    def neighbour(self, d: int, side: int) -> int:
        """The rank owning the next (side +1) or previous (-1) cell along axis d."""
        q = self.q
        da, db = ((-1, -1), (1, 0), (0, 1))[d]
        return ((self.a + side * da) % q) * q + (self.b + side * db) % q

    def _slab(self, u: np.ndarray, d: int, first: bool) -> np.ndarray:
        s: list[slice] = [slice(None)] * 4
        s[d + 1] = slice(0, GHOST) if first else slice(u.shape[d + 1] - GHOST, None)
        return u[tuple(s)]

    def copy_faces(self) -> None:
        """NPB copy_faces: one message per direction and side with the q-1 cells' faces."""
        t, q = self.t, self.q
        if q == 1:
            return
        recvs = []
        sends = []
        for d in range(3):
            for side in (-1, 1):
                # Receive into the ghosts on my cells' `side` from the neighbour on that side.
                mine = sorted(
                    (c for c in self.cells if (c.c[d] > 0 if side < 0 else c.c[d] < q - 1)),
                    key=lambda c: c.c[d],
                )
                count = sum(c.u[:, :, :, :].size // c.shape[d] * GHOST for c in mine)
                tag = 100 + 2 * d + (side < 0)  # +1: the data moves towards +
                recvs.append((d, side, mine, t.irecv(self.neighbour(d, side), tag, count)))
        for d in range(3):
            for side in (-1, 1):
                # Send to the neighbour on `side` the layers it keeps as ghosts on its other side.
                out = sorted(
                    (c for c in self.cells if (c.c[d] > 0 if side < 0 else c.c[d] < q - 1)),
                    key=lambda c: c.c[d],
                )
                buf = np.concatenate([self._slab(c.u, d, side < 0).ravel() for c in out])
                tag = 100 + 2 * d + (side > 0)
                sends.append(t.isend(self.neighbour(d, side), buf, tag, "faces"))
        got = t.waitall([r for *_, r in recvs] + sends)
        for (d, side, mine, _), data in zip(recvs, got, strict=False):
            assert data is not None
            off = 0
            for c in mine:
                shp = list(c.u.shape)
                shp[d + 1] = GHOST
                size = int(np.prod(shp))
                c.ghosts[(d, side)] = data[off : off + size].reshape(shp)
                off += size

    # ---- the implicit part: three sweeps ------------------------------------------------
    def forward(
        self, cell: Cell, d: int, r: np.ndarray, carry: np.ndarray | None
    ) -> tuple[Any, np.ndarray]:
        """Eliminate along axis d; ``r`` is (L, N, 5). Returns (factors, carry out (N, fwd))."""
        raise NotImplementedError

    def backward(
        self, cell: Cell, d: int, factors: Any, nxt: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Back-substitute; returns (solution (L, N, 5), carry to the previous cell (N, bwd))."""
        raise NotImplementedError

    def sweep(self, d: int, rhs: dict[tuple[int, int, int], np.ndarray]) -> None:
        t, q = self.t, self.q
        cells = sorted(self.cells, key=lambda c: c.c[d])
        pred, succ = self.neighbour(d, -1), self.neighbour(d, 1)
        factors = []
        sends = []
        for s, cell in enumerate(cells):
            r = np.moveaxis(rhs[cell.c], (d + 1, 0), (0, -1))
            L, o1, o2, _ = r.shape
            carry = None
            if s > 0:
                got = t.wait(t.irecv(pred, 200 + d, o1 * o2 * self.fwd_width))
                assert got is not None
                carry = got.reshape(o1 * o2, self.fwd_width)
            f, out = self.forward(cell, d, r.reshape(L, o1 * o2, 5), carry)
            factors.append((f, (L, o1, o2)))
            if s < q - 1:
                sends.append(t.isend(succ, out, 200 + d, "forward"))
        for s in range(q - 1, -1, -1):
            cell = cells[s]
            f, (L, o1, o2) = factors[s]
            nxt = None
            if s < q - 1:
                got = t.wait(t.irecv(succ, 300 + d, o1 * o2 * self.bwd_width))
                assert got is not None
                nxt = got.reshape(o1 * o2, self.bwd_width)
            x, first = self.backward(cell, d, f, nxt)
            if s > 0:
                sends.append(t.isend(pred, first, 300 + d, "backward"))
            rhs[cell.c] = np.moveaxis(x.reshape(L, o1, o2, 5), (0, -1), (d + 1, 0))
        if sends:
            t.waitall(sends)

    def row_kind(self, cell: Cell, d: int) -> np.ndarray:
        """Per point along the axis: 0 boundary, 1 next to it, 2 inside (global index)."""
        g = np.arange(cell.lo[d], cell.hi[d])
        k = np.full(g.shape, 2)
        k[(g == 1) | (g == self.n - 2)] = 1
        k[(g == 0) | (g == self.n - 1)] = 0
        return k

    def line_w(self, cell: Cell, d: int) -> np.ndarray:
        """w along the lines of axis d: (L, N)."""
        w = np.moveaxis(cell.w, d, 0)
        return w.reshape(w.shape[0], -1)

    # ---- the run --------------------------------------------------------------------------
    def step(self) -> dict[tuple[int, int, int], np.ndarray]:
        self.copy_faces()
        rhs = {c.c: self.rhs(c) for c in self.cells}
        out = {k: v.copy() for k, v in rhs.items()}
        for d in range(3):
            self.sweep(d, out)
        for c in self.cells:
            c.u = c.u + out[c.c]
        return rhs

    def run_steps(self, steps: int) -> np.ndarray:
        """``steps`` ADI steps from the initial field; the 15 norms (first rhs, last rhs, error)."""
        first = None
        for _ in range(steps):
            self.t.mark("iter")
            rhs = self.step()
            if first is None:
                first = sum((v**2).sum(axis=(1, 2, 3)) for v in rhs.values())
        self.t.mark("post")
        self.copy_faces()
        last = sum((self.rhs(c) ** 2).sum(axis=(1, 2, 3)) for c in self.cells)
        err = sum(((c.u - c.uex) ** 2).sum(axis=(1, 2, 3)) for c in self.cells)
        assert first is not None
        local = np.concatenate([first, last, err])
        tot = self.t.allreduce(local, "sum", "norms")
        return np.sqrt(tot / (self.n - 2) ** 3)

    def reset(self) -> None:
        for c in self.cells:
            x, y, z = self._coords(c.lo, c.hi, 0)
            bump = np.sin(math.pi * x) * np.sin(math.pi * y) * np.sin(math.pi * z)
            c.u = c.uex * (1.0 - 0.5 * bump)
            c.ghosts.clear()

    def rep(self, t: Transport) -> Rep:
        self.reset()
        norms = self.run_steps(self.steps)
        first, last, err = norms[:5], norms[5:10], norms[10:]
        falls = bool(np.all(last < first))
        detail: dict[str, Any] = {
            "steps": self.steps,
            "rhs_norm_first": first.tolist(),
            "rhs_norm_last": last.tolist(),
            "error_norm": err.tolist(),
            "residual_falls": falls,
        }
        return Rep(self.steps, falls, detail)

    def finish(self, t: Transport, rep: Rep) -> Rep:
        """Rank 0 repeats the run alone, after the timed part (it would hold the others up)."""
        detail = dict(rep.detail)
        detail["serial_max_relative_difference"] = None
        verified = rep.verified
        if self.check_serial and t.rank == 0:
            norms = np.array(
                detail["rhs_norm_first"] + detail["rhs_norm_last"] + detail["error_norm"]
            )
            solo = type(self)()
            solo.configure(SoloTransport(), self.n)
            ref = solo.run_steps(self.steps)
            rel = float(np.max(np.abs(norms - ref) / np.maximum(np.abs(ref), 1e-300)))
            detail["serial_max_relative_difference"] = rel
            # Relative 1e-10, or round-off level for a norm that has converged to ~0.
            agree = bool(np.all(np.abs(norms - ref) <= TOL * np.abs(ref) + ABS_TOL))
            verified = bool(verified) and agree
        return Rep(rep.iterations, verified, detail)

    def text(self, rep: Rep) -> list[str]:
        d = rep.detail
        out = [f" Time steps      =  {d['steps']}"]
        for c in range(5):
            out.append(
                f" Comp {c + 1}: rhs {d['rhs_norm_first'][c]:.6e} -> {d['rhs_norm_last'][c]:.13e}"
                f"  error {d['error_norm'][c]:.13e}"
            )
        s = d.get("serial_max_relative_difference")
        out.append(
            " Serial check    =  "
            + ("not run" if s is None else f"max relative difference {s:.2e} (<= {TOL:g})")
        )
        out.append(f" Residual falls  =  {d['residual_falls']}")
        return out
