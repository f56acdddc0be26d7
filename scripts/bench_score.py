"""Scoring throughput of a 4B-class InternVL judge, three ways side by side in one run.

Builds a randomly initialised ``InternVLForConditionalGeneration`` with the shapes of a
real 4B judge (``--shape 4b``: an InternViT-300M-class vision tower at 448 px and a
3.6B Qwen2-class language model) or the tiny test shapes (``--shape tiny``); or a Qwen2.5-VL judge of
Qwen2.5-VL-3B-Instruct's shapes (``--shape qwen2.5-vl-3b``: its windowed ViT at the recipe's pixel bounds,
``--shape tiny-qwen2.5-vl``: the tests' tiny one; ``scripts/_bench_qwen.py``), and scores
one fixed synthetic workload (random-colour images, prompts padded with words to about
``--prompt-tokens`` tokens, the MMIE rubric's six criteria plus overall per response):

  a. ``mmie``: MMIE-style, one (response, criterion) at a time: generate a rationale of
     exactly ``--new-tokens`` tokens (EOS suppressed, so every run does the same work), then
     one more forward pass to read the score. This *is* ``ExpectedScorer.score_with_rationale``,
     called with ``model.generate`` made to ignore EOS (``min_new_tokens = max_new_tokens``).
     It is slow, so it runs on the first ``--mmie-responses`` responses only; its rates are
     per second and compare directly with the others.
  b. ``unshared``: ``ExpectedScorer.score(share_prefix=False)``, one forward pass per criterion.
  c. ``shared``: ``ExpectedScorer.score(share_prefix=True)`` with ``packed="off"``, the response's
     prefix (with every image) once, each criterion's suffix on a copy of its KV cache; token-budget
     batching.
  c. ``packed``: the same with ``packed="flex"`` (``judge.models.packed``): each forward batch one row,
     the responses' prefixes and suffixes end to end under a prefix-tree FlexAttention mask, positions
     restarting after each prefix; no KV copy, no padding. Charged the same FLOPs as ``shared``.

Every timed run includes encoding (chat template, tokenising, image preprocessing), as
``judge-score`` does; with ``--workers N`` encoding runs in persistent DataLoader worker
processes, started before any timing and overlapped with the GPU. For each mode: responses/s,
criterion scores/s, prefill tokens/s, achieved TFLOP/s and MFU (FLOP count below), peak GPU
memory allocated and reserved (GiB). JSON goes to
``benchmarks/results/bench_score_<device>_<timestamp>.json``.

The protocol for a published figure: at least 128 responses (default 256) and 3 repeats of (b)
and (c), alternating, the median reported (the default), from a committed tree: a tree whose
tracked files differ from its commit is refused unless ``--allow-dirty`` (the JSON records the
commit and ``dirty``). ``--profile`` adds one run of each mode of ``--profile-modes`` under
``torch.profiler``, right after the first repeat: the time of encoding (or waiting for the
workers), the prefix pass, the KV-cache copies, the suffix passes, the packed pass and its block
mask, and the read-out, and the top operators.

Nothing measured is lost to a cut: the table and the JSON (one file, rewritten) come after every
repeat and after the profile, and ``--budget-s`` ends the timed repeats cleanly when the next run of
a mode would not fit (its last time predicts it), writing what it has (``protocol.met`` then says
whether the repeats it finished meet the protocol).

FLOPs (forward; multiply-add = 2; real tokens only, padding never counted), per sequence that
runs ``n`` new tokens over ``c`` tokens already in the KV cache and reads logits at ``k`` positions::

    F_lm(n, c, k)  = 2 * P_lm * n + 4 * L * d_attn * (n*c + n*(n+1)/2) + 2 * d_model * V * k
    F_vit(tiles)   = tiles * (2 * P_vit * T + 4 * L_vit * d_vit * T**2 + 2 * P_proj * T_llm)

``P_lm``: parameters of the decoder layers and final norm (no embeddings, no LM head);
``L``, ``d_attn`` (= heads * head_dim), ``d_model``, ``V``: the language model's layers,
attention width, hidden size and vocabulary; causal attention counts only the keys each
query sees. ``P_vit``, ``L_vit``, ``d_vit``: the vision tower's parameters (embeddings
included: the patch embedding is a matmul), layers and width; ``T`` = patches per tile + 1
(the class token), full bidirectional attention; ``P_proj`` the projector's parameters and
``T_llm`` the tokens a tile becomes (256 at 448 px). Each mode is charged the FLOPs of the
algorithm it runs: (b) re-runs the prompt and the images for every criterion, (c) runs the
prefix and the images once per response; (a) counts the generation's prefill, one
``F_lm(1, c, 1)`` per decoded token, and the read-out pass (images again). MFU = FLOPs /
seconds / peak, with the peak bf16 dense rate of the GPU (H100 SXM and H200: 989.4 TFLOP/s;
``--peak-tflops`` to override); null on the CPU.

    python scripts/bench_score.py --shape 4b                           # on a GPU: the real measurement
    python scripts/bench_score.py --shape 4b --describe                # config and parameter counts only
    python scripts/bench_score.py --shape tiny --responses 8 --new-tokens 4 --prompt-tokens 300
    python scripts/bench_score.py --shape 4b --modes unshared,shared,packed --responses 128 --budget-s 200
    python scripts/bench_score.py --shape qwen2.5-vl-3b --modes unshared,packed --responses 128
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
for _p in (REPO, SCRIPTS):  # the judge package, and the harness modules beside this script
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

# The harness, the judge and workload, and the timed modes live beside this script; every name stays
# reachable as bench_score.NAME (bench_train, bench_repro, bench_e2e and the tests use them so).
from _bench_common import (  # noqa: E402
    GIB,
    MIN_REPEATS,
    MIN_RESPONSES,
    PEAK_BF16_TFLOPS,
    command_line,
    device_tag,
    machine_facts,
    parse_range,
    peak_memory,
    peak_tflops,
    protocol,
    rates,
    require_clean,
    reset_peak,
    resolve_device,
    resolve_dtype,
    run_date,
    source_state,
    sync,
    versions,
    write_result,
)
from _bench_common import fmt as _fmt  # noqa: E402
from _bench_model import (  # noqa: E402
    FILLER_WORDS,
    SHAPES,
    FlopModel,
    Item,
    Shape,
    _words,
    attn_used,
    build_config,
    build_model,
    build_processor,
    build_workload,
    describe,
    flop_model,
    image_tokens,
    model_class,
    param_counts,
    print_description,
    prompts_for,
    request_for,
)
from _bench_modes import (  # noqa: E402
    Encoder,
    _scores_by_key,
    agreement,
    auto_chunk,
    eos_ignored,
    mmie_counts,
    print_profile,
    profile_modes,
    score_judge,
    score_mmie,
    workload_counts,
)
from _bench_report import agreement_of, flop_formula, mode_result, print_table, ratios_of  # noqa: E402
from _bench_score_args import score_parser  # noqa: E402

__all__ = [
    "FILLER_WORDS",
    "GIB",
    "MIN_REPEATS",
    "MIN_RESPONSES",
    "PEAK_BF16_TFLOPS",
    "REPO",
    "SHAPES",
    "Encoder",
    "FlopModel",
    "Item",
    "Shape",
    "_fmt",
    "_scores_by_key",
    "_words",
    "agreement",
    "attn_used",
    "auto_chunk",
    "build_config",
    "build_model",
    "build_processor",
    "build_workload",
    "describe",
    "device_tag",
    "eos_ignored",
    "flop_model",
    "image_tokens",
    "machine_facts",
    "main",
    "mmie_counts",
    "model_class",
    "param_counts",
    "parse_range",
    "peak_memory",
    "peak_tflops",
    "print_description",
    "print_profile",
    "print_table",
    "profile_modes",
    "prompts_for",
    "protocol",
    "rates",
    "request_for",
    "require_clean",
    "reset_peak",
    "resolve_device",
    "resolve_dtype",
    "score_judge",
    "score_mmie",
    "source_state",
    "sync",
    "versions",
    "workload_counts",
    "write_result",
]


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = score_parser(__doc__.split("\n\n")[0])
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - {"mmie", "unshared", "shared", "packed"}
    if unknown:
        p.error(f"unknown modes {sorted(unknown)}")
    if args.repeats < 1 or args.responses < 1:
        p.error("--repeats and --responses must be positive")
    source = source_state()
    require_clean(source, args.allow_dirty)
    chunk = args.chunk or auto_chunk(args.responses, args.workers)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from judge.core.rubric import load_rubric
    from judge.models.readout import Encoded, ExpectedScorer, _common_prefix_len, encode_vision

    shape = SHAPES[args.shape]
    rubric = load_rubric("mmie")
    processor = build_processor(shape, args.max_tiles, rubric)
    config = build_config(shape, processor)
    counts = param_counts(config)
    desc = describe(shape, config, counts)
    print_description(desc)
    if args.describe:
        return 0

    device = resolve_device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    peak, gpu = peak_tflops(device, args.peak_tflops)
    fm = flop_model(config, counts)

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    items = build_workload(
        processor,
        rubric,
        responses=args.responses,
        images=args.images,
        prompt_tokens=args.prompt_tokens,
        families=families,
        jitter=args.jitter,
        seed=args.seed,
    )
    requests = [request_for(it, rubric, "score") for it in items]
    # Encoding alone, timed on the CPU: what ExpectedScorer.encode does per request (no model needed).
    t0 = time.perf_counter()
    raw = [encode_vision(processor, r.prompts, r.images, r.max_patches, key=r.key) for r in requests]
    encode_s = time.perf_counter() - t0
    # The pixels, and what else of the images the FLOP count reads (Qwen's image_grid_thw).
    encoded = [
        Encoded(
            r,
            ids,
            vis.get("pixel_values"),
            _common_prefix_len(ids),
            {k: v for k, v in vis.items() if k != "pixel_values"},
        )
        for r, (ids, vis) in zip(requests, raw, strict=True)
    ]
    lens = [len(x) for e in encoded for x in e.input_ids]
    prefix = [e.prefix_len for e in encoded]
    n_scores = len(lens)
    workload = {
        "responses": len(requests),
        "criterion_scores": n_scores,
        "families": families,
        "images_per_response": list(args.images),
        "images": sum(len(it.images) for it in items),
        "tiles": sum(int(e.pixel_values.shape[0]) for e in encoded if e.pixel_values is not None),
        "prompt_tokens_target": args.prompt_tokens,
        "jitter": args.jitter,
        "prompt_tokens_mean": statistics.fmean(lens),
        "prompt_tokens_min": min(lens),
        "prompt_tokens_max": max(lens),
        "shared_prefix_tokens_mean": statistics.fmean(prefix),
        "encode_seconds_inline": encode_s,
        "encode_responses_per_s": len(requests) / encode_s,
        "encode_threads": torch.get_num_threads(),
    }
    print(
        f"workload: {len(requests)} responses, {n_scores} criterion prompts of {workload['prompt_tokens_mean']:.0f} "
        f"tokens on average ({min(lens)}-{max(lens)}), shared prefix {workload['shared_prefix_tokens_mean']:.0f}; "
        f"{workload['images']} images; encoding alone {encode_s:.2f} s ({workload['encode_responses_per_s']:.1f} "
        "responses/s on one CPU process)"
    )

    # The encoding workers start now, from the processor, before the model exists and before any timing.
    encoder = Encoder(processor, requests, 0 if args.encode_only else args.workers, chunk)
    workers_start_s = encoder.start()
    model = scorer = packed_scorer = None
    build_s = weights_bytes = None
    if not args.encode_only:
        t0 = time.perf_counter()
        model = build_model(config, processor, device, dtype, args.attn, args.seed)
        sync(device)
        build_s = time.perf_counter() - t0
        weights_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        print(
            f"built on {device} ({dtype}, attention {args.attn}) in {build_s:.1f} s; "
            f"weights {weights_bytes / GIB:.2f} GiB"
        )
        scorer = ExpectedScorer(model, processor, rubric.scale.values, device=device, packed="off")
        # The packed path, asked for outright: a machine where it cannot run says why (ConfigError).
        packed_scorer = (
            ExpectedScorer(model, processor, rubric.scale.values, device=device, packed="flex")
            if "packed" in modes
            else None
        )
    else:
        modes = []

    attn_info = attn_used(model) if model is not None else None
    results: dict[str, dict] = {}
    scores: dict[str, dict] = {}
    kw = dict(batch_tokens=args.batch_tokens, batch_size=args.batch_size)
    #: mode -> (scorer, share_prefix) of modes (b) and (c)
    paths = {"unshared": (scorer, False), "shared": (scorer, True), "packed": (packed_scorer, True)}

    def run_mode(mode: str, enc: Encoder):
        sc, share = paths[mode]
        return score_judge(sc, enc, share_prefix=share, **kw)

    # Warm-up: first-call allocations, kernel selection, FlexAttention's compilation and lazy imports stay out
    # of the timings.
    warm = Encoder(processor, requests[: max(1, min(args.warmup, len(requests)))], 0, chunk)
    for mode in ("unshared", "shared", "packed"):
        if mode in modes:
            t0 = time.perf_counter()
            run_mode(mode, warm)
            print(f"  warm-up {mode}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    if "mmie" in modes:
        with eos_ignored(model):
            scorer.score_with_rationale(
                request_for(items[0], rubric, "rationale_score"), max_new_tokens=min(args.new_tokens, 8)
            )
    sync(device)

    labels = {
        "unshared": "b. judge-score, no prefix sharing",
        "shared": "c. judge-score, prefix sharing on KV-cache copies + token-budget batching",
        "packed": "c. judge-score, prefix sharing in one packed pass per row (FlexAttention prefix-tree mask)",
    }
    timed = [m for m in ("unshared", "shared", "packed") if m in modes]
    times: dict[str, list[float]] = {m: [] for m in timed}
    peaks: dict[str, list[dict]] = {m: [] for m in timed}
    counts_of = {
        m: workload_counts(
            encoded,
            fm,
            paths[m][1],
            args.batch_tokens,
            args.batch_size,
            chunk if args.workers > 0 else None,
            packed=m == "packed",
        )
        for m in timed
    }
    profiles: dict = {}
    profile_modes_wanted = [m.strip() for m in args.profile_modes.split(",") if m.strip() in timed]
    path: Path | None = None
    cmd = command_line("bench_score.py", argv)
    stopped: str | None = None

    def report(final: bool) -> Path:
        """The results so far: the table (and profile) printed, the JSON (one file) rewritten."""
        nonlocal path
        for mode in timed:
            if not times[mode]:
                continue
            results[mode] = mode_result(
                labels[mode], len(requests), n_scores, times[mode], counts_of[mode], peak, peaks[mode]
            )
        done = min((len(times[m]) for m in timed), default=args.repeats)
        result = {
            "benchmark": "judge scoring throughput: MMIE-style vs judge-score without and with prefix sharing "
            "(KV copy, packed)",
            "command": cmd,
            "date": run_date(),
            "device": machine_facts(device, peak, gpu),
            "versions": versions(),
            **source,
            "protocol": protocol(len(requests), done if timed else MIN_REPEATS, quiet=not final),
            "complete": final and stopped is None,
            "stopped": stopped,
            "config": {
                "model": desc,
                "dtype": str(dtype).replace("torch.", ""),
                "attn_implementation": args.attn,
                "attn_used": attn_info,
                "weights_gib": weights_bytes / GIB if weights_bytes else None,
                "build_seconds": build_s,
                "workload": workload,
                "new_tokens": args.new_tokens,
                "mmie_responses": args.mmie_responses,
                "batch_tokens": args.batch_tokens,
                "batch_size": args.batch_size,
                "workers": args.workers,
                "chunk": chunk if args.workers > 0 else None,
                "workers_start_seconds": workers_start_s,
                "warmup": args.warmup,
                "repeats": args.repeats,
                "budget_s": args.budget_s,
                "modes": modes,
                "seed": args.seed,
            },
            "flop_formula": flop_formula(fm),
            "results": results,
            "ratios": ratios_of(results),
            "agreement": agreement_of(scores),
            "profile": profiles or None,
        }
        print_table(result)
        if path is None:
            path = write_result(
                args.out, "bench_score_encode" if args.encode_only else "bench_score", device, result
            )
        else:
            from judge.core.atomic import write_json

            write_json(path, result)
        print(f"wrote {path}", flush=True)
        return path

    t_budget = time.perf_counter()

    def fits(mode: str) -> bool:
        if args.budget_s is None or not times[mode]:
            return True
        return time.perf_counter() - t_budget + times[mode][-1] <= args.budget_s

    for rep in range(args.repeats):
        # Alternate the order, so that a drift in the machine's state does not favour one mode.
        for mode in timed if rep % 2 == 0 else timed[::-1]:
            if not fits(mode):
                stopped = (
                    f"--budget-s {args.budget_s:g}: repeat {rep + 1} of {mode} (last {times[mode][-1]:.1f} s) would "
                    f"end past it, {time.perf_counter() - t_budget:.1f} s in"
                )
                break
            reset_peak(device)
            sync(device)
            t0 = time.perf_counter()
            out = run_mode(mode, encoder)
            sync(device)
            times[mode].append(time.perf_counter() - t0)
            peaks[mode].append(peak_memory(device))
            print(f"  {mode:8s} run {rep + 1}: {times[mode][-1]:.2f} s", file=sys.stderr, flush=True)
            assert sum(len(s) for _, s in out) == n_scores
            scores[mode] = _scores_by_key(out)
        if stopped:
            print(f"stopped: {stopped}", file=sys.stderr, flush=True)
            break
        if rep == 0 and args.profile and profile_modes_wanted:
            # Right after the first repeat, so that a run cut later still has it.
            profiles.update(
                profile_modes(
                    {m: functools.partial(run_mode, m, encoder) for m in profile_modes_wanted}, device
                )
            )
            print_profile(profiles)
        report(final=False)

    if "mmie" in modes and not stopped:
        sub = [request_for(it, rubric, "rationale_score") for it in items[: max(1, args.mmie_responses)]]
        reset_peak(device)
        sync(device)
        t0 = time.perf_counter()
        out, gen_lengths = score_mmie(scorer, sub, args.new_tokens)
        sync(device)
        sec = time.perf_counter() - t0
        mem = peak_memory(device)
        assert all(n == args.new_tokens for n in gen_lengths), gen_lengths
        c = mmie_counts(scorer, out, gen_lengths, fm)
        n = sum(len(s) for _, s in out)
        scores["mmie"] = _scores_by_key(out)
        results["mmie"] = {
            "label": f"a. MMIE-style: one (response, criterion) at a time, {args.new_tokens}-token rationale, "
            "then a read-out pass",
            "responses": len(sub),
            "criterion_scores": n,
            "seconds": sec,
            "responses_per_s": len(sub) / sec,
            "criterion_scores_per_s": n / sec,
            "prefill_tokens": c["prefill_tokens"],
            "prefill_tokens_per_s": c["prefill_tokens"] / sec,
            "decode_tokens": c["decode_tokens"],
            "generated_tokens": c["generated_tokens"],
            "generated_tokens_per_s": c["generated_tokens"] / sec,
            "tiles_encoded": c["tiles"],
            **rates(sec, c["flops"], peak),
            **mem,
        }

    report(final=True)
    del model
    reset_peak(device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
