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
  judge-calibrate --judge runs/demo/judge --human runs/demo/data/splits/validation.jsonl \\
                  --scores runs/demo/judge/calibration/scores.jsonl
                                                labels, and the judge's raw scores of them, at hand
"""


def build_parser() -> argparse.ArgumentParser:
    """The options, generated from :class:`~judge.eval.config.CalibrateConfig`."""
    p = Parser(
        prog="judge-calibrate",
        description="Fit a judge's calibration on human labels (by default its validation split): a map of "
        "the expected score per criterion (temperature or isotonic; both are compared on held-out items) "
        "and split conformal intervals at a stated level. Writes calibration.json into the judge folder "
        "and names it in the judge card; judge-score, judge-serve and Judge.score then apply it.",
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
        from judge.eval.calibration import format_calibration
        from judge.scoring.calibrate import calibrate_judge

        with flags_in_warnings(parser):
            result = calibrate_judge(settings_from(args, CalibrateConfig))
    except JudgeError as e:
        return fail(e, parser)
    if result.calibration is not None:
        print(format_calibration(result.calibration))
        print(f"\nwrote {result.path} (named in the judge card); fitted on {result.scores}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
