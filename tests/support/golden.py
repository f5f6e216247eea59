"""Golden files: figures a test compares bit for bit with those an earlier engine
recorded, written with the commit that recorded them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any


def record(path: Path, runs: dict[str, Any]) -> None:
    """Write ``runs`` to ``path`` with the commit of the code that computed them."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path.write_text(json.dumps({"engine_commit": commit, "runs": runs}, indent=1) + "\n")
