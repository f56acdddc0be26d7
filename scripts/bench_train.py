"""Training throughput of a 4B-class InternVL judge: LoRA SFT steps, bf16 LoRA and 4-bit QLoRA.

The same randomly initialised model as ``scripts/bench_score.py`` (``--shape 4b`` or ``tiny``; the
Qwen2.5-VL-3B shape ``qwen2.5-vl-3b`` and ``tiny-qwen2.5-vl`` beside them, F_vit then per image as
``scripts/_bench_qwen.py`` counts it) is
saved once to a folder, then loaded for each configuration through the judge's own training
path, ``judge.train.model.build_model`` (LoRA on the language model's projections; QLoRA:
NF4 through bitsandbytes and ``prepare_model_for_kbit_training``). Batches come from the judge's
own collator (``judge.train.collator.JudgeCollator``) over SFT examples of the synthetic
workload (one example per response and criterion, ``--target`` format), through a DataLoader
(``--workers`` processes, pinned memory, length bucketing with ``--bucket``). The loop is plain
torch (AdamW on the adapters, bf16 autocast on the GPU, as the Trainer's ``bf16: true`` does), so
nothing but the step is timed.

Configurations (``--configs``): ``lora``, ``lora-gc``, ``qlora``, ``qlora-gc`` (``-gc``: gradient
checkpointing, non-reentrant as ``judge-train`` sets it), each also with ``-packed`` (``lora-packed``,
``qlora-gc-packed``...: ``train.packing``, the batch's examples end to end in one row, nothing padded;
on a GPU the language model then runs ``flex_attention``). For each: tokens/s, examples/s, achieved
TFLOP/s, MFU, peak GPU memory (weights, optimizer state and activations).

Repeats (``--repeats``, default 3): every configuration runs once per repeat, in an order that alternates
(forward, then backward, ...), and the median is reported, so that clocks, the allocator's state or
autotuning do not favour whichever runs first. A quantization's model is loaded once per repeat (LoRA's
and QLoRA's are never held together, so each peak is its own); within it the configurations toggle
checkpointing and packing on the same model, with a fresh optimizer each. The table and the JSON (one
file, rewritten) come after every repeat, and ``--budget-s`` stops cleanly before a repeat that would
not fit (by the last one's time).

liger-kernel (``--liger`` / ``--no-liger``; default: on where it can run, as ``judge-train``'s
``train.liger_kernel: null``): RMSNorm, SwiGLU and RoPE kernels and the fused cross-entropy at the label
positions. It patches the process, so a run with and one without are two runs of this script.

Loss (``--loss-on``): ``labels`` (default) runs the LM head only where labels are (the batch
re-aligned to the right, so every completion ends in the last column, and ``logits_to_keep``);
``all`` is the stock path (``model(**batch)`` with labels: logits for every position, which the
Trainer does today).

FLOPs per step (real tokens; recomputation for checkpointing not counted, so this is MFU, not
HFU), per example of ``n`` tokens with ``k`` label tokens, with ``bench_score``'s symbols::

    forward   2*P_lm*n + 4*L*d_attn*n*(n+1)/2 + 2*d_model*V*k + F_vit(tiles)
    backward  2*P_lm*n + 8*L*d_attn*n*(n+1)/2 + 2*d_model*V*k        (input gradients only: the base is frozen)
    adapters  6*P_lora*n                                                 (forward, input and weight gradients)

The vision tower and projector are frozen and get no backward pass. ``mfu_6n`` also reports the
full-fine-tuning convention (6*P_lm*n, 12*L*d_attn*n*(n+1)/2, 6*d_model*V*k), which other
LoRA benchmarks often quote; it is 1.5x the LM part of the count above.

    python scripts/bench_train.py --shape 4b                              # on a GPU
    python scripts/bench_train.py --shape 4b --configs qlora-gc --batch-size 8
    python scripts/bench_train.py --shape tiny --steps 2 --warmup-steps 1 --batch-size 2 --prompt-tokens 300
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
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
import bench_score as bs  # noqa: E402  (the shared model, workload and FLOP helpers)
from _bench_train_data import (  # noqa: E402  (examples, sampler, losses, FLOPs of a step)
    BatchSampler,
    loss_all,
    loss_labels_only,
    sft_examples,
    step_flops,
)
from _bench_train_report import median_result, print_table  # noqa: E402  (medians, the table)

REPO = bc.REPO
#: configuration -> (quantization, gradient checkpointing, packing)
CONFIGS = {
    f"{base}{'-packed' if packed else ''}": (quant, gc, packed)
    for base, (quant, gc) in {
        "lora": ("none", False),
        "lora-gc": ("none", True),
        "qlora": ("4bit", False),
        "qlora-gc": ("4bit", True),
    }.items()
    for packed in (False, True)
}


# ----------------------------------------------------------------------------- one configuration
def load_model(quant: str, args, model_dir: Path, device: str, dtype_name: str):
    """The model of one quantization through judge-train's ``build_model``, on ``device``, training mode.
    Returns ``(model, processor, dtype, run config, load seconds, weights GiB)``."""
    import torch

    from judge.train.config import RunConfig
    from judge.train.model import build_model

    if quant != "none" and not device.startswith("cuda") and torch.cuda.is_available():
        raise SystemExit(
            f"{quant}: build_model places a 4-bit model on the GPU whenever one is present; run with "
            "--device cuda, or hide the GPU (CUDA_VISIBLE_DEVICES=) for a CPU run"
        )
    if quant != "none" and not device.startswith("cuda"):
        print("  4-bit on the CPU (bitsandbytes' CPU kernels): slow, for testing only", file=sys.stderr)
    bc.reset_peak(device)
    cfg = RunConfig.model_validate(
        {
            "data": {"annotations": ["synthetic.jsonl"]},
            "model": {"path": str(model_dir), "dtype": dtype_name, "attn_implementation": args.attn},
            "lora": {"r": args.lora_r, "alpha": args.lora_alpha, "dropout": args.lora_dropout},
            "quantization": quant,
            "train": {"per_device_train_batch_size": args.batch_size, "liger_kernel": args.liger},
        }
    )
    t0 = time.perf_counter()
    model, processor, dtype = build_model(cfg)
    if quant == "none":
        model.to(device)
    model.train()
    bc.sync(device)
    weights = torch.cuda.memory_allocated() / bc.GIB if device.startswith("cuda") else None
    return model, processor, dtype, cfg, time.perf_counter() - t0, weights


def run_config(
    name: str, model, processor, dtype, cfg, args, device: str, examples, lengths, fm, peak
) -> dict:
    """Warm-up and timed steps of configuration ``name`` on ``model`` (checkpointing and packing set as it
    says, a fresh optimizer); returns its figures (or ``error``)."""
    import torch
    from torch.utils.data import DataLoader

    from judge.train.collator import JudgeCollator
    from judge.train.model import liger_on

    quant, gc_on, packed = CONFIGS[name]
    cuda = device.startswith("cuda")
    # The untimed part (set-up, loader workers, kernels' first compiles) is reported too.
    t_config = time.perf_counter()
    if gc_on:
        # What the Trainer does with gradient_checkpointing: true and judge-train's kwargs.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_disable()
    if cuda and args.attn == "sdpa":
        # judge-train's packing on a GPU: the language model on flex_attention (a block mask that skips the
        # other examples of the row); padded batches keep sdpa.
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        base.set_attn_implementation({"text_config": "flex_attention" if packed else "sdpa"})
    model.train()
    bc.reset_peak(device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    lora_params = sum(p.numel() for p in trainable)
    opt = torch.optim.AdamW(
        trainable, lr=args.lr, weight_decay=0.0, fused=cuda and all(p.is_cuda for p in trainable)
    )
    collator = JudgeCollator(processor, labels_last=args.loss_on == "labels" and not packed, packed=packed)
    sampler = BatchSampler(lengths, args.batch_size, args.bucket, args.seed)
    loader = DataLoader(
        examples,
        batch_sampler=sampler,
        collate_fn=collator,
        num_workers=args.workers,
        pin_memory=cuda and args.pin_memory,
        persistent_workers=False,
        prefetch_factor=2 if args.workers > 0 else None,
    )
    # bf16 autocast, as the Trainer's bf16: true does (LoRA weights are float32, QLoRA's norms and embeddings too).
    autocast = (
        torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16)
        if dtype == torch.bfloat16
        else contextlib.nullcontext()
    )
    fused = liger_on(cfg)
    if args.loss_on == "labels" or packed:
        loss_fn = functools.partial(loss_labels_only, fused=fused)
    else:
        loss_fn = loss_all
    pixel_dtype = next(
        (p.dtype for n, p in model.named_parameters() if "patch_embeddings" in n and p.is_floating_point()),
        dtype,
    )
    total = args.warmup_steps + args.steps
    if len(sampler) < total:
        raise SystemExit(f"{len(sampler)} batches for {total} steps: raise --responses")
    losses, step_s = [], []
    flops = flops6 = 0.0
    tokens = labels = padded = 0
    it = iter(loader)
    t_start = t_last = time.perf_counter()
    result: dict = {
        "quantization": quant,
        "gradient_checkpointing": gc_on,
        "packing": packed,
        "liger_kernel": fused,
        "trainable_params": lora_params,
        "attn_implementation": bs.attn_used(model),
    }
    try:
        for step in range(total):
            if step == args.warmup_steps:
                bc.sync(device)
                t_start = t_last = time.perf_counter()
                result["setup_and_warmup_seconds"] = t_start - t_config
            batch = next(it)
            if step >= args.warmup_steps:
                f, f6, n, k = step_flops(batch, fm, lora_params)
                flops, flops6, tokens, labels = flops + f, flops6 + f6, tokens + n, labels + k
                padded += batch["input_ids"].numel()
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            if "pixel_values" in batch:
                batch["pixel_values"] = batch["pixel_values"].to(pixel_dtype)
            with autocast:
                loss = loss_fn(model, batch)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach())
            if step >= args.warmup_steps and args.sync_steps:
                bc.sync(device)
                now = time.perf_counter()
                step_s.append(now - t_last)
                t_last = now
        bc.sync(device)
        sec = time.perf_counter() - t_start
    except torch.cuda.OutOfMemoryError as e:
        result.update(
            {
                "error": f"out of memory: {str(e).splitlines()[0]}",
                "seconds_until_error": time.perf_counter() - t_config,
                **bc.peak_memory(device),
            }
        )
        print(f"  {name}: out of memory after {result['seconds_until_error']:.1f} s", file=sys.stderr)
        return result
    finally:
        del opt, loader, it
    loss_values = [float(x) for x in losses]
    n_examples = args.steps * args.batch_size
    result.update(
        {
            "steps": args.steps,
            "warmup_steps": args.warmup_steps,
            "batch_size": args.batch_size,
            "seconds": sec,
            "seconds_per_step": sec / args.steps,
            "seconds_per_step_median": statistics.median(step_s) if step_s else None,
            "tokens": tokens,
            "label_tokens": labels,
            "tokens_with_padding": padded,
            "padding_fraction": 1 - tokens / padded if padded else None,
            "tokens_per_s": tokens / sec,
            "examples_per_s": n_examples / sec,
            **bc.rates(sec, flops, peak),
            "flops_6n": flops6,
            "mfu_6n": (flops6 / sec / 1e12 / peak) if peak else None,
            "loss_first": loss_values[0],
            "loss_last": loss_values[-1],
            "loss_finite": all(math.isfinite(x) for x in loss_values),
            **bc.peak_memory(device),
        }
    )
    return result


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--shape", choices=sorted(bs.SHAPES), default="4b")
    p.add_argument(
        "--configs", default="lora-gc,lora,lora-packed,qlora-gc", help=f"any of {', '.join(CONFIGS)}"
    )
    p.add_argument(
        "--steps", type=int, default=10, help="timed optimizer steps per configuration (default 10)"
    )
    p.add_argument("--warmup-steps", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument("--batch-size", type=int, default=8, help="examples per step (default 8)")
    p.add_argument("--responses", type=int, help="responses in the data pool (default: enough for the steps)")
    p.add_argument("--images", type=bc.parse_range, default=(2, 3))
    p.add_argument("--prompt-tokens", type=int, default=1500)
    p.add_argument("--jitter", type=float, default=0.15)
    p.add_argument("--families", default="SA,PBL,MSR")
    p.add_argument("--max-tiles", type=int, default=1)
    p.add_argument("--target", default="score", choices=["score", "score_rationale", "rationale_score"])
    p.add_argument("--rationale-words", type=int, default=60, help="rationale length for rationale targets")
    p.add_argument(
        "--loss-on",
        default="labels",
        choices=["labels", "all"],
        help="labels: LM head on label positions only; all: logits everywhere (the stock path)",
    )
    p.add_argument("--bucket", action=argparse.BooleanOptionalAction, default=True, help="length bucketing")
    p.add_argument(
        "--liger",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="liger-kernel (judge-train's train.liger_kernel): RMSNorm, SwiGLU and RoPE kernels in the Qwen2 LM "
        "and the fused linear cross-entropy; --liger needs a CUDA GPU (default: on where it can run)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of every configuration, alternating their order; the median is reported (default 3)",
    )
    p.add_argument(
        "--budget-s",
        type=float,
        help="seconds for all repeats: a repeat that would not fit (by the last one's time) is not started, "
        "and the JSON keeps the repeats done",
    )
    p.add_argument(
        "--workers", type=int, default=2, help="DataLoader workers running the collator (0: inline)"
    )
    p.add_argument("--pin-memory", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument(
        "--sync-steps",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="synchronise after each step to time it (adds a sync per step)",
    )
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=int, default=32)
    p.add_argument("--lora-dropout", type=float, default=0.05)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", help="auto: bfloat16 on a GPU, float32 on the CPU")
    p.add_argument("--attn", default="sdpa", choices=["sdpa", "eager", "flash_attention_2"])
    p.add_argument("--peak-tflops", type=float)
    p.add_argument("--threads", type=int)
    p.add_argument(
        "--model-dir",
        help="where the random model is saved (reused if it holds one; default: a "
        "temporary folder, removed at the end)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--save-only",
        action="store_true",
        help="save the random model (and its processor) to --model-dir, and stop: a base for judge-train",
    )
    p.add_argument(
        "--allow-dirty",
        action="store_true",
        help="time a working tree whose tracked files differ from its commit (the JSON says dirty: true)",
    )
    p.add_argument("--out", default=str(REPO / "benchmarks/results"))
    args = p.parse_args(argv)
    if args.save_only and not args.model_dir:
        p.error("--save-only needs --model-dir")
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = set(configs) - set(CONFIGS)
    if bad:
        p.error(f"unknown configs {sorted(bad)}")
    if args.repeats < 1:
        p.error("--repeats must be positive")
    if args.liger:
        from judge.train.model import liger_unavailable

        why = liger_unavailable() or (
            None
            if args.device in ("auto", "cuda") or args.device.startswith("cuda:")
            else f"runs on a CUDA device, not --device {args.device}"
        )
        if why:
            p.error(f"--liger {why}")
    source = bc.source_state()
    bc.require_clean(source, args.allow_dirty)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from judge.core.rubric import load_rubric
    from judge.train.collator import JudgeCollator

    device = bc.resolve_device(args.device)
    dtype = bc.resolve_dtype(args.dtype, device)
    # Named explicitly: build_model loads a non-quantized base on the CPU, where 'auto' would mean float32.
    dtype_name = str(dtype).replace("torch.", "")
    peak, gpu = bc.peak_tflops(device, args.peak_tflops)
    shape = bs.SHAPES[args.shape]
    rubric = load_rubric("mmie")
    processor = bs.build_processor(shape, args.max_tiles, rubric)
    config = bs.build_config(shape, processor)
    counts = bs.param_counts(config)
    desc = bs.describe(shape, config, counts)
    bs.print_description(desc)
    fm = bs.flop_model(config, counts)

    def report(runs, loads, repeats_done: int, stopped: str | None, path: Path | None, final: bool) -> Path:
        """The results so far (medians over the repeats done): the table printed, the JSON (one file)
        rewritten."""
        results = {name: median_result(r) for name, r in runs.items() if r}
        cmd = bc.command_line("bench_train.py", argv)
        result = {
            "benchmark": "judge LoRA SFT training throughput: bf16 LoRA and 4-bit QLoRA, with and without "
            "gradient checkpointing",
            "command": cmd,
            "date": bc.run_date(),
            "device": bc.machine_facts(device, peak, gpu),
            "versions": bc.versions(),
            **source,
            "protocol": {
                "steps": args.steps,
                "warmup_steps": args.warmup_steps,
                "repeats": args.repeats,
                "min_repeats": bc.MIN_REPEATS,
                "met": repeats_done >= bc.MIN_REPEATS,
            },
            "config": {
                "model": desc,
                "dtype": dtype_name,
                "attn_implementation": args.attn,
                "workload": workload,
                "lora": {
                    "r": args.lora_r,
                    "alpha": args.lora_alpha,
                    "dropout": args.lora_dropout,
                    "target_modules": "language (q,k,v,o,gate,up,down of the language model)",
                },
                "optimizer": "torch AdamW (fused on the GPU)",
                "lr": args.lr,
                "batch_size": args.batch_size,
                "steps": args.steps,
                "warmup_steps": args.warmup_steps,
                "loss_on": args.loss_on,
                "liger_kernel": args.liger,
                "liger_kernel_used": any(r.get("liger_kernel") for r in results.values()),
                "repeats": args.repeats,
                "budget_s": args.budget_s,
                "bucket": args.bucket,
                "workers": args.workers,
                "pin_memory": args.pin_memory,
                "configs": configs,
                "seed": args.seed,
            },
            "flop_formula": {
                "forward": "2*P_lm*n + 4*L*d_attn*n*(n+1)/2 + 2*d_model*V*k + F_vit(tiles)",
                "backward": "2*P_lm*n + 8*L*d_attn*n*(n+1)/2 + 2*d_model*V*k (frozen base: input gradients only)",
                "adapters": "6*P_lora*n",
                "convention_6n": "6*P_lm*n + 12*L*d_attn*n*(n+1)/2 + 6*d_model*V*k + 6*P_lora*n + F_vit(tiles)",
                "P_lm": fm.lm_params,
                "L": fm.lm_layers,
                "d_attn": fm.attn_dim,
                "d_model_x_V": fm.head_params,
                "P_vit": fm.vit_params,
                "T": fm.vit_tokens,
                "P_proj": fm.proj_params,
                "notes": "n real tokens (no padding), k label tokens per example; recomputation under gradient "
                "checkpointing is not counted (MFU, not HFU); MFU = flops / seconds / peak_bf16_tflops",
            },
            "results": results,
        }
        result["repeats_done"] = repeats_done
        result["complete"] = final and stopped is None
        result["stopped"] = stopped
        result["load_seconds"] = loads
        print_table(result)
        if path is None:
            path = bc.write_result(args.out, "bench_train", device, result)
        else:
            from judge.core.atomic import write_json

            write_json(path, result)
        print(f"wrote {path}", flush=True)
        return path

    tmp = None
    model_dir = (
        Path(args.model_dir) if args.model_dir else Path(tmp := tempfile.mkdtemp(prefix="bench-train-"))
    )
    try:
        if not (model_dir / "config.json").is_file():
            t0 = time.perf_counter()
            model = bs.build_model(config, processor, device, dtype, args.attn, args.seed)
            model.save_pretrained(model_dir)
            processor.save_pretrained(model_dir)
            del model
            bc.reset_peak(device)
            print(f"saved the random {shape.name} model to {model_dir} in {time.perf_counter() - t0:.1f} s")
        if args.save_only:
            return 0

        n_examples = args.batch_size * (args.steps + args.warmup_steps)
        per_response = len(rubric.family("SA").criterion_ids)
        responses = args.responses or math.ceil(n_examples / per_response)
        families = [f.strip() for f in args.families.split(",") if f.strip()]
        items = bs.build_workload(
            processor,
            rubric,
            responses=responses,
            images=args.images,
            prompt_tokens=args.prompt_tokens,
            families=families,
            jitter=args.jitter,
            seed=args.seed,
            target_format=args.target,
        )
        examples = sft_examples(items, rubric, args.target, args.rationale_words, args.seed)
        # Lengths once, before the timed loop, as a dataset's length column would hold them.
        collator = JudgeCollator(processor)
        lengths = []
        for ex in examples:
            p_ids, c_ids, _ = collator.encode(ex)
            lengths.append(len(p_ids) + len(c_ids))
        workload = {
            "responses": responses,
            "examples": len(examples),
            "target": args.target,
            "families": families,
            "images_per_response": list(args.images),
            "example_tokens_mean": statistics.fmean(lengths),
            "example_tokens_min": min(lengths),
            "example_tokens_max": max(lengths),
            "prompt_tokens_target": args.prompt_tokens,
        }
        print(
            f"data: {len(examples)} examples of {workload['example_tokens_mean']:.0f} tokens on average "
            f"({min(lengths)}-{max(lengths)}), target {args.target!r}"
        )

        runs: dict[str, list[dict]] = {c: [] for c in configs}
        loads: dict[str, list[float]] = {}
        path: Path | None = None
        stopped: str | None = None
        groups = [q for q in ("none", "4bit") if any(CONFIGS[c][0] == q for c in configs)]
        t_budget = time.perf_counter()
        rep_seconds: list[float] = []
        for rep in range(args.repeats):
            if args.budget_s is not None and rep_seconds:
                elapsed = time.perf_counter() - t_budget
                if elapsed + rep_seconds[-1] > args.budget_s:
                    stopped = (
                        f"--budget-s {args.budget_s:g}: repeat {rep + 1} (the last took {rep_seconds[-1]:.0f} s) "
                        f"would end past it, {elapsed:.0f} s in"
                    )
                    print(f"stopped: {stopped}", file=sys.stderr, flush=True)
                    break
            t_rep = time.perf_counter()
            # Alternate: forward on even repeats, backward on odd ones, for the models and the configurations.
            order = groups if rep % 2 == 0 else groups[::-1]
            for quant in order:
                model, processor, dtype, cfg, load_s, weights = load_model(
                    quant, args, model_dir, device, dtype_name
                )
                loads.setdefault(quant, []).append(load_s)
                names = [c for c in configs if CONFIGS[c][0] == quant]
                for name in names if rep % 2 == 0 else names[::-1]:
                    r = run_config(
                        name, model, processor, dtype, cfg, args, device, examples, lengths, fm, peak
                    )
                    r.update(load_seconds=load_s, weights_memory_gib=weights)
                    runs[name].append(r)
                    if "error" not in r:
                        print(
                            f"  {name} run {rep + 1}: {r['seconds']:.2f} s after "
                            f"{r['setup_and_warmup_seconds']:.1f} s of set-up and warm-up, {r['tokens_per_s']:.4g} tokens/s, "
                            f"loss {r['loss_first']:.3f} -> {r['loss_last']:.3f}",
                            file=sys.stderr,
                            flush=True,
                        )
                    bc.reset_peak(device)
                del model
                bc.reset_peak(device)
            rep_seconds.append(time.perf_counter() - t_rep)
            path = report(runs, loads, rep + 1, stopped, path, final=rep + 1 == args.repeats)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if stopped is not None or path is None:
        path = report(runs, loads, len(rep_seconds), stopped, path, final=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
