"""``judge-score`` end to end against ``bench_score.py``'s mode (c) on the same workload.

A randomly initialised judge of ``--shape`` is saved once as a plain model folder (``judge-score`` loads
it with ``--rubric mmie``), and ``bench_score.py``'s workload (responses of 2-3 images, criterion prompts
of about ``--prompt-tokens``) is written as a prediction file with its images as PNG files. Then,
``--repeats`` times, in alternating order:

* ``bench (c)``: ``bench_score.py``'s mode (c) in this process (shared prefix, token-budget batches,
  from the images in memory), the model loaded from the saved folder by ``judge.Judge.load`` and
  ``--workers`` persistent encoding workers started before any timing: the scoring alone;
* ``judge-score, workers N`` for each of ``--score-workers``: the command in a process of its own, on
  the prediction file, timed from start to exit: imports, loading the model, reading the records and
  images, the rule-based metrics, scoring, writing ``scores.jsonl`` and the summary;
* ``judge-score --limit 1``: the same command on one record, its fixed cost.

Reported (medians): responses/s of each, and for ``judge-score`` also its steady rate,
``(responses - 1) / (seconds - seconds of --limit 1)``: what a long run approaches once the fixed cost
is paid. Both are compared with ``bench (c)``'s rate (the issue-23 goal: >= 90%). The scores of
``judge-score`` and ``bench (c)`` are compared item by item too (the same weights; the batches differ, so
in bf16 they differ in their last bits). A table is printed and the JSON goes to
``benchmarks/results/bench_e2e_<device>_<time>.json``, rewritten after every repeat (``repeats_done``), so a
run cut short by a time limit keeps the repeats it finished.

    python scripts/bench_e2e.py --shape tiny --responses 128 --prompt-tokens 600 --threads 1   # CPU check
    python scripts/bench_e2e.py --shape 4b --device cuda --responses 256 --workers 6 --score-workers 0,6
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

import _bench_common as bc  # noqa: E402  (the harness: protocol, machine facts, JSON)
import bench_repro as br  # noqa: E402  (the workload as files, the saved judge, judge-score in a child process)
import bench_score as bs  # noqa: E402  (shapes, workload, encoding workers, mode (c))

REPO = bc.REPO
BENCH = "bench (c)"
FIXED = "judge-score --limit 1"


def parse_workers(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"expected one or more counts >= 0, got {text!r}")
    return out


def summarise(times: dict[str, list[float]], n: int, bench_scores: dict, cli_scores: dict[str, dict]) -> dict:
    """Per run: median seconds, responses/s and its ratio to bench (c); for judge-score also the steady rate
    and how far its scores are from the bench's."""
    med = {r: statistics.median(t) for r, t in times.items()}
    bench_rate = n / med[BENCH]
    results = {}
    for run in times:
        row = {"seconds": med[run], "seconds_all": times[run]}
        if run == FIXED:
            row["responses"] = 1
        else:
            row["responses"] = n
            row["responses_per_s"] = n / med[run]
            row["over_bench"] = row["responses_per_s"] / bench_rate
        if run not in (BENCH, FIXED):
            steady = med[run] - med[FIXED]
            row["steady_responses_per_s"] = (n - 1) / steady if steady > 0 else None
            row["steady_over_bench"] = row["steady_responses_per_s"] / bench_rate if steady > 0 else None
            got = cli_scores[run]
            diffs = [abs(got[k] - v) for k, v in bench_scores.items() if got.get(k) is not None]
            row["scores_compared"] = len(diffs)
            row["scores_missing"] = len(bench_scores) - len(diffs)
            row["max_abs_diff_vs_bench"] = max(diffs) if diffs else None
        results[run] = row
    return results


def main(argv: list[str] | None = None) -> int:
    from judge.models import BATCH_TOKENS

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--shape", choices=sorted(bs.SHAPES), default="4b")
    p.add_argument("--responses", type=int, default=256, help="responses in the workload (default 256)")
    p.add_argument("--images", type=bc.parse_range, default=(2, 3), help="images per response (default 2-3)")
    p.add_argument(
        "--prompt-tokens", type=int, default=1500, help="mean criterion-prompt length (default 1500)"
    )
    p.add_argument("--jitter", type=float, default=0.15, help="prompt lengths vary within +-this fraction")
    p.add_argument("--families", default="SA,PBL,MSR")
    p.add_argument(
        "--workers", type=int, default=0, help="bench (c)'s persistent encoding workers (default 0: inline)"
    )
    p.add_argument(
        "--score-workers",
        type=parse_workers,
        default=[0],
        help="judge-score's --workers, one timed run each per repeat (comma-separated; default 0)",
    )
    p.add_argument("--batch-tokens", type=int, default=BATCH_TOKENS, help="token budget per forward pass")
    p.add_argument(
        "--batch-size", type=int, default=16, help="responses per forward pass, both sides (default 16)"
    )
    p.add_argument("--repeats", type=int, default=bc.MIN_REPEATS, help="timed runs of each (median)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", help="auto: bfloat16 on a GPU, float32 on the CPU")
    p.add_argument("--threads", type=int, help="torch threads here and in judge-score's processes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-dir", help="where the random judge is saved (reused if it holds one)")
    p.add_argument("--allow-dirty", action="store_true", help="run on a tree that differs from its commit")
    p.add_argument("--out", default=str(REPO / "benchmarks/results"))
    args = p.parse_args(argv)
    if args.responses < 2 or args.repeats < 1 or args.workers < 0:
        p.error("--responses must be at least 2, --repeats at least 1, --workers at least 0")
    source = bc.source_state()
    bc.require_clean(source, args.allow_dirty)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import judge
    from judge.core.atomic import write_json
    from judge.core.rubric import load_rubric

    device = bc.resolve_device(args.device)
    dtype = bc.resolve_dtype(args.dtype, device)
    dtype_name = str(dtype).replace("torch.", "")
    shape = bs.SHAPES[args.shape]
    rubric = load_rubric("mmie")
    per_response = max(len(f.criterion_ids) for f in rubric.families.values())
    work = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    model_dir = Path(args.model_dir) if args.model_dir else work / "judge"
    saved = (model_dir / "config.json").is_file()
    if saved:  # a judge saved before (by bench_train.py --save-only, say): encode as its processor does
        from judge.models.loading import load_processor

        processor = load_processor(str(model_dir))
    else:
        processor = bs.build_processor(shape, 1, rubric)
    try:
        data = work / "data"
        data.mkdir()
        items, _ = br.write_workload(data, processor, rubric, args)
        requests = [bs.request_for(it, rubric) for it in items]
        n_scores = sum(len(r.criteria) for r in requests)
        # Workers before the model (nothing forked from a process holding a GPU context), started untimed.
        encoder = bs.Encoder(processor, requests, args.workers, bs.auto_chunk(len(requests), args.workers))
        workers_start_s = encoder.start()
        if not saved:
            t0 = time.perf_counter()
            br.save_judge(model_dir, shape, processor, device, dtype, args.seed)
            print(f"saved the random {shape.name} judge ({dtype_name}) in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        j = judge.Judge.load(str(model_dir), rubric="mmie", device=device, dtype=dtype_name)
        bc.sync(device)
        load_s = time.perf_counter() - t0
        scorer = j.engine.scorer
        kw = dict(batch_tokens=args.batch_tokens, batch_size=args.batch_size * per_response)
        scorer.score(requests[:2], share_prefix=True, batch_tokens=args.batch_tokens,
                     max_batch_size=kw["batch_size"])  # warm-up, untimed  # fmt: skip
        print(
            f"workload: {len(requests)} responses, {n_scores} criterion scores; model loaded in {load_s:.1f} s; "
            f"bench (c) with {args.workers} encoding workers (started in {workers_start_s:.1f} s)",
            flush=True,
        )

        common = ["--judge", str(model_dir), "--rubric", "mmie", "--device", device, "--dtype", dtype_name,
                  "--batch-tokens", str(args.batch_tokens), "--batch-size", str(args.batch_size),
                  "--overwrite", "--no-progress"]  # fmt: skip
        peak, gpu = bc.peak_tflops(device, None)
        result = {
            "benchmark": "judge-score end to end (a process of its own, files in and out) against "
            "bench_score.py's mode (c) on the same workload",
            "command": bc.command_line("bench_e2e.py", argv),
            "date": bc.run_date(),
            "device": bc.machine_facts(device, peak, gpu),
            "versions": bc.versions(),
            **source,
            "protocol": bc.protocol(args.responses, args.repeats),
            "config": {
                "shape": shape.name,
                "dtype": dtype_name,
                "responses": len(requests),
                "criterion_scores": n_scores,
                "images_per_response": list(args.images),
                "prompt_tokens": args.prompt_tokens,
                "jitter": args.jitter,
                "bench_workers": args.workers,
                "score_workers": args.score_workers,
                "batch_tokens": args.batch_tokens,
                "batch_size_responses": args.batch_size,
                "repeats": args.repeats,
                "threads": args.threads,
                "seed": args.seed,
                "model_load_seconds_in_process": load_s,
            },
        }
        # One file, rewritten after every repeat: a run cut short (a device call's time limit) keeps its repeats.
        tag = bc.device_tag(device, result["device"].get("name"))
        path = Path(args.out) / f"bench_e2e_{tag}_{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        runs = [BENCH, *(f"judge-score, workers {w}" for w in args.score_workers), FIXED]
        times: dict[str, list[float]] = {r: [] for r in runs}
        bench_scores: dict = {}
        cli_scores: dict[str, dict] = {}
        for rep in range(args.repeats):
            for run in runs if rep % 2 == 0 else runs[::-1]:
                if run == BENCH:
                    bc.sync(device)
                    t0 = time.perf_counter()
                    out = bs.score_judge(scorer, encoder, share_prefix=True, **kw)
                    bc.sync(device)
                    times[run].append(time.perf_counter() - t0)
                    bench_scores = {
                        (r.key, c): s.expected
                        for r, scores in out
                        for c, s in zip(r.criteria, scores, strict=True)
                    }
                else:
                    w = 0 if run == FIXED else int(run.rsplit(" ", 1)[1])
                    dest = work / f"score-{w}{'-limit' if run == FIXED else ''}"
                    extra = ["--limit", "1"] if run == FIXED else []
                    times[run].append(
                        br.run_judge_score(
                            [
                                str(data / "items.jsonl"),
                                *common,
                                "--workers",
                                str(w),
                                "--out",
                                str(dest),
                                *extra,
                            ],
                            args.threads,
                            work / f"{dest.name}.log",
                        )
                    )
                    if run != FIXED:
                        cli_scores[run] = br.judge_scores(dest)
                print(f"  run {rep + 1}: {run}: {times[run][-1]:.2f} s", file=sys.stderr, flush=True)
            result["repeats_done"] = rep + 1
            result["results"] = summarise(times, len(requests), bench_scores, cli_scores)
            write_json(path, result)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print_table(result)
    print(f"wrote {path}")
    return 0


def print_table(result: dict) -> None:
    c = result["config"]
    print(
        f"\n{result['device']['name']} ({result['device']['type']}), {c['shape']} {c['dtype']}: {c['responses']} "
        f"responses, {c['criterion_scores']} criterion scores; medians of {result['repeats_done']}"
    )
    print(
        "| run | seconds | responses/s | / bench (c) | steady responses/s | steady / bench (c) | max diff |"
    )
    print("|---|---|---|---|---|---|---|")
    for run, r in result["results"].items():
        print(
            f"| {run} | {r['seconds']:.2f} | {bc.fmt(r.get('responses_per_s'), '.2f')} | "
            f"{bc.fmt(r.get('over_bench'), '.2f')} | {bc.fmt(r.get('steady_responses_per_s'), '.2f')} | "
            f"{bc.fmt(r.get('steady_over_bench'), '.2f')} | {bc.fmt(r.get('max_abs_diff_vs_bench'), '.1e')} |"
        )


if __name__ == "__main__":
    sys.exit(main())
