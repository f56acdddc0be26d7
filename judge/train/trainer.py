"""``judge-train``: human annotations -> a LoRA-tuned (or fully tuned) judge, validated against humans.

The flow of :func:`train_judge`:

1. read and validate the run config (nothing is loaded if it is wrong);
2. build the SFT dataset from the annotations (``judge.data``), or take a prebuilt one
   whose rubric hash must match; empty splits fail here, before any model is loaded;
3. load the base (``judge.models.load_scorer``; 4-/8-bit through bitsandbytes), add LoRA
   adapters on the language model (or train it fully: ``train.finetune: full``);
4. train with TRL's ``SFTTrainer`` on accelerate (DDP / FSDP / DeepSpeed by ``accelerate
   launch``), loss on the completion only, scoring the validation split with the
   scorer judge-score uses at each evaluation and keeping the best checkpoint;
5. write ``<output_dir>/judge/`` atomically: ``adapter/`` (or ``merged/``), ``processor/``,
   ``judge_card.json``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.atomic import write_json
from ..data.config import DataSections
from ..data.errors import ConfigError
from ..data.rubric import load_rubric
from ..models.card import CARD_NAME, git_commit, library_versions
from .config import LANGUAGE_LINEAR, RunConfig, load_run_config
from .validation import ValidationSet, run_validation

HEADLINE = ("overall_spearman", "overall_pearson", "overall_kendall", "overall_mae", "all_spearman")


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


def _state():
    """accelerate's process state. On a machine without a GPU it must be created with ``cpu=True`` (first),
    or processes started by ``accelerate launch --multi_gpu`` / torchrun would each think they are alone."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def _is_main() -> bool:
    return _state().is_main_process


# ----------------------------------------------------------------------------- data
def prepare_data(cfg: RunConfig, config_path: Path, data_dir: str | Path | None, log: Callable[[str], None]) -> Path:
    """Build the SFT dataset (main process; the others wait), or check a prebuilt one; return its folder."""
    from ..data.build import build_sft_dataset
    from ..models.loading import load_processor

    rubric = load_rubric(cfg.rubric)
    state = _state()
    if data_dir is None:
        out = cfg.data_dir
        if state.is_main_process:
            processor = load_processor(cfg.model.path, cfg.model.trust_remote_code)
            sections = DataSections(rubric=cfg.rubric, data=cfg.data, output_dir=cfg.output_dir, seed=cfg.seed)
            build_sft_dataset(sections, processor, out_dir=out, config_path=config_path, log=log)
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
            "rebuild the data (judge-data build) or use the rubric it was built with")
    counts = manifest["counts"]
    if counts.get("train", 0) == 0:
        raise ConfigError(f"the train split of {out} is empty; check data.split fractions and the annotation files")
    if counts.get("validation", 0) == 0 and cfg.eval.strategy != "no":
        raise ConfigError(f"the validation split of {out} is empty; give data.split.validation a share, or set "
                          "eval.strategy: no")
    return out


# ----------------------------------------------------------------------------- model
def build_model(cfg: RunConfig):
    """Load the base and make the trainable model: LoRA on the language model, or full tuning."""
    import torch

    from ..models.loading import load_scorer, resolve_dtype

    device = "cuda" if torch.cuda.is_available() else "cpu"
    quant = None if cfg.quantization == "none" else cfg.quantization
    device_map = None
    if quant is not None and device == "cuda":
        device_map = {"": int(os.environ.get("LOCAL_RANK", 0))}
    # Resolve "auto" against the training device (bf16 on a GPU), not against the CPU the weights load on.
    dtype = resolve_dtype(cfg.model.dtype, device)
    model, processor = load_scorer(cfg.model.path, dtype=dtype, device="cpu" if quant is None else device,
                                   quantization=quant, trust_remote_code=cfg.model.trust_remote_code,
                                   attn_implementation=cfg.model.attn_implementation, device_map=device_map)
    model.train()
    frozen_prefixes = []
    if not cfg.lora.train_vision:
        frozen_prefixes.append("vision_tower")
    if not cfg.lora.train_projector:
        frozen_prefixes.append("multi_modal_projector")
    if cfg.train.finetune == "full":
        for name, p in model.named_parameters():
            p.requires_grad = not any(f in name for f in frozen_prefixes)
        return model, processor, dtype
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if quant is not None:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=cfg.train.gradient_checkpointing)
    targets = cfg.lora.target_modules
    if targets == "language":
        # Only the language model's projections: the vision tower has q/k/v-like names of its own.
        targets = r".*language_model.*\.(" + "|".join(LANGUAGE_LINEAR) + r")$"
    modules_to_save = [m for m, on in (("vision_tower", cfg.lora.train_vision),
                                       ("multi_modal_projector", cfg.lora.train_projector)) if on]
    lcfg = LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha, lora_dropout=cfg.lora.dropout,
                      target_modules=targets, modules_to_save=modules_to_save or None, task_type="CAUSAL_LM")
    try:
        model = get_peft_model(model, lcfg)
    except ValueError as e:
        raise ConfigError(f"lora.target_modules {cfg.lora.target_modules!r} matches no module of "
                          f"{cfg.model.path!r}: {e}") from None
    return model, processor, dtype


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
        learning_rate=t.learning_rate, num_train_epochs=t.num_train_epochs, max_steps=t.max_steps,
        per_device_train_batch_size=t.per_device_train_batch_size,
        per_device_eval_batch_size=t.per_device_eval_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps, lr_scheduler_type=t.lr_scheduler_type,
        warmup_steps=t.warmup_steps, weight_decay=t.weight_decay, max_grad_norm=t.max_grad_norm, optim=t.optim,
        gradient_checkpointing=t.gradient_checkpointing, logging_steps=t.logging_steps,
        save_strategy=save_strategy, save_total_limit=t.save_total_limit,
        eval_strategy=eval_strategy, dataloader_num_workers=t.dataloader_num_workers, seed=cfg.train_seed,
        data_seed=cfg.train_seed, bf16=t.bf16 if t.bf16 is not None else dtype == torch.bfloat16,
        report_to=report_to, run_name=cfg.logging.run_name, remove_unused_columns=False,
        dataset_kwargs={"skip_prepare_dataset": True}, max_length=None, completion_only_loss=True,
        use_cpu=not torch.cuda.is_available(), disable_tqdm=False,
        ddp_find_unused_parameters=False,
    )
    if t.save_steps:
        kwargs["save_steps"] = t.save_steps
    if eval_strategy == "steps":
        kwargs["eval_steps"] = ev.steps
        if not t.save_steps:
            kwargs["save_steps"] = ev.steps
    if eval_strategy != "no":
        kwargs.update(load_best_model_at_end=True, metric_for_best_model=ev.best_metric,
                      greater_is_better=ev.greater)
    if t.gradient_checkpointing:
        kwargs["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    return SFTConfig(**kwargs)


def _make_trainer_class():
    from transformers import ProgressCallback
    from trl import SFTTrainer

    class JudgeTrainer(SFTTrainer):
        """SFTTrainer whose evaluation scores the validation split against the human scores."""

        def __init__(self, *args, validation: ValidationSet | None, run_cfg: RunConfig, judge_processor, **kw):
            super().__init__(*args, **kw)
            self.validation = validation
            self.run_cfg = run_cfg
            self.judge_processor = judge_processor
            self.eval_history: list[dict[str, Any]] = []

        # transformers 5 saves InternVL checkpoints under its legacy key names, and Trainer reloads a
        # full (non-PEFT) checkpoint with load_state_dict(strict=False), which then matches no key and
        # silently keeps the current weights. Reload full checkpoints through from_pretrained, which
        # maps the names, and insist that every weight arrives.
        def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
            model = model if model is not None else self.model
            if hasattr(model, "peft_config"):
                return super()._load_from_checkpoint(resume_from_checkpoint, model)
            _load_full_checkpoint(model, resume_from_checkpoint)

        def _load_best_model(self):
            if hasattr(self.model, "peft_config"):
                return super()._load_best_model()
            _load_full_checkpoint(self.model, self.state.best_model_checkpoint)

        def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> dict[str, float]:
            if self.validation is None:
                return {}
            ev = self.run_cfg.eval
            metrics, seconds = run_validation(self.validation, self.model, self.judge_processor,
                                              share_prefix=ev.share_prefix, max_batch_tokens=ev.max_batch_tokens,
                                              metrics=ev.metrics)
            self.eval_history.append({"step": self.state.global_step, "seconds": round(seconds, 2), **metrics})
            out = {f"{metric_key_prefix}_{k}": _selectable(k, v, ev.best_metric, ev.greater)
                   for k, v in metrics.items() if v is not None or k == ev.best_metric}
            out[f"{metric_key_prefix}_seconds"] = round(seconds, 2)
            self.log(out)
            self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, out)
            return out

    class CompactProgress(ProgressCallback):
        """The progress bar, printing headline numbers only (the full breakdown goes to the loggers)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or self.training_bar is None or not logs:
                return
            keep = {k: v for k, v in logs.items()
                    if k in ("loss", "learning_rate", "grad_norm", "epoch", "eval_seconds")
                    or k.removeprefix("eval_") in HEADLINE}
            if keep:
                self.training_bar.write(_fmt_log(state.global_step, keep))

    return JudgeTrainer, CompactProgress


def _load_full_checkpoint(model, folder: str) -> None:
    """Load a full checkpoint written by Trainer into ``model`` in place; every key must match."""
    saved = type(model).from_pretrained(folder, dtype=next(model.parameters()).dtype)
    result = model.load_state_dict(saved.state_dict(), strict=False)
    missing = [k for k in result.missing_keys if k != "lm_head.weight"]  # tied to the embeddings
    if missing or result.unexpected_keys:
        raise RuntimeError(f"checkpoint {folder} does not match the model: missing {missing[:5]}, "
                           f"unexpected {result.unexpected_keys[:5]}")


def _selectable(key: str, value: float | None, best: str, greater: bool) -> float | None:
    # Trainer compares the best metric with numpy: an undefined correlation (a constant scorer, as an
    # untrained model can be) counts as the worst value instead of breaking the comparison.
    if key == best and value is None:
        return -1.0 if greater else math.inf
    return value


def _fmt_log(step: int, logs: dict[str, Any]) -> str:
    parts = [f"step {step}"]
    for k, v in logs.items():
        parts.append(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
    return "  ".join(parts)


def _report_to(cfg: RunConfig) -> list[str]:
    if cfg.logging.backend == "wandb":
        os.environ.setdefault("WANDB_PROJECT", cfg.logging.project)
        return ["wandb"]
    if cfg.logging.backend == "tensorboard":
        return ["tensorboard"]
    return []


# ----------------------------------------------------------------------------- main
def train_judge(
    config: str | Path,
    overrides: list[str] | None = None,
    *,
    resume: bool = False,
    merge: bool = False,
    data_dir: str | Path | None = None,
    log: Callable[[str], None] = print,
) -> TrainResult:
    """Run ``judge-train``; returns where the judge went and the validation metrics before and after."""
    t0 = time.perf_counter()
    config_path, cfg = load_run_config(config, overrides)
    _state()
    from ..models.loading import check_model_source

    check_model_source(cfg.model.path)
    checkpoints = cfg.out / "checkpoints"
    if resume and not _last_checkpoint(checkpoints):
        raise ConfigError(f"--resume: no checkpoint in {checkpoints} to resume from")
    rubric = load_rubric(cfg.rubric)
    data_path = prepare_data(cfg, config_path, data_dir, log if _is_main() else (lambda s: None))

    import datasets
    from transformers import ProgressCallback, set_seed

    set_seed(cfg.train_seed)
    dd = datasets.load_from_disk(str(data_path / "dataset"))
    validation = ValidationSet(dd["validation"], rubric) if len(dd["validation"]) else None
    model, processor, dtype = build_model(cfg)

    out = cfg.out
    if not resume and _is_main() and checkpoints.exists():
        # A fresh run must not pick up (or be confused by) checkpoints of an earlier one.
        shutil.rmtree(checkpoints)
    args = _sft_config(cfg, dtype, checkpoints, _report_to(cfg))
    from .collator import JudgeCollator

    JudgeTrainer, CompactProgress = _make_trainer_class()
    baseline = None
    ev = cfg.eval
    if validation is not None and ev.at_start and not resume:
        baseline, secs = run_validation(validation, model, processor, share_prefix=ev.share_prefix,
                                        max_batch_tokens=ev.max_batch_tokens, metrics=ev.metrics)
        if _is_main():
            log(f"untrained judge on validation ({len(validation)} scores, {secs:.1f} s): "
                + _headline(baseline))
    trainer = JudgeTrainer(
        model=model, args=args, train_dataset=dd["train"],
        eval_dataset=dd["validation"] if validation is not None else None,
        processing_class=processor, data_collator=JudgeCollator(processor, cfg.max_length),
        validation=validation if ev.strategy != "no" else None, run_cfg=cfg, judge_processor=processor,
    )
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(CompactProgress())
    if _is_main():
        st = _state()
        n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
        log(f"training {cfg.train.finetune} ({n_train:,} trainable parameters) on {st.device}, world size "
            f"{st.num_processes}, {len(dd['train'])} examples")
    t_train = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(_last_checkpoint(checkpoints)) if resume else None)
    train_seconds = time.perf_counter() - t_train
    final = None
    if validation is not None:
        # The best checkpoint is loaded by now (load_best_model_at_end); score it once more.
        final, _ = run_validation(validation, trainer.model, processor, share_prefix=ev.share_prefix,
                                  max_batch_tokens=ev.max_batch_tokens, metrics=ev.metrics)
    best_value = trainer.state.best_metric
    judge_dir = out / "judge"
    if _is_main():
        card = _card(cfg, config_path, rubric, data_path, baseline, final, trainer, train_seconds)
        _write_judge(trainer.model, processor, card, judge_dir, cfg, merge)
        _log_final(cfg, final, baseline)
    trainer.accelerator.wait_for_everyone()
    result = TrainResult(judge_dir, trainer.state.global_step, time.perf_counter() - t0, baseline, final or {},
                         ev.best_metric, best_value, trainer.state.best_model_checkpoint)
    if _is_main():
        log(format_summary(result, train_seconds))
    return result


def _last_checkpoint(folder: Path) -> Path | None:
    from transformers.trainer_utils import get_last_checkpoint

    if not folder.is_dir():
        return None
    last = get_last_checkpoint(str(folder))
    return Path(last) if last else None


def _headline(metrics: dict[str, Any] | None) -> str:
    if not metrics:
        return "(no validation)"
    return "  ".join(f"{k}={_num(metrics.get(k))}" for k in HEADLINE)


def _num(v) -> str:
    return "undefined" if v is None else f"{v:.3f}"


def _card(cfg, config_path, rubric, data_path: Path, baseline, final, trainer, train_seconds) -> dict[str, Any]:
    manifest = json.loads((data_path / "manifest.json").read_text(encoding="utf-8"))
    return {
        "judge_card_version": 1,
        "base_model": cfg.model.path if cfg.model.path != "tiny" else "tiny:seed=0",
        "finetune": cfg.train.finetune,
        "quantization": cfg.quantization,
        "rubric": {"name": rubric.name, "version": rubric.version, "hash": rubric.hash},
        "scale": rubric.scale.values,
        "target_format": cfg.data.target,
        "data": {"hash": manifest["data_hash"], "examples": manifest["counts"], "records": manifest["records"],
                 "annotation_files": manifest["annotation_files"], "dataset": str(data_path)},
        "config_file": str(config_path),
        "config": cfg.model_dump(mode="json"),
        "seed": cfg.train_seed,
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "libraries": library_versions(),
        "training": {"steps": trainer.state.global_step, "epochs": trainer.state.epoch,
                     "seconds": round(train_seconds, 1), "best_metric": cfg.eval.best_metric,
                     "best_value": trainer.state.best_metric,
                     "best_checkpoint": trainer.state.best_model_checkpoint,
                     "evaluations": getattr(trainer, "eval_history", [])},
        "validation": {"untrained": baseline, "final": final},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _write_judge(model, processor, card: dict, judge_dir: Path, cfg: RunConfig, merge: bool) -> None:
    """Write adapter/ (or merged/), processor/ and the card beside, then swap the folder in."""
    tmp = judge_dir.with_name(judge_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    is_peft = hasattr(model, "peft_config")
    if is_peft:
        model.save_pretrained(tmp / "adapter")
    if not is_peft or merge:
        merged = _merged_model(model, cfg, tmp / "adapter") if is_peft else model
        merged.save_pretrained(tmp / "merged", safe_serialization=True)
        processor.save_pretrained(tmp / "merged")
    processor.save_pretrained(tmp / "processor")
    card["outputs"] = sorted(p.name for p in tmp.iterdir())
    write_json(tmp / CARD_NAME, card)
    old = judge_dir.with_name(judge_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if judge_dir.exists():
        judge_dir.rename(old)
    tmp.rename(judge_dir)
    shutil.rmtree(old, ignore_errors=True)


def _merged_model(model, cfg: RunConfig, adapter_dir: Path):
    if cfg.quantization == "none":
        return model.merge_and_unload()
    # A quantized base cannot take merged weights: reload it unquantized and merge there.
    from peft import PeftModel

    from ..models.loading import load_scorer

    base, _ = load_scorer(cfg.model.path, dtype=cfg.model.dtype, trust_remote_code=cfg.model.trust_remote_code)
    return PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()


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
    lines = ["", "== judge-train summary",
             f"steps {r.steps}   training {train_seconds:.1f} s   total {r.seconds:.1f} s"]
    if r.final:
        lines.append(f"best {r.best_metric}: {_num(r.best_value)}"
                     + (f"  ({r.best_checkpoint})" if r.best_checkpoint else ""))
        lines.append(f"validation before: {_headline(r.baseline)}" if r.baseline else "validation before: (skipped)")
        lines.append(f"validation after:  {_headline(r.final)}")
    lines.append(f"judge written to {r.judge_dir}")
    return "\n".join(lines)


__all__ = ["TrainResult", "build_model", "format_summary", "prepare_data", "train_judge"]
