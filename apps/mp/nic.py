"""The rank's side of the NIC socket (docs/cdc.md "NIC socket").

At start the rank registers with its node's agent: one SEQPACKET datagram
with the duplicated data sockets and a memfd state page (SCM_RIGHTS), as
seed 002's ``register_to_CSM()`` maps a process's receive completion queue
into the kernel (§4.2, Fig. 4). The agent answers with its ERL page, which
the library copies into every header it sends. The state page is where the
library tells the agent, without a system call, whether it is computing,
spinning or blocked, whether it is inside a collective, how many messages
it read off the sockets but has not consumed yet, and the message-delay
histogram.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import socket
import struct
import sys
from collections.abc import Sequence

from agent import nicproto

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_MD = struct.Struct("<QQ")


class StatePage:
    """The library's writable view of its state page (also used without an agent)."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("cosched-rank-state", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, nicproto.STATE_SIZE)
        self.mem = mmap.mmap(self.fd, nicproto.STATE_SIZE)
        nicproto.init_state(self.mem)
        self.md_count = 0
        self.md_sum_ns = 0
        self.consumed = 0

    def set_wait(self, state: int) -> None:
        _U32.pack_into(self.mem, nicproto.OFF_WAIT, state)

    def set_collective(self, on: bool) -> None:
        _U32.pack_into(self.mem, nicproto.OFF_IN_COLLECTIVE, 1 if on else 0)

    def set_unexpected(self, n: int) -> None:
        _U64.pack_into(self.mem, nicproto.OFF_UNEXPECTED, n)

    def add_receive(self, md_ns: int) -> None:
        self.consumed += 1
        self.md_count += 1
        self.md_sum_ns += md_ns
        _U64.pack_into(self.mem, nicproto.OFF_CONSUMED, self.consumed)
        _MD.pack_into(self.mem, nicproto.OFF_MD_COUNT, self.md_count, self.md_sum_ns)
        off = nicproto.OFF_MD_BUCKETS + 8 * nicproto.md_bucket(md_ns / 1e9)
        _U64.pack_into(self.mem, off, _U64.unpack_from(self.mem, off)[0] + 1)

    def buckets(self) -> list[int]:
        return list(nicproto.read_state(self.mem).md_buckets)

    def close(self) -> None:
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
