"""``python -m testbed.cluster cluster up --nodes 2``: the ``cosched`` command line."""

import sys

from testbed.cli import main

sys.exit(main())
