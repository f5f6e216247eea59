"""Check the controller's flags as the daemon will, without starting it.

    python check_flags.py --policy gang --quantum 0.1 --agents ... --key-file ...

Runs controller/__main__.py's own parsing and config_from_args (policy and its
parameters, quantum, lead, the agents list, the key file's checks), prints
nothing when they pass, and the daemon's one-line error when they do not.
"""

import sys

from common.errors import CoschedError
from common.exits import report
from controller.__main__ import build_parser, config_from_args

try:
    config_from_args(build_parser().parse_args(sys.argv[1:]))
except CoschedError as err:
    sys.exit(report("controller", err))
