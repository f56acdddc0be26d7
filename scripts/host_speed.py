"""How fast this machine is today, for the test suite's time budget (`.ci/run`).

The suite's wall time on the 2-core development host varies by up to 1.5x from day to day with the host
alone (same commit, same tests). A fixed wall-clock budget is then either loose or flaky; `.ci/run` scales
its budget by this machine's speed against the development host's instead, so that on a slower machine or
day it fails when the suite would pass its budget *at the development host's speed*; on a faster one the
budget stays its base in wall time.

The workload is what dominates the suite: a fresh Python importing torch, transformers (the InternVL
modelling the tiny judges use) and peft, then a few hundred small matrix products. Each run is a process
of its own; its wall-clock seconds are timed.

    python3 scripts/host_speed.py measure [--runs 3] [--json PATH]
        times the workload, prints a table and the median; --json writes the runs
    python3 scripts/host_speed.py budget --base 2100 --reference R SECONDS [SECONDS ...]
        prints the budget and its factor: BASE x (median of SECONDS / R), the factor between 1 and 2
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

WORKLOAD = (
    "import torch, transformers, peft\n"
    "from transformers.models.internvl import modeling_internvl\n"
    "x = torch.randn(256, 256)\n"
    "for _ in range(200):\n"
    "    x = torch.tanh(x @ x)\n"
)
#: the factor's bounds: never under 1 (the budget is at least its base in wall time, on any machine), and a
#: broken measurement cannot turn the check off
MIN_FACTOR, MAX_FACTOR = 1.0, 2.0


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of seconds, got {text!r}")
    return value


def measure(runs: int) -> list[float]:
    """Wall-clock seconds of ``runs`` fresh processes running the workload, one after another."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", WORKLOAD], capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise SystemExit(f"error: the workload failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return times


def budget(base: float, reference: float, seconds: list[float]) -> tuple[int, float]:
    """The budget in seconds and the factor it was scaled by."""
    factor = min(MAX_FACTOR, max(MIN_FACTOR, statistics.median(seconds) / reference))
    return round(base * factor), factor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="time the workload")
    m.add_argument("--runs", type=int, default=3, help="fresh processes (default 3; the median is reported)")
    m.add_argument("--json", help="write the runs here")
    m.add_argument("--median-only", action="store_true", help="print the median alone (for a shell script)")
    b = sub.add_parser("budget", help="scale a budget by the measured seconds")
    b.add_argument("--base", type=positive, required=True, help="the budget at the reference speed, seconds")
    b.add_argument("--reference", type=positive, required=True, help="the workload's seconds at that speed")
    b.add_argument("seconds", type=positive, nargs="+", help="the workload's seconds measured here")
    args = parser.parse_args(argv)
    if args.command == "budget":
        seconds, factor = budget(args.base, args.reference, args.seconds)
        print(seconds, f"{factor:.2f}")
        return 0
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    times = measure(args.runs)
    median = statistics.median(times)
    if args.median_only:
        print(f"{median:.2f}")
    else:
        print("| run | seconds |\n| --- | --- |")
        for i, t in enumerate(times, 1):
            print(f"| {i} | {t:.2f} |")
        print(f"median: {median:.2f} s ({platform.node()}, {platform.processor() or platform.machine()})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "host": platform.node(),
                    "command": "python3 scripts/host_speed.py "
                    + " ".join(sys.argv[1:] if argv is None else argv),
                    "workload": WORKLOAD,
                    "seconds": times,
                    "median": median,
                },  # fmt: skip
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
