"""``judge-calibrate``: argument parsing only; the work is :func:`judge.api.calibrate_judge`."""

from __future__ import annotations

import argparse
import sys

from judge.cli._common import Parser, add_settings, fail, flags_in_warnings, settings_from
from judge.cli._logging import setup_logging
from judge.core.errors import JudgeError
from judge.eval.config import CalibrateConfig

EPILOG = """\
examples (from the repository root, after scripts/demo.sh):
  judge-calibrate --judge runs/demo/judge       fit on the judge's validation split (as
                                                judge-train --calibrate did)
  judge-calibrate --judge runs/demo/judge --method isotonic --level 0.8
  judge-calibrate --judge runs/demo/judge --selective --agreement 0.9 --delta 0.1
                                                also fit the trusted/escalated thresholds
  judge-calibrate --judge runs/demo/judge --selective --plan
                                                how many labelled items that promise needs
                                                at this judge's agreement (writes nothing)
  judge-calibrate --judge runs/demo/judge --human runs/demo/data/splits/validation.jsonl \\
                  --scores runs/demo/judge/calibration/scores.jsonl
                                                labels, and the judge's raw scores of them, at hand
"""


def build_parser() -> argparse.ArgumentParser:
    """The options, generated from :class:`~judge.eval.config.CalibrateConfig`."""
    p = Parser(
        prog="judge-calibrate",
        description="Fit a judge's calibration on human labels (by default its validation split): a map of "
        "each criterion's scale distribution (temperature or isotonic, chosen by cross-validated NLL, or none "
        "when neither helps), split conformal intervals at a stated level (per criterion where the labels "
        "allow), and with --selective the confidence thresholds that keep a promised agreement with humans. "
        "Prints NLL, Brier and calibration errors of the read-out and the maps on held-out items, writes "
        "calibration.json (and selective.json) into the judge folder and names them in the judge card; "
        "judge-score, judge-serve and Judge.score then apply them.",
        epilog=EPILOG,
    )
    add_settings(p, CalibrateConfig)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``judge-calibrate``; returns the exit code (2 for a user error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging()
    try:
        from judge.eval.calibration_report import format_calibration
        from judge.eval.selective import format_selective
        from judge.scoring.calibrate import calibrate_judge

        with flags_in_warnings(parser):
            result = calibrate_judge(settings_from(args, CalibrateConfig))
    except JudgeError as e:
        return fail(e, parser)
    if result.calibration is not None and result.path is None and result.selective is not None:
        from judge.eval.selective import format_plan

        print(format_selective(result.selective))  # --plan: what the fit would trust, then the plan
        print()
        print(format_plan(result.selective))
        print("\n(--plan: nothing written)")
        return 0
    if result.calibration is not None:
        print(format_calibration(result.calibration))
        if result.selective is not None:
            print()
            print(format_selective(result.selective))
        if result.labels is not None:
            lab = result.labels
            print(f"\nhuman labels: {lab['matched']} of {lab['labels']} labelled responses matched a score")
        print(f"\nwrote {result.path} (named in the judge card); fitted on {result.scores}")
        if result.selective_path is not None:
            print(
                f"wrote {result.selective_path} (named in the judge card): scores are marked trusted or escalated"
            )
        if result.reliability is not None:
            print(f"reliability diagram of the held-out items: {result.reliability}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
