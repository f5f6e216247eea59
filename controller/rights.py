"""Who is an operator, and what only operators may ask for (docs/security.md, issue 28).

Operators are uids, from the kernel: root, the daemon's own user, and the
``--operator`` names resolved to uids once, at start. Nothing the caller's
environment says (``LOGNAME``, ``USER``: what ``getpass.getuser()`` read first)
makes anyone an operator: a controller started from ``su`` or ``sudo -E`` with
``USER=alice`` made alice an operator, who could then submit ``--as root``.

Beyond owning their jobs, only operators may

* put a job in the ``benchmark`` class (it pre-empts everyone: Gorda & Brooks
  1991 §3.1 gives the class to "the system" for benchmarking), at submission
  or with ``class``;
* have more than ``queue_limit`` jobs queued (default 100 per user, an operator
  setting): a user cannot fill the controller with waiting jobs.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable, Mapping

from controller.jobs import BENCHMARK, QUEUED, Job, SpecError
from controller.operator import OperatorConfig


class RightsError(ValueError):
    """A request only an operator may make; the message says what and why."""


def operator_uids(names: Iterable[str], daemon_uid: int | None = None) -> frozenset[int]:
    """Root, the daemon's user and ``names`` as uids; ValueError names an unknown user."""
    uids = {0, os.geteuid() if daemon_uid is None else daemon_uid}
    for name in names:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            raise ValueError(f"--operator {name!r}: no such user on this host") from None
    return frozenset(uids)


def uid_of(name: str) -> int | None:
    """A user name's uid in this host's passwd database (None if unknown)."""
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def check_submit(
    raw: object, user: str, operator: bool, jobs: Mapping[int, Job], cfg: OperatorConfig
) -> None:
    """Refuse a submission only operators may make (SpecError: the one-line reply)."""
    if operator:
        return
    if isinstance(raw, dict) and raw.get("class") == BENCHMARK:
        raise SpecError(
            "spec.class: benchmark jobs pre-empt everyone and are for operators only;"
            " submit as production or interactive"
        )
    limit = cfg.queue_limit
    if limit is not None:
        queued = sum(1 for j in jobs.values() if j.user == user and j.state == QUEUED)
        if queued >= limit:
            raise SpecError(
                f"user {user!r} already has {queued} queued job(s), the limit is {limit};"
                " wait for some to start or ask an operator"
            )


def check_class(new_class: object, operator: bool) -> None:
    if new_class == BENCHMARK and not operator:
        raise RightsError("class: benchmark is for operators only (it pre-empts everyone)")
