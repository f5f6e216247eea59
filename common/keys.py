"""The cluster's shared secret (HMAC key) on disk: written once, checked on every read.

The key authenticates every controller-agent frame (agent/wire.py) and every
TCP client of the controller, so the file must be what it claims to be:

* a regular file, not a symlink (no one may point us at another file);
* readable by its owner only (mode 0600: no group or other bits);
* at least :data:`MIN_KEY_BYTES` bytes once surrounding whitespace is stripped.

``write_key`` writes ``nbytes`` random bytes as hex text (no newline), so
readers that strip whitespace and readers that do not see the same key.
"""

from __future__ import annotations

import contextlib
import os
import stat

from common.errors import CoschedError

MIN_KEY_BYTES = 16


class KeyFileError(CoschedError):
    """A key file that is missing, unsafe or too short."""


def daemon_owners() -> frozenset[int]:
    """Who may own a key a daemon reads: root and the daemon's own user."""
    return frozenset({0, os.geteuid()})


def read_key(path: str, owners: frozenset[int] | None = None) -> bytes:
    """The key in ``path``, after the checks above; KeyFileError says what to fix.

    ``owners``: the uids the file may belong to (None: anyone, as a user's own key).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        if os.path.islink(path):
            raise KeyFileError(
                f"key file {path} is a symlink",
                fix="give the path of the key file itself",
            ) from None
        raise KeyFileError(
            f"cannot read key file {path}: {err.strerror}",
            fix="give the cluster key (`cosched cluster up` writes cluster.key beside "
            "cluster.json)",
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileError(f"key file {path} is not a regular file", fix="give the key file")
        if owners is not None and info.st_uid not in owners:
            raise KeyFileError(
                f"key file {path} is owned by uid {info.st_uid}, not by root or this daemon's "
                "user: its owner could rewrite it",
                fix=f"chown root {path}",
            )
        key = b""
        while chunk := os.read(fd, 65536):
            key += chunk
    finally:
        os.close(fd)
    key = key.strip()
    if len(key) < MIN_KEY_BYTES:
        raise KeyFileError(
            f"key file {path} holds fewer than {MIN_KEY_BYTES} bytes",
            fix="write a longer key, e.g. `head -c 32 /dev/urandom | xxd -p -c 64 > KEY`",
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise KeyFileError(
            f"key file {path} is readable or writable by others "
            f"(mode {stat.S_IMODE(info.st_mode):04o})",
            fix=f"chmod 600 {path}",
        )
    return key


def write_key(path: str, nbytes: int = 32) -> str:
    """Create ``path`` afresh with a random key, mode 0600 from the start; returns ``path``.

    An old file (or symlink) at ``path`` is removed first, never written through.
    """
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, os.urandom(nbytes).hex().encode())
    finally:
        os.close(fd)
    return path


def read_user_keys(directory: str, cluster_key: bytes | None = None) -> dict[str, bytes]:
    """``NAME.key`` files of ``directory`` as {NAME: key} (controller ``--user-keys``).

    Each file passes :func:`read_key`'s checks and belongs to root or the daemon's
    user (issue 28: mode alone let a user who owned ``root.key`` rewrite it and be
    root); the directory must be a real directory others cannot write, owned the
    same way; a user key equal to the cluster key is refused (the cluster key is the
    agents' credential, docs/security.md).
    """
    owners = daemon_owners()
    try:
        info = os.lstat(directory)
    except OSError as err:
        raise KeyFileError(
            f"--user-keys {directory}: {err.strerror}", fix="give a directory of NAME.key files"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise KeyFileError(f"--user-keys {directory} is not a directory (a link?)",
                           fix="give the directory itself")  # fmt: skip
    if stat.S_IMODE(info.st_mode) & 0o022:
        raise KeyFileError(f"--user-keys {directory} is writable by others",
                           fix=f"chmod go-w {directory}")  # fmt: skip
    if info.st_uid not in owners:
        raise KeyFileError(f"--user-keys {directory} is owned by uid {info.st_uid}: its owner "
                           "could replace any key", fix=f"chown root {directory}")  # fmt: skip
    keys: dict[str, bytes] = {}
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(".key"):
            continue
        name = entry[: -len(".key")]
        path = os.path.join(directory, entry)
        key = read_key(path, owners)
        if cluster_key is not None and key == cluster_key:
            raise KeyFileError(f"{path} is the cluster key",
                               fix="give each user a key of their own")  # fmt: skip
        keys[name] = key
    if not keys:
        raise KeyFileError(f"--user-keys {directory} holds no NAME.key file",
                           fix="write one per user, e.g. `cosched` docs/security.md")  # fmt: skip
    return keys
