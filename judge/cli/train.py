"""``judge-train``: argument parsing only; the work is :func:`judge.train.train_judge`."""

from __future__ import annotations

import sys

from judge.cli._common import Parser, fail, flags_in_warnings
from judge.cli._logging import setup_logging
from judge.core.errors import JudgeError

#: Settings the library's messages name that judge-train sets in its run config, not by a flag.
CONFIG_SETTINGS = {"skip_invalid": "--set data.skip_invalid=true"}


def main(argv: list[str] | None = None) -> int:
    p = Parser(
        prog="judge-train",
        description="Human annotations -> a LoRA-tuned judge, validated against the humans while it trains. "
        "Several processes: accelerate launch [--num_processes N] -m judge.cli.train --config ...",
    )
    p.add_argument(
        "--config", required=True, help="run config, e.g. rubric6.yaml (a bare name is looked up in rubrics/)"
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set train.learning_rate=1e-4 (repeatable)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from the last checkpoint in "
        "<output_dir>/checkpoints; ends at the same step count as an uninterrupted run",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="also write merged/ (adapter merged into the base, loadable by AutoModelForImageTextToText)",
    )
    p.add_argument(
        "--data", help="use this prebuilt SFT dataset folder (judge-data build) instead of building one"
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="then calibrate the judge on its validation split, as judge-calibrate --judge <output_dir>/judge "
        "does: calibrated scores and 90%% conformal intervals from then on",
    )
    args = p.parse_args(argv)
    setup_logging()
    try:
        from judge.data.config import parse_overrides
        from judge.train import train_judge

        with flags_in_warnings(p, CONFIG_SETTINGS):
            result = train_judge(
                args.config,
                overrides=parse_overrides(args.overrides),
                resume=args.resume,
                merge=args.merge,
                data_dir=args.data,
            )
            if args.calibrate:
                from judge.eval.calibration_report import format_calibration
                from judge.eval.config import CalibrateConfig
                from judge.scoring.calibrate import calibrate_judge

                cal = calibrate_judge(
                    CalibrateConfig(judge=str(result.judge_dir), progress=False)
                ).calibration
                if cal is not None:
                    print("\n== calibration (judge-calibrate)\n" + format_calibration(cal))
    except JudgeError as e:
        return fail(e, p, CONFIG_SETTINGS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
