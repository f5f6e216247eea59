"""A secret per job instance, known only to its ranks (docs/security.md, issue 28).

Every job on a node shares the node's address and a job's ports are
predictable (controller/quantum.py ``job_port``), so a rank's listening socket
is reachable by every other job: another user's job could run commands as the
MPI job's user through apps/mpilaunch.py's remote shell, or join the mesh as
one of its ranks (apps/mp/mesh.py). Both now authenticate with the job's
secret (an HMAC challenge–response, apps/mp/auth.py).

The secret never crosses the network and is in no file: the controller gives
every rank of one launch the same random *instance* (``COSCHED_JOB_INSTANCE``,
in the launch environment; not secret), and each agent derives

    secret = HMAC-SHA256(cluster key, "cosched-job-secret" | job id | instance)

and puts it in its ranks' environment as ``COSCHED_JOB_SECRET`` (never on a
command line: ``/proc/PID/environ`` is readable by the rank's user and root
only). Users cannot set ``COSCHED_*`` variables (the controller refuses them
in a spec; the agent sets these last). A launch without a valid instance (a
key holder talking to the agent directly) gets one made up by the agent, so
only the ranks of that launch share its secret.

The instance also names the job's output directory (agent/runas.py
``output_dir``), which must not exist yet: an output directory is never
reused, even when a fresh controller numbers jobs from 1 again.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping

SECRET_ENV = "COSCHED_JOB_SECRET"
INSTANCE_ENV = "COSCHED_JOB_INSTANCE"
_INSTANCE_RE = re.compile(r"^[0-9a-f]{16,64}$")


def new_instance() -> str:
    return secrets.token_hex(16)


def instance_of(env: Mapping[str, str]) -> str:
    """The launch's instance, or a fresh one when it gives none (or a malformed one)."""
    got = env.get(INSTANCE_ENV, "")
    return got if _INSTANCE_RE.match(got) else new_instance()


def job_secret(cluster_key: bytes, job_id: str, instance: str) -> str:
    """The job instance's secret, as 64 hex characters."""
    msg = b"cosched-job-secret\0" + job_id.encode() + b"\0" + instance.encode()
    return hmac.new(cluster_key, msg, hashlib.sha256).hexdigest()


def rank_env(cluster_key: bytes, job_id: str, instance: str) -> dict[str, str]:
    """What a rank's environment gets: its instance and secret."""
    return {INSTANCE_ENV: instance, SECRET_ENV: job_secret(cluster_key, job_id, instance)}
