"""NPB BT-like: ADI with block-tridiagonal (5x5) line solves over a multipartition.

The shared structure (problem, multipartition, faces, self-check) is in
``apps.npb.adi``. BT's implicit factor along each axis is
I - dt (w K delta^2 / h^2 + M / 3): per grid line a block-tridiagonal system
with full 5x5 blocks that vary along the line (w does), solved by block
Thomas elimination. The forward carry to the next cell is, per line, the
eliminated super-diagonal block and right-hand side (25 + 5 doubles, as
NPB's BT); the backward carry is the solution at the cell's first point
(5 doubles).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from apps.npb.adi import AdiKernel, Cell, M
from apps.npb.runner import entry

K = np.eye(5) + 0.1 * (np.ones((5, 5)) - np.eye(5))  # SPD: eigenvalues 1.4 and 0.9


class BT(AdiKernel):
    name = "bt"
    steps_default: ClassVar[dict[str, int]] = {"S": 60, "W": 200, "A": 200}
    grid_n: ClassVar[dict[str, int]] = {"S": 12, "W": 24, "A": 64}
    fwd_width = 30
    bwd_width = 5

    def diffusion(self, cell: Cell, d2: np.ndarray) -> np.ndarray:
        out: np.ndarray = cell.w * np.einsum("ij,j...->i...", K, d2)
        return out

    def forward(
        self, cell: Cell, d: int, r: np.ndarray, carry: np.ndarray | None
    ) -> tuple[Any, np.ndarray]:
        L, N, _ = r.shape
        kind = self.row_kind(cell, d)
        s = self.dt * self.line_w(cell, d) / self.h**2  # (L, N)
        eye = np.eye(5)
        cp = np.zeros((L, N, 5, 5))
        dp = np.zeros((L, N, 5))
        prev_c = prev_d = None
        if carry is not None:
            prev_c = carry[:, :25].reshape(N, 5, 5)
            prev_d = carry[:, 25:]
        for i in range(L):
            if kind[i] == 0:  # boundary row: du = 0
                prev_c, prev_d = cp[i], dp[i]
                continue
            si = s[i][:, None, None]
            a = -si * K  # (N, 5, 5); the super-diagonal block is the same
            b = eye + 2.0 * si * K - self.dt * M / 3.0
            rr = r[i]
            if prev_c is not None and prev_d is not None:
                b = b - a @ prev_c
                rr = rr - np.einsum("nij,nj->ni", a, prev_d)
            sol = np.linalg.solve(b, np.concatenate([a, rr[:, :, None]], axis=2))
            cp[i], dp[i] = sol[:, :, :5], sol[:, :, 5]
            prev_c, prev_d = cp[i], dp[i]
        out = np.concatenate([cp[L - 1].reshape(N, 25), dp[L - 1]], axis=1)
        return (cp, dp), out

    def backward(
        self, cell: Cell, d: int, factors: Any, nxt: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        cp, dp = factors
        L, N = dp.shape[:2]
        x = np.empty_like(dp)
        ahead = nxt if nxt is not None else np.zeros((N, 5))
        for i in range(L - 1, -1, -1):
            x[i] = dp[i] - np.einsum("nij,nj->ni", cp[i], ahead)
            ahead = x[i]
        return x, x[0].copy()


main = entry(BT())

if __name__ == "__main__":
    main()
