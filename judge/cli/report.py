"""``judge-report``: scorers against human scores (and each other), with the human ceiling and plots."""

from __future__ import annotations

import argparse
import sys
import time

from ..data.errors import JudgeError
from ._common import Parser, nonnegative_int, positive_int
from ._common import fail as _fail


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="judge-report",
        description="Compare named score files (judge-score output, CLIPScore, ...) with human annotations: "
                    "correlations with bootstrap intervals, error and agreement statistics, the human ceiling, "
                    "paired comparisons; writes report.md, report.json, report.html and PNG plots.",
        epilog="example: judge-report --human runs/demo/data/splits/test.jsonl --scores judge=runs/demo/score/scores.jsonl "
               "--clip-model tiny --out runs/demo/report",
    )
    p.add_argument("--human", action="append", default=[], metavar="FILE", required=True,
                   help="annotation records with human scores (.jsonl/.json); repeatable")
    p.add_argument("--scores", action="append", default=[], metavar="NAME=FILE",
                   help="a score file (ScoreRecord JSONL) under a scorer name; repeatable (at least one, "
                        "unless --clip-model)")
    p.add_argument("--rubric", default="mmie", help="rubric name in rubrics/ or a YAML path (default: mmie)")
    p.add_argument("--root", help="resolve the human files' relative image paths from this folder (default: each "
                   "file's folder)")
    p.add_argument("--out", default="runs/report", help="output folder (default: runs/report)")
    p.add_argument("--clip-model", metavar="PATH|tiny",
                   help="also compute CLIPScore on the human file's responses with this CLIP checkpoint (folder, "
                        "hub id, or 'tiny' for the seeded random tiny CLIP); written to OUT/clipscore.jsonl and "
                        "reported as scorer 'clipscore'")
    p.add_argument("--clip-pairing", choices=["neighbour", "whole"], default="neighbour",
                   help="CLIPScore image-text pairs: each image with the text just before it (neighbour, default) "
                        "or with the whole response text")
    p.add_argument("--device", default="cpu", help="device for --clip-model (default: cpu)")
    p.add_argument("--bootstrap", type=positive_int, default=1000, metavar="N",
                   help="bootstrap resamples of questions (default: 1000)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the bootstrap (default: 0)")
    p.add_argument("--title", default="Judge agreement with human scores", help="the report's title")
    p.add_argument("--note", metavar="TEXT", help="a sentence placed at the top of the report")
    p.add_argument("--criterion", action="append", metavar="ID",
                   help="compare only these criteria ('overall', a criterion id); repeatable (default: all)")
    p.add_argument("--on-scale", action="append", default=[], metavar="NAME",
                   help="treat scorer NAME as scoring on the rubric scale (judges are detected by themselves); "
                        "repeatable")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``judge-report``; returns the exit code (2 for a user error)."""
    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    try:
        from ..eval.report import ScoreSpec, format_main_table, run_report

        specs = [ScoreSpec.parse(s) for s in args.scores]
        result = run_report(
            args.human, specs, rubric=args.rubric, out_dir=args.out, root=args.root, clip_model=args.clip_model,
            clip_pairing=args.clip_pairing, device=args.device, n_boot=args.bootstrap, seed=args.seed,
            title=args.title, note=args.note, criteria=args.criterion, on_scale=args.on_scale,
            log=lambda s: print(s, flush=True),
        )
    except JudgeError as e:
        return _fail(e)
    data = result.data
    main_slice = next(s for s in data["slices"] if s["key"] == data["main"])
    print(f"\nMain table ({main_slice['title']}; 95% intervals from {data['settings']['bootstrap']} resamples "
          "of questions):\n")
    print(format_main_table(data))
    if data["warnings"]:
        print("\nwarnings:")
        for w in data["warnings"]:
            print(f"  - {w}")
    print(f"\nwrote {result.files['md']}, report.json, report.html and {len(data['plots'])} plot(s) "
          f"to {result.out_dir}/")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
