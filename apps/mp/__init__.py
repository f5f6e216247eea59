"""cosched's message-passing library (docs/cdc.md "Message library"; Yu & Byun 2011 §4).

    from apps.mp import Comm, ANY_SOURCE
    with Comm.from_env() as comm:          # COSCHED_* from the launcher
        comm.send(1, b"hello", tag=7)
        total = comm.allreduce([1.0])

Modules: frame (40-byte headers), comm (connections, progress engine, point to
point), collectives, wait (spin / block / spin-block), linkemu (userspace
delay, jitter and loss), nic (registration with the node agent), stats
(message counts and message delay).
"""

from apps.mp.collectives import pack_floats, pack_ints, unpack_floats, unpack_ints
from apps.mp.comm import ANY_SOURCE, ANY_TAG, Comm, Request
from apps.mp.errors import MPError
from apps.mp.linkemu import LinkEmu
from apps.mp.wait import WaitMode

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
    "Comm",
    "LinkEmu",
    "MPError",
    "Request",
    "WaitMode",
    "pack_floats",
    "pack_ints",
    "unpack_floats",
    "unpack_ints",
]
