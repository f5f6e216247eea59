"""Does NIC have cosched's HTB shaping at RATE bit/s? Prints JSON, changes nothing.

    python htb_state.py NIC RATE_BPS BURST_BYTES

The layout is testbed/cluster/shaping.py's: root qdisc htb 1: with default
class 0x10, class 1:10 with rate = ceil and burst = cburst. Prints
{"qdisc_ok": bool, "class_ok": bool, "qdisc": ..., "class": ...}: the role
(re)makes the qdisc or the class only where one is not as wanted.
"""

import json
import re
import subprocess
import sys

UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
SIZES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def tc(*args: str) -> str:
    return subprocess.run(["tc", *args], check=True, capture_output=True, text=True).stdout


def rate(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)([KMGT]?)bit", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else -1.0


def size(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)([KMG]?)b", text)
    return float(m.group(1)) * SIZES[m.group(2)] if m else -1.0


def near(got: float, want: float, tolerance: float) -> bool:
    return abs(got - want) <= tolerance * want


def main(nic: str, rate_bps: int, burst: int) -> dict[str, object]:
    qdiscs = json.loads(tc("-j", "qdisc", "show", "dev", nic, "root") or "[]")
    root = qdiscs[0] if qdiscs else {}
    qdisc_ok = (
        root.get("kind") == "htb"
        and root.get("handle") == "1:"
        and int(str(root.get("options", {}).get("default", "0")), 0) == 0x10
    )
    line = tc("class", "show", "dev", nic, "classid", "1:10").strip() if qdisc_ok else ""
    fields = dict(re.findall(r"\b(rate|ceil|burst|cburst) (\S+)", line))
    class_ok = (
        line.startswith("class htb 1:10 ")
        and near(rate(fields.get("rate", "")), rate_bps, 0.005)
        and near(rate(fields.get("ceil", "")), rate_bps, 0.005)
        # tc keeps the burst as a time and prints it back: allow its rounding
        and near(size(fields.get("burst", "")), burst, 0.02)
        and near(size(fields.get("cburst", "")), burst, 0.02)
    )
    return {"qdisc_ok": qdisc_ok, "class_ok": class_ok, "qdisc": root, "class": line}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
