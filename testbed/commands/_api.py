"""Reaching the controller API, for the ``controller`` and ``jobs`` command groups.

On the local socket, a socket file that does not exist means no controller
was ever started here, so the command says how to start one at once instead
of retrying; a socket that exists but refuses is a controller restarting
from its checkpoint (Gorda & Brooks 1991 §3.1), and the request is retried for
``--retry`` seconds like any client.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Protocol

from common.addr import parse_addr
from common.errors import CoschedError
from common.keys import KeyFileError, read_key
from common.names import DEFAULT_RUN_DIR, RUN_DIR_ENV, controller_socket
from controller.client import ControllerClient, ControllerError, ControllerUnavailable

DEFAULT_RETRY = 30.0
START_FIX = (
    "start one with 'cosched controller start --policy paired-gang' (after 'cosched cluster up')"
)


class CliError(CoschedError):
    """A user mistake or an unusable answer: ``cosched: error: <message>``, exit status 2."""

    exit_code = 2


class Client(Protocol):
    """What the commands need from a controller client (tests pass a fake)."""

    def request(self, op: str, **args: Any) -> Any: ...

    def close(self) -> None: ...


def default_socket() -> str:
    return controller_socket()


def make_client(args: argparse.Namespace) -> Client:
    """Build the client from the common options (tests monkeypatch this)."""
    if args.tcp:
        try:
            host, port = parse_addr(args.tcp)
        except ValueError:
            raise CliError(f"--tcp wants HOST:PORT, got {args.tcp!r}") from None
        if not args.key_file:
            raise CliError(
                "--tcp needs --key-file", fix="give the cluster key the controller was given"
            )
        try:
            key = read_key(args.key_file)
        except KeyFileError as err:
            raise CliError(err.message, fix=err.fix) from None
        return ControllerClient(tcp=(host, port), key=key, user=args.user, retry=args.retry)
    sock = args.socket or default_socket()
    if not os.path.exists(sock):
        raise CliError(f"no controller answers on {sock}", fix=START_FIX)
    return ControllerClient(sock, retry=args.retry)


def call(args: argparse.Namespace, op: str, **req: Any) -> Any:
    """One request; a refusal or an absent controller becomes a CliError."""
    client = make_client(args)
    try:
        return client.request(op, **req)
    except ControllerUnavailable as exc:
        where = args.tcp or args.socket or default_socket()
        raise CliError(f"no controller answers on {where} ({exc})", fix=START_FIX) from None
    except ControllerError as exc:
        raise CliError(str(exc)) from None
    finally:
        client.close()


def common_options() -> argparse.ArgumentParser:
    """The options every command that talks to the controller takes (a parent parser)."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("reaching the controller")
    g.add_argument(
        "--socket",
        default=None,
        metavar="PATH",
        help=f"controller socket (default ${RUN_DIR_ENV}/controller.sock, "
        f"{RUN_DIR_ENV} defaulting to {DEFAULT_RUN_DIR})",
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


def json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the raw API answer as JSON")


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))
