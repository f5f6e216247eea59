"""NPB-like kernels: BT, SP, FT, IS and CG (Yu & Byun 2011 §5.2, Tables 2–3; docs/apps.md).

One module per kernel, each computing the real thing over a thin transport
interface (``apps.npb.transport``) that runs over our message library
(``apps.mp``) or over real MPI (mpi4py). CG, FT and IS compute NPB's problems
(NPB's random generator, ``apps.npb.randdp``) and pass NPB's verification;
BT and SP follow the ADI structure (block-tridiagonal / scalar-pentadiagonal
line solves in x, y and z over a multipartition) and check themselves.

``KERNELS`` is the table other parts read (``cosched app list/run``): the
allowed rank rule, the classes, the Table 2 pattern and its message-size
shares. Run one as ``python -m apps.npb.<name> --ranks R --class S
--transport ours|mpi``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

# One rank is one thread, as one MPI process of Yu & Byun 2011 was one CPU: numpy's BLAS
# must not start a thread pool in every rank (set before numpy is first imported).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from common.errors import CoschedError  # noqa: E402 - after the thread settings


@dataclass(frozen=True)
class Table2Entry:
    """One message-size group of Yu & Byun 2011 Table 2 (16 processes, class A).

    ``kinds``: the kernel's send categories that make up this group (each
    send a kernel makes is labelled with one; see docs/apps.md for why the
    comparison is by category, not by byte count).
    """

    label: str  # as printed in Table 2, e.g. "28 K"
    share: float  # percent of messages
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class KernelInfo:
    """What ``cosched app list/run`` needs to know about one kernel."""

    name: str
    module: str  # python -m <module>
    rank_rule: str  # "square" or "power2"
    classes: tuple[str, ...]
    description: str
    intensity: str  # Table 2 "Comm. Intensity"
    pattern: str  # Table 2 "Comm. Pattern": NN (nearest neighbour) or AA (all-to-all)
    routines: tuple[str, ...]  # Table 2 "MPI Routines"
    table2: tuple[Table2Entry, ...]
    verification: str  # what "VERIFIED" means for this kernel

    def allows(self, ranks: int) -> bool:
        return rank_allowed(self.rank_rule, ranks)

    def allowed_ranks(self, limit: int = 64) -> list[int]:
        return [n for n in range(1, limit + 1) if self.allows(n)]

    def rank_argv(
        self,
        python: str,
        cls: str = "S",
        transport: str = "ours",
        duration: float | None = None,
        extra: tuple[str, ...] = (),
    ) -> list[str]:
        """The command of one rank of a job (cosched submit / mpirun start R of them)."""
        argv = [python, "-m", self.module, "--class", cls, "--transport", transport]
        if duration is not None:
            argv += ["--duration", f"{duration:g}"]
        return argv + list(extra)


def rank_allowed(rule: str, ranks: int) -> bool:
    if ranks < 1:
        return False
    if rule == "square":
        return math.isqrt(ranks) ** 2 == ranks
    if rule == "power2":
        return ranks & (ranks - 1) == 0
    raise ValueError(f"unknown rank rule {rule!r}")


KERNELS: dict[str, KernelInfo] = {
    "bt": KernelInfo(
        name="bt",
        module="apps.npb.bt",
        rank_rule="square",
        classes=("S", "W", "A"),
        description="block-tridiagonal ADI solver (5x5 blocks) on a multipartitioned 3-D grid",
        intensity="low",
        pattern="NN",
        routines=("MPI_Isend", "MPI_Irecv", "MPI_Wait"),
        table2=(
            Table2Entry("11 K", 37.0, ("backward",)),
            Table2Entry("61 K", 26.0, ("faces",)),
            Table2Entry("69 K", 37.0, ("forward",)),
        ),
        verification="residual and error norms reproduced by a serial run of the same code",
    ),
    "sp": KernelInfo(
        name="sp",
        module="apps.npb.sp",
        rank_rule="square",
        classes=("S", "W", "A"),
        description="scalar-pentadiagonal ADI solver on a multipartitioned 3-D grid",
        intensity="medium",
        pattern="NN",
        routines=("MPI_Isend", "MPI_Irecv", "MPI_Wait"),
        table2=(
            Table2Entry("18 K - 20 K", 37.0, ("backward",)),
            Table2Entry("39 K - 45 K", 37.0, ("forward",)),
            Table2Entry("61 K", 26.0, ("faces",)),
        ),
        verification="residual and error norms reproduced by a serial run of the same code",
    ),
    "ft": KernelInfo(
        name="ft",
        module="apps.npb.ft",
        rank_rule="power2",
        classes=("S", "W", "A"),
        description="3-D FFT PDE solver (NPB FT), pencil decomposition with all-to-all transposes",
        intensity="medium",
        pattern="AA",
        routines=("MPI_Alltoall", "MPI_Reduce"),
        table2=(
            Table2Entry("8", 33.0, ("checksum",)),
            Table2Entry("1048 K", 66.0, ("transpose",)),
        ),
        verification="NPB checksums of every iteration within 1e-12",
    ),
    "is": KernelInfo(
        name="is",
        module="apps.npb.is_",
        rank_rule="power2",
        classes=("S", "W", "A"),
        description="integer sort (NPB IS): bucket sizes allreduce, all-to-all key exchange",
        intensity="high",
        pattern="AA",
        routines=("MPI_Allreduce", "MPI_Alltoall", "MPI_Alltoallv"),
        table2=(
            Table2Entry("4", 33.0, ("counts",)),
            Table2Entry("4 K", 33.0, ("buckets",)),
            Table2Entry("65 K", 33.0, ("keys",)),
        ),
        verification="NPB partial verification every iteration and full verification",
    ),
    "cg": KernelInfo(
        name="cg",
        module="apps.npb.cg",
        rank_rule="power2",
        classes=("S", "W", "A"),
        description="conjugate gradient, inverse power method (NPB CG), 2-D matrix decomposition",
        intensity="high",
        pattern="NN",
        routines=("MPI_Send", "MPI_Irecv", "MPI_Wait"),
        table2=(
            Table2Entry("8", 56.5, ("dot",)),
            Table2Entry("16", 1.1, ("norms",)),
            Table2Entry("28 K", 42.4, ("vector",)),
        ),
        verification="NPB zeta within 1e-10",
    ),
}


class NpbError(CoschedError):
    """Bad input to a kernel (rank count, class, parameter): one line, exit 2."""

    exit_code = 2


def kernel(name: str) -> KernelInfo:
    info = KERNELS.get(name.lower())
    if info is None:
        raise NpbError(
            f"unknown NPB kernel {name!r}", fix=f"choose one of {', '.join(sorted(KERNELS))}"
        )
    return info


def check_ranks(name: str, ranks: int) -> None:
    """One clear error for a rank count the kernel cannot use (before anything starts)."""
    info = kernel(name)
    if not info.allows(ranks):
        what = "a square number" if info.rank_rule == "square" else "a power of two"
        raise NpbError(
            f"{info.name.upper()} cannot run on {ranks} ranks: it needs {what}",
            fix=f"use one of {', '.join(map(str, info.allowed_ranks(16)))}, ...",
        )


def check_class(name: str, cls: str) -> str:
    info = kernel(name)
    up = cls.upper()
    if up not in info.classes:
        raise NpbError(
            f"{info.name.upper()} has no class {cls!r}",
            fix=f"use --class one of {', '.join(info.classes)}",
        )
    return up


def table2_shares(name: str, kinds: dict[str, int]) -> list[tuple[Table2Entry, float]]:
    """Measured share (percent of all recorded sends) of each Table 2 group."""
    total = sum(kinds.values())
    out = []
    for e in kernel(name).table2:
        n = sum(kinds.get(k, 0) for k in e.kinds)
        out.append((e, 100.0 * n / total if total else 0.0))
    return out


__all__ = [
    "KERNELS",
    "KernelInfo",
    "NpbError",
    "Table2Entry",
    "check_class",
    "check_ranks",
    "kernel",
    "rank_allowed",
    "table2_shares",
]
