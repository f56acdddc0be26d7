"""Sharded training on one GPU with the shipped accelerate configs; run by check_sharded_training.sh.

For FSDP2 (``configs/accelerate/fsdp.yaml``), DeepSpeed ZeRO-2 and ZeRO-3 (``deepspeed_zero2.yaml``,
``deepspeed_zero3.yaml``), with full fine-tuning and with LoRA (``--merge``), it trains the tiny judge a
few steps with validation on, one process each (``--num_processes 1``), several runs at a time:

* in float32 (``--mixed_precision no``, ``model.dtype=float32``), the six pairs: the judge written,
  loaded in this process (``judge.models.card.load_judge``; the adapter too for LoRA), must score the
  validation split as the card's final metrics say (1e-4); in float32 the scoring in training and
  here is the same computation, so this checks the weights;
* as shipped (bf16), full fine-tuning with each config: the judge's weights must be exactly those
  of the best checkpoint the Trainer saved (and reloaded) during training;
* for all: the run was distributed as asked (the card's ``training.distributed``, read off the live
  model: FSDP2 DTensors, ZeRO-3 partitions), and the final metrics are the best checkpoint's
  evaluation (full fine-tuning picks ``overall_mae``, whose best is not the last step here);
* FSDP full fine-tuning in float32: ``--resume`` from checkpoint-4 ends with the same losses.

Usage: ``python scripts/device/check_sharded_training.py OUT_DIR`` from the repository root; prints a
line per run, writes ``OUT_DIR/summary.json`` and the runs' logs, exits 1 if a check fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = ("fsdp.yaml", "deepspeed_zero2.yaml", "deepspeed_zero3.yaml")
RUNS = [(c, f, "float32") for c in CONFIGS for f in ("full", "lora")] + [(c, "full", "bf16") for c in CONFIGS]
POOLED = ("overall_mae", "overall_pearson", "overall_spearman", "all_mae", "all_pearson", "all_spearman")
TOL = 1e-4
BATCH_TOKENS = 64  # one response per forward batch
PARALLEL = 3  # runs at a time on the one GPU (the tiny model leaves it mostly idle)


def _launch(
    config: str, finetune: str, precision: str, out: Path, data: Path, port: int, *flags: str
) -> tuple[int, str, float]:
    sets = [
        f"output_dir={out}",
        "train.per_device_train_batch_size=4",
        "train.logging_steps=1",
        "train.warmup_steps=0",
        "train.save_steps=2",
        "eval.strategy=steps",
        "eval.steps=2",
        f"eval.batch_tokens={BATCH_TOKENS}",
        f"train.finetune={finetune}",
    ]
    if finetune == "full":
        sets += ["train.max_steps=6", "train.learning_rate=2e-3", "eval.best_metric=overall_mae"]
    else:
        sets += ["train.max_steps=4", "train.learning_rate=1e-3"]
    launch = ["--num_processes", "1", "--main_process_port", str(port)]
    if precision == "float32":
        sets.append("model.dtype=float32")
        launch += ["--mixed_precision", "no"]
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        f"configs/accelerate/{config}",
        *launch,
        "-m",
        "judge.cli.train",
        "--config",
        "demo",
        "--data",
        str(data),
        *flags,
    ]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
    )
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0


def _losses(state: Path) -> list[float]:
    return [e["loss"] for e in json.loads(state.read_text())["log_history"] if "loss" in e]


def _max_diff(a: dict, b: dict) -> float:
    return max(abs(a[k] - b[k]) for k in POOLED)


def _weights_diff(a: Path, b: Path) -> float:
    from safetensors.torch import load_file

    x, y = load_file(str(a)), load_file(str(b))
    if set(x) != set(y):
        return float("inf")
    return max((x[k].float() - y[k].float()).abs().max().item() for k in x)


def main() -> int:
    import datasets
    import torch

    from judge.core.rubric import load_rubric
    from judge.models.card import load_judge
    from judge.models.loading import load_scorer
    from judge.testing.demo import generate_demo
    from judge.train.config import load_run_config
    from judge.train.trainer import prepare_data
    from judge.train.validation import ValidationSet, validation_metrics

    t_start = time.perf_counter()
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/judge-sharded-check")
    shutil.rmtree(out, ignore_errors=True)
    (out / "logs").mkdir(parents=True)
    if not torch.cuda.is_available():
        print("no GPU: this check is for a GPU machine (the CPU runs are tests/test_train_sharded.py)")
        return 1
    import deepspeed

    versions = {
        m.__name__: m.__version__
        for m in (
            torch,
            deepspeed,
            __import__("transformers"),
            __import__("accelerate"),
            __import__("trl"),
            __import__("peft"),
        )
    }
    print(
        f"{torch.cuda.get_device_name(0)}; " + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True
    )
    demo = generate_demo(out / "demo", n_questions=12, seed=0)
    config_path, cfg = load_run_config(
        "demo", {"data.annotations": [str(demo)], "output_dir": str(out / "prep")}
    )
    data = prepare_data(cfg, config_path, None)
    vset = ValidationSet(datasets.load_from_disk(str(data / "dataset"))["validation"], load_rubric("mmie"))

    def rescored(model, processor) -> dict:
        return validation_metrics(vset.score(model, processor, batch_tokens=BATCH_TOKENS))

    def name_of(config, finetune, precision) -> str:
        return f"{config.removesuffix('.yaml')}-{finetune}-{precision}"

    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {
            run: pool.submit(
                _launch,
                *run,
                out / name_of(*run),
                data,
                29600 + i,
                *(["--merge"] if run[1] == "lora" else []),
            )
            for i, run in enumerate(RUNS)
        }
        results = {run: f.result() for run, f in futures.items()}

    rows, failed = [], []
    for config, finetune, precision in RUNS:
        name = name_of(config, finetune, precision)
        run = out / name
        rc, log, secs = results[(config, finetune, precision)]
        (out / "logs" / f"{name}.log").write_text(log)
        row: dict = {"run": name, "seconds": round(secs, 1), "rc": rc}
        problems = []
        if rc != 0:
            problems.append(f"exit {rc}: {log[-1500:]}")
        else:
            card = json.loads((run / "judge" / "judge_card.json").read_text())
            dist = card["training"]["distributed"]
            row["distributed"] = dist
            kind = "fsdp" if config.startswith("fsdp") else "deepspeed"
            sharded = config != "deepspeed_zero2.yaml"
            if dist["type"] != kind or dist["device"] != "cuda" or dist["parameters_sharded"] != sharded:
                problems.append(f"distributed as {dist}")
            evals = {e["step"]: e for e in card["training"]["evaluations"]}
            best = int(card["training"]["best_checkpoint"].rsplit("-", 1)[1])
            row["best_step"] = best
            if finetune == "full" and best == max(evals):
                problems.append("the best checkpoint is the last step's: its reload is not exercised")
            final = card["validation"]["final"]
            row["final_vs_best_eval"] = _max_diff(final, evals[best])
            if row["final_vs_best_eval"] > TOL:
                problems.append(f"final metrics are not checkpoint-{best}'s: {row['final_vs_best_eval']:.2e}")
            if precision == "float32":
                model, processor, _ = load_judge(run / "judge", device="cuda", dtype="float32")
                row["reloaded_vs_final"] = _max_diff(rescored(model, processor), final)
                if row["reloaded_vs_final"] > TOL:
                    problems.append(
                        f"reloaded judge scores differ from the card: {row['reloaded_vs_final']:.2e}"
                    )
                del model
                if finetune == "lora":
                    adapted, processor = load_scorer(
                        "tiny", adapter=str(run / "judge" / "adapter"), device="cuda", dtype="float32"
                    )
                    row["adapter_vs_final"] = _max_diff(rescored(adapted, processor), final)
                    if row["adapter_vs_final"] > TOL:
                        problems.append(f"adapter scores differ from the card: {row['adapter_vs_final']:.2e}")
                    del adapted
            else:
                # The Trainer's own checkpoint of the best step (its FSDP / DeepSpeed save path).
                row["weights_vs_best_checkpoint"] = _weights_diff(
                    run / "judge" / "merged" / "model.safetensors",
                    run / "checkpoints" / f"checkpoint-{best}" / "model.safetensors",
                )
                if row["weights_vs_best_checkpoint"] != 0:
                    problems.append(
                        f"judge weights differ from checkpoint-{best}'s: "
                        f"{row['weights_vs_best_checkpoint']:.2e}"
                    )
            if (config, finetune, precision) == ("fsdp.yaml", "full", "float32"):
                ckpt = run / "checkpoints"
                ref = _losses(ckpt / "checkpoint-6" / "trainer_state.json")
                shutil.rmtree(ckpt / "checkpoint-6")
                shutil.rmtree(run / "judge")
                rc2, log2, secs2 = _launch(config, finetune, precision, run, data, 29650, "--resume")
                (out / "logs" / f"{name}-resume.log").write_text(log2)
                row["resume_seconds"] = round(secs2, 1)
                if rc2 != 0:
                    problems.append(f"--resume exit {rc2}: {log2[-1500:]}")
                else:
                    got = _losses(ckpt / "checkpoint-6" / "trainer_state.json")
                    row["resume_loss_diff"] = max(abs(a - b) / abs(b) for a, b in zip(got, ref, strict=True))
                    if row["resume_loss_diff"] > 1e-4:
                        problems.append(f"--resume losses {got} differ from {ref}")
            torch.cuda.empty_cache()
        row["ok"] = not problems
        rows.append(row)
        if problems:
            failed.append((name, problems))
        print(
            f"{name:30s} {'ok  ' if row['ok'] else 'FAIL'} {secs:6.1f} s  "
            + "  ".join(
                f"{k}={v:.2e}" if isinstance(v, float) else f"{k}={v}"
                for k, v in row.items()
                if k
                in (
                    "best_step",
                    "final_vs_best_eval",
                    "reloaded_vs_final",
                    "adapter_vs_final",
                    "weights_vs_best_checkpoint",
                    "resume_loss_diff",
                )
            ),
            flush=True,
        )
    total = time.perf_counter() - t_start
    (out / "summary.json").write_text(
        json.dumps(
            {
                "versions": versions,
                "seconds": round(total, 1),
                "runs": rows,
                "failed": [{"run": n, "problems": p} for n, p in failed],
            },
            indent=2,
        )
    )
    for name, problems in failed:
        print(f"\n== {name} failed:\n" + "\n".join(problems))
    print(f"\n{len(RUNS) - len(failed)} of {len(RUNS)} runs passed in {total:.0f} s; logs in {out / 'logs'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
