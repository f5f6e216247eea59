"""The rank's side of the NIC socket (docs/cdc.md "NIC socket").

At start the rank registers with its node's agent: one SEQPACKET datagram
with the duplicated data sockets and a memfd state page (SCM_RIGHTS), as
Yu & Byun's ``register_to_CSM()`` maps a process's receive completion queue
into the kernel (§4.2, Fig. 4). The agent answers with its ERL page, which
the library copies into every header it sends. The state page is where the
library tells the agent, without a system call, whether it is computing,
spinning or blocked, whether it is inside a collective, how many messages
it read off the sockets but has not consumed yet, and the message-delay
histogram.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import mmap
import os
import socket
import sys
from collections.abc import Sequence

from agent import nicproto


class StatePage:
    """The rank's state page: a memfd the library writes and the agent maps read-only.

    It exists with or without an agent (the library's counters live in it), and
    is what registration hands over (``fd``). Layout: agent/nicproto.py. It is
    sealed at its size: the agent takes only a page that cannot shrink under
    its mapping (agent/nicguard.py).
    """

    def __init__(self) -> None:
        self.fd = os.memfd_create("cosched-rank-state", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, nicproto.STATE_SIZE)
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        self.mem = mmap.mmap(self.fd, nicproto.STATE_SIZE)
        nicproto.init_state(self.mem)

    def set_wait(self, state: int) -> None:
        nicproto.write_wait(self.mem, state)

    def set_collective(self, on: bool) -> None:
        nicproto.write_collective(self.mem, on)

    def set_unexpected(self, n: int) -> None:
        nicproto.write_unexpected(self.mem, n)

    def state(self) -> nicproto.State:
        return nicproto.read_state(self.mem)

    def close(self) -> None:
        if not self.mem.closed:
            self.mem.close()
            os.close(self.fd)


class NicClient:
    """Registration with the agent; ``erl_us()`` reads the node's ERL page."""

    def __init__(self, conn: socket.socket, erl: mmap.mmap | None) -> None:
        self.conn = conn
        self.erl = erl

    @classmethod
    def register(
        cls,
        path: str,
        job: str,
        rank: int,
        page: StatePage,
        socks: Sequence[tuple[int, str, socket.socket]],
    ) -> NicClient | None:
        """Register; on any failure print one warning line and return None (no NIC)."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.settimeout(5.0)
            conn.connect(path)
            msg = {
                "op": "register",
                "job": job,
                "rank": rank,
                "pid": os.getpid(),
                "socks": [{"peer": peer, "addr": addr} for peer, addr, _ in socks],
            }
            fds = [page.fd] + [s.fileno() for _, _, s in socks]
            socket.send_fds(conn, [json.dumps(msg).encode()], fds)
            data, got, _flags, _addr = socket.recv_fds(conn, 65536, 4)
            reply = json.loads(data) if data else {"ok": False, "error": "agent closed"}
            if not reply.get("ok"):
                for f in got:
                    os.close(f)
                raise OSError(reply.get("error", "refused"))
            erl = None
            if got:
                erl = mmap.mmap(got[0], nicproto.ERL_PAGE_SIZE, prot=mmap.PROT_READ)
                for f in got:
                    os.close(f)
            conn.setblocking(False)
            return cls(conn, erl)
        except (OSError, ValueError) as e:
            print(
                f"mp: rank {rank}: no NIC registration with the agent at {path} ({e}); "
                "running without coscheduling support",
                file=sys.stderr,
            )
            conn.close()
            return None

    def erl_us(self) -> int:
        return nicproto.read_erl(self.erl) if self.erl is not None else 0

    def collective(self, on: bool) -> None:
        # If the socket is full the page flag still says it at the agent's next tick.
        with contextlib.suppress(OSError):
            self.conn.send(b'{"op":"coll","on":true}' if on else b'{"op":"coll","on":false}')

    def close(self) -> None:
        self.conn.close()
        if self.erl is not None:
            self.erl.close()
            self.erl = None
