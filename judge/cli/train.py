"""``judge-train``: argument parsing only; the work is :func:`judge.train.train_judge`."""

from __future__ import annotations

import sys

from judge.cli._common import Parser, fail, flags_in_warnings
from judge.cli._logging import setup_logging
from judge.core.errors import JudgeError

#: Settings the library's messages name that judge-train sets in its run config, not by a flag.
CONFIG_SETTINGS = {"skip_invalid": "--set data.skip_invalid=true"}


EXAMPLES = """\
examples:
  judge-train --config demo --set train.max_steps=20 --set eval.steps=10 \\
              --set output_dir=runs/demo-20
                        the demo recipe, 20 steps, validated twice (scripts/demo.sh runs more)
  judge-train --config demo --data runs/demo-20/data --set train.learning_rate=5e-4 \\
              --set train.max_steps=20 --set eval.steps=10 --set output_dir=runs/demo-lr
                        another learning rate on the data that run built
"""


def set_keys(width: int = 98) -> str:
    """What ``--set`` takes: each section's keys, read from the run config model (so the list is never stale)."""
    import textwrap

    from pydantic import BaseModel

    from judge.train.config import RunConfig

    top, lines = [], []
    for name, f in RunConfig.model_fields.items():
        sub = f.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            keys = ", ".join(sub.model_fields)
            lines.append(
                textwrap.fill(f"{name}.{{{keys}}}", width, initial_indent="  ", subsequent_indent="    ")
            )
        else:
            top.append(name)
    head = textwrap.fill(
        f"--set SECTION.KEY=VALUE takes these keys (and top-level KEY=VALUE: {', '.join(top)}):", width
    )
    return "\n".join([head, *lines])


def build_parser() -> Parser:
    from judge.core.rubric import shipped_dir

    configs = sorted(f.stem for f in shipped_dir().glob("*.yaml") if _is_run_config(f))
    p = Parser(
        prog="judge-train",
        description="Human annotations -> a LoRA-tuned judge, validated against the humans while it trains.\n\n"
        f"Shipped run configs (--config NAME, from any folder): {', '.join(configs)}. demo: the tiny local "
        "model on the shipped demo set, trained fully on the CPU in about a minute (what scripts/demo.sh "
        "runs); demo-pairs: the same model on the demo set's preference pairs (docs/training.md, Preference "
        "pairs); rubric6: the real recipe, LoRA on OpenGVLab/InternVL3-2B-hf on a GPU, for your annotations "
        "(--set data.annotations=[...]); rubric6-qwen2.5vl-3b and rubric6-qwen3vl-4b: the same recipe on "
        "Qwen/Qwen2.5-VL-3B-Instruct and Qwen/Qwen3-VL-4B-Instruct, rubric6-llava-ov-0.5b on "
        "llava-hf/llava-onevision-qwen2-0.5b-ov-hf (docs/families.md). Several processes: accelerate launch [--num_processes N] -m "
        "judge.cli.train --config ...",
        epilog=set_keys() + "\n\n" + EXAMPLES,
    )
    p.add_argument(
        "--config",
        required=True,
        help=f"run config: a shipped one by name ({', '.join(configs)}), or a YAML file (a bare name is "
        "looked up in ./rubrics/ first)",
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
    return p


def _is_run_config(path) -> bool:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and "data" in data and "families" not in data


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
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
