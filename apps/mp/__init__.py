"""cosched's message-passing library (docs/cdc.md "Message library").

from apps.mp import Comm
with Comm.from_env() as comm:
    comm.send(1, b"hello", tag=7)
    total = comm.allreduce([1.0])
"""

from apps.mp.comm import ANY_SOURCE, ANY_TAG, Comm, Request
from apps.mp.errors import MPError
from apps.mp.linkemu import LinkEmu
from apps.mp.wait import WaitMode

__all__ = ["ANY_SOURCE", "ANY_TAG", "Comm", "LinkEmu", "MPError", "Request", "WaitMode"]
