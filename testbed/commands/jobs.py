"""``cosched submit|jobs|matrix|slice|kill|class``: the users' side of the controller.

This is gangster's role in Gorda & Brooks 1991 §3: users submit jobs, watch the matrix
and their jobs, change a job's class and ask ``slice`` where a new job would
get 100 % of its nodes. Everything goes through the controller API
(docs/controller-api.md) with :class:`controller.client.ControllerClient`
(see ``_api``); the views are :mod:`testbed.views`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from typing import Any

from common.names import CLASSES
from testbed import views

from . import command_parser
from ._api import CliError, call, common_options, json_arg, print_json

DEFAULT_WATCH = 2.0
SPEC_KEYS = frozenset(
    {"name", "size", "argv", "class", "env", "cwd", "estimate", "exclusive", "run_as"}
)
_CLEAR = "\033[H\033[2J"  # cursor home + clear screen, as watch(1) does


# -- watch -------------------------------------------------------------------


def watch(args: argparse.Namespace, title: str, draw: Callable[[], str]) -> int:
    """Redraw ``draw()`` every ``args.watch`` seconds until Ctrl-C, like watch(1)."""
    every = float(args.watch)
    try:
        while True:
            try:
                body = draw()
            except CliError as exc:
                # Keep watching through a controller restart; say what is wrong meanwhile.
                body = f"cosched: {exc}\n"
            stamp = time.strftime("%H:%M:%S")
            sys.stdout.write(f"{_CLEAR}every {every:g}s: {title}    {stamp}\n\n{body}")
            sys.stdout.flush()
            time.sleep(every)
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        return 0


def _watch_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--watch",
        "-w",
        nargs="?",
        type=_positive_float,
        const=DEFAULT_WATCH,
        default=None,
        metavar="SECS",
        help=f"redraw every SECS seconds (default {DEFAULT_WATCH:g}) until Ctrl-C",
    )


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"want a positive number of seconds, got {text!r}")
    return value


# -- the job spec ----------------------------------------------------------------


def _parse_env(items: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--env wants KEY=VALUE, got {item!r}", fix="e.g. --env OMP_THREADS=1")
        env[key] = value
    return env


def _load_spec(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise CliError(f"cannot read --spec {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CliError(f"--spec {path} is not valid TOML: {exc}") from None
    spec = data.get("job", data)  # either a [job] table or top-level keys
    if not isinstance(spec, dict):
        raise CliError(f"--spec {path}: [job] must be a table")
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise CliError(f"--spec {path}: unknown keys {unknown}; known: {sorted(SPEC_KEYS)}")
    if isinstance(spec.get("argv"), str):
        spec["argv"] = shlex.split(spec["argv"])
    return dict(spec)


def build_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The ``submit`` spec: the ``--spec`` file, then flags on top, then the command."""
    spec = _load_spec(args.spec) if args.spec else {}
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if argv:
        spec["argv"] = argv
    for key, value in (
        ("size", args.size),
        ("class", args.job_class),
        ("name", args.name),
        ("estimate", args.estimate),
        ("cwd", args.cwd),
        ("run_as", args.run_as),
    ):
        if value is not None:
            spec[key] = value
    if args.exclusive:
        spec["exclusive"] = True
    if args.env:
        spec["env"] = {**spec.get("env", {}), **_parse_env(args.env)}
    if not spec.get("argv"):
        raise CliError(
            "nothing to run: give the command after '--' or argv in --spec",
            fix="e.g. cosched submit --size 2 -- ./prog",
        )
    if not isinstance(spec["argv"], list) or not all(isinstance(a, str) for a in spec["argv"]):
        raise CliError("argv must be a list of strings")
    if getattr(args, "mpi", False):
        if shutil.which("mpirun") is None:
            raise CliError(
                "--mpi: mpirun is not installed",
                fix="install Open MPI (apt-get install openmpi-bin libopenmpi-dev)",
            )
        # rank 0 runs mpirun over the job's nodes, the others start its daemons
        spec["argv"] = [sys.executable, "-m", "apps.mpilaunch", "--", *spec["argv"]]
    spec.setdefault("size", 1)
    if not isinstance(spec["size"], int) or spec["size"] < 1:
        raise CliError(f"size must be a whole number >= 1, got {spec['size']!r}")
    if "cwd" not in spec and not args.tcp:
        # Local nodes share this host's file system: run where the user stands.
        spec["cwd"] = os.getcwd()
    return spec


# -- commands ----------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit a job."""
    spec = build_spec(args)
    result = call(args, "submit", spec=spec)
    job_id = result["job_id"] if isinstance(result, dict) else result
    if args.quiet:
        print(job_id)
    else:
        nodes = f"{spec['size']} node{'s' if spec['size'] != 1 else ''}"
        print(f"submitted job {job_id} ({nodes}): {shlex.join(spec['argv'])}")
    return 0


def _policy_line(args: argparse.Namespace) -> str:
    """The controller's policy (and MPL and scheme under CDC), or nothing if status fails."""
    try:
        status = call(args, "status")
    except CliError:
        return ""
    return views.render_policy(status) + "\n" if isinstance(status, dict) else ""


def cmd_jobs(args: argparse.Namespace) -> int:
    """List jobs."""

    def draw() -> str:
        table = views.render_jobs(call(args, "jobs", all=args.all))
        return _policy_line(args) + table

    if args.json:
        print_json(call(args, "jobs", all=args.all))
        return 0
    if args.watch:
        return watch(args, "cosched jobs" + (" --all" if args.all else ""), draw)
    sys.stdout.write(draw())
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    """Show the Ousterhout matrix."""

    def draw() -> str:
        return views.render_matrix(call(args, "matrix"))

    if args.json:
        print_json(call(args, "matrix"))
        return 0
    if args.watch:
        return watch(args, "cosched matrix", draw)
    sys.stdout.write(draw())
    return 0


def cmd_slice(args: argparse.Namespace) -> int:
    """gangster's slice."""
    req: dict[str, Any] = {} if args.size is None else {"size": args.size}
    result = call(args, "slice", **req)
    if args.json:
        print_json(result)
        return 0
    names: list[str] | None = None
    try:
        status = call(args, "status")
        width = len(result["packed"][0]) if result.get("packed") else None
        nodes = status.get("nodes") if isinstance(status, dict) else None
        if isinstance(nodes, list) and (width is None or len(nodes) == width):
            names = [str(n) for n in nodes]
    except CliError:
        pass  # node names are a nicety; indices still tell where the hole is
    sys.stdout.write(views.render_slice(result, args.size, nodes=names))
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    """Kill a job."""
    result = call(args, "kill", job_id=args.job)
    state = result.get("state") if isinstance(result, dict) else result
    print(f"job {args.job}: {state}")
    return 0


def cmd_class(args: argparse.Namespace) -> int:
    """Change a job's class."""
    result = call(args, "class", job_id=args.job, **{"class": args.job_class})
    new = result.get("class") if isinstance(result, dict) else result
    print(f"job {args.job}: class {new}")
    return 0


# -- registration ---------------------------------------------------------------


def add_commands(subparsers: Any) -> None:
    """Register submit, jobs, matrix, slice, kill and class on ``subparsers``."""
    common = [common_options()]
    p = command_parser(
        subparsers,
        "submit",
        "submit a parallel job (a gang of SIZE ranks)",
        "Submit a job to the controller. Rank i of the job runs CMD on the i-th node of its "
        "placement with COSCHED_JOB, COSCHED_RANK, COSCHED_SIZE, COSCHED_RANK0_ADDR, "
        "COSCHED_PORT and COSCHED_NODE set. Classes (Gorda & Brooks 1991): interactive is served "
        "first "
        "and demoted to production after the operator's interactive_limit; standby runs only "
        "on idle cycles; benchmark gets its nodes to itself. Locally the job runs in the "
        "current directory unless --cwd says otherwise. Prints the job id.",
        "  cosched submit --size 4 -- python -m apps.synthetic --gcomp 2500000\n"
        "  cosched submit --size 4 --class standby --name io -- "
        "python -m apps.synthetic --gcomp 0 --gio 20\n"
        "  cosched submit --spec job.toml          # [job] size=4 argv=['./prog'] class=...\n"
        "  id=$(cosched submit -q --size 2 -- ./prog) && cosched kill $id\n"
        "  cosched submit --size 4 --mpi -- python3 my_mpi4py_program.py   # unmodified MPI",
        common,
    )
    p.add_argument("--size", "-n", type=int, default=None, metavar="K", help="ranks (default 1)")
    p.add_argument(
        "--class",
        dest="job_class",
        choices=CLASSES,
        default=None,
        help="job class (default: the controller's, production)",
    )
    p.add_argument("--name", default=None, metavar="N", help="a name shown in 'cosched jobs'")
    p.add_argument(
        "--estimate",
        type=float,
        default=None,
        metavar="S",
        help="run-time estimate in seconds (backfilling uses it)",
    )
    p.add_argument(
        "--exclusive", action="store_true", help="never pair this job with another (paired gang)"
    )
    p.add_argument(
        "--as",
        dest="run_as",
        default=None,
        metavar="USER",
        help="operators only: run the ranks as USER instead of yourself (root included); "
        "everyone else's jobs run as the user who submits them (docs/security.md)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="K=V",
        help="environment variable for every rank (repeatable)",
    )
    p.add_argument("--cwd", default=None, metavar="DIR", help="working directory of the ranks")
    p.add_argument(
        "--spec",
        default=None,
        metavar="FILE.toml",
        help="job description (keys of a [job] table: name, size, argv, class, env, cwd, "
        "estimate, exclusive); flags override it",
    )
    p.add_argument(
        "--mpi",
        action="store_true",
        help="CMD is an Open MPI program: rank 0 runs mpirun over the job's nodes and the other "
        "ranks start its daemons, all inside the job's cgroups (apps/mpilaunch.py)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="print only the job id")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="what to run")
    p.set_defaults(func=cmd_submit)

    p = command_parser(
        subparsers,
        "jobs",
        "list jobs: state, CPU against wall time",
        "List the jobs the controller knows (queued, running, frozen), or with --all also "
        "the ended ones, under a line naming the controller's policy (with the MPL and the "
        "agents' scheme for the space-sharing policies of Yu & Byun 2011). UTIL is CPU seconds / "
        "(wall seconds x size): near 1 for a compute-bound job running alone, low for an "
        "I/O-bound one.",
        "  cosched jobs\n  cosched jobs --all\n  cosched jobs --watch 1      # Ctrl-C to stop",
        common,
    )
    p.add_argument("--all", "-a", action="store_true", help="include ended jobs")
    _watch_arg(p)
    json_arg(p)
    p.set_defaults(func=cmd_jobs)

    p = command_parser(
        subparsers,
        "matrix",
        "show the Ousterhout matrix (which job runs where, in which slot)",
        "Show the scheduling matrix like gangster (Gorda & Brooks 1991): a column per node, a row "
        "per "
        "time slot. '>' marks the slot running now, '+' its paired-gang partner, '*' a row "
        "with a job running as an alternate on idle nodes; '.' is a free node. Wide machines "
        "get one letter per node, explained below the matrix.",
        "  cosched matrix\n  cosched matrix --watch       # redraw every 2 s, Ctrl-C to stop",
        common,
    )
    _watch_arg(p)
    json_arg(p)
    p.set_defaults(func=cmd_matrix)

    p = command_parser(
        subparsers,
        "slice",
        "where would a new job get 100%% of its nodes? (gangster's slice)",
        "Pack all known jobs space-wise into as few time slices as possible (first-fit "
        "decreasing, Gorda & Brooks 1991 §3) and show the nodes free in every slice: a job placed "
        "there would get 100% of its nodes' time.",
        "  cosched slice\n  cosched slice --size 8",
        common,
    )
    p.add_argument("--size", "-n", type=int, default=None, metavar="K", help="the new job's size")
    json_arg(p)
    p.set_defaults(func=cmd_slice)

    p = command_parser(
        subparsers,
        "kill",
        "kill a job",
        "Kill every rank of a job (your own; operators may kill any).",
        "  cosched kill 12",
        common,
    )
    p.add_argument("job", type=int, metavar="JOB", help="job id")
    p.set_defaults(func=cmd_kill)

    p = command_parser(
        subparsers,
        "class",
        "change a job's class",
        "Change the class of a job, e.g. raise a job demoted to production back to "
        "interactive while debugging it (Gorda & Brooks 1991 §3).",
        "  cosched class 12 interactive\n  cosched class 12 standby",
        common,
    )
    p.add_argument("job", type=int, metavar="JOB", help="job id")
    p.add_argument("job_class", choices=CLASSES, metavar="CLASS", help=", ".join(CLASSES))
    p.set_defaults(func=cmd_class)
