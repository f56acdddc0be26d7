"""The main job on the shipped demo set, every command in one Python process (``bash scripts/demo.sh`` runs
this; the steps are listed there and in README.md).

Each step prints the command line it stands for (``$ judge-train --config demo --calibrate``: run alone, it
does the same) and then what that command prints; each runs through the command's own ``main``, in this one
process, so that torch and transformers are imported once (about 10 s a command on a 2-core CPU, a third of
the demo when every command was its own process). The run ends with each step's wall time, the
``judge-view`` command for it and the verdict block (:mod:`judge.view.verdict`: read from the files the steps
wrote).

    python scripts/demo.py [--quick | --steps N] [--seed N] [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import shutil
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The demo's own training length (judge/rubrics/demo.yaml: train.max_steps) and --quick's.
DEMO_STEPS = 300
QUICK_STEPS = 60
#: Seconds on the 2-core development machine (docs/demo.md, "How long it takes": the three runs of
#: scripts/demo_seeds.py, 300 steps each, the median run): everything but the training steps, and one step.
FIXED_S = 60
STEP_S = 0.29

#: command -> (module, its main)
MAINS = {
    "judge-data": ("judge.cli", "data_main"),
    "judge-train": ("judge.cli.train", "main"),
    "judge-calibrate": ("judge.cli.calibrate", "main"),
    "judge-score": ("judge.cli.score", "main"),
    "judge-report": ("judge.cli.report", "main"),
    "judge-audit": ("judge.cli.audit", "main"),
}


def expected_seconds(steps: int) -> int:
    return round(FIXED_S + STEP_S * steps)


#: Set to 1 by scripts/demo.sh when other processes use half of the CPUs or more (it then runs one thread).
BUSY_ENV = "JUDGE_DEMO_BUSY"


def opening(steps: int | None, *, quick: bool, busy: bool) -> str:
    """The demo's first lines: how long it should take and how to change that. A --quick run is not told to
    run --quick; it is told what it gives (a check of the pipeline, not the demo's figures or verdicts)."""
    n_steps = steps if steps is not None else DEMO_STEPS
    text = (
        f"The demo trains {n_steps} steps and takes about {expected_seconds(n_steps)} s on a quiet 2-core CPU "
        "(the development machine; up to twice that on a slower one)."
    )
    if busy:
        # Two --quick runs on a busy 2-core host: 313 s and 337 s in all against 77 s expected (docs/demo.md).
        text += (
            " This machine is busy: expect several times that (--quick took 313 s and 337 s in all on a busy "
            "2-core host)."
        )
    if quick:
        text += (
            f" --quick trains {QUICK_STEPS} steps instead of {DEMO_STEPS}: a check that every step runs; its judge "
            "has learned less, so its figures and verdicts may differ from the full demo's (docs/demo.md)."
        )
    else:
        text += (
            f" {'Shorter' if n_steps > QUICK_STEPS else 'Other lengths'}: bash scripts/demo.sh --quick "
            f"({QUICK_STEPS} steps, about {expected_seconds(QUICK_STEPS)} s: every step runs, but the judge has "
            "learned less, so its figures and verdicts may differ) or --steps N."
        )
    return textwrap.fill(text + " Training prints the time left as it goes.", width=110)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bash scripts/demo.sh",
        description="The main job on the shipped demo set: validate, train, calibrate, score, report, audit.",
    )
    length = p.add_mutually_exclusive_group()
    length.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_STEPS} training steps instead of {DEMO_STEPS}: every step runs, the judge is weaker",
    )
    length.add_argument(
        "--steps", type=int, metavar="N", help=f"N training steps (default {DEMO_STEPS}, demo.yaml's own)"
    )
    p.add_argument(
        "--seed", type=int, metavar="N", help="another training seed (scripts/demo_seeds.py runs 3)"
    )
    p.add_argument(
        "--out", metavar="DIR", help="write under DIR (relative to where you run it) instead of runs/demo"
    )
    args = p.parse_args(argv)
    if args.steps is not None and args.steps < 2:
        p.error(f"--steps must be at least 2, got {args.steps}")
    if args.seed is not None and args.seed < 0:
        p.error(f"--seed must be 0 or more, got {args.seed}")
    return args


def shown(command: str, argv: list[str]) -> str:
    return " ".join([command, *(shlex.quote(a) for a in argv)])


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    # --out is relative to where the demo was started; every other path to the repository root.
    out = str(Path(args.out).resolve()) if args.out else "runs/demo"
    os.chdir(ROOT)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    steps = QUICK_STEPS if args.quick else args.steps
    n_steps = steps if steps is not None else DEMO_STEPS
    print(opening(steps, quick=args.quick, busy=os.environ.get(BUSY_ENV) == "1"), flush=True)

    # Calibrated by the judge-calibrate --selective step below, not by judge-train --calibrate: that would fit
    # the same calibration twice (the selective step refits it on the same labels) and print its tables twice.
    train = ["--config", "demo"]
    if out != "runs/demo":
        train += ["--set", f"output_dir={out}"]
    if steps is not None:  # evaluated half-way and at the end, as demo.yaml does for its own steps
        train += ["--set", f"train.max_steps={steps}", "--set", f"eval.steps={(steps + 1) // 2}"]
    if args.seed is not None:
        train += ["--set", f"train.seed={args.seed}"]
    test_split = f"{out}/data/splits/test.jsonl"
    labels = f"{out}/data/splits/test-sample20.jsonl"
    quiet = ["--overwrite", "--no-progress"]
    # The demo judge is trained on the overall score (demo.yaml's data.criteria): judge-score and judge-audit
    # score what it was trained on by default; the untrained model is asked the same, to compare like with like.
    plan: list[tuple[str, str, list[str]]] = [
        (
            "judge-data validate",
            "judge-data",
            ["validate", "annotations/demo/annotations.jsonl", "--rubric", "mmie"],
        ),
        ("judge-train", "judge-train", train),
        (
            # The demo judge is promised 60% agreement with the annotators (a real judge would be asked 90%):
            # a judge this weak, held to more on the 36 held-out validation scores of 25 questions, escalates
            # everything. 60% shows the thresholds at work.
            "judge-calibrate --selective: calibrate on the validation split, then thresholds that keep 60% "
            "agreement with the annotators (with probability 90%)",
            "judge-calibrate",
            [
                "--judge",
                f"{out}/judge",
                "--selective",
                "--agreement",
                "0.6",
                "--delta",
                "0.1",
                "--no-progress",
            ],
        ),
        (
            "judge-data sample: 20% of the test questions (every model's response to each), at random, as if "
            "labelled",
            "judge-data",
            ["sample", test_split, "--fraction", "0.2", "--by", "question", "--seed", "0", "--out", labels],
        ),
        (
            "judge-score: the trained judge on the test split (calibrated; PPI leaderboard from the 20% labels)",
            "judge-score",
            [test_split, "--judge", f"{out}/judge", "--out", f"{out}/score", *quiet, "--labels", labels],
        ),
        (
            "judge-score: the same model untrained",
            "judge-score",
            [
                test_split,
                "--judge",
                "tiny",
                "--rubric",
                "mmie",
                "--criteria",
                "overall",
                "--out",
                f"{out}/score-untrained",
                *quiet,
            ],
        ),
        (
            "judge-report",
            "judge-report",
            [
                "--human",
                test_split,
                "--scores",
                f"trained={out}/score/scores.jsonl",
                "--scores",
                f"untrained={out}/score-untrained/scores.jsonl",
                "--clip-model",
                "tiny:seed=3",
                "--out",
                f"{out}/report",
                "--ppi-draws",  # 2,000 by default: 500 here keep the demo short (coverage to about 0.6%)
                "500",
                "--title",
                "Demo judge vs simulated annotators (test split)",
                "--note",
                "A demonstration of the pipeline on synthetic data with randomly initialised small models "
                "(a tiny InternVL judge, a tiny random CLIP), not a measure of any real judge.",
            ],
        ),
        (
            "judge-audit: does the trained judge see what the annotators see?",
            "judge-audit",
            [
                test_split,
                "--judge",
                f"{out}/judge",
                "--out",
                f"{out}/audit",
                *quiet,
                "--perturb",
                "blank-images",
                "--perturb",
                "off-topic",
                "--perturb",
                "unrelated-text",
            ],
        ),
    ]

    times: list[tuple[str, float]] = []
    t_all = time.perf_counter()
    for title, command, cmd_argv in plan:
        print(f"\n== {title}\n$ {shown(command, cmd_argv)}", flush=True)
        module, name = MAINS[command]
        t0 = time.perf_counter()
        code = getattr(importlib.import_module(module), name)(cmd_argv)
        times.append((title, time.perf_counter() - t0))
        sys.stdout.flush()
        if code:
            print(
                f"error: the demo stopped at `{command}` (exit {code}); what it wrote so far is in {out}/",
                file=sys.stderr,
            )
            return code

    title = "In brief: calibration, intervals, selective evaluation and prediction-powered means on the test split"
    recap = [f"{out}/report/report.json", "--summary", f"{out}/score/summary.json"]
    print(f"\n== {title}\n$ {shown('python3 scripts/demo_recap.py', recap)}", flush=True)
    t0 = time.perf_counter()
    sys.path.insert(0, str(ROOT / "scripts"))
    code = importlib.import_module("demo_recap").main(recap)
    times.append((title, time.perf_counter() - t0))
    total = time.perf_counter() - t_all

    print("\n== Wall time of each step")
    for title, seconds in times:
        print(f"{seconds:7.1f} s  {title}")
    print(
        f"{total:7.1f} s  in all ({int(total // 60)} min {int(total % 60):02d} s; about "
        f"{expected_seconds(n_steps)} s expected)"
    )
    view = "judge-view" if shutil.which("judge-view") else "python3 -m judge.cli.view"
    print(
        "\n== Look at what the judge did: each test item beside its scores, the report's plots and the audit"
    )
    print(f"{view} {out}/score --report {out}/report --audit {out}/audit")
    # The last screen: the verdicts, read from the files the steps wrote (judge-view's first page shows them too).
    from judge.view.verdict import read_run_files, run_verdicts, verdict_block

    files = read_run_files(
        score=f"{out}/score",
        report=f"{out}/report",
        audit=f"{out}/audit",
        judge=f"{out}/judge",
        scorer="trained",
    )
    print("\n" + verdict_block(run_verdicts(files), files))
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
