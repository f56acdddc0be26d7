"""``judge-score``: argument parsing only; the work is :func:`judge.serve.score_files`."""

from __future__ import annotations

import argparse
import sys

from ..data.errors import JudgeError
from ._common import Parser, fail, positive_int

EPILOG = """\
examples:
  judge-score preds.jsonl --judge runs/demo/judge                      canonical predictions, a trained judge
  judge-score mmie.json --judge tiny --rubric mmie                      MMIE's JSON, the tiny test model
  judge-score outputs/m/ActionSequence/pred.json --dataset-file ActionSequence.json --no-judge
  judge-score mmra.jsonl --no-judge --metric-mode official              MMRA rows, the official metric only
  judge-score runs/demo/data/splits/test.jsonl --judge runs/demo/judge  an annotation split (for judge-report)
  accelerate launch --multi_gpu --num_processes 2 -m judge.cli.score preds.jsonl --judge J --device cpu
                                                                        two processes (on CPU, too)
"""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="judge-score",
        description="Score benchmark predictions with a learned judge (expected score per criterion, from "
        "the score-token distribution) and the benchmarks' rule-based metrics; write scores.jsonl and a "
        "summary. A killed run started again resumes where it stopped.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs",
        nargs="+",
        help="prediction files (canonical JSONL, MMIE JSON, MileBench pred.json, "
        "MMRA rows) or annotation files (records with human 'scores')",
    )
    g = p.add_argument_group("judge")
    g.add_argument(
        "--judge",
        help="a judge folder (with judge_card.json), or a plain model folder / hub id / "
        "'tiny' together with --rubric",
    )
    g.add_argument(
        "--rubric",
        help="rubric name in rubrics/ or a YAML path (default: the one the judge card names; "
        "mmie without a judge)",
    )
    g.add_argument(
        "--force", action="store_true", help="score even when the rubric's hash differs from the judge card's"
    )
    g.add_argument(
        "--no-judge",
        action="store_true",
        help="rule-based metrics only; items that need the judge are counted as not scored",
    )
    g.add_argument(
        "--rationale",
        action="store_true",
        help="let the judge write a rationale before its score (one "
        "prompt at a time; the score is still read from the distribution)",
    )
    g.add_argument("--max-new-tokens", type=positive_int, default=256, help="rationale length limit (default 256)")
    g.add_argument(
        "--device", default="auto", help="cpu, cuda, cuda:1, ... (default auto: CUDA when available)"
    )
    g.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="weights' dtype (auto: bfloat16 on GPU, float32 on CPU)",
    )
    g.add_argument(
        "--quantization",
        default="card",
        choices=["card", "none", "4bit", "8bit"],
        help="how to load the judge's base: card (default: as the judge was trained, so a QLoRA judge is "
        "scored on its 4-bit base), none, 4bit or 8bit (bitsandbytes); overriding the card warns",
    )
    g.add_argument(
        "--batch-tokens",
        type=positive_int,
        default=16384,
        help="tokens per forward pass, padding included (default 16384)",
    )
    g.add_argument(
        "--batch-size",
        type=positive_int,
        default=16,
        help="responses (each with all its criterion prompts) per forward pass, at most (default 16)",
    )
    g.add_argument(
        "--no-share-prefix",
        action="store_true",
        help="run every criterion prompt in full instead of computing the response's shared prefix once",
    )
    g.add_argument(
        "--max-tokens",
        type=positive_int,
        help="context budget of one prompt; longer items get fewer image "
        "tiles, then are unscorable (default: the model's max positions, else 32768)",
    )
    g.add_argument("--baseline", choices=["clipscore"], help="also write a baseline's scores (CLIPScore)")
    g.add_argument("--clip-model", help="CLIP model folder, hub id or 'tiny' for --baseline clipscore")
    i = p.add_argument_group("inputs and outputs")
    i.add_argument(
        "--format",
        default="auto",
        choices=["auto", "canonical", "mmie", "milebench", "mmra", "annotations"],
        help="input format (default auto: detected per file)",
    )
    i.add_argument(
        "--dataset-file", help="MileBench dataset file <ds>.json (or a folder of them) for pred.json inputs"
    )
    i.add_argument(
        "--root", help="resolve relative image paths from this folder instead of each file's folder"
    )
    i.add_argument(
        "--metric-mode",
        default="both",
        choices=["official", "strict", "both"],
        help="rule-based metrics: the benchmark's own scoring, the toolkit's fixed extraction, or both "
        "(default)",
    )
    i.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip invalid records (listed in the summary) instead of stopping",
    )
    i.add_argument("--limit", type=positive_int, help="score only the first N records (in input order)")
    i.add_argument("--out", default="runs/score", help="output folder (default runs/score)")
    i.add_argument("--overwrite", action="store_true", help="start afresh in --out instead of resuming")
    i.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from ..serve import ScoreConfig, print_result, score_files

        cfg = ScoreConfig(
            inputs=args.inputs,
            judge=args.judge,
            rubric=args.rubric,
            force=args.force,
            out=args.out,
            overwrite=args.overwrite,
            skip_invalid=args.skip_invalid,
            format=args.format,
            dataset_file=args.dataset_file,
            root=args.root,
            metric_mode=args.metric_mode,
            no_judge=args.no_judge,
            rationale=args.rationale,
            max_new_tokens=args.max_new_tokens,
            device=args.device,
            dtype=args.dtype,
            quantization=args.quantization,
            batch_tokens=args.batch_tokens,
            batch_size=args.batch_size,
            share_prefix=not args.no_share_prefix,
            max_tokens=args.max_tokens,
            limit=args.limit,
            baseline=args.baseline,
            clip_model=args.clip_model,
            progress=not args.no_progress,
        )
        result = score_files(cfg)
    except JudgeError as e:
        return fail(e)
    if result.summary:  # the main process prints; the others of a sharded run stay quiet
        print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
