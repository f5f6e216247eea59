"""``cosched controller|submit|jobs|matrix|slice|kill|class``: the user's side of the controller.

This is gangster's role in seed 003 §3: users submit jobs, watch the matrix
and their jobs, change a job's class and ask ``slice`` where a new job would
get 100 % of its nodes; operators start, stop, checkpoint and tune the
controller. Everything goes through the controller API
(docs/controller-api.md) with :class:`controller.client.ControllerClient`;
the views are :mod:`testbed.views`.

:func:`add_controller_commands` registers the commands on the ``cosched``
console script's subparsers; :func:`main` runs them standalone
(``python -m testbed.controller_cli jobs``).

Error policy: one line on stderr, ``cosched: ...``, exit status 2. On the
local socket, a socket file that does not exist means no controller was ever
started here, so the CLI says how to start one at once instead of retrying;
a socket that exists but refuses is a controller restarting from its
checkpoint (seed 003 §3.1), and the request is retried for ``--retry``
seconds like any client.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from controller.client import ControllerClient, ControllerError, ControllerUnavailable
from testbed import views

DEFAULT_RUN_DIR = "/run/cosched"
DEFAULT_RETRY = 30.0
DEFAULT_WATCH = 2.0
CLASSES = ("interactive", "production", "standby", "benchmark")
SETTABLE = ("quantum", "max_slots", "interactive_limit", "user_limit")
_CLEAR = "\033[H\033[2J"  # cursor home + clear screen, as watch(1) does


class CliError(Exception):
    """A user mistake or an unusable answer: printed as ``cosched: <message>``, exit 2."""


class Client(Protocol):
    """What the commands need from a controller client (tests pass a fake)."""

    def request(self, op: str, **args: Any) -> Any: ...

    def close(self) -> None: ...


def run_dir() -> str:
    return os.environ.get("COSCHED_RUN_DIR") or DEFAULT_RUN_DIR


def default_socket() -> str:
    return os.path.join(run_dir(), "controller.sock")


def _start_hint(sock: str) -> str:
    return (
        f"no controller answers on {sock}; start one with "
        "'cosched controller start --policy paired-gang' (after 'cosched cluster up')"
    )


def make_client(args: argparse.Namespace) -> Client:
    """Build the client from the common options (tests monkeypatch this)."""
    if args.tcp:
        host, sep, port = args.tcp.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise CliError(f"--tcp wants HOST:PORT, got {args.tcp!r}")
        if not args.key_file:
            raise CliError("--tcp needs --key-file (the cluster key the controller was given)")
        try:
            key = Path(args.key_file).read_bytes().strip()
        except OSError as exc:
            raise CliError(f"cannot read --key-file {args.key_file}: {exc.strerror}") from None
        if len(key) < 16:
            raise CliError(f"key file {args.key_file} holds fewer than 16 bytes")
        return ControllerClient(tcp=(host, int(port)), key=key, user=args.user, retry=args.retry)
    sock = args.socket or default_socket()
    if not os.path.exists(sock):
        raise CliError(_start_hint(sock))
    return ControllerClient(sock, retry=args.retry)


def _call(args: argparse.Namespace, op: str, **req: Any) -> Any:
    client = make_client(args)
    try:
        return client.request(op, **req)
    except ControllerUnavailable as exc:
        where = args.tcp or args.socket or default_socket()
        raise CliError(f"{_start_hint(where)} ({exc})") from None
    except ControllerError as exc:
        raise CliError(str(exc)) from None
    finally:
        client.close()


def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn every expected failure into one line and exit status 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except CliError as exc:
            print(f"cosched: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(file=sys.stderr)
            return 130

    run.__name__ = func.__name__
    run.__doc__ = func.__doc__
    return run


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


# -- watch -------------------------------------------------------------------


def _watch(
    args: argparse.Namespace,
    title: str,
    draw: Callable[[], str],
) -> int:
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


# -- commands: users -----------------------------------------------------------


def _parse_env(items: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--env wants KEY=VALUE, got {item!r}")
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
    known = {"name", "size", "argv", "class", "env", "cwd", "estimate", "exclusive"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise CliError(f"--spec {path}: unknown keys {unknown}; known: {sorted(known)}")
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
    ):
        if value is not None:
            spec[key] = value
    if args.exclusive:
        spec["exclusive"] = True
    if args.env:
        spec["env"] = {**spec.get("env", {}), **_parse_env(args.env)}
    if not spec.get("argv"):
        raise CliError("nothing to run: give the command after '--' or argv in --spec")
    if not isinstance(spec["argv"], list) or not all(isinstance(a, str) for a in spec["argv"]):
        raise CliError("argv must be a list of strings")
    spec.setdefault("size", 1)
    if not isinstance(spec["size"], int) or spec["size"] < 1:
        raise CliError(f"size must be a whole number >= 1, got {spec['size']!r}")
    if "cwd" not in spec and not args.tcp:
        # Local nodes share this host's file system: run where the user stands.
        spec["cwd"] = os.getcwd()
    return spec


@_guard
def cmd_submit(args: argparse.Namespace) -> int:
    """Submit a job."""
    spec = build_spec(args)
    result = _call(args, "submit", spec=spec)
    job_id = result["job_id"] if isinstance(result, dict) else result
    if args.quiet:
        print(job_id)
    else:
        nodes = f"{spec['size']} node{'s' if spec['size'] != 1 else ''}"
        print(f"submitted job {job_id} ({nodes}): {shlex.join(spec['argv'])}")
    return 0


@_guard
def cmd_jobs(args: argparse.Namespace) -> int:
    """List jobs."""

    def draw() -> str:
        return views.render_jobs(_call(args, "jobs", all=args.all))

    if args.json:
        _print_json(_call(args, "jobs", all=args.all))
        return 0
    if args.watch:
        return _watch(args, "cosched jobs" + (" --all" if args.all else ""), draw)
    sys.stdout.write(draw())
    return 0


@_guard
def cmd_matrix(args: argparse.Namespace) -> int:
    """Show the Ousterhout matrix."""

    def draw() -> str:
        return views.render_matrix(_call(args, "matrix"))

    if args.json:
        _print_json(_call(args, "matrix"))
        return 0
    if args.watch:
        return _watch(args, "cosched matrix", draw)
    sys.stdout.write(draw())
    return 0


@_guard
def cmd_slice(args: argparse.Namespace) -> int:
    """gangster's slice."""
    req: dict[str, Any] = {} if args.size is None else {"size": args.size}
    result = _call(args, "slice", **req)
    if args.json:
        _print_json(result)
        return 0
    names: list[str] | None = None
    try:
        status = _call(args, "status")
        width = len(result["packed"][0]) if result.get("packed") else None
        nodes = status.get("nodes") if isinstance(status, dict) else None
        if isinstance(nodes, list) and (width is None or len(nodes) == width):
            names = [str(n) for n in nodes]
    except CliError:
        pass  # node names are a nicety; indices still tell where the hole is
    sys.stdout.write(views.render_slice(result, args.size, nodes=names))
    return 0


@_guard
def cmd_kill(args: argparse.Namespace) -> int:
    """Kill a job."""
    result = _call(args, "kill", job_id=args.job)
    state = result.get("state") if isinstance(result, dict) else result
    print(f"job {args.job}: {state}")
    return 0


@_guard
def cmd_class(args: argparse.Namespace) -> int:
    """Change a job's class."""
    result = _call(args, "class", job_id=args.job, **{"class": args.job_class})
    new = result.get("class") if isinstance(result, dict) else result
    print(f"job {args.job}: class {new}")
    return 0


# -- commands: operators -------------------------------------------------------


def _parse_setting(item: str) -> tuple[str, Any]:
    key, sep, raw = item.partition("=")
    key = key.strip().replace("-", "_")
    if not sep:
        raise CliError(f"set wants KEY=VALUE, got {item!r}; keys: {', '.join(SETTABLE)}")
    if key not in SETTABLE:
        raise CliError(f"unknown setting {key!r}; settable: {', '.join(SETTABLE)}")
    raw = raw.strip()
    if raw.lower() in ("null", "none", "unlimited", ""):
        if key in ("quantum", "interactive_limit"):
            raise CliError(f"{key} needs a number of seconds")
        return key, None
    try:
        value: Any = int(raw) if key in ("max_slots", "user_limit") else float(raw)
    except ValueError:
        kind = "a whole number or none" if key in ("max_slots", "user_limit") else "seconds"
        raise CliError(f"{key}={raw!r}: want {kind}") from None
    return key, value


def _render_mapping(data: Any) -> str:
    if not isinstance(data, dict):
        return json.dumps(data) + "\n"
    width = max((len(str(k)) for k in data), default=0)
    lines = []
    for key in data:
        value = data[key]
        text = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value
        lines.append(f"{str(key).ljust(width)}  {'-' if text is None else text}")
    return "\n".join(lines) + "\n"


@_guard
def cmd_status(args: argparse.Namespace) -> int:
    """Controller status."""
    result = _call(args, "status")
    if args.json:
        _print_json(result)
    else:
        sys.stdout.write(_render_mapping(result))
    return 0


@_guard
def cmd_checkpoint(args: argparse.Namespace) -> int:
    """Write a checkpoint now."""
    result = _call(args, "checkpoint")
    print(f"checkpoint written: {result.get('path') if isinstance(result, dict) else result}")
    return 0


@_guard
def cmd_set(args: argparse.Namespace) -> int:
    """Change operator settings."""
    settings = dict(_parse_setting(item) for item in args.settings)
    result = _call(args, "set", **settings)
    sys.stdout.write(_render_mapping(result))
    return 0


@_guard
def cmd_stop(args: argparse.Namespace) -> int:
    """Shut the controller down (after a checkpoint)."""
    result = _call(args, "shutdown", checkpoint=args.checkpoint)
    path = result.get("path") if isinstance(result, dict) else None
    print("controller stopping" + (f"; checkpoint at {path}" if path else ""))
    return 0


def daemon_argv(args: argparse.Namespace) -> list[str]:
    """The ``python -m controller`` command line for ``controller start``."""
    argv = [sys.executable, "-m", "controller", "--policy", args.policy]
    argv += ["--quantum", f"{args.quantum:g}", "--run-dir", args.run_dir]
    for kv in args.param:
        argv += ["--param", kv]
    for flag, value in (
        ("--cluster-state", args.cluster_state),
        ("--agents", args.agents),
        ("--capacity", args.capacity),
        ("--key-file", args.daemon_key_file),
        ("--listen-tcp", args.listen_tcp),
        ("--metrics", args.metrics),
        ("--checkpoint", args.checkpoint_path),
        ("--fifo-priority", args.fifo_priority),
    ):
        if value is not None:
            argv += [flag, str(value)]
    if args.restore:
        argv.append("--restore")
    return argv


def _answers(sock: str) -> bool:
    if not os.path.exists(sock):
        return False
    client = ControllerClient(sock, retry=0.0, timeout=2.0)
    try:
        client.request("status")
    except (ControllerError, OSError):
        return False
    finally:
        client.close()
    return True


@_guard
def cmd_start(args: argparse.Namespace) -> int:
    """Start the controller daemon in the background."""
    sock = os.path.join(args.run_dir, "controller.sock")
    if _answers(sock):
        raise CliError(
            f"a controller already answers on {sock}; stop it with 'cosched controller stop'"
        )
    try:
        os.makedirs(args.run_dir, exist_ok=True)
        log_path = args.log or os.path.join(args.run_dir, "controller.log")
        log = open(log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
    except OSError as exc:
        raise CliError(f"cannot prepare {args.run_dir}: {exc.strerror} (are you root?)") from None
    env = dict(os.environ, COSCHED_RUN_DIR=args.run_dir)
    try:
        # A new session: the daemon outlives this command and the user's terminal.
        proc = subprocess.Popen(
            daemon_argv(args),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env=env,
        )
    finally:
        log.close()
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = _last_line(log_path)
            raise CliError(
                f"the controller exited with status {proc.returncode}: {tail} (log: {log_path})"
            )
        if _answers(sock):
            print(f"controller started: pid {proc.pid}, socket {sock}, log {log_path}")
            return 0
        time.sleep(0.1)
    raise CliError(
        f"the controller (pid {proc.pid}) did not answer on {sock} within {args.wait:g} s; "
        f"see {log_path}"
    )


def _last_line(path: str) -> str:
    try:
        lines = [x for x in Path(path).read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no log"
    return lines[-1].strip() if lines else "no output"


# -- registration ---------------------------------------------------------------


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("reaching the controller")
    g.add_argument(
        "--socket",
        default=None,
        metavar="PATH",
        help="controller socket (default $COSCHED_RUN_DIR/controller.sock, "
        f"COSCHED_RUN_DIR defaulting to {DEFAULT_RUN_DIR})",
    )
    g.add_argument(
        "--tcp", default=None, metavar="HOST:PORT", help="reach a remote controller over TCP"
    )
    g.add_argument("--key-file", default=None, metavar="F", help="cluster key for --tcp")
    g.add_argument(
        "--user",
        default=None,
        metavar="U",
        help="user name to act as over --tcp (default $USER; on the socket your uid decides)",
    )
    g.add_argument(
        "--retry",
        type=float,
        default=DEFAULT_RETRY,
        metavar="SECONDS",
        help="keep retrying a restarting or busy controller this long (default %(default)g)",
    )
    return p


def _json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the raw API answer as JSON")


def _parser(
    subparsers: Any, name: str, help_: str, description: str, examples: str, common: bool = True
) -> argparse.ArgumentParser:
    return subparsers.add_parser(  # type: ignore[no-any-return]
        name,
        help=help_,
        description=textwrap.fill(description, 79),
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common()] if common else [],
    )


def add_controller_commands(subparsers: Any) -> None:
    """Register controller, submit, jobs, matrix, slice, kill and class on ``subparsers``."""
    _add_controller(subparsers)

    p = _parser(
        subparsers,
        "submit",
        "submit a parallel job (a gang of SIZE ranks)",
        "Submit a job to the controller. Rank i of the job runs CMD on the i-th node of its "
        "placement with COSCHED_JOB, COSCHED_RANK, COSCHED_SIZE, COSCHED_RANK0_ADDR, "
        "COSCHED_PORT and COSCHED_NODE set. Classes (seed 003): interactive is served first "
        "and demoted to production after the operator's interactive_limit; standby runs only "
        "on idle cycles; benchmark gets its nodes to itself. Locally the job runs in the "
        "current directory unless --cwd says otherwise. Prints the job id.",
        "  cosched submit --size 4 -- python -m apps.synthetic --gcomp 2500000\n"
        "  cosched submit --size 4 --class standby --name io -- "
        "python -m apps.synthetic --gcomp 0 --gio 20\n"
        "  cosched submit --spec job.toml          # [job] size=4 argv=['./prog'] class=...\n"
        "  id=$(cosched submit -q --size 2 -- ./prog) && cosched kill $id",
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
    p.add_argument("--quiet", "-q", action="store_true", help="print only the job id")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="what to run")
    p.set_defaults(func=cmd_submit)

    p = _parser(
        subparsers,
        "jobs",
        "list jobs: state, CPU against wall time",
        "List the jobs the controller knows (queued, running, frozen), or with --all also "
        "the ended ones. UTIL is CPU seconds / (wall seconds x size): near 1 for a "
        "compute-bound job running alone, low for an I/O-bound one.",
        "  cosched jobs\n  cosched jobs --all\n  cosched jobs --watch 1      # Ctrl-C to stop",
    )
    p.add_argument("--all", "-a", action="store_true", help="include ended jobs")
    _watch_arg(p)
    _json_arg(p)
    p.set_defaults(func=cmd_jobs)

    p = _parser(
        subparsers,
        "matrix",
        "show the Ousterhout matrix (which job runs where, in which slot)",
        "Show the scheduling matrix like gangster (seed 003): a column per node, a row per "
        "time slot. '>' marks the slot running now, '+' its paired-gang partner, '*' a row "
        "with a job running as an alternate on idle nodes; '.' is a free node. Wide machines "
        "get one letter per node, explained below the matrix.",
        "  cosched matrix\n  cosched matrix --watch       # redraw every 2 s, Ctrl-C to stop",
    )
    _watch_arg(p)
    _json_arg(p)
    p.set_defaults(func=cmd_matrix)

    p = _parser(
        subparsers,
        "slice",
        "where would a new job get 100%% of its nodes? (gangster's slice)",
        "Pack all known jobs space-wise into as few time slices as possible (first-fit "
        "decreasing, seed 003 §3) and show the nodes free in every slice: a job placed "
        "there would get 100% of its nodes' time.",
        "  cosched slice\n  cosched slice --size 8",
    )
    p.add_argument("--size", "-n", type=int, default=None, metavar="K", help="the new job's size")
    _json_arg(p)
    p.set_defaults(func=cmd_slice)

    p = _parser(
        subparsers,
        "kill",
        "kill a job",
        "Kill every rank of a job (your own; operators may kill any).",
        "  cosched kill 12",
    )
    p.add_argument("job", type=int, metavar="JOB", help="job id")
    p.set_defaults(func=cmd_kill)

    p = _parser(
        subparsers,
        "class",
        "change a job's class",
        "Change the class of a job, e.g. raise a job demoted to production back to "
        "interactive while debugging it (seed 003 §3).",
        "  cosched class 12 interactive\n  cosched class 12 standby",
    )
    p.add_argument("job", type=int, metavar="JOB", help="job id")
    p.add_argument("job_class", choices=CLASSES, metavar="CLASS", help=", ".join(CLASSES))
    p.set_defaults(func=cmd_class)


def _add_controller(subparsers: Any) -> None:
    top = subparsers.add_parser(
        "controller",
        help="start, stop, inspect and tune the controller daemon",
        description="Operate the cosched controller daemon (python -m controller).",
        epilog="examples:\n"
        "  cosched cluster up --nodes 4 && cosched controller start --policy paired-gang\n"
        "  cosched controller status\n"
        "  cosched controller set quantum=0.5 user_limit=4\n"
        "  cosched controller stop",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = top.add_subparsers(
        dest="controller_command", metavar="{start,stop,status,checkpoint,set}"
    )
    sub.required = True

    p = _parser(
        sub,
        "start",
        "start the daemon in the background",
        "Spawn 'python -m controller' detached (its own session, output to the log), wait "
        "until its socket answers and print its pid. Without --agents it drives the local "
        "emulated cluster described by cluster.json ('cosched cluster up').",
        "  cosched controller start --policy gang --quantum 1\n"
        "  cosched controller start --policy paired-gang --param band=0.2\n"
        "  cosched controller start --policy gang --checkpoint /var/lib/cosched/ckpt.json "
        "--restore",
        common=False,
    )
    p.add_argument("--policy", required=True, help="scheduling policy ('cosched policies')")
    p.add_argument(
        "--quantum", type=float, default=1.0, metavar="S", help="time slice, s (default 1)"
    )
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="policy parameter")
    p.add_argument("--cluster-state", default=None, metavar="PATH", help="cluster.json to drive")
    p.add_argument("--agents", default=None, metavar="n0=IP:PORT,...", help="explicit agents")
    p.add_argument("--capacity", type=float, default=None, help="CPUs per node (with --agents)")
    p.add_argument(
        "--key-file",
        dest="daemon_key_file",
        default=None,
        metavar="F",
        help="cluster key (default: the cluster state's)",
    )
    p.add_argument("--listen-tcp", default=None, metavar="HOST:PORT", help="also serve TCP")
    p.add_argument("--metrics", default=None, metavar="HOST:PORT", help="Prometheus exporter")
    p.add_argument(
        "--checkpoint", dest="checkpoint_path", default=None, metavar="PATH", help="checkpoint"
    )
    p.add_argument("--restore", action="store_true", help="resume from --checkpoint")
    p.add_argument(
        "--fifo-priority",
        type=int,
        default=None,
        metavar="P",
        help="the daemon's SCHED_FIFO priority (0: ordinary scheduling; default the daemon's)",
    )
    p.add_argument(
        "--run-dir",
        default=run_dir(),
        metavar="DIR",
        help="socket directory (default $COSCHED_RUN_DIR or /run/cosched)",
    )
    p.add_argument("--log", default=None, metavar="FILE", help="daemon log (default RUN_DIR/)")
    p.add_argument(
        "--wait", type=float, default=15.0, metavar="S", help="how long to wait for the socket"
    )
    p.set_defaults(func=cmd_start)

    p = _parser(
        sub,
        "stop",
        "checkpoint and shut the daemon down",
        "Ask the controller to finish outstanding requests, write its checkpoint and exit "
        "(seed 003 §3.1); a new controller started with --restore picks up from there.",
        "  cosched controller stop\n  cosched controller stop --no-checkpoint",
    )
    p.add_argument(
        "--checkpoint",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write a checkpoint first (default yes)",
    )
    p.set_defaults(func=cmd_stop)

    p = _parser(
        sub,
        "status",
        "policy, nodes, agents, quanta, skew",
        "Show the controller's status: policy, nodes and whether their agents are "
        "connected, quanta run, quantum command skew, fail-safe and checkpoint state.",
        "  cosched controller status\n  cosched controller status --json",
    )
    _json_arg(p)
    p.set_defaults(func=cmd_status)

    p = _parser(
        sub,
        "checkpoint",
        "write a checkpoint now",
        "Write the controller's checkpoint file now and print its path.",
        "  cosched controller checkpoint",
    )
    p.set_defaults(func=cmd_checkpoint)

    p = _parser(
        sub,
        "set",
        "change operator settings (quantum, max_slots, ...)",
        "Change operator settings while the controller runs (seed 003 §3): quantum (s, >= "
        "0.01), max_slots (int or none), interactive_limit (s of run time before an "
        "interactive job is demoted), user_limit (jobs per user, int or none).",
        "  cosched controller set quantum=0.5\n"
        "  cosched controller set max_slots=4 user_limit=none",
    )
    p.add_argument("settings", nargs="+", metavar="KEY=VALUE", help=", ".join(SETTABLE))
    p.set_defaults(func=cmd_set)


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m testbed.controller_cli jobs``."""
    parser = argparse.ArgumentParser(prog="cosched")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_controller_commands(sub)
    args = parser.parse_args(argv)
    rc: int = args.func(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
