"""``judge-train``: human annotations -> a LoRA-tuned (or fully tuned) judge, validated against humans.

The flow of :func:`train_judge`:

1. read and validate the run config (nothing is loaded if it is wrong);
2. build the SFT dataset from the annotations (``judge.data``), or take a prebuilt one
   whose rubric hash must match; empty splits fail here, before any model is loaded;
3. load the base (``judge.models.load_scorer``; 4-/8-bit through bitsandbytes), add LoRA
   adapters on the language model (or train it fully: ``train.finetune: full``);
4. train with TRL's ``SFTTrainer`` on accelerate (DDP / FSDP2 / DeepSpeed ZeRO-2 or -3 by
   ``accelerate launch``), loss on the completion only, scoring the validation split with the
   scorer judge-score uses at each evaluation and keeping the best checkpoint;
5. write ``<output_dir>/judge/`` atomically: ``adapter/`` (or ``merged/``), ``processor/``,
   ``judge_card.json``. A sharded model's weights are gathered by the accelerator on every
   process (FSDP's full state dict, ZeRO-3's 16-bit gather) and written by the main one.

Sharded models (FSDP, ZeRO-3) run every forward as a collective: every process must call the
same modules the same number of times. Validation plans its batches for that
(``judge.train.validation``); best-checkpoint and resume loading go through the Trainer's own
FSDP / DeepSpeed loaders, never plain tensors into a sharded model. A full, unsharded model's checkpoints,
which the Trainer's loader cannot read (transformers 5's legacy key names), load through
``from_pretrained`` in a callback (``_FullCheckpoints``): no private Trainer method is overridden.
The Trainer subclass and its callbacks live in :mod:`judge.train.judge_trainer`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.core.errors import ConfigError, JudgeError
from judge.core.rubric import load_rubric
from judge.data.config import DataSections, check_data_paths
from judge.train.config import RunConfig, check_best_metric, load_run_config, override_run_config
from judge.train.judge_folder import judge_card, save_judge
from judge.train.judge_trainer import (
    _headline,
    _make_trainer_class,
    _num,
    _trainer_misloads_full_checkpoints,
    _TrainerMisloadWarning,
)
from judge.train.launch import (
    check_distributed,
    check_launch,
    cpu_sharded,
    describe,
    distribution_of,
    is_main,
    process_state,
)
from judge.train.model import build_model
from judge.train.pair_validation import build_validation, check_pair_metric_defined

logger = logging.getLogger(__name__)


@dataclass
class TrainResult:
    judge_dir: Path
    steps: int
    seconds: float
    baseline: dict[str, Any] | None
    final: dict[str, Any]
    best_metric: str
    best_value: float | None
    best_checkpoint: str | None


class TrainingDiverged(JudgeError):
    """The loss or the gradient norm stopped being finite while training."""


# ----------------------------------------------------------------------------- data
def prepare_data(cfg: RunConfig, config_path: Path | None, data_dir: str | Path | None) -> Path:
    """Build the SFT dataset (main process; the others wait), or check a prebuilt one; return its folder."""
    from judge.data.build import build_sft_dataset
    from judge.models.families import set_pixel_bounds
    from judge.models.loading import load_processor

    rubric = load_rubric(cfg.rubric)
    state = process_state()
    if data_dir is None:
        out = cfg.data_dir
        if state.is_main_process:
            processor = load_processor(cfg.model.path, cfg.model.trust_remote_code)
            set_pixel_bounds(processor, cfg.model.min_pixels, cfg.model.max_pixels)
            sections = DataSections(
                rubric=cfg.rubric, data=cfg.data, output_dir=cfg.output_dir, seed=cfg.seed
            )
            build_sft_dataset(sections, processor, out_dir=out, config_path=config_path)
        state.wait_for_everyone()
    else:
        out = Path(data_dir)
    manifest_path = out / "manifest.json"
    if not manifest_path.is_file():
        raise ConfigError(f"{out} holds no SFT dataset (no manifest.json); build it with judge-data build")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest["rubric"]["hash"] != rubric.hash:
        raise ConfigError(
            f"the dataset in {out} was built with rubric {manifest['rubric']['name']!r} hash "
            f"{manifest['rubric']['hash'][:12]}, but the config's rubric {cfg.rubric!r} has hash {rubric.hash[:12]}; "
            "rebuild the data (judge-data build) or use the rubric it was built with"
        )
    pairs = manifest.get("pairs", {}).get("counts", {})
    counts = {s: n + pairs.get(s, 0) for s, n in manifest["counts"].items()}
    if counts.get("train", 0) == 0:
        raise ConfigError(
            f"the train split of {out} is empty; check data.split fractions and the annotation files"
        )
    if counts.get("validation", 0) == 0 and cfg.eval.strategy != "no":
        raise ConfigError(
            f"the validation split of {out} is empty; give data.split.validation a share, or set "
            "eval.strategy: no"
        )
    return out


# ----------------------------------------------------------------------------- model


# ----------------------------------------------------------------------------- trainer
def _sft_config(cfg: RunConfig, dtype, checkpoints: Path, report_to: list[str]):
    import torch
    from trl import SFTConfig

    t = cfg.train
    ev = cfg.eval
    eval_strategy = ev.strategy
    save_strategy = "steps" if t.save_steps else (eval_strategy if eval_strategy != "no" else "epoch")
    kwargs: dict[str, Any] = dict(
        output_dir=str(checkpoints),
        learning_rate=t.learning_rate,
        num_train_epochs=t.num_train_epochs,
        max_steps=t.max_steps,
        per_device_train_batch_size=t.per_device_train_batch_size,
        per_device_eval_batch_size=t.per_device_eval_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        lr_scheduler_type=t.lr_scheduler_type,
        warmup_steps=t.warmup_steps,
        weight_decay=t.weight_decay,
        max_grad_norm=t.max_grad_norm,
        optim=t.optim,
        # transformers 5.23+ names it activation_checkpointing; the old name (which TRL sets, to True, by
        # default) would print a FutureWarning on every run, even with checkpointing off.
        activation_checkpointing=t.gradient_checkpointing,
        logging_steps=t.logging_steps,
        save_strategy=save_strategy,
        save_total_limit=t.save_total_limit,
        eval_strategy=eval_strategy,
        dataloader_num_workers=t.dataloader_num_workers,
        seed=cfg.train_seed,
        data_seed=cfg.train_seed,
        bf16=t.bf16 if t.bf16 is not None else dtype == torch.bfloat16,
        report_to=report_to,
        run_name=cfg.logging.run_name,
        remove_unused_columns=False,
        dataset_kwargs={"skip_prepare_dataset": True},
        max_length=None,
        completion_only_loss=True,
        use_cpu=not torch.cuda.is_available(),
        disable_tqdm=False,
        # A NaN or inf loss is logged as it is (Trainer would average it away), so divergence is seen.
        logging_nan_inf_filter=False,
        ddp_find_unused_parameters=False,
    )
    if t.save_steps:
        kwargs["save_steps"] = t.save_steps
    if eval_strategy == "steps":
        kwargs["eval_steps"] = ev.steps
        if not t.save_steps:
            kwargs["save_steps"] = ev.steps
    if eval_strategy != "no":
        # The Trainer tracks the best checkpoint (and keeps it from rotation) whenever it has a metric; it
        # loads it at the end only where its own loader is right (see _FullCheckpoints).
        kwargs.update(
            load_best_model_at_end=not _trainer_misloads_full_checkpoints(cfg),
            metric_for_best_model=ev.best_metric,
            greater_is_better=ev.greater,
        )
    if t.gradient_checkpointing:
        kwargs["activation_checkpointing_kwargs"] = {"use_reentrant": False}
    if cpu_sharded():
        # The training arguments would otherwise rebuild accelerate's state as a CPU one (see process_state).
        kwargs["accelerator_config"] = {"use_configured_state": True}
    return SFTConfig(**kwargs)


def _report_to(cfg: RunConfig) -> list[str]:
    if cfg.logging.backend == "wandb":
        os.environ.setdefault("WANDB_PROJECT", cfg.logging.project)
        return ["wandb"]
    if cfg.logging.backend == "tensorboard":
        return ["tensorboard"]
    return []


# ----------------------------------------------------------------------------- main
def train_judge(
    config: RunConfig | str | Path,
    *,
    overrides: Mapping[str, Any] | None = None,
    resume: bool = False,
    merge: bool = False,
    data_dir: str | Path | None = None,
) -> TrainResult:
    """Run ``judge-train``; returns where the judge went and the validation metrics before and after.

    ``config``: a validated :class:`RunConfig`, or a config file / shipped config name (``"demo"``).
    ``overrides``: dotted config keys to typed values, ``{"train.max_steps": 4, "output_dir": "runs/x"}``.
    ``resume``: continue from the last checkpoint in ``<output_dir>/checkpoints``; ``merge``: also write
    ``merged/``; ``data_dir``: a prebuilt SFT dataset instead of building one.

    The main process logs its progress (INFO): the data statistics, the untrained judge's validation
    numbers, what trains where, and the summary at the end."""
    t0 = time.perf_counter()
    if isinstance(config, RunConfig):
        config_path, cfg = None, override_run_config(config, overrides)
    else:
        config_path, cfg = load_run_config(config, overrides)
    if data_dir is None:  # a missing annotation file fails now, not after the model has loaded
        check_data_paths(cfg.data, config_path)
    process_state()
    from judge.models.loading import check_model_source

    check_model_source(
        cfg.model.path,
        hint="point the config at the folder: --set model.path=DIR; to try the pipeline without a "
        "checkpoint, train the tiny local model: judge-train --config demo",
    )
    check_launch(cfg)
    checkpoints = cfg.out / "checkpoints"
    resume_from = _last_checkpoint(checkpoints) if resume else None
    if resume and resume_from is None:
        raise ConfigError(f"`resume`: no checkpoint in {checkpoints} to resume from")
    rubric = load_rubric(cfg.rubric)
    check_best_metric(cfg, rubric)  # before the data build and the model load
    data_path = prepare_data(cfg, config_path, data_dir)

    from transformers import ProgressCallback, set_seed

    from judge.data.pair_examples import load_pair_dataset
    from judge.data.sft import load_sft_dataset

    set_seed(cfg.train_seed)
    dd = load_sft_dataset(data_path)
    pairs = load_pair_dataset(data_path)  # None without data.pairs
    if cfg.eval.strategy != "no":  # a best metric the split cannot define: refused before the model
        check_pair_metric_defined(cfg.eval.best_metric, pairs["validation"] if pairs else None)
    validation = build_validation(dd["validation"], pairs["validation"] if pairs else None, rubric)
    model, processor, dtype = build_model(cfg)

    out = cfg.out
    if not resume and is_main() and checkpoints.exists():
        # A fresh run must not pick up (or be confused by) checkpoints of an earlier one.
        shutil.rmtree(checkpoints)
    args = _sft_config(cfg, dtype, checkpoints, _report_to(cfg))
    from judge.train.collator import JudgeCollator
    from judge.train.pair_loss import with_pairs

    JudgeTrainer, CompactProgress, FullCheckpoints = _make_trainer_class()
    ev = cfg.eval
    collator = JudgeCollator(
        processor, cfg.max_length, labels_last=not cfg.train.packing, packed=cfg.train.packing
    )
    # With preference pairs (data.pairs), SFT and pair examples mixed, and the loss adds both terms.
    train_set, collator, pair_objective = with_pairs(
        cfg, pairs, dd["train"], collator, processor, rubric.scale.values
    )
    trainer = JudgeTrainer(
        model=model,
        args=args,
        train_dataset=train_set,
        eval_dataset=dd["validation"] if validation is not None else None,
        processing_class=processor,
        data_collator=collator,
        pair_objective=pair_objective,
        validation=validation if ev.strategy != "no" else None,
        run_cfg=cfg,
        judge_processor=processor,
        # The untrained judge is scored when training begins, on the model as the accelerator prepared it.
        baseline_set=validation if ev.at_start and not resume else None,
    )
    if cfg.quantization != "none":
        import torch

        # TRL's SFTTrainer casts what trains of a quantized model to bf16 (the QLoRA paper's choice); here it
        # keeps float32 masters (judge.train.model): bf16 weights lose small updates, and a vision tower
        # trained in full as bf16 meets float32 pixels in SmolVLM, which casts them to its first weight's dtype.
        for param in trainer.model.parameters():
            if param.requires_grad and param.dtype in (torch.bfloat16, torch.float16):
                param.data = param.data.float()
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(CompactProgress())
    misload = _trainer_misloads_full_checkpoints(cfg)
    if misload:
        trainer.add_callback(FullCheckpoints(resume_from, load_best=ev.strategy != "no"))
    check_distributed(trainer, cfg, dd["train"])
    if is_main():
        st = process_state()
        n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
        logger.info(
            f"training {cfg.train.finetune} ({n_train:,} trainable parameters) on {st.device}, world size "
            f"{st.num_processes}, {describe(trainer)}, {len(train_set)} examples"
        )
    t_train = time.perf_counter()
    quiet = _TrainerMisloadWarning()
    trainer_log = logging.getLogger("transformers.trainer")
    if misload and resume_from is not None:
        trainer_log.addFilter(quiet)
    try:
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    finally:
        trainer_log.removeFilter(quiet)
    train_seconds = time.perf_counter() - t_train
    if trainer.diverged:
        raise TrainingDiverged(
            f"training diverged {trainer.diverged}: the weights are no longer finite, so no judge was written "
            f"(an earlier one in {out / 'judge'} is kept). Lower train.learning_rate (now "
            f"{cfg.train.learning_rate:g}) or raise train.warmup_steps; a checkpoint saved before it, if any, is "
            f"in {checkpoints}"
        )
    distribution = distribution_of(trainer)
    final = None
    if validation is not None:
        # The best checkpoint is loaded by now (load_best_model_at_end); score it once more.
        final, _ = trainer.score(validation)
    baseline = trainer.baseline
    best_value = trainer.state.best_metric
    judge_dir = out / "judge"
    card = judge_card(
        cfg, config_path, rubric, data_path, baseline, final, trainer, train_seconds, distribution
    )
    # Every process takes part (a sharded model's weights are gathered); the main one writes.
    save_judge(trainer, processor, card, judge_dir, cfg, merge, dtype)
    if is_main():
        _log_final(cfg, final, baseline)
    trainer.accelerator.wait_for_everyone()
    result = TrainResult(
        judge_dir,
        trainer.state.global_step,
        time.perf_counter() - t0,
        baseline,
        final or {},
        ev.best_metric,
        best_value,
        trainer.state.best_model_checkpoint,
    )
    if is_main():
        logger.info(format_summary(result, train_seconds))
    return result


def _last_checkpoint(folder: Path) -> Path | None:
    """The newest complete checkpoint in ``folder``, or None.

    Trainer writes ``trainer_state.json`` last, so a checkpoint without a readable one was cut off while
    being saved (a kill or a full disk): resuming from it would fail on a half-written file. Such folders
    are skipped, and the main process removes them, since training writes them again."""
    if not folder.is_dir():
        return None
    numbered = []
    for d in folder.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", d.name)
        if m and d.is_dir():
            numbered.append((int(m.group(1)), d))
    for _, d in sorted(numbered, reverse=True):
        try:
            json.loads((d / "trainer_state.json").read_text())
            return d
        except (OSError, ValueError):
            logger.warning(
                f"{d} is incomplete (saving it was interrupted); resuming from an earlier checkpoint"
            )
            if is_main():
                shutil.rmtree(d, ignore_errors=True)
    return None


def _log_final(cfg: RunConfig, final: dict | None, baseline: dict | None) -> None:
    """Send the before/after table to the logger the run uses (wandb: a table in the run)."""
    if cfg.logging.backend != "wandb" or not final:
        return
    import wandb

    if wandb.run is None:
        return
    rows = [[k, baseline.get(k) if baseline else None, v] for k, v in final.items() if not k.endswith("_n")]
    wandb.log({"validation/final_table": wandb.Table(columns=["metric", "untrained", "trained"], data=rows)})
    wandb.run.summary.update({f"final/{k}": v for k, v in final.items() if v is not None})
    wandb.finish()


def format_summary(r: TrainResult, train_seconds: float) -> str:
    lines = [
        "",
        "== judge-train summary",
        f"steps {r.steps}   training {train_seconds:.1f} s   total {r.seconds:.1f} s",
    ]
    if r.final:
        lines.append(
            f"best {r.best_metric}: {_num(r.best_value)}"
            + (f"  ({r.best_checkpoint})" if r.best_checkpoint else "")
        )
        lines.append(
            f"validation before: {_headline(r.baseline)}" if r.baseline else "validation before: (skipped)"
        )
        lines.append(f"validation after:  {_headline(r.final)}")
    lines.append(f"judge written to {r.judge_dir}")
    return "\n".join(lines)


__all__ = ["TrainResult", "build_model", "format_summary", "prepare_data", "train_judge"]
