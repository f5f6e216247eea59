"""NPB FT: a 3-D PDE (u_t = alpha * laplacian u) solved spectrally with 3-D FFTs.

Problem (NPB report RNR-94-007 §2.5, NPB 3.x ``ft``): a complex field of
nx x ny x nz random numbers from ``randlc`` (seed 314159265, real and
imaginary parts alternating, x fastest), transformed once; iteration t
multiplies the spectrum by exp(-4 alpha pi^2 |k|^2) again (so by
exp(-4 alpha pi^2 |k|^2 t) in all), transforms it back and takes the
checksum sum_{j=1}^{1024} u(j mod nx, 3j mod ny, 5j mod nz) / (nx ny nz).
Verified when every iteration's checksum is within 1e-12 of NPB's (real
and imaginary part, shared/npb-reference.md). The forward FFT of the
initial field is part of each repetition, as in NPB's timed region.

Decomposition: pencils on a p1 x p2 rank grid (p1 = 2^floor(log2(p)/2)),
as NPB's 2-D layout. A rank holds x-pencils (all of x, a slice of y and z);
a 3-D FFT is an x-FFT, an all-to-all inside the grid row (x chunks for y
slices) and a y-FFT, an all-to-all inside the grid column and a z-FFT --
two Alltoall calls per transform, each a transpose. The checksum is a local
sum and an MPI_Reduce of one complex number to rank 0. With p1 = 1 (one or
two ranks) the row transpose is a local copy and sends nothing.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.fft as sfft

from apps.npb import NpbError
from apps.npb.randdp import SEED, skip, vranlc
from apps.npb.runner import Kernel, Rep, entry
from apps.npb.transport import Transport

ALPHA = 1e-6
EPSILON = 1e-12


@dataclass(frozen=True)
class FtClass:
    nx: int
    ny: int
    nz: int
    niter: int
    checksums: tuple[complex, ...]


CLASSES = {
    "S": FtClass(
        64,
        64,
        64,
        6,
        (
            complex(5.546087004964e02, 4.845363331978e02),
            complex(5.546385409189e02, 4.865304269511e02),
            complex(5.546148406171e02, 4.883910722336e02),
            complex(5.545423607415e02, 4.901273169046e02),
            complex(5.544255039624e02, 4.917475857993e02),
            complex(5.542683411902e02, 4.932597244941e02),
        ),
    ),
    "W": FtClass(
        128,
        128,
        32,
        6,
        (
            complex(5.673612178944e02, 5.293246849175e02),
            complex(5.631436885271e02, 5.282149986629e02),
            complex(5.594024089970e02, 5.270996558037e02),
            complex(5.560698047020e02, 5.260027904925e02),
            complex(5.530898991250e02, 5.249400845633e02),
            complex(5.504159734538e02, 5.239212247086e02),
        ),
    ),
    "A": FtClass(256, 256, 128, 6, ()),  # no reference values here: not verified
}


def pgrid(size: int) -> tuple[int, int]:
    p1 = 1 << (int(math.log2(size)) // 2)
    return p1, size // p1


def _kbar(n: int, lo: int, hi: int) -> np.ndarray:
    i = np.arange(lo, hi)
    return ((i + n // 2) % n) - n // 2


class FT(Kernel):
    name = "ft"

    def add_args(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument(
            "--niter",
            type=int,
            default=None,
            metavar="N",
            help="time steps per repetition (default NPB's 6; fewer are verified step by step)",
        )

    def check_args(self, args: argparse.Namespace, ranks: int) -> None:
        c = CLASSES[args.cls]
        p1, p2 = pgrid(ranks)
        if c.nx % p1 or c.ny % p1 or c.ny % p2 or c.nz % p2:
            raise NpbError(
                f"FT class {args.cls} ({c.nx}x{c.ny}x{c.nz}) cannot be split over a "
                f"{p1}x{p2} rank grid",
                fix="use fewer ranks",
            )
        if args.niter is not None and args.niter < 1:
            raise NpbError(f"--niter must be >= 1, got {args.niter}")

    def setup(self, t: Transport, cls: str, args: argparse.Namespace) -> None:
        c = self.c = CLASSES[cls]
        self.niter = args.niter or c.niter
        self.t = t
        self.p1, self.p2 = pgrid(t.size)
        self.a, self.b = t.rank % self.p1, t.rank // self.p1  # y-slice / x-chunk, z-slice
        self.row = t.split(self.b, self.a) if self.p1 > 1 else None  # same z slice
        self.col = t.split(self.a, self.b) if self.p2 > 1 else None  # same x chunk
        self.Y, self.Z = c.ny // self.p1, c.nz // self.p2  # x-pencil extents
        self.Xc, self.Yc = c.nx // self.p1, c.ny // self.p2  # z-pencil extents
        # Twiddle in the z-pencil layout: all z, y-chunk b, x-chunk a.
        kz = _kbar(c.nz, 0, c.nz)[:, None, None]
        ky = _kbar(c.ny, self.b * self.Yc, (self.b + 1) * self.Yc)[None, :, None]
        kx = _kbar(c.nx, self.a * self.Xc, (self.a + 1) * self.Xc)[None, None, :]
        self.twiddle = np.exp(-4.0 * ALPHA * math.pi**2 * (kx**2 + ky**2 + kz**2))
        # Checksum points in my x-pencil.
        j = np.arange(1, 1025)
        q, r, s = j % c.nx, (3 * j) % c.ny, (5 * j) % c.nz
        y0, z0 = self.a * self.Y, self.b * self.Z
        mine = (r >= y0) & (r < y0 + self.Y) & (s >= z0) & (s < z0 + self.Z)
        self.chk_idx = (s[mine] - z0, r[mine] - y0, q[mine])

    def initial(self) -> np.ndarray:
        """NPB ``compute_initial_conditions`` for my x-pencil (z slice b, y slice a)."""
        c = self.c
        u = np.empty((self.Z, self.Y, c.nx), dtype=np.complex128)
        y0 = self.a * self.Y
        for zz in range(self.Z):
            z = self.b * self.Z + zz
            off = 2 * c.nx * (y0 + c.ny * z)
            r = vranlc(2 * c.nx * self.Y, skip(SEED, off))
            u[zz] = (r[0::2] + 1j * r[1::2]).reshape(self.Y, c.nx)
        return u

    # ---- transposes ---------------------------------------------------------------------
    def _x_to_y(self, u: np.ndarray) -> np.ndarray:
        Z, Y, p1, Xc = self.Z, self.Y, self.p1, self.Xc
        blocks = u.reshape(Z, Y, p1, Xc).transpose(2, 0, 1, 3)
        got = self.row.alltoall(blocks, "transpose") if self.row else blocks
        return got.transpose(1, 0, 2, 3).reshape(Z, p1 * Y, Xc)

    def _y_to_z(self, u: np.ndarray) -> np.ndarray:
        Z, p2, Yc, Xc = self.Z, self.p2, self.Yc, self.Xc
        blocks = u.reshape(Z, p2, Yc, Xc).transpose(1, 0, 2, 3)
        got = self.col.alltoall(blocks, "transpose") if self.col else blocks
        return got.reshape(p2 * Z, Yc, Xc)

    def _z_to_y(self, u: np.ndarray) -> np.ndarray:
        Z, p2, Yc, Xc = self.Z, self.p2, self.Yc, self.Xc
        blocks = u.reshape(p2, Z, Yc, Xc)
        got = self.col.alltoall(blocks, "transpose") if self.col else blocks
        return got.transpose(1, 0, 2, 3).reshape(Z, p2 * Yc, Xc)

    def _y_to_x(self, u: np.ndarray) -> np.ndarray:
        Z, Y, p1, Xc = self.Z, self.Y, self.p1, self.Xc
        blocks = u.reshape(Z, p1, Y, Xc).transpose(1, 0, 2, 3)
        got = self.row.alltoall(blocks, "transpose") if self.row else blocks
        return got.transpose(1, 2, 0, 3).reshape(Z, Y, p1 * Xc)

    def forward(self, u: np.ndarray) -> np.ndarray:
        """x-pencils -> spectrum in z-pencils (unnormalised, exp(-i...))."""
        u = sfft.fft(u, axis=2)
        u = sfft.fft(self._x_to_y(u), axis=1)
        out: np.ndarray = sfft.fft(self._y_to_z(u), axis=0)
        return out

    def inverse(self, u: np.ndarray) -> np.ndarray:
        """z-pencil spectrum -> x-pencils, unnormalised (NPB divides in the checksum)."""
        n = self.c.nx * self.c.ny * self.c.nz
        u = sfft.ifft(u, axis=0)
        u = sfft.ifft(self._z_to_y(u), axis=1)
        out: np.ndarray = sfft.ifft(self._y_to_x(u), axis=2) * n
        return out

    def rep(self, t: Transport) -> Rep:
        c = self.c
        spec = self.forward(self.initial())
        sums: list[complex] = []
        for _ in range(self.niter):
            t.mark("iter")
            spec = spec * self.twiddle
            u = self.inverse(spec)
            local = np.array([u[self.chk_idx].sum()], dtype=np.complex128)
            tot = t.reduce(local, "sum", 0, "checksum")
            sums.append(complex(tot[0]) / (c.nx * c.ny * c.nz) if tot is not None else 0j)
        errs = []
        for got, ref in zip(sums, c.checksums, strict=False):
            errs.append(
                max(
                    abs(got.real - ref.real) / abs(ref.real),
                    abs(got.imag - ref.imag) / abs(ref.imag),
                )
            )
        verified: bool | None = all(e <= EPSILON for e in errs) if c.checksums else None
        if t.rank != 0:
            verified = None  # only rank 0 has the sums; the report is rank 0's
        detail: dict[str, Any] = {
            "checksums": [[z.real, z.imag] for z in sums],
            "relative_errors": errs,
        }
        return Rep(self.niter, verified, detail)

    def text(self, rep: Rep) -> list[str]:
        out = []
        for i, (re, im) in enumerate(rep.detail["checksums"], start=1):
            err = rep.detail["relative_errors"]
            e = f"  err {err[i - 1]:.2e}" if i <= len(err) else ""
            out.append(f" T = {i:2d}  Checksum = {re:22.12e} {im:22.12e}{e}")
        return out


main = entry(FT())

if __name__ == "__main__":
    main()
