"""Run an unmodified Open MPI program as a cosched job (``cosched submit --mpi``).

The controller places a job of N ranks on N nodes and each node's agent starts the
same command inside the job's cgroups, as the submitting user. For an MPI program
that command is ``python -m apps.mpilaunch -- PROGRAM ARGS``; what each rank does:

* **rank 0** runs ``mpirun -n N --host IP0,IP1,...`` (the ranks' data-network
  addresses, ``COSCHED_PEERS``) with this module as Open MPI's remote-shell agent
  (``plm_rsh_agent``) and its out-of-band and TCP transports restricted to the
  data network. mpirun, and the MPI process it starts on node 0, are children of
  rank 0: inside its cgroup.
* **rank r > 0** waits on its data address (port ``COSCHED_PORT`` + r) for rank 0's
  remote-shell agent, which sends the command mpirun wants run there (Open MPI's
  ``orted`` daemon); it runs it with ``/bin/sh -c`` as its own child — so the daemon
  and the MPI process it starts are inside rank r's cgroup, as the job's user — and
  relays its output and exit status back. Only connections from rank 0's address
  that prove they hold the job's secret are served, one command each (issue 28:
  any job on rank 0's node could connect, and its command ran as this job's
  user). The exchange (apps/mp/auth.py): the rank sends a nonce; the caller
  sends the command with its own nonce and an HMAC under the secret over both
  and the command; the rank answers with its own HMAC before running anything,
  so the caller knows the output it relays is the rank's.

So the gang scheduler freezes and thaws mpirun, the daemons and every MPI process
with the job, and an MPI program needs no change. Open MPI 4 (ORTE, ``orted``) is
what Debian ships here; ``cosched submit --mpi`` refuses in one line where mpirun
is missing.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from apps.mp import auth
from apps.mp.mesh import connect_once
from common import safejson

ACCEPT_TIMEOUT_S = 120.0  # a rank > 0 waits this long for mpirun's call
CONNECT_TIMEOUT_S = 60.0  # the remote-shell agent retries this long (ranks start unevenly)
HANDSHAKE_S = 10.0  # a caller gets this long to prove itself
MAX_MESSAGE = 1 << 20  # one framed message, bytes
_LEN = struct.Struct("!I")


class LaunchError(RuntimeError):
    pass


def _peers() -> tuple[int, int, list[str], int]:
    try:
        rank = int(os.environ["COSCHED_RANK"])
        size = int(os.environ["COSCHED_SIZE"])
        port = int(os.environ["COSCHED_PORT"])
    except (KeyError, ValueError) as e:
        raise LaunchError(
            f"not started as a cosched job ({e}): use `cosched submit --mpi`"
        ) from None
    raw = os.environ.get("COSCHED_PEERS") or ",".join(
        [os.environ.get("COSCHED_RANK0_ADDR", "127.0.0.1")] * size
    )
    peers = raw.split(",")
    if len(peers) != size:
        raise LaunchError(f"COSCHED_PEERS names {len(peers)} addresses for {size} ranks")
    return rank, size, peers, port


def data_network(peers: Sequence[str]) -> str:
    """The smallest network holding every rank's address (Open MPI's if_include)."""
    addrs = [ipaddress.ip_address(p) for p in peers]
    net = ipaddress.ip_network(f"{addrs[0]}/32")
    while not all(a in net for a in addrs):
        net = net.supernet()
    return str(net)


def mpirun_argv(mpirun: str, peers: Sequence[str], program: Sequence[str]) -> list[str]:
    """Rank 0's command: one MPI process per node, daemons started through us."""
    agent = f"{sys.executable} -m apps.mpilaunch --rsh"
    net = data_network(peers)
    return [
        mpirun, "-n", str(len(peers)), "--host", ",".join(f"{p}:1" for p in peers),
        "--mca", "plm_rsh_agent", agent,
        "--mca", "plm_rsh_no_tree_spawn", "1",  # every daemon from rank 0: we serve one call
        "--leave-session-attached",  # orted stays our child: in the cgroup, its output relayed
        "--mca", "oob_tcp_if_include", net,
        "--mca", "btl_tcp_if_include", net,
        "--mca", "btl", "self,tcp",  # nodes are separate hosts (shared memory is not)
        "--mca", "mpi_yield_when_idle", "1",
        "-x", "PYTHONPATH", "-x", "PATH",
        *program,
    ]  # fmt: skip


def _send(sock: socket.socket, obj: object) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(_LEN.pack(len(data)) + data)


def _recv(sock: socket.socket) -> object | None:
    """One framed message; None at EOF or for one too long or not (shallow) JSON."""
    head = _recv_exact(sock, _LEN.size)
    if head is None or _LEN.unpack(head)[0] > MAX_MESSAGE:
        return None
    body = _recv_exact(sock, _LEN.unpack(head)[0])
    if body is None:
        return None
    try:
        msg: object = safejson.loads(body)
    except ValueError:
        return None
    return msg


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


# ---- rank r > 0: serve one command from rank 0 -------------------------------------------


def _rank_proof(secret: bytes, rank: int, cmd: str, theirs: bytes, mine: bytes) -> bytes:
    return auth.proof(secret, "cosched-mpilaunch-rank", rank, cmd, theirs, mine)


def _caller_proof(secret: bytes, rank: int, cmd: str, theirs: bytes, mine: bytes) -> bytes:
    return auth.proof(secret, "cosched-mpilaunch-rsh", rank, cmd, theirs, mine)


def _authenticated_command(conn: socket.socket, rank: int, secret: bytes) -> str | None:
    """The command a caller sends, if it proves it holds the job's secret; else None."""
    conn.settimeout(HANDSHAKE_S)
    mine = auth.new_nonce()
    try:
        _send(conn, {"nonce": mine.hex()})
        msg = _recv(conn)
        if not isinstance(msg, dict):
            return None
        cmd, nonce, proof = msg.get("cmd"), msg.get("nonce"), msg.get("proof")
        if not (isinstance(cmd, str) and isinstance(nonce, str) and isinstance(proof, str)):
            return None
        theirs, got = bytes.fromhex(nonce), bytes.fromhex(proof)
        if not auth.valid(_caller_proof(secret, rank, cmd, mine, theirs), got):
            return None
        _send(conn, {"proof": _rank_proof(secret, rank, cmd, theirs, mine).hex()})
    except (OSError, ValueError):
        return None
    conn.settimeout(None)
    return cmd


def serve(rank: int, peers: Sequence[str], port: int) -> int:
    secret = auth.secret_from_env()
    lst = socket.create_server((peers[rank], port + rank), reuse_port=False)
    deadline = time.monotonic() + ACCEPT_TIMEOUT_S
    with lst:
        while True:
            lst.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                conn, (addr, _p) = lst.accept()
            except TimeoutError:
                print(f"mpilaunch: rank {rank}: mpirun never called in {ACCEPT_TIMEOUT_S:g} s",
                      file=sys.stderr)  # fmt: skip
                return 1
            if addr != peers[0]:  # only rank 0's remote-shell agent
                conn.close()
                continue
            cmd = _authenticated_command(conn, rank, secret)
            if cmd is None:
                print(f"mpilaunch: rank {rank}: refused a call from {addr}: it cannot prove "
                      "it belongs to this job", file=sys.stderr, flush=True)  # fmt: skip
                conn.close()
                continue
            break
    with conn:
        env = dict(os.environ)
        if os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        proc = subprocess.Popen(
            ["/bin/sh", "-c", cmd],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )

        # one writer at a time on the socket
        lock = threading.Lock()

        def locked(stream: object, tag: str) -> None:
            assert hasattr(stream, "read1")
            while chunk := stream.read1(65536):
                with lock, contextlib.suppress(OSError):
                    _send(conn, {tag: chunk.decode(errors="replace")})

        threads = [
            threading.Thread(target=locked, args=(proc.stdout, "out"), daemon=True),
            threading.Thread(target=locked, args=(proc.stderr, "err"), daemon=True),
        ]
        for t in threads:
            t.start()
        code = proc.wait()
        for t in threads:
            t.join(5)
        print(f"mpilaunch: rank {rank}: Open MPI's daemon exited with status {code}: "
              f"{cmd.strip()}", file=sys.stderr)  # fmt: skip
        with lock, contextlib.suppress(OSError):
            _send(conn, {"exit": code})
    return code


# ---- the remote-shell agent mpirun calls: `--rsh HOST CMD...` -----------------------------


def rsh(argv: Sequence[str]) -> int:
    _rank, _size, peers, port = _peers()
    args = [a for a in argv if not (a.startswith("-") and a in ("-x", "-n", "-T"))]
    if not args:
        print("mpilaunch --rsh: no host", file=sys.stderr)
        return 255
    host, cmd = args[0], " ".join(args[1:])
    if host not in peers:
        print(f"mpilaunch --rsh: {host} is not a node of this job ({','.join(peers)})",
              file=sys.stderr)  # fmt: skip
        return 255
    r = peers.index(host)
    end = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            sock = connect_once((host, port + r), 5)
            break
        except OSError as e:
            if time.monotonic() > end:
                print(f"mpilaunch --rsh: rank {r} at {host}:{port + r}: {e}", file=sys.stderr)
                return 255
            time.sleep(0.2)
    secret = auth.secret_from_env()
    with sock:
        try:
            sock.settimeout(HANDSHAKE_S)
            hello = _recv(sock)
            if not isinstance(hello, dict) or not isinstance(hello.get("nonce"), str):
                raise ValueError("no nonce")
            theirs, mine = bytes.fromhex(hello["nonce"]), auth.new_nonce()
            proof = _caller_proof(secret, r, cmd, theirs, mine).hex()
            _send(sock, {"cmd": cmd, "nonce": mine.hex(), "proof": proof})
            answer = _recv(sock)
            got = bytes.fromhex(answer.get("proof", "")) if isinstance(answer, dict) else b""
            if not auth.valid(_rank_proof(secret, r, cmd, mine, theirs), got):
                raise ValueError("wrong proof")
        except (OSError, ValueError) as e:
            print(f"mpilaunch --rsh: rank {r} at {host}:{port + r} did not prove it belongs "
                  f"to this job ({e})", file=sys.stderr)  # fmt: skip
            return 255
        sock.settimeout(None)
        while True:
            msg = _recv(sock)
            if not isinstance(msg, dict):
                return 255  # the rank went away
            if "out" in msg:
                sys.stdout.write(msg["out"])
                sys.stdout.flush()
            elif "err" in msg:
                sys.stderr.write(msg["err"])
                sys.stderr.flush()
            elif "exit" in msg:
                return int(msg["exit"])


# ---- rank 0 ---------------------------------------------------------------------------


def launch(program: Sequence[str]) -> int:
    rank, _size, peers, port = _peers()
    if rank != 0:
        return serve(rank, peers, port)
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("mpilaunch: mpirun is not installed on this node (apt-get install openmpi-bin)",
              file=sys.stderr)  # fmt: skip
        return 127
    env = dict(os.environ)
    if os.geteuid() == 0:  # a root job (root submitted it): Open MPI wants it said twice
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.setdefault("PYTHONPATH", os.getcwd())
    argv = mpirun_argv(mpirun, peers, program)
    print(f"mpilaunch: {shlex.join(argv)}", file=sys.stderr, flush=True)
    return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL).returncode


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["--rsh"]:
            return rsh(args[1:])
        if args[:1] == ["--"]:
            args = args[1:]
        if not args:
            print("usage: python -m apps.mpilaunch -- PROGRAM ARGS (as a cosched job)",
                  file=sys.stderr)  # fmt: skip
            return 2
        return launch(args)
    except LaunchError as e:
        print(f"mpilaunch: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
