"""``host:port`` addresses as typed on command lines: parse and format back.

``[v6]:port`` is accepted (brackets stripped) and written back with brackets.
An empty host is an error unless the caller gives a default (the agent listens
on every address for ``:7070``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from common.errors import UsageError


class AddressError(UsageError, ValueError):
    """Text that is not ``host:port``."""


def parse_addr(text: str, *, default_host: str | None = None) -> tuple[str, int]:
    """``"10.0.0.1:7070"`` -> ``("10.0.0.1", 7070)``; ``"[::1]:80"`` -> ``("::1", 80)``."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]") or (default_host or "")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise AddressError(
            f"want HOST:PORT, got {text!r}", fix="e.g. 10.212.0.254:7000 or [::1]:7000"
        )
    return host, int(port)


def format_addr(addr: tuple[str, int]) -> str:
    """The inverse of :func:`parse_addr`."""
    host, port = addr
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def addr_arg(*, default_host: str | None = None) -> Callable[[str], tuple[str, int]]:
    """An argparse ``type=``: the parse error becomes argparse's own message."""

    def host_port(text: str) -> tuple[str, int]:
        try:
            return parse_addr(text, default_host=default_host)
        except AddressError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return host_port
