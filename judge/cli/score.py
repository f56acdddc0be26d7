"""``judge-score``: argument parsing only; the work is :func:`judge.scoring.score_files`.

The options are generated from :class:`~judge.scoring.config.ScoreConfig` (names, defaults, help, choices,
checks); this module orders them into groups and prints the result.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from judge.cli._common import Parser, add_settings, print_written, run_job, settings_from

if TYPE_CHECKING:  # the run module loads torch; the command imports it only once parsing is done
    from judge.scoring.run import ScoreResult

EPILOG = """\
examples (from the repository root, after scripts/demo.sh):
  judge-score examples/predictions/canonical.jsonl --judge runs/demo/judge --out runs/ex/canonical
                                      canonical predictions, the demo's trained judge
  judge-score examples/predictions/mmie.json --judge tiny --rubric mmie --out runs/ex/mmie
                                      MMIE's JSON, the tiny (untrained) test model
  judge-score examples/predictions/milebench/*/pred.json \\
              --dataset-file examples/predictions/milebench --no-judge --out runs/ex/milebench
                                      MileBench's pred.json files, the official metrics only
  judge-score examples/predictions/mmra/predictions.jsonl --no-judge --metric-mode official \\
              --out runs/ex/mmra      MMRA rows, the official metric only
  judge-score runs/demo/data/splits/test.jsonl --judge runs/demo/judge --out runs/ex/test
                                      an annotation split (for judge-report)
  judge-score examples/predictions/canonical.jsonl --judge runs/demo/judge --workers 2 \\
              --out runs/ex/workers   encoding in 2 processes while the model scores
  judge-score examples/predictions/canonical.jsonl --server http://127.0.0.1:8000 \\
              --out runs/ex/remote    through a running judge-serve --judge runs/demo/judge
  accelerate launch --multi_gpu --num_processes 2 -m judge.cli.score \\
              examples/predictions/canonical.jsonl --judge runs/demo/judge --device cpu \\
              --out runs/ex/two
                                      two processes (on the CPU too)
"""


#: The options in ``--help`` order, by group; each is a field of :class:`~judge.scoring.config.ScoreConfig`.
GROUPS = {
    "judge": [
        "judge",
        "server",
        "server_concurrency",
        "rubric",
        "criteria",
        "force",
        "calibration",
        "no_judge",
        "rationale",
        "max_new_tokens",
        "device",
        "dtype",
        "quantization",
        "batch_tokens",
        "batch_size",
        "share_prefix",
        "packed",
        "reproducible",
        "workers",
        "max_tokens",
        "baseline",
        "clip_model",
    ],
    "inputs and outputs": [
        "format",
        "dataset_file",
        "root",
        "metric_mode",
        "skip_invalid",
        "limit",
        "out",
        "overwrite",
        "progress",
    ],
    "summary": ["labels", "min_labels", "leaderboard_resamples", "leaderboard_seed"],
}


def build_parser() -> argparse.ArgumentParser:
    # Imported here: reading the benchmark registry loads benchmark plugins, whose failure main() reports.
    from judge.scoring.config import ScoreConfig
    from judge.scoring.inputs import input_formats

    p = Parser(
        prog="judge-score",
        description="Score benchmark predictions with a learned judge (expected score per criterion, from "
        "the score-token distribution) and the benchmarks' rule-based metrics; write scores.jsonl and a "
        "summary. A killed run started again resumes where it stopped.",
        epilog=EPILOG,
    )
    add_settings(p, ScoreConfig, positional=["inputs"], groups=GROUPS, choices={"format": input_formats()})
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``judge-score``; returns the exit code (2 for a user error)."""

    def job(args: argparse.Namespace) -> ScoreResult:
        from judge.scoring.config import ScoreConfig
        from judge.scoring.run import score_files

        return score_files(settings_from(args, ScoreConfig))

    def show(result: ScoreResult) -> None:
        if result.summary:  # the main process prints; the others of a sharded run stay quiet
            print_result(result)

    return run_job(build_parser, argv, job, show)


def print_result(result: ScoreResult) -> None:
    """A short plain-text summary and where the files went (every table is in summary.md)."""
    from judge.scoring.summary import render_console

    if result.summary:
        print(render_console(result.summary))
        print()
    print_written(result.written, result.seconds, result.files, note="every table: summary.md")


if __name__ == "__main__":
    sys.exit(main())
