"""NPB SP-like: ADI with scalar pentadiagonal line solves over a multipartition.

The shared structure (problem, multipartition, faces, self-check) is in
``apps.npb.adi``. SP's implicit factor along each axis is, per component,
I - dt nu_c w delta^2 / h^2 + dssp delta^4: a scalar pentadiagonal system
per grid line (tridiagonal next to the boundary, where NPB also drops the
fourth difference). Components 0-2 share one system, 3 and 4 have their
own (nu x 1.3 and x 0.7), as NPB's lhs, lhsp and lhsm. Elimination without
pivoting (the rows are diagonally dominant: dssp <= 1/4); the forward carry
to the next cell is the last two eliminated rows (2 x (3 x 2 coefficients +
5 right-hand sides) = 22 doubles per line, as NPB's SP), the backward carry
the solution at the cell's first two points (10 doubles).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from apps.npb.adi import DSSP, AdiKernel, Cell
from apps.npb.runner import entry

NU = np.array([1.0, 1.3, 0.7])  # per system
GROUP = np.array([0, 0, 0, 1, 2])  # component -> system
NU_C = NU[GROUP]


class SP(AdiKernel):
    name = "sp"
    steps_default: ClassVar[dict[str, int]] = {"S": 100, "W": 400, "A": 400}
    grid_n: ClassVar[dict[str, int]] = {"S": 12, "W": 36, "A": 64}
    fwd_width = 22
    bwd_width = 10

    def diffusion(self, cell: Cell, d2: np.ndarray) -> np.ndarray:
        out: np.ndarray = cell.w * NU_C[:, None, None, None] * d2
        return out

    def forward(
        self, cell: Cell, d: int, r: np.ndarray, carry: np.ndarray | None
    ) -> tuple[Any, np.ndarray]:
        L, N, _ = r.shape
        kind = self.row_kind(cell, d)
        s = self.dt * NU[:, None, None] * self.line_w(cell, d)[None] / self.h**2  # (3, L, N)
        dp = np.zeros((L, 3, N))
        ep = np.zeros((L, 3, N))
        rp = np.zeros((L, N, 5))
        if carry is not None:
            cr = carry.reshape(N, 2, 11)
            rows = [
                (cr[:, k, 0:3].T.copy(), cr[:, k, 3:6].T.copy(), cr[:, k, 6:11].copy())
                for k in range(2)
            ]
        else:
            z3, z5 = np.zeros((3, N)), np.zeros((N, 5))
            rows = [(z3, z3, z5), (z3, z3, z5)]
        for i in range(L):
            (dp2, ep2, rp2), (dp1, ep1, rp1) = rows[-2], rows[-1]
            si = s[:, i]
            if kind[i] == 0:
                a = b = dd = e = np.zeros_like(si)
                c = np.ones_like(si)
            elif kind[i] == 1:
                a = e = np.zeros_like(si)
                b = dd = -si
                c = 1.0 + 2.0 * si
            else:
                a = e = np.full_like(si, DSSP)
                b = dd = -si - 4.0 * DSSP
                c = 1.0 + 2.0 * si + 6.0 * DSSP
            b1 = b - a * dp2
            c1 = c - a * ep2
            r1 = r[i] - a[GROUP].T * rp2
            c2 = c1 - b1 * dp1
            d2 = dd - b1 * ep1
            r2 = r1 - b1[GROUP].T * rp1
            dp[i], ep[i], rp[i] = d2 / c2, e / c2, r2 / c2[GROUP].T
            rows.append((dp[i], ep[i], rp[i]))
        out = np.concatenate(
            [
                np.concatenate([rows[k][0].T, rows[k][1].T, rows[k][2]], axis=1)[:, None, :]
                for k in (-2, -1)
            ],
            axis=1,
        ).reshape(N, 22)
        return (dp, ep, rp), out

    def backward(
        self, cell: Cell, d: int, factors: Any, nxt: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        dp, ep, rp = factors
        L, N, _ = rp.shape
        x = np.empty_like(rp)
        if nxt is not None:
            nx2 = nxt.reshape(N, 2, 5)
            x1, x2 = nx2[:, 0], nx2[:, 1]  # x_{i+1}, x_{i+2}
        else:
            x1 = x2 = np.zeros((N, 5))
        for i in range(L - 1, -1, -1):
            x[i] = rp[i] - dp[i][GROUP].T * x1 - ep[i][GROUP].T * x2
            x1, x2 = x[i], x1
        first = np.stack([x[0], x[1]], axis=1).reshape(N, 10)
        return x, first


main = entry(SP())

if __name__ == "__main__":
    main()
