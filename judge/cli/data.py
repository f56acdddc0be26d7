"""Command-line entry points. Argument parsing only: each command calls one function of a room."""

from __future__ import annotations

import argparse
import json
import sys
import time

from judge.cli._common import Parser, fail, flags_in_warnings, nonnegative_int, positive_int
from judge.cli._logging import setup_logging
from judge.core.errors import JudgeError


def data_main(argv: list[str] | None = None) -> int:
    """``judge-data``: validate annotations, build the SFT dataset, show rubrics, make the demo set."""
    p = build_parser()
    args = p.parse_args(argv)
    setup_logging()
    try:
        with flags_in_warnings(p):
            return _run(args)
    except JudgeError as e:
        return fail(e, p)


def build_parser() -> Parser:
    """``judge-data`` and its subcommands' options."""
    p = Parser(
        prog="judge-data",
        description="Annotations in, SFT data out: validate, build, rubric show, sample, demo, tiny-model.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    v = sub.add_parser(
        "validate", help="check annotation files; print a summary and every problem (exit 1 if any)"
    )
    v.add_argument("files", nargs="+", help="annotation files (.jsonl or .json)")
    v.add_argument(
        "--rubric",
        default="mmie",
        help="rubric name in rubrics/ or a YAML path (default: mmie); 'none' skips the rubric checks",
    )
    v.add_argument("--root", help="resolve image paths from this folder instead of each file's folder")
    v.add_argument("--allow-urls", action="store_true", help="accept http(s) image references (not fetched)")
    v.add_argument(
        "--max-pixels", type=positive_int, default=None, help="pixel limit per image (default 40,000,000)"
    )
    v.add_argument("--json", metavar="PATH", help="also write the full report as JSON")

    b = sub.add_parser(
        "build", help="annotations -> SFT dataset (prompt/completion + images), split by question"
    )
    b.add_argument(
        "--config",
        required=True,
        help="run config, e.g. rubrics/rubric6.yaml (a bare name is looked up in rubrics/)",
    )
    b.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set data.aggregation=median (repeatable)",
    )
    b.add_argument(
        "--processor",
        help="processor for token counts: a model folder, a hub id or 'tiny' "
        "(default: the config's model.path)",
    )
    b.add_argument(
        "--no-tokens", action="store_true", help="skip token counting (and the token budget check)"
    )
    b.add_argument("--out", help="output folder (default: data.output_dir or <output_dir>/data)")
    b.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip invalid records (counted and listed in stats.json) instead of stopping",
    )

    r = sub.add_parser("rubric", help="rubric tools")
    rsub = r.add_subparsers(dest="rubric_cmd", required=True)
    rs = rsub.add_parser("show", help="print a rubric and its hash")
    rs.add_argument("name", nargs="?", default="mmie")
    rs.add_argument("--json", action="store_true", help="print the parsed rubric as JSON")

    d = sub.add_parser("demo", help="(re)generate the synthetic demo annotation set")
    d.add_argument("--out", default="annotations/demo", help="output folder (default: annotations/demo)")
    d.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (default: 0)")
    d.add_argument(
        "--n-questions", type=positive_int, default=250, help="questions (3 responses each; default: 250)"
    )

    sm = sub.add_parser(
        "sample",
        help="a random share of a JSON Lines file's records (e.g. the responses to have labelled for "
        "judge-score --labels)",
    )
    sm.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="JSON Lines files (.jsonl): predictions or annotations; several (one per model, as judge-score "
        "takes them) are drawn from together, the same questions in each",
    )
    sm.add_argument(
        "--fraction", type=_fraction, required=True, help="share of the records to keep, in (0, 1]"
    )
    sm.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (default: 0)")
    sm.add_argument(
        "--by",
        choices=["record", "question"],
        default="record",
        help="draw single records (default), or whole questions: every response to a drawn question, so that "
        "each pair of models has labels on the same questions (what PPI win rates need)",
    )
    sm.add_argument(
        "--out",
        help="output file (default: beside the input, <stem>-sample<percent>.jsonl, where relative image "
        "paths still resolve)",
    )

    t = sub.add_parser("tiny-model", help="save the seeded tiny InternVL scorer to a folder")
    t.add_argument("--out", required=True, help="output folder")
    t.add_argument("--seed", type=nonnegative_int, default=0, help="random seed of the weights (default: 0)")
    return p


def _run(args) -> int:
    if args.cmd == "validate":
        return _validate(args)
    if args.cmd == "build":
        return _build(args)
    if args.cmd == "rubric":
        return _rubric_show(args)
    if args.cmd == "demo":
        from judge.testing.demo import generate_demo

        path = generate_demo(args.out, n_questions=args.n_questions, seed=args.seed)
        print(f"wrote {path}")
        return 0
    if args.cmd == "sample":
        return _sample(args)
    if args.cmd == "tiny-model":
        from judge.models.loading import save_tiny_scorer

        print(f"wrote {save_tiny_scorer(args.out, seed=args.seed)}")
        return 0
    return 2


def _validate(args) -> int:
    from judge.core.atomic import write_json
    from judge.core.images import DEFAULT_MAX_PIXELS, ImageLimits
    from judge.core.rubric import load_rubric
    from judge.data.validate import format_report, validate_annotations

    t0 = time.perf_counter()
    rubric = None if args.rubric.lower() == "none" else load_rubric(args.rubric)
    limits = ImageLimits(max_pixels=args.max_pixels or DEFAULT_MAX_PIXELS)
    report = validate_annotations(
        args.files, rubric, root=args.root, allow_urls=args.allow_urls, image_limits=limits
    )
    print(format_report(report))
    if args.json:
        write_json(args.json, report.as_dict())
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    return 0 if report.ok else 1


def _build(args) -> int:
    from judge.data.build import build_sft_dataset
    from judge.data.config import check_data_paths, load_data_sections, parse_overrides
    from judge.models.loading import check_model_source, load_processor

    overrides = args.overrides + (["data.skip_invalid=true"] if args.skip_invalid else [])
    sections = load_data_sections(args.config, parse_overrides(overrides))
    check_data_paths(sections.data, args.config)
    processor = None
    if not args.no_tokens:
        source = args.processor or (sections.other.get("model") or {}).get("path")
        if source is None:
            raise JudgeError(
                "no processor to count tokens with: set model.path in the config, pass "
                "--processor, or --no-tokens"
            )
        check_model_source(str(source))
        processor = load_processor(str(source))
    build_sft_dataset(sections, processor, out_dir=args.out, config_path=args.config)
    return 0


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not in (0, 1]")
    return value


def _sample(args) -> int:
    from pathlib import Path

    from judge.core.atomic import atomic_write
    from judge.data.split import sample_lines

    srcs = [Path(f) for f in args.files]
    if len(srcs) > 1 and not args.out:
        raise JudgeError(
            f"{len(srcs)} input files: name the one sample file with --out (e.g. --out to_label.jsonl, in the "
            "folder their relative image paths resolve from)"
        )
    lines, total, units = sample_lines(srcs, args.fraction, args.seed, by=args.by)
    src = srcs[0]
    out = (
        Path(args.out) if args.out else src.with_name(f"{src.stem}-sample{round(100 * args.fraction)}.jsonl")
    )
    same = [s for s in srcs if out.resolve() == s.resolve()]
    if same:
        which = f" {same[0]}" if len(srcs) > 1 else ""
        raise JudgeError(f"--out {out} is the input file{which}; write the sample elsewhere")
    with atomic_write(out) as f:
        f.write("".join(ln + "\n" for ln in lines))
    drawn = f" ({round(args.fraction * units) or 1} of {units} questions)" if args.by == "question" else ""
    print(f"wrote {out}: {len(lines)} of {total} records{drawn} (seed {args.seed})")
    return 0


def _rubric_show(args) -> int:
    from judge.core.rubric import load_rubric

    rubric = load_rubric(args.name)
    if args.json:
        print(
            json.dumps({"hash": rubric.hash, **rubric.model_dump(mode="json")}, indent=2, ensure_ascii=False)
        )
    else:
        print(rubric.render())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(data_main())
