"""Time the judge with and without shared-prefix scoring, side by side in one run.

Scores the demo set (``annotations/demo/annotations.jsonl``) with the tiny judge (or ``--judge``)
through the public API (:class:`judge.Judge`, ``share_prefix`` on and off), alternately,
``--repeats`` times each (median reported), and prints responses/s and criterion scores/s.
Each side loads the judge once; each timed run encodes and scores (what ``judge-score`` does per item,
minus writing). The JSON result goes to ``benchmarks/results/`` with the machine's facts
(CPU count, threads, load average before and after: other jobs on a shared machine skew timings).

    python scripts/bench_prefix.py                    # tiny judge, first 60 demo responses, 3 runs each
    python scripts/bench_prefix.py --all              # the whole demo set (750 responses)
    python scripts/bench_prefix.py --threads 1        # steadier on a CPU shared with other jobs
    python scripts/bench_prefix.py --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    def positive_int(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
        return int(text)

    from judge import ScoreConfig

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", default=str(REPO / "annotations/demo/annotations.jsonl"))
    p.add_argument("--judge", default="tiny")
    p.add_argument("--rubric", default="mmie")
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--limit", type=positive_int, default=60, help="score the first N responses (default 60)"
    )
    size.add_argument("--all", action="store_true", help="score every response of --input")
    p.add_argument("--repeats", type=positive_int, default=3)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument(
        "--batch-size", type=positive_int, default=16, help="responses per forward pass (default 16)"
    )
    p.add_argument(
        "--batch-tokens", type=positive_int, default=ScoreConfig.model_fields["batch_tokens"].default
    )
    p.add_argument(
        "--threads",
        type=positive_int,
        help="torch intra-op threads (default: torch's own choice). On a machine "
        "shared with other jobs, 1 avoids threads stalling each other and gives steadier timings",
    )
    p.add_argument("--out", default=str(REPO / "benchmarks/results"))
    args = p.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    import judge

    def load(share: bool) -> judge.Judge:
        return judge.Judge.load(
            args.judge,
            rubric=args.rubric,
            device=args.device,
            dtype=args.dtype,
            share_prefix=share,
            batch_size=args.batch_size,
            batch_tokens=args.batch_tokens,
        )

    judges = {True: load(True), False: load(False)}
    scorer = judges[True]
    device = scorer.device
    records = judge.load_annotations(args.input).records
    if not args.all:
        records = records[: args.limit]
    n_criteria = sum(len(scorer.rubric.family(r.task).criterion_ids) for r in records)
    load_before = os.getloadavg()

    def run(share: bool) -> float:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        n = len(judges[share].score_records(records))
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        assert n == n_criteria, (n, n_criteria)
        return time.perf_counter() - t0

    run(True)  # warm-up: first-call allocations and lazy imports are not what we measure
    times: dict[str, list[float]] = {"shared": [], "unshared": []}
    for i in range(args.repeats):
        # Alternate the order so a drift in machine load does not favour one side.
        for mode in ("shared", "unshared") if i % 2 == 0 else ("unshared", "shared"):
            times[mode].append(run(mode == "shared"))
            print(f"run {i + 1} {mode:8s} {times[mode][-1]:7.2f} s", file=sys.stderr, flush=True)
    load_after = os.getloadavg()

    rows = {}
    for mode, ts in times.items():
        med = statistics.median(ts)
        rows[mode] = {
            "seconds_median": med,
            "seconds": ts,
            "responses_per_s": len(records) / med,
            "criterion_scores_per_s": n_criteria / med,
        }
    speedup = rows["unshared"]["seconds_median"] / rows["shared"]["seconds_median"]
    print(
        f"\n{len(records)} responses, {n_criteria} criterion scores; judge {scorer.provenance['judge']} on "
        f"{device} ({scorer.dtype}); median of {args.repeats}\n"
    )
    print(f"| {'prefix':9s} | {'seconds':>8s} | {'responses/s':>11s} | {'criterion scores/s':>18s} |")
    print(f"|{'-' * 11}|{'-' * 10}|{'-' * 13}|{'-' * 20}|")
    for mode, r in rows.items():
        print(
            f"| {mode:9s} | {r['seconds_median']:8.2f} | {r['responses_per_s']:11.2f} | "
            f"{r['criterion_scores_per_s']:18.2f} |"
        )
    print(
        f"\nshared prefix: {speedup:.2f}x faster; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after "
        f"on {os.cpu_count()} CPUs"
    )

    result = {
        "benchmark": "shared-prefix scoring",
        "judge": scorer.provenance["judge"],
        "rubric": scorer.rubric.name,
        "input": str(args.input),
        "responses": len(records),
        "criterion_scores": n_criteria,
        "device": device,
        "dtype": scorer.dtype,
        "batch_size": args.batch_size,
        "batch_tokens": args.batch_tokens,
        "repeats": args.repeats,
        "results": rows,
        "speedup": speedup,
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(),
            "load_average_before": load_before,
            "load_average_after": load_after,
            "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
        },
        "versions": {
            "judge": judge.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "git_commit": _git_commit(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = "gpu" if device.startswith("cuda") else "cpu"
    path = out / f"bench_prefix_{tag}_{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        )
    except OSError:
        return None
    return out.stdout.strip() or None


if __name__ == "__main__":
    sys.exit(main())
