"""Checkpoint and restart (Gorda & Brooks 1991 §3.1: "writes a checkpoint file, and exits.
A new version can then be started using the checkpoint file").

The file format (a checksummed JSON envelope, written atomically, the previous good
file kept as ``PATH.prev``) and the restore strategy: docs/controller.md, "Checkpoints".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from typing import Any

FORMAT = "cosched-controller-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why."""


def _canonical(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def encode(payload: dict[str, Any]) -> bytes:
    body = _canonical(payload)
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "sha256": hashlib.sha256(body).hexdigest(),
        "payload": payload,
    }
    return json.dumps(doc, sort_keys=True, indent=1, allow_nan=False).encode() + b"\n"


def decode(data: bytes, where: str = "checkpoint") -> dict[str, Any]:
    """The payload of a checkpoint file's bytes, or CheckpointError with the reason."""
    if not data.strip():
        raise CheckpointError(f"{where}: empty file")
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{where}: not UTF-8 text ({e})") from None
    except ValueError as e:
        raise CheckpointError(f"{where}: truncated or not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{where}: not a cosched controller checkpoint")
    if doc.get("version") != VERSION:
        raise CheckpointError(
            f"{where}: checkpoint version {doc.get('version')!r}, this controller reads {VERSION}"
        )
    payload = doc.get("payload")
    if not isinstance(payload, dict):
        raise CheckpointError(f"{where}: payload missing")
    digest = hashlib.sha256(_canonical(payload)).hexdigest()
    if doc.get("sha256") != digest:
        raise CheckpointError(f"{where}: checksum mismatch (file corrupted or edited)")
    return payload


def write(path: str, payload: dict[str, Any]) -> str:
    """Atomically replace ``path`` with a checkpoint of ``payload``."""
    data = encode(payload)
    directory = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # Keep the previous good file as PATH.prev (a hard link: no copy, no
        # window without a file at PATH) so a later corruption has a fallback.
        if os.path.exists(path):
            prev = path + ".prev"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(prev)
            with contextlib.suppress(OSError):
                os.link(path, prev)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    # The rename itself must reach the disk too.
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return path


def read(path: str) -> dict[str, Any]:
    """The checkpoint in ``path``, refused if it is a link or others may read or write it.

    It holds every job's command and environment (docs/security.md); ``write`` makes it
    0600, so a wider mode means someone else made or changed it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        why = "a symbolic link" if os.path.islink(path) else e.strerror
        raise CheckpointError(f"{path}: cannot read ({why})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise CheckpointError(
                f"{path}: mode {stat.S_IMODE(st.st_mode):04o} lets others read or change it;"
                f" `chmod 600 {path}` if you trust its content"
            )
        if st.st_uid != os.geteuid():
            raise CheckpointError(f"{path}: owned by uid {st.st_uid}, not by the controller")
        data = f.read()
    return decode(data, path)
