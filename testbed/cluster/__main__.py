"""``python -m testbed.cluster``: the cluster commands without the full ``cosched`` CLI."""

import sys

from .cli import main

sys.exit(main())
