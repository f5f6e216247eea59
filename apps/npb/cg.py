"""NPB CG: the inverse power method with conjugate gradient on NPB's random sparse matrix.

Problem (NPB report RNR-94-007 §2.4, NPB 3.x ``makea``/``sparse``/``conj_grad``):
the matrix A = sum_i size_i * v_i v_i^T + (RCOND - SHIFT) I, where v_i is a
random sparse vector of NONZER entries drawn with ``randlc`` plus the entry
0.5 at position i, and size_i falls geometrically from 1 to RCOND. Each of
NITER outer iterations runs 25 CG iterations for A z = x, then
zeta = SHIFT + 1 / (x . z) and x = z / ||z||. Verified when
|zeta - zeta_ref| / zeta_ref <= 1e-10 (reference values in
shared/npb-reference.md).

Decomposition (NPB's): ranks form an nprows x npcols grid (npcols = nprows,
or 2 nprows when the rank count is an odd power of two); rank (i, j) holds
the block A[rows_i, cols_j] and the vectors' segment cols_j (replicated down
each grid column). q = A p is the local block product, summed across the
grid row by log2(npcols) pairwise exchanges of the row segment, then one
exchange with the transpose partner delivers each rank its column segment
(on the diagonal of a square grid the partner is the rank itself: NPB sends
to itself, so do we).
A dot product is a local sum and log2(npcols) exchanges of 8 bytes; the two
norms of an outer iteration travel together (16 bytes). Sends are blocking
(MPI_Send), receives posted first (MPI_Irecv, MPI_Wait): Yu & Byun 2011 Table 2's
CG routines. The pairwise sums are commutative on every rank, so the
replicated segments stay bit-for-bit equal.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from apps.npb import NpbError
from apps.npb.randdp import SEED, Randlc
from apps.npb.randdp import A as AMULT
from apps.npb.runner import Kernel, Rep, entry
from apps.npb.transport import Transport

RCOND = 0.1
CGITMAX = 25
EPSILON = 1e-10


@dataclass(frozen=True)
class CgClass:
    na: int
    nonzer: int
    niter: int
    shift: float
    zeta: float


CLASSES = {
    "S": CgClass(1400, 7, 15, 10.0, 8.5971775078648),
    "W": CgClass(7000, 8, 15, 12.0, 10.362595087124),
    "A": CgClass(14000, 11, 15, 20.0, 17.130235054029),
}


def make_vectors(n: int, nonzer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NPB's ``makea`` draws: per row i the sparse vector v_i (0-based columns, values).

    Returns (row of each entry, column of each entry, value of each entry).
    """
    rng = Randlc(SEED, AMULT)
    rng.next()  # NPB's main draws zeta once before makea
    nn1 = 1
    while nn1 < n:
        nn1 *= 2
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for i in range(n):
        iv: list[int] = []
        v: list[float] = []
        while len(iv) < nonzer:  # sprnvc
            vecelt = rng.next()
            vecloc = rng.next()
            j = int(nn1 * vecloc) + 1
            if j > n or j in iv:
                continue
            iv.append(j)
            v.append(vecelt)
        if i + 1 in iv:  # vecset: the diagonal entry is 0.5
            v[iv.index(i + 1)] = 0.5
        else:
            iv.append(i + 1)
            v.append(0.5)
        rows += [i] * len(iv)
        cols += [c - 1 for c in iv]
        vals += v
    return np.array(rows), np.array(cols), np.array(vals)


def make_block(
    cls: CgClass,
    r0: int,
    r1: int,
    c0: int,
    c1: int,
    vecs: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> sp.csr_matrix:
    """NPB's ``sparse``: the block A[r0:r1, c0:c1] of sum_i size_i v_i v_i^T + (RCOND - SHIFT) I."""
    n = cls.na
    vrow, vcol, vval = vecs
    ratio = RCOND ** (1.0 / n)
    size = np.cumprod(np.concatenate([[1.0], np.full(n - 1, ratio)]))  # size_i, as NPB updates it
    starts = np.flatnonzero(np.r_[True, vrow[1:] != vrow[:-1]])
    counts = np.diff(np.r_[starts, vrow.size])
    ii, jj, vv = [], [], []
    for m in np.unique(counts):
        sel = starts[counts == m]
        idx = sel[:, None] + np.arange(m)[None, :]  # (rows with m entries, m)
        c = vcol[idx]
        v = vval[idx]
        scale = size[vrow[sel]][:, None] * v  # scale = size * aelt[nza]  (row j = c[:, a])
        va = v[:, None, :] * scale[:, :, None]  # va[i, a, b] = aelt[b] * scale[a]
        jrow = np.broadcast_to(c[:, :, None], va.shape)
        jcol = np.broadcast_to(c[:, None, :], va.shape)
        diag = (jrow == jcol) & (jrow == vrow[sel][:, None, None])
        va = va + np.where(diag, RCOND - cls.shift, 0.0)
        keep = (jrow >= r0) & (jrow < r1) & (jcol >= c0) & (jcol < c1)
        ii.append(jrow[keep] - r0)
        jj.append(jcol[keep] - c0)
        vv.append(va[keep])
    coo = sp.coo_matrix(
        (np.concatenate(vv), (np.concatenate(ii), np.concatenate(jj))), shape=(r1 - r0, c1 - c0)
    )
    return coo.tocsr()  # duplicates summed


def grid(size: int) -> tuple[int, int]:
    """NPB's process grid: npcols = nprows, or 2 nprows for an odd power of two."""
    l2 = int(math.log2(size))
    nprows = 1 << (l2 // 2)
    return nprows, size // nprows


class CG(Kernel):
    name = "cg"

    def add_args(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument(
            "--niter",
            type=int,
            default=None,
            metavar="N",
            help="outer iterations per repetition (default NPB's 15; another value "
            "cannot be verified)",
        )

    def check_args(self, args: argparse.Namespace, ranks: int) -> None:
        if args.niter is not None and args.niter < 1:
            raise NpbError(f"--niter must be >= 1, got {args.niter}")

    def setup(self, t: Transport, cls: str, args: argparse.Namespace) -> None:
        self.cls = CLASSES[cls]
        self.niter = args.niter or self.cls.niter
        n = self.cls.na
        self.t = t
        self.nprows, self.npcols = grid(t.size)
        self.prow, self.pcol = divmod(t.rank, self.npcols)
        cb = [round(k * n / self.npcols) for k in range(self.npcols + 1)]
        step = self.npcols // self.nprows
        rb = cb[::step]
        self.cb, self.rb = cb, rb
        self.c0, self.c1 = cb[self.pcol], cb[self.pcol + 1]
        self.r0, self.r1 = rb[self.prow], rb[self.prow + 1]
        self.l2npcols = int(math.log2(self.npcols))
        self.block = make_block(
            self.cls, self.r0, self.r1, self.c0, self.c1, make_vectors(n, self.cls.nonzer)
        )
        # Transpose exchange: who gets my row sum's pieces, and from whom my column segment comes.
        if self.npcols == self.nprows:
            self.send_to = [(self.pcol * self.npcols + self.prow, 0, self.r1 - self.r0)]
            self.recv_from = self.pcol * self.npcols + self.prow
        else:
            h = self.pcol % 2
            lo = cb[2 * self.prow + h] - self.r0
            hi = cb[2 * self.prow + h + 1] - self.r0
            self.send_to = [((self.pcol // 2) * self.npcols + 2 * self.prow + h, lo, hi)]
            self.recv_from = (self.pcol // 2) * self.npcols + 2 * self.prow + self.pcol % 2
        # NPB's untimed first iteration (page tables, caches); not recorded.
        self.t.rec.enabled = False
        self._outer(np.ones(self.c1 - self.c0))
        self.t.rec.enabled = True

    # ---- communication ------------------------------------------------------------------
    def _rowsum(self, w: np.ndarray, kind: str, tag: int) -> np.ndarray:
        """Sum across the grid row by pairwise exchanges (recursive doubling)."""
        t = self.t
        for s in range(self.l2npcols):
            partner = self.prow * self.npcols + (self.pcol ^ (1 << s))
            req = t.irecv(partner, tag + s, w.size)
            t.send(partner, w, tag + s, kind)
            got = t.wait(req)
            assert got is not None
            w = w + got
        return w

    def _dot(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(self._rowsum(np.array([a @ b]), "dot", 30)[0])

    def _matvec(self, p: np.ndarray) -> np.ndarray:
        w = self._rowsum(self.block @ p, "vector", 10)
        if self.t.size == 1:
            return w
        t = self.t
        _, lo, hi = self.send_to[0]
        # On the diagonal of a square grid the partner is the rank itself: NPB sends
        # anyway (MPI_Send to itself), and so do we -- it is a message in Table 2's count.
        req = t.irecv(self.recv_from, 20, self.c1 - self.c0)
        t.send(self.send_to[0][0], w[lo:hi], 20, "vector")
        got = t.wait(req)
        assert got is not None
        return np.array(got)

    # ---- NPB's conj_grad and outer iteration ------------------------------------------
    def _conj_grad(self, x: np.ndarray) -> tuple[np.ndarray, float]:
        z = np.zeros_like(x)
        r = x.copy()
        p = r.copy()
        rho = self._dot(r, r)
        for _ in range(CGITMAX):
            q = self._matvec(p)
            d = self._dot(p, q)
            alpha = rho / d
            rho0 = rho
            z = z + alpha * p
            r = r - alpha * q
            rho = self._dot(r, r)
            beta = rho / rho0
            p = r + beta * p
        az = self._matvec(z)
        rnorm = math.sqrt(self._dot(x - az, x - az))
        return z, rnorm

    def _outer(self, x: np.ndarray) -> tuple[np.ndarray, float, float]:
        z, rnorm = self._conj_grad(x)
        norms = self._rowsum(np.array([x @ z, z @ z]), "norms", 40)
        zeta = self.cls.shift + 1.0 / norms[0]
        return z / math.sqrt(norms[1]), zeta, rnorm

    def rep(self, t: Transport) -> Rep:
        x = np.ones(self.c1 - self.c0)
        zeta = rnorm = 0.0
        for _ in range(self.niter):
            t.mark("iter")
            x, zeta, rnorm = self._outer(x)
        err = abs(zeta - self.cls.zeta) / self.cls.zeta
        verified = err <= EPSILON if self.niter == self.cls.niter else None
        detail: dict[str, Any] = {
            "zeta": zeta,
            "zeta_reference": self.cls.zeta,
            "relative_error": err,
            "rnorm": rnorm,
            "niter": self.niter,
        }
        return Rep(self.niter, verified, detail)

    def text(self, rep: Rep) -> list[str]:
        d = rep.detail
        return [
            f" Zeta            =  {d['zeta']:.13e}",
            f" Reference zeta  =  {d['zeta_reference']:.13e}",
            f" Error           =  {d['relative_error']:.3e}",
        ]


main = entry(CG())

if __name__ == "__main__":
    main()
