"""The command-line side of a sweep: its flags, a spec's ``[executor]`` table, the options.

Every command that runs a study's simulated runs adds the same flags with
:func:`add_sweep_args` and turns them into :class:`SweepOptions` with
:func:`options_from`. The command line wins over the spec's ``[executor]``
table, which wins over the defaults (local processes, one per core; the
study's result store)::

    [executor]
    workers = 4                      # local worker processes
    # dask = "tcp://head:8786"       # or a Dask scheduler (docs/sweeps.md)
    # timeout = 10                   # seconds to reach it
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

from testbed.sweep import SweepOptions, check_options
from testbed.sweep.errors import SweepUsageError

TABLE: dict[str, type | tuple[type, ...]] = {"workers": int, "dask": str, "timeout": (int, float)}


def add_sweep_args(parser: argparse.ArgumentParser, *, store: bool = True) -> None:
    """``--workers``, ``--dask`` and, for commands that keep results, ``--force``, ``--store``."""
    g = parser.add_argument_group("where simulated runs execute (docs/sweeps.md)")
    g.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="local worker processes (default: the spec's [executor], else one per core)",
    )
    g.add_argument(
        "--dask",
        default=None,
        metavar="ADDRESS",
        help="run on a Dask cluster instead, e.g. tcp://head:8786",
    )
    if store:
        g.add_argument("--force", action="store_true", help="rerun runs whose results are stored")
        g.add_argument(
            "--store",
            type=Path,
            default=None,
            metavar="PATH",
            help="the result store (SQLite; default OUT/runs.sqlite)",
        )


def spec_table(path: str | Path) -> dict[str, Any] | None:
    """The ``[executor]`` table of a TOML spec, or None (an unreadable spec is the study's to
    report)."""
    try:
        doc = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    table = doc.get("executor")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise SweepUsageError(
            f"{path}: [executor] must be a table", fix="e.g. [executor] then workers = 4"
        )
    return table


def options_from(
    args: argparse.Namespace,
    spec_table: dict[str, Any] | None = None,
    *,
    store: Path | None = None,
    desc: str = "runs",
    where: str = "[executor]",
) -> SweepOptions:
    """The options for these flags and this ``[executor]`` table (checked: one line if bad).

    ``store`` is the study's default result store (``--store`` overrides it).
    """
    table = dict(spec_table or {})
    for k, v in table.items():
        want = TABLE.get(k)
        if want is None:
            raise SweepUsageError(f"{where}.{k}: unknown field", fix=f"one of {', '.join(TABLE)}")
        if not isinstance(v, want) or isinstance(v, bool):
            raise SweepUsageError(
                f"{where}.{k}: wrong type ({v!r})",
                fix='e.g. workers = 4, dask = "tcp://head:8786", timeout = 10',
            )
    cli_workers = getattr(args, "workers", None)
    cli_dask = getattr(args, "dask", None)
    if cli_workers is not None and cli_dask is not None:
        raise SweepUsageError(
            "--workers and --dask: give one (--workers counts local processes; "
            "with --dask the cluster's workers run)",
            fix="drop one of them",
        )
    if cli_workers is not None or cli_dask is not None:
        workers, dask = cli_workers, cli_dask  # the command line replaces the table
    else:
        workers, dask = table.get("workers"), table.get("dask")
        if workers is not None and workers < 1:
            raise SweepUsageError(
                f"{where}.workers = {workers}: a sweep needs at least one worker",
                fix="write workers = 1 or more, or leave it out (one per core)",
            )
    if workers is not None and dask is not None:
        raise SweepUsageError(f"{where}: workers and dask both given", fix="keep one of them")
    options = SweepOptions(
        workers=workers,  # None: one per core
        dask=dask,
        force=bool(getattr(args, "force", False)),
        progress=not getattr(args, "quiet", False),
        desc=desc,
        store=getattr(args, "store", None) or store,
        connect_timeout=float(table.get("timeout", 10.0)),
    )
    check_options(options)
    if dask is not None:
        from testbed.sweep.daskpool import check_address

        options.dask = check_address(dask)
    return options


def forward(args: argparse.Namespace) -> list[str]:
    """The sweep flags of ``args`` as arguments again (for a command that hands on)."""
    out: list[str] = []
    if getattr(args, "workers", None) is not None:
        out += ["--workers", str(args.workers)]
    if getattr(args, "dask", None) is not None:
        out += ["--dask", args.dask]
    if getattr(args, "force", False):
        out.append("--force")
    if getattr(args, "store", None) is not None:
        out += ["--store", str(args.store)]
    return out


def given(args: argparse.Namespace) -> list[str]:
    """The sweep flags given (for a command that must refuse or ignore them)."""
    names = ("workers", "dask", "force", "store")
    return [f"--{n}" for n in names if getattr(args, n, None) not in (None, False)]
