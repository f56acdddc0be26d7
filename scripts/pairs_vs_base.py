"""Pair-trained judge vs the untrained base on held-out demo pairs, over several seeds.

For each seed: ``judge-train --config demo-pairs`` (the tiny model on the demo set's preference pairs, seed
``N``), then both the trained judge and the untrained base (the same ``tiny`` weights it started from) score
the two sides of every pair of the build's **test** split, with the scorer judge-score uses; a verdict is the
preference from the two distributions (as judge-bench and validation read it). Prints a table of held-out
pairwise accuracy (ties as ``pairs_accuracy`` counts them: an undecided verdict earns 1/2) with a paired
bootstrap interval of trained - base (questions resampled, both judges on the same resample), and writes it
as JSON under ``benchmarks/results/``.

The judge-bench VL-RewardBench path does not fit here: its rows are one image and two text responses, while
the demo's responses interleave their own pictures; the pairs are scored as judge-bench scores a pair (each
side's distribution, one preference), in process.

    python scripts/pairs_vs_base.py                      # seeds 0 1 2, demo-pairs as shipped
    python scripts/pairs_vs_base.py --seeds 0 --steps 4  # a quick check of the script itself
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def held_out_credits(data_dir: Path, model, processor, rubric) -> tuple[list[float], list[str]]:
    """Per test pair (human ties left out), what the judge earns, and the pair's question."""
    from judge.data.pair_examples import load_pair_dataset
    from judge.train.pair_validation import PairValidationSet

    test = load_pair_dataset(data_dir)["test"]
    pset = PairValidationSet(test, rubric)
    rows = pset.sides.score(model, processor)
    credits = pset.credits(rows)
    keep = [i for i, c in enumerate(credits) if c is not None]
    return [float(credits[i]) for i in keep], [pset.questions[i] for i in keep]  # type: ignore[arg-type]


def paired_interval(trained, base, clusters, resamples: int, seed: int) -> tuple[float, float]:
    """95% percentile interval of mean(trained) - mean(base), resampling questions (clusters) with replacement."""
    diff = np.asarray(trained) - np.asarray(base)
    ids = sorted(set(clusters))
    index = {q: [i for i, c in enumerate(clusters) if c == q] for q in ids}
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(resamples):
        drawn = rng.integers(0, len(ids), len(ids))
        rows = [i for k in drawn for i in index[ids[k]]]
        stats.append(diff[rows].mean())
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(lo), float(hi)


def _provenance() -> dict:
    """What every result file in benchmarks/results records: date, commit, a dirty tree, versions, device."""
    import subprocess

    import torch
    import transformers

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True).stdout.strip()

    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "device": "cpu",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=None, help="train.max_steps (default: the config's, 150)")
    ap.add_argument("--config", default="demo-pairs")
    ap.add_argument("--runs", default="runs/pairs-vs-base", help="where each seed's run goes")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--out", default=None, help="JSON (default benchmarks/results/pairs_vs_base.json)")
    args = ap.parse_args(argv)

    from judge.core.rubric import load_rubric
    from judge.models import build_tiny_scorer
    from judge.models.loader import load
    from judge.train import train_judge
    from judge.train.config import load_run_config

    _, cfg = load_run_config(args.config)
    rubric = load_rubric(cfg.rubric)
    rows = []
    for seed in args.seeds:
        out = Path(args.runs) / f"seed-{seed}"
        over: dict = {"output_dir": str(out), "seed": seed, "eval.strategy": "no", "eval.at_start": False}
        if args.steps is not None:
            over["train.max_steps"] = args.steps
        t0 = time.perf_counter()
        train_judge(args.config, overrides=over)
        seconds = time.perf_counter() - t0
        judge = load(out / "judge", device="cpu", progress=False)
        trained, clusters = held_out_credits(out / "data", judge.model, judge.processor, rubric)
        base_model, base_proc = build_tiny_scorer(seed=0)  # demo-pairs starts from `tiny` (seed 0) every seed
        base, clusters_b = held_out_credits(out / "data", base_model, base_proc, rubric)
        assert clusters == clusters_b
        lo, hi = paired_interval(trained, base, clusters, args.resamples, seed)
        rows.append(
            {
                "seed": seed,
                "pairs": len(trained),
                "questions": len(set(clusters)),
                "trained_accuracy": float(np.mean(trained)),
                "base_accuracy": float(np.mean(base)),
                "difference": float(np.mean(trained) - np.mean(base)),
                "interval_95": [lo, hi],
                "train_seconds": round(seconds, 1),
            }
        )
    print(f"{'seed':>4} {'pairs':>6} {'trained':>8} {'base':>8} {'trained - base [95% paired CI]':>32}")
    for r in rows:
        lo, hi = r["interval_95"]
        print(
            f"{r['seed']:>4} {r['pairs']:>6} {r['trained_accuracy']:>8.3f} {r['base_accuracy']:>8.3f} "
            f"{r['difference']:>+12.3f} [{lo:+.3f}, {hi:+.3f}]"
        )
    path = Path(args.out) if args.out else REPO / "benchmarks" / "results" / "pairs_vs_base.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        **_provenance(),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "config": args.config,
        "steps": args.steps,
        "resamples": args.resamples,
        "split": "test",
        "accuracy": "pairs humans did not tie; an undecided verdict earns 1/2",
        "rows": rows,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
