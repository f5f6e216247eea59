"""What the unprivileged users of tests/security do: attacks, victims' programs, clients.

Run as ``python -m secattacks COMMAND ...`` by a test user, from a world-readable
copy of this file and of cosched's stdlib-only packages (tests/support/security_sandbox.py);
never imported by the root side. Standard library (and cosched's ``agent.wire``,
``agent.nicproto``, ``apps.mp``) only. Every command prints one JSON object: what
happened, for the test to judge.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import mmap
import os
import resource
import socket
import struct
import sys
import time
from typing import Any

_LEN = struct.Struct("!I")


def out(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


# ---- the controller's API --------------------------------------------------------------------
def request(sock_path: str, op: str, args: dict[str, Any]) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(sock_path)
        s.sendall(json.dumps({"op": op, "args": args}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return dict(json.loads(buf)) if buf else {"ok": False, "error": "closed"}


def cmd_request(a: argparse.Namespace) -> None:
    out(**request(a.sock, a.op, json.loads(a.args)))


def cmd_submit_many(a: argparse.Namespace) -> None:
    """Submit ``n`` copies of a spec over one connection; count accepted and refused."""
    accepted, errors = 0, []
    spec = json.loads(a.spec)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(a.sock)
        f = s.makefile("rb")
        for _ in range(a.n):
            s.sendall(json.dumps({"op": "submit", "args": {"spec": spec}}).encode() + b"\n")
            reply = json.loads(f.readline())
            if reply.get("ok"):
                accepted += 1
            else:
                errors.append(reply.get("error"))
    out(accepted=accepted, refused=len(errors), first_error=errors[0] if errors else None)


def cmd_tcp_request(a: argparse.Namespace) -> None:
    """A TCP request signed with ``keyfile``'s key as ``client:NAME`` (--user-keys)."""
    from agent.client import AgentClient, AgentError

    with open(a.keyfile, "rb") as f:
        key = f.read().strip()
    c = AgentClient((a.host, a.port), key, sender=f"client:{a.name}", timeout=10)
    try:
        c.connect()
        msg = c.request("request", {"op": a.op, "args": json.loads(a.args), "user": a.name})
        out(connected=True, reply=msg.data)
    except (AgentError, OSError, ValueError) as e:
        out(connected=False, error=str(e))
    finally:
        c.close()


# ---- finding 1: the job's ports ---------------------------------------------------------------
def _connect_until(addr: tuple[str, int], seconds: float) -> socket.socket | None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            s = socket.create_connection(addr, timeout=2)
            if s.getsockname() == s.getpeername():
                s.close()
                raise ConnectionRefusedError
            return s
        except OSError:
            time.sleep(0.05)
    return None


def _recv_framed(s: socket.socket) -> Any:
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    n = _LEN.unpack(head)[0]
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            return None
        body += chunk
    return json.loads(body)


def cmd_rsh_hijack(a: argparse.Namespace) -> None:
    """Call a waiting mpilaunch rank as if we were its rank 0's mpirun."""
    s = _connect_until((a.addr, a.port), a.seconds)
    if s is None:
        out(connected=False, served=False)
        return
    seen: list[Any] = []
    served = False
    with s:
        s.settimeout(a.seconds)
        body = json.dumps({"cmd": a.cmd}).encode()
        s.sendall(_LEN.pack(len(body)) + body)
        with contextlib.suppress(OSError, ValueError):
            while (msg := _recv_framed(s)) is not None:
                seen.append(msg)
                if isinstance(msg, dict) and "exit" in msg:
                    served = True
                    break
    out(connected=True, served=served, seen=seen[:5], source=os.environ.get("COSCHED_NODE"))


def cmd_mesh_impostor(a: argparse.Namespace) -> None:
    """Pose as rank ``claim`` of job ``job`` to the rank listening at addr:port."""
    from apps.mp import frame

    results = []
    for variant in ("plain", "with-nonce"):
        s = _connect_until((a.addr, a.port), a.seconds)
        if s is None:
            results.append({"variant": variant, "connected": False})
            continue
        with s:
            s.settimeout(5)
            job = a.job.encode() + (os.urandom(16) if variant == "with-nonce" else b"")
            hello = frame.pack(frame.HELLO, a.claim, a.size, len(job), time.time_ns(), 0) + job
            payload = a.payload.encode()
            data = frame.pack(frame.DATA, a.claim, 0, len(payload), time.time_ns(), 0) + payload
            got = b""
            with contextlib.suppress(OSError):
                s.sendall(hello)
                if variant == "with-nonce":
                    got = s.recv(4096)
                    s.sendall(os.urandom(32))  # a "proof" without the secret
                s.sendall(data)
                time.sleep(0.5)
                got += s.recv(4096)
            results.append({"variant": variant, "connected": True, "answer": got.hex()[:80]})
        if variant == "plain" and results[-1].get("answer"):
            break  # taken as the rank: nothing more to try
    out(results=results)


def cmd_mesh_victim(a: argparse.Namespace) -> None:
    """Rank 1 sends b"genuine" to rank 0 (after ``delay`` s); rank 0 prints what came."""
    from apps.mp import Comm

    rank = int(os.environ["COSCHED_RANK"])
    if rank == 1:
        time.sleep(a.delay)
    with Comm.from_env(connect_timeout=a.timeout) as c:
        if c.rank == 1:
            c.send(0, b"genuine", tag=0)
        else:
            out(got=c.recv(1, 0).decode(errors="replace"))


# ---- finding 4: stopping a daemon -------------------------------------------------------------
def cmd_deep_unix(a: argparse.Namespace) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(a.sock)
        s.sendall(b"[" * a.depth + b"\n")
        try:
            reply = s.recv(65536)
        except OSError as e:
            reply = str(e).encode()
    out(reply=reply.decode(errors="replace")[:200])


def cmd_deep_tcp(a: argparse.Namespace) -> None:
    """A wire frame whose body is ``depth`` '[' (before any MAC could be checked)."""
    body = b"[" * a.depth
    frame = struct.pack(">3sBI", b"CSQ", 1, len(body)) + body + os.urandom(32)
    with socket.create_connection((a.host, a.port), timeout=10) as s:
        with contextlib.suppress(OSError):
            s.sendall(frame)
        try:
            reply = s.recv(65536)
        except OSError as e:
            reply = str(e).encode()
    out(reply=reply.hex()[:80])


def cmd_unsigned_error(a: argparse.Namespace) -> None:
    """A hello signed with a made-up key: the error frame the server sends back, raw."""
    from agent import wire

    key = os.urandom(32)
    msg = wire.Message(wire.HELLO, a.sender, 1, "", None, time.time(), {"nonce": "00" * 16})
    with socket.create_connection((a.host, a.port), timeout=10) as s:
        s.sendall(wire.encode(key, msg))
        s.settimeout(10)
        data = b""
        with contextlib.suppress(OSError):
            while chunk := s.recv(65536):
                data += chunk
    out(frame=data.hex())


def cmd_flood(a: argparse.Namespace) -> None:
    """Open ``n`` connections to each target as fast as possible and hold them ``hold`` s.

    Targets: ``unix:PATH`` or ``tcp:HOST:PORT``. Reports how many connects succeeded,
    failed, and how many of the held ones the server closed meanwhile.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, a.n * len(a.targets) + 64)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    held: list[socket.socket] = []
    report: dict[str, dict[str, int]] = {}
    t0 = time.monotonic()
    for target in a.targets:
        kind, _, rest = target.partition(":")
        ok = failed = 0
        for _ in range(a.n):
            try:
                if kind == "unix":
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.settimeout(1)
                    s.connect(rest)
                else:
                    host, port = rest.rsplit(":", 1)
                    s = socket.create_connection((host, int(port)), timeout=1)
                s.setblocking(False)
                held.append(s)
                ok += 1
            except OSError:
                with contextlib.suppress(NameError, OSError):
                    s.close()
                failed += 1
        report[target] = {"connected": ok, "failed": failed}
    opened_s = time.monotonic() - t0
    # mark the start of the hold for the test; keep the connections, count the closed ones
    with contextlib.suppress(OSError):
        open(a.ready, "w").close()
    time.sleep(a.hold)
    closed = 0
    for s in held:  # closed by the server: EOF (after its one-line refusal, if any)
        try:
            while s.recv(65536):
                pass
            closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    out(targets=report, held=len(held), closed_by_server=closed, open_s=round(opened_s, 2))


# ---- findings 4 and 5: the NIC socket ----------------------------------------------------------
def _nic() -> str:
    return os.environ["COSCHED_NIC_SOCK"]


def _page(sealed: bool = True) -> int:
    fd = os.memfd_create("page", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 4096)
    from agent import nicproto

    with mmap.mmap(fd, 4096) as m:
        nicproto.init_state(m)
    if sealed:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def _register(
    job: str, rank: int, fds: list[int], socks: list[dict[str, Any]]
) -> tuple[socket.socket, dict[str, Any], list[int]]:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.settimeout(10)
    c.connect(_nic())
    msg = {"op": "register", "job": job, "rank": rank, "pid": os.getpid(), "socks": socks}
    socket.send_fds(c, [json.dumps(msg).encode()], fds)
    try:
        data, got, _, _ = socket.recv_fds(c, 65536, 4)
        reply = json.loads(data) if data else {"ok": False, "error": "closed"}
    except (OSError, ValueError) as e:
        reply, got = {"ok": False, "error": f"no answer: {e}"}, []
    return c, reply, got


def cmd_nic_deep(a: argparse.Namespace) -> None:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.settimeout(10)
    c.connect(a.path or _nic())
    with contextlib.suppress(OSError):
        c.send(b"[" * 60000)
    try:
        reply = c.recv(4096)
    except OSError as e:
        reply = str(e).encode()
    out(reply=reply.decode(errors="replace")[:200])


def cmd_nic_badfd(a: argparse.Namespace) -> None:
    """Register with a pipe where a socket should be."""
    r, _w = os.pipe()
    _c, reply, _ = _register(os.environ["COSCHED_JOB_ID"], int(os.environ["COSCHED_RANK"]),
                             [_page(), r], [{"peer": 1, "addr": "127.0.0.1"}])  # fmt: skip
    out(reply=reply)


def cmd_nic_truncate(a: argparse.Namespace) -> None:
    """Register (unsealed page when ``--unsealed``), then truncate the ERL page and ours."""
    page = _page(sealed=not a.unsealed)
    c, reply, got = _register(
        os.environ["COSCHED_JOB_ID"], int(os.environ["COSCHED_RANK"]), [page], []
    )
    result: dict[str, Any] = {"reply": reply}
    for name, fd in (("erl", got[0] if got else -1), ("page", page)):
        if fd < 0:
            continue
        try:
            os.ftruncate(fd, 0)
            result[f"{name}_truncated"] = True
        except OSError as e:
            result[f"{name}_truncated"] = False
            result[f"{name}_error"] = e.strerror
        try:  # reopen it writable through /proc and try again
            fd2 = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
            os.ftruncate(fd2, 0)
            result[f"{name}_reopened_truncated"] = True
        except OSError as e:
            result[f"{name}_reopened_truncated"] = False
            result[f"{name}_reopen_error"] = e.strerror
    time.sleep(a.hold)  # the agent's ticks read the pages meanwhile
    c.close()
    out(**result)


def cmd_nic_fake_pending(a: argparse.Namespace) -> None:
    """Register properly once, claim 1000 unexpected messages, burn CPU for ``hold`` s."""
    from agent import nicproto

    fd = _page()
    m = mmap.mmap(fd, 4096)
    nicproto.write_unexpected(m, 1000)
    c, reply, _ = _register(os.environ["COSCHED_JOB_ID"], int(os.environ["COSCHED_RANK"]),
                            [fd], [])  # fmt: skip
    sys.stdout.write(json.dumps({"registered": reply}) + "\n")
    sys.stdout.flush()
    end = time.monotonic() + a.hold
    while time.monotonic() < end:
        nicproto.write_unexpected(m, 1000)
    c.close()


def cmd_nic_register_many(a: argparse.Namespace) -> None:
    """Register our own rank twice, ranks of ours that are elsewhere, and a self-made
    TCP connection as a mesh socket; report which registrations the agent took."""
    job, rank = os.environ["COSCHED_JOB_ID"], int(os.environ["COSCHED_RANK"])
    attempts, keep = [], []
    for r in [rank, rank, *[x for x in range(4) if x != rank]]:
        c, reply, _ = _register(job, r, [_page()], [])
        attempts.append({"rank": r, "ok": bool(reply.get("ok")), "error": reply.get("error")})
        keep.append(c)
    lst = socket.create_server(("127.0.0.1", 0))
    far = socket.create_connection(lst.getsockname())
    near, _ = lst.accept()
    c, reply, _ = _register(job, rank, [_page(), near.fileno()],
                            [{"peer": (rank + 1) % 2, "addr": "127.0.0.1"}])  # fmt: skip
    attempts.append({"rank": rank, "sock": "loopback", "ok": bool(reply.get("ok")),
                     "error": reply.get("error")})  # fmt: skip
    keep += [c, far, near, lst]
    out(attempts=attempts)
    time.sleep(a.hold)


# ---- plain helpers ---------------------------------------------------------------------------
def cmd_read(a: argparse.Namespace) -> None:
    try:
        with open(a.path, errors="replace") as f:
            out(ok=True, text=f.read())
    except OSError as e:
        out(ok=False, error=e.strerror)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="secattacks")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def add(name: str, fn: Any, *args: tuple[str, dict[str, Any]]) -> None:
        p = sub.add_parser(name)
        for flag, kw in args:
            p.add_argument(flag, **kw)
        p.set_defaults(fn=fn)

    s, i, f = {"type": str}, {"type": int}, {"type": float}
    add("request", cmd_request, ("sock", s), ("op", s), ("args", s))
    add("submit-many", cmd_submit_many, ("sock", s), ("spec", s), ("n", i))
    add("tcp-request", cmd_tcp_request, ("host", s), ("port", i), ("keyfile", s), ("name", s),
        ("op", s), ("args", s))  # fmt: skip
    add("rsh-hijack", cmd_rsh_hijack, ("addr", s), ("port", i), ("cmd", s), ("seconds", f))
    add("mesh-impostor", cmd_mesh_impostor, ("addr", s), ("port", i), ("job", s), ("size", i),
        ("claim", i), ("payload", s), ("seconds", f))  # fmt: skip
    add("mesh-victim", cmd_mesh_victim, ("delay", f), ("timeout", f))
    add("deep-unix", cmd_deep_unix, ("sock", s), ("--depth", {"type": int, "default": 100000}))
    add("deep-tcp", cmd_deep_tcp, ("host", s), ("port", i),
        ("--depth", {"type": int, "default": 100000}))  # fmt: skip
    add("unsigned-error", cmd_unsigned_error, ("host", s), ("port", i),
        ("--sender", {"default": "controller"}))  # fmt: skip
    add("flood", cmd_flood, ("n", i), ("hold", f), ("ready", s), ("targets", {"nargs": "+"}))
    add("nic-deep", cmd_nic_deep, ("--path", {"default": None}))
    add("nic-badfd", cmd_nic_badfd)
    add("nic-truncate", cmd_nic_truncate, ("--unsealed", {"action": "store_true"}),
        ("--hold", {"type": float, "default": 1.0}))  # fmt: skip
    add("nic-fake-pending", cmd_nic_fake_pending, ("hold", f))
    add("nic-register-many", cmd_nic_register_many, ("hold", f))
    add("read", cmd_read, ("path", s))
    a = ap.parse_args(argv)
    a.fn(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
