"""Ranks proving to each other that they belong to one job (docs/security.md, issue 28).

Each rank's agent puts the job's secret in its environment
(``COSCHED_JOB_SECRET``, agent/jobsecret.py). A connection between ranks, or
from mpilaunch's remote-shell agent to a rank, is accepted only after a
challenge–response: both ends send a fresh random nonce, then each sends an
HMAC-SHA256 under the secret over a label saying its role, what it claims
(job, ranks, size, command) and both nonces. A peer without the secret cannot
answer, a recorded answer fits no other connection (the nonces differ), and
one side's answer cannot be replayed as the other's (the labels differ).

Ranks started outside cosched (no secret in the environment) use an empty
key: the exchange runs the same, but proves nothing. Local launchers
(``cosched app run``, the NPB runner) give their ranks a secret of their own
(:func:`new_secret`). Stdlib only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping

SECRET_ENV = "COSCHED_JOB_SECRET"
NONCE_SIZE = 16
PROOF_SIZE = 32


def secret_from_env(env: Mapping[str, str] | None = None) -> bytes:
    """The job's secret (b"" outside cosched)."""
    return (os.environ if env is None else env).get(SECRET_ENV, "").encode()


def new_secret() -> str:
    """A secret for ranks a local launcher starts (``SECRET_ENV``)."""
    return secrets.token_hex(32)


def new_nonce() -> bytes:
    return os.urandom(NONCE_SIZE)


def proof(secret: bytes, label: str, *parts: bytes | str | int) -> bytes:
    """HMAC-SHA256 under ``secret`` of ``label`` and ``parts``, each length-prefixed
    (so no two different claims read the same)."""
    mac = hmac.new(secret, label.encode(), hashlib.sha256)
    for part in parts:
        raw = part if isinstance(part, bytes) else str(part).encode()
        mac.update(len(raw).to_bytes(4, "big") + raw)
    return mac.digest()


def valid(expected: bytes, got: bytes) -> bool:
    return hmac.compare_digest(expected, got)
