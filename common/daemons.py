"""How cosched starts its own Python daemons (agent, controller, relay, emulated agents).

Root often runs ``cosched cluster up`` or ``cosched controller start`` from
wherever it stands, ``/tmp`` included; ``python -m agent`` started there put
that directory first on ``sys.path``, so a ``common/`` package anyone had
planted there ran as root (issue 28). Daemons therefore start

* with ``-I`` (isolated: neither the working directory nor ``PYTHON*``
  variables reach ``sys.path``) where cosched is installed in the interpreter's
  site-packages, else with ``-P`` (a source tree found through ``PYTHONPATH``,
  which only the operator sets);
* from ``/`` (:data:`DAEMON_CWD`);
* with an environment cut to :data:`KEPT` (search paths, locale, cosched's own
  ``COSCHED_*`` directories): nothing else of the caller's environment, its
  ``LOGNAME`` and ``USER`` included, reaches a daemon. ``PYTHONPATH`` starts
  with the tree this cosched was imported from, so a daemon runs the same code
  as the command that started it, installed or not.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Mapping

DAEMON_CWD = "/"
#: The directory holding the ``common`` package this process imported.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Variables a daemon keeps from the environment it was started from.
KEPT = ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR")
KEPT_PREFIXES = ("LC_", "COSCHED_")


@functools.cache
def isolation_flags(python: str = sys.executable) -> tuple[str, ...]:
    """``("-I",)`` when the daemons' packages import in an isolated interpreter, else
    ``("-P",)``: the working directory is never on the daemon's path either way."""
    probe = [python, "-I", "-c", "import agent, common, controller"]
    try:
        done = subprocess.run(probe, cwd=DAEMON_CWD, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ("-P",)
    return ("-I",) if done.returncode == 0 else ("-P",)


def python_argv(module: str, *args: str, python: str | None = None) -> list[str]:
    """``[python, -I|-P, -m, module, *args]``."""
    exe = python or sys.executable
    return [exe, *isolation_flags(exe), "-m", module, *args]


def daemon_env(
    extra: Mapping[str, str] | None = None, source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a daemon starts with: :data:`KEPT` of ``source`` (default ours)."""
    src = os.environ if source is None else source
    env = {k: v for k, v in src.items() if k in KEPT or k.startswith(KEPT_PREFIXES)}
    paths = [SOURCE_ROOT, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.update(extra or {})
    return env
