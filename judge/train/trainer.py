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
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.core.errors import ConfigError, JudgeError
from judge.core.rubric import Rubric, load_rubric
from judge.data.config import DataSections
from judge.models.card import (
    CardData,
    CardRubric,
    CardTraining,
    CardValidation,
    Distribution,
    JudgeCard,
    Metrics,
    git_commit,
    library_versions,
    write_card,
)
from judge.train.config import LANGUAGE_LINEAR, RunConfig, load_run_config, override_run_config
from judge.train.loss import labels_only_loss
from judge.train.validation import ValidationSet, run_validation

logger = logging.getLogger(__name__)

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


class TrainingDiverged(JudgeError):
    """The loss or the gradient norm stopped being finite while training."""


def _launched_sharding() -> str | None:
    """``"fsdp"`` or ``"deepspeed"`` when ``accelerate launch`` was given such a config, else None."""
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        return "deepspeed"
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        return "fsdp"
    return None


def _cpu_sharded() -> bool:
    """FSDP or DeepSpeed launched on a machine without a GPU (processes on the CPU, gloo)."""
    import torch

    return _launched_sharding() is not None and not torch.cuda.is_available()


def _state():
    """accelerate's process state. On a machine without a GPU it must be created with ``cpu=True`` (first),
    or processes started by ``accelerate launch --multi_gpu`` / torchrun would each think they are alone.

    FSDP and DeepSpeed on CPU processes (gloo): accelerate turns its FSDP and DeepSpeed settings on for
    GPU kinds of process state only and would silently run plain data parallelism instead. For FSDP the
    CPU state is marked as a multi-device one, so that the accelerator shards (FSDP2 runs on gloo); for
    DeepSpeed the state is made the non-CPU way with the gloo backend (DeepSpeed's CPU accelerator uses
    gloo). The training arguments then keep this state (``use_configured_state``)."""
    import torch
    from accelerate import PartialState
    from accelerate.utils import DistributedType

    if PartialState._shared_state:
        return PartialState()
    if torch.cuda.is_available():
        return PartialState()
    sharding = _launched_sharding()
    if sharding == "deepspeed" and int(os.environ.get("LOCAL_RANK", -1)) != -1:
        return PartialState(backend="gloo")
    state = PartialState(cpu=True)
    if sharding == "fsdp" and state.distributed_type == DistributedType.MULTI_CPU:
        PartialState._shared_state["distributed_type"] = DistributedType.MULTI_GPU
    return state


def _is_main() -> bool:
    return _state().is_main_process


# ----------------------------------------------------------------------------- data
def prepare_data(cfg: RunConfig, config_path: Path | None, data_dir: str | Path | None) -> Path:
    """Build the SFT dataset (main process; the others wait), or check a prebuilt one; return its folder."""
    from judge.data.build import build_sft_dataset
    from judge.models.loading import load_processor

    rubric = load_rubric(cfg.rubric)
    state = _state()
    if data_dir is None:
        out = cfg.data_dir
        if state.is_main_process:
            processor = load_processor(cfg.model.path, cfg.model.trust_remote_code)
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
    counts = manifest["counts"]
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
def build_model(cfg: RunConfig):
    """Load the base and make the trainable model: LoRA on the language model, or full tuning."""
    import torch

    from judge.models.loading import load_scorer, resolve_dtype

    check_liger(cfg)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    quant = None if cfg.quantization == "none" else cfg.quantization
    device_map = None
    if quant is not None and device == "cuda":
        device_map = {"": int(os.environ.get("LOCAL_RANK", 0))}
    # Resolve "auto" against the training device (bf16 on a GPU), not against the CPU the weights load on.
    dtype = resolve_dtype(cfg.model.dtype, device)
    model, processor = load_scorer(
        cfg.model.path,
        dtype=dtype,
        device="cpu" if quant is None else device,
        quantization=quant,
        trust_remote_code=cfg.model.trust_remote_code,
        attn_implementation=cfg.model.attn_implementation,
        device_map=device_map,
    )
    model.train()
    if liger_on(cfg):
        _apply_liger(model, required=cfg.train.liger_kernel is True)
    if cfg.train.packing and device == "cuda" and cfg.model.attn_implementation is None:
        # A packed row under sdpa gets a dense (tokens x tokens) mask and attends across examples before
        # masking; flex_attention's block mask skips those blocks. The vision tower keeps its own.
        model.set_attn_implementation({"text_config": "flex_attention"})
    frozen_prefixes = []
    if not cfg.lora.train_vision:
        frozen_prefixes.append("vision_tower")
    if not cfg.lora.train_projector:
        frozen_prefixes.append("multi_modal_projector")
    if cfg.train.finetune == "full":
        for name, p in model.named_parameters():
            p.requires_grad = not any(f in name for f in frozen_prefixes)
        return model, processor, dtype
    from peft import LoraConfig, get_peft_model

    if quant is not None:
        # Not peft's prepare_model_for_kbit_training: it upcasts every frozen parameter that is not 4-bit
        # (vision tower, projector, embeddings, norms) to float32, which at 4B size costs more memory than
        # the 4-bit weights save (QLoRA peaked above bf16 LoRA on the H100). Frozen parameters stay in the
        # load dtype; what trains is float32 (below); gradient checkpointing is the Trainer's (non-reentrant,
        # so the inputs need not require gradients).
        model.requires_grad_(False)
    targets: str | list[str] = cfg.lora.target_modules
    if targets == "language":
        # Only the language model's projections: the vision tower has q/k/v-like names of its own.
        targets = r".*language_model.*\.(" + "|".join(LANGUAGE_LINEAR) + r")$"
    modules_to_save = [
        m
        for m, on in (
            ("vision_tower", cfg.lora.train_vision),
            ("multi_modal_projector", cfg.lora.train_projector),
        )
        if on
    ]
    lcfg = LoraConfig(
        r=cfg.lora.r,
        lora_alpha=cfg.lora.alpha,
        lora_dropout=cfg.lora.dropout,
        target_modules=targets,
        modules_to_save=modules_to_save or None,
        task_type="CAUSAL_LM",
    )
    try:
        model = get_peft_model(model, lcfg)
    except ValueError as e:
        raise ConfigError(
            f"lora.target_modules {cfg.lora.target_modules!r} matches no module of {cfg.model.path!r}: {e}"
        ) from None
    if quant is not None:
        # What trains keeps float32 master weights (the adapters already are: peft's autocast_adapter_dtype;
        # a vision tower or projector trained in full is a bf16 copy until here): bf16 weights would lose the
        # small updates. bf16 autocast runs their matmuls in bf16 all the same.
        for param in model.parameters():
            if param.requires_grad and param.dtype in (torch.bfloat16, torch.float16):
                param.data = param.data.float()
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
    if _cpu_sharded():
        # The training arguments would otherwise rebuild accelerate's state as a CPU one (see _state).
        kwargs["accelerator_config"] = {"use_configured_state": True}
    return SFTConfig(**kwargs)


def _trainer_misloads_full_checkpoints(cfg: RunConfig) -> bool:
    """Whether this run's checkpoints are full, unsharded models, which the Trainer's own loader cannot read.

    transformers 5 saves InternVL checkpoints under its legacy key names (``save_pretrained``'s original
    format), and the Trainer reloads a full checkpoint with ``load_state_dict(strict=False)``, which then
    matches no key and keeps the current weights, warning only. ``from_pretrained`` maps the names. A
    PEFT checkpoint (the adapter) and a sharded one (FSDP's or DeepSpeed's own state, under the model's
    own names) load right through the Trainer."""
    return cfg.train.finetune == "full" and _launched_sharding() is None


def _make_trainer_class():
    from transformers import ProgressCallback, TrainerCallback
    from trl import SFTTrainer

    class JudgeTrainer(SFTTrainer):
        """SFTTrainer whose evaluation scores the validation split against the human scores."""

        def __init__(
            self,
            *args,
            validation: ValidationSet | None,
            run_cfg: RunConfig,
            judge_processor,
            baseline_set: ValidationSet | None = None,
            **kw,
        ):
            super().__init__(*args, **kw)
            self.validation = validation
            self.run_cfg = run_cfg
            self.judge_processor = judge_processor
            self.eval_history: list[dict[str, Any]] = []
            self.baseline: dict[str, Any] | None = None
            self.diverged: str | None = None  #: what the divergence guard saw, when it stopped training
            # liger's fused loss reads the LM head's weight outside its forward: not a shard of it.
            zero3 = self.is_deepspeed_enabled and self.accelerator.state.deepspeed_plugin.zero_stage == 3
            self.fused_loss = liger_on(run_cfg) and not (self.is_fsdp_enabled or zero3)
            if baseline_set is not None:
                self.add_callback(_Baseline(self, baseline_set))
            self.add_callback(_DivergenceGuard(self))

        @property
        def sharded(self) -> bool:
            """Whether the accelerator manages the model (FSDP, DeepSpeed): its own save and load paths apply."""
            return bool(self.is_fsdp_enabled or self.is_deepspeed_enabled)

        def score(self, vset: ValidationSet) -> tuple[dict[str, Any], float]:
            """Validation metrics of the model as it is now (every process takes part)."""
            ev = self.run_cfg.eval
            return run_validation(
                vset,
                self.model,
                self.judge_processor,
                share_prefix=ev.share_prefix,
                batch_tokens=ev.batch_tokens,
                metrics=ev.metrics,
                grad_mode="no_grad" if self.sharded else "inference",
            )

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            # The LM head on the completion columns only (judge.train.loss): the same loss, without a
            # vocabulary-wide projection of every prompt position.
            loss, outputs = labels_only_loss(model, inputs, num_items_in_batch, fused=self.fused_loss)
            return (loss, outputs) if return_outputs else loss

        def evaluate(
            self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"
        ) -> dict[str, float]:
            if self.validation is None:
                return {}
            ev = self.run_cfg.eval
            metrics, seconds = self.score(self.validation)
            self.eval_history.append(
                {"step": self.state.global_step, "seconds": round(seconds, 2), **metrics}
            )
            out: dict[str, float] = {}
            for k, v in metrics.items():
                if v is not None:
                    out[f"{metric_key_prefix}_{k}"] = v
                elif k == ev.best_metric:
                    # Trainer compares the best metric with numpy: an undefined correlation (a constant
                    # scorer, as an untrained model can be) counts as the worst value instead.
                    out[f"{metric_key_prefix}_{k}"] = -1.0 if ev.greater else math.inf
            out[f"{metric_key_prefix}_seconds"] = round(seconds, 2)
            self.log(out)
            self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, out)
            return out

    class _Baseline(TrainerCallback):
        """Score the untrained judge once the accelerator has prepared it: on its device (not the CPU it was
        loaded on), sharded if so, exactly as every later evaluation scores it."""

        def __init__(self, trainer: JudgeTrainer, vset: ValidationSet):
            self.trainer, self.vset = trainer, vset

        def on_train_begin(self, args, state, control, **kwargs):
            if self.trainer.baseline is not None:
                return
            self.trainer.baseline, secs = self.trainer.score(self.vset)
            if state.is_world_process_zero:
                logger.info(
                    f"untrained judge on validation ({len(self.vset)} scores, {secs:.1f} s): "
                    + _headline(self.trainer.baseline)
                )

    class _DivergenceGuard(TrainerCallback):
        """Stop at the first logged loss or gradient norm that is not finite: the weights are NaN from then on,
        and a judge written from them would score NaN. Every process sees the same logs (the gradient norm is
        the reduced one), so they all stop together."""

        def __init__(self, trainer: JudgeTrainer):
            self.trainer = trainer

        def on_log(self, args, state, control, logs=None, **kwargs):
            bad = {
                k: v
                for k, v in (logs or {}).items()
                if k in ("loss", "grad_norm") and isinstance(v, float) and not math.isfinite(v)
            }
            if bad and self.trainer.diverged is None:
                lr = next(
                    (e.get("learning_rate") for e in reversed(state.log_history) if "learning_rate" in e),
                    None,
                )
                self.trainer.diverged = (
                    f"at step {state.global_step} "
                    + ", ".join(f"{k}={v}" for k, v in bad.items())
                    + (f" (learning rate {lr:.3g})" if lr is not None else "")
                )
                control.should_training_stop = True
                control.should_save = False

    class _FullCheckpoints(TrainerCallback):
        """Full, unsharded models (:func:`_trainer_misloads_full_checkpoints`): their checkpoints load through
        ``from_pretrained``, every weight required, by the Trainer's public callback events: the checkpoint
        resumed from when training begins (before the first step; the Trainer restores the optimizer,
        scheduler, RNG and step itself), the best checkpoint when training ends (the Trainer's own loading of
        it is off: ``load_best_model_at_end`` false, the best still tracked and kept from rotation)."""

        def __init__(self, resume_from: Path | None, load_best: bool):
            self.resume_from, self.load_best = resume_from, load_best

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if self.resume_from is not None and model is not None:
                _load_full_checkpoint(model, str(self.resume_from))

        def on_train_end(self, args, state, control, model=None, **kwargs):
            if self.load_best and state.best_model_checkpoint is not None and model is not None:
                logger.info(
                    f"loading the best checkpoint, {state.best_model_checkpoint} ({state.best_metric})"
                )
                _load_full_checkpoint(model, state.best_model_checkpoint)

    class CompactProgress(ProgressCallback):
        """The progress bar, printing headline numbers only (the full breakdown goes to the loggers), each
        line with the step count, the time spent and an estimate of the time left: a log read later, or a
        terminal that does not redraw the bar, still says how long training will take."""

        def on_train_begin(self, args, state, control, **kwargs):
            super().on_train_begin(args, state, control, **kwargs)
            self.started, self.first_step = time.perf_counter(), state.global_step

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or self.training_bar is None or not logs:
                return
            keep = {
                k: v
                for k, v in logs.items()
                if k in ("loss", "learning_rate", "grad_norm", "epoch", "eval_seconds")
                or k.removeprefix("eval_") in HEADLINE
            }
            if keep:
                done, left = state.global_step - self.first_step, state.max_steps - state.global_step
                eta = _eta(time.perf_counter() - self.started, done, left)
                self.training_bar.write(f"{_fmt_log(state.global_step, keep, state.max_steps)}  [{eta}]")

    return JudgeTrainer, CompactProgress, _FullCheckpoints


class _TrainerMisloadWarning(logging.Filter):
    """Drops the Trainer's "missing keys" warning of a resumed full checkpoint: its own loader matches no key
    of it (see :func:`_trainer_misloads_full_checkpoints`), and ``_FullCheckpoints`` loads it right."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("There were missing keys in the checkpoint model loaded")


def _load_full_checkpoint(model, folder: str) -> None:
    """Load a full checkpoint written by Trainer into ``model`` in place; every key must match.

    For an unsharded model only: a sharded one is loaded by the Trainer's FSDP / DeepSpeed loaders."""
    saved = type(model).from_pretrained(folder, dtype=next(model.parameters()).dtype, use_safetensors=True)
    result = model.load_state_dict(saved.state_dict(), strict=False)
    missing = [k for k in result.missing_keys if k != "lm_head.weight"]  # tied to the embeddings
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"checkpoint {folder} does not match the model: missing {missing[:5]}, "
            f"unexpected {result.unexpected_keys[:5]}"
        )


# ----------------------------------------------------------------------------- distributed checks
def liger_unavailable() -> str | None:
    """Why liger-kernel cannot run in this process (no CUDA GPU, not installed), or None."""
    import torch

    if not torch.cuda.is_available():
        return (
            "needs a CUDA GPU: liger-kernel's kernels are Triton GPU kernels, and on a machine without one "
            "Triton finds no driver to run them on ('0 active drivers')"
        )
    try:
        import liger_kernel  # noqa: F401
    except ImportError:
        return "needs liger-kernel: pip install 'judge[liger]' (or liger-kernel)"
    return None


def check_liger(cfg: RunConfig) -> None:
    """``train.liger_kernel`` can run here (checked before anything loads)."""
    if cfg.train.liger_kernel and (why := liger_unavailable()):
        raise ConfigError(f"train.liger_kernel {why}; set train.liger_kernel: false to train without it")


def liger_on(cfg: RunConfig) -> bool:
    """Whether this run uses liger-kernel: ``train.liger_kernel`` when set, else (the default) wherever it
    can run (:func:`liger_unavailable`), which is never on the CPU."""
    if cfg.train.liger_kernel is not None:
        return cfg.train.liger_kernel
    return liger_unavailable() is None


def _apply_liger(model, required: bool = True) -> None:
    """liger-kernel's RMSNorm, SwiGLU and RoPE kernels in the model's Qwen2 language model, in place.

    liger patches Qwen2's rotary function for the whole process (a module-level function) and this model's
    norm and MLP modules; the LM head and loss stay the judge's (``labels_only_loss(fused=True)``). A language
    model that is not Qwen2 is an error when liger was asked for (``required``), else it keeps its own
    modules (the fused loss still applies: it needs only the LM head)."""
    from liger_kernel.transformers import apply_liger_kernel_to_qwen2

    lm = getattr(getattr(model, "model", None), "language_model", None)
    model_type = getattr(getattr(lm, "config", None), "model_type", None)
    if model_type != "qwen2" and not required:
        logger.info(f"liger-kernel's Qwen2 kernels skipped: this language model is {model_type!r}")
        return
    if model_type != "qwen2":
        raise ConfigError(
            f"train.liger_kernel supports a Qwen2 language model (InternVL2.5/3 judges); this model's is "
            f"{model_type or type(lm).__name__!r}"
        )
    apply_liger_kernel_to_qwen2(
        rope=True, rms_norm=True, swiglu=True, cross_entropy=False, fused_linear_cross_entropy=False, model=lm
    )


def _check_launch(cfg: RunConfig) -> None:
    """Before any model is loaded: what FSDP / DeepSpeed cannot run."""
    check_liger(cfg)
    sharding = _launched_sharding()
    if sharding is not None and cfg.quantization != "none":
        raise ConfigError(
            f"quantization {cfg.quantization!r} (QLoRA) cannot run under {sharding}: bitsandbytes' "
            "quantized weights are not sharded; launch with configs/accelerate/ddp.yaml, or set "
            "quantization: none"
        )


def _check_distributed(trainer, cfg: RunConfig, train_split) -> None:
    """Once the accelerator exists, before training: the sharded set-ups judge-train supports and can save."""
    acc = trainer.accelerator
    sharding = _launched_sharding()
    if (sharding == "fsdp" and not trainer.is_fsdp_enabled) or (
        sharding == "deepspeed" and not trainer.is_deepspeed_enabled
    ):
        raise ConfigError(
            f"accelerate launch asked for {sharding}, but accelerate set up {acc.distributed_type} "
            "(the model would not be sharded); check the accelerate config"
        )
    zero3 = False
    if trainer.is_fsdp_enabled:
        plugin = acc.state.fsdp_plugin
        if plugin.fsdp_version != 2:
            raise ConfigError(
                f"fsdp_config.fsdp_version {plugin.fsdp_version} is not supported: judge-train runs "
                "FSDP2 (fsdp_version: 2, as in configs/accelerate/fsdp.yaml)"
            )
        if "FULL_STATE_DICT" not in str(plugin.state_dict_type):
            raise ConfigError(
                f"fsdp_config.fsdp_state_dict_type {str(plugin.state_dict_type).split('.')[-1]} is "
                "not supported: judge-train saves and reloads checkpoints as FULL_STATE_DICT"
            )
    if trainer.is_deepspeed_enabled:
        plugin = acc.state.deepspeed_plugin
        zero3 = plugin.zero_stage == 3
        if plugin.zero_stage not in (2, 3):
            raise ConfigError(
                f"deepspeed_config.zero_stage {plugin.zero_stage} is not supported: use ZeRO-2 or "
                "ZeRO-3 (configs/accelerate/deepspeed_zero2.yaml, deepspeed_zero3.yaml)"
            )
        zero_cfg = plugin.deepspeed_config.get("zero_optimization", {})
        if zero3 and not zero_cfg.get("stage3_gather_16bit_weights_on_model_save"):
            raise ConfigError(
                "deepspeed_config.zero3_save_16bit_model must be true under ZeRO-3 (DeepSpeed's "
                "stage3_gather_16bit_weights_on_model_save): without it the judge's weights cannot "
                "be gathered to be written"
            )
    if acc.num_processes > 1:
        params_sharded = trainer.is_fsdp_enabled or zero3
        vision_trains = any(
            p.requires_grad
            for n, p in trainer.model.named_parameters()
            if "vision_tower" in n or "multi_modal_projector" in n
        )
        if params_sharded or vision_trains:
            _check_images_everywhere(
                train_split,
                "FSDP / ZeRO-3 shard the vision tower"
                if params_sharded
                else "the vision tower or projector trains",
            )


def _check_images_everywhere(train_split, why: str) -> None:
    """Processes that run the vision tower and processes that skip it (a batch without images) would
    exchange different parameters or gradients: a hang, or an error, mid-training."""
    import pyarrow.compute as pc

    counts = pc.list_value_length(train_split.data.column("images")).to_pylist()
    without = sum(1 for n in counts if not n)
    if 0 < without < len(counts):
        raise ConfigError(
            f"{without} of {len(counts)} training examples have no image: with several processes, "
            f"where {why}, every example needs an image (or none may have one), or the processes "
            "would run different modules and their exchanges of parameters or gradients would no "
            "longer match (a hang or an error mid-training); train in one process, or split the "
            "data by modality"
        )


def _distribution(trainer) -> Distribution:
    """How the run was distributed, read off the live model (for the card)."""
    from torch.distributed.tensor import DTensor

    acc = trainer.accelerator
    kind = (
        "fsdp"
        if trainer.is_fsdp_enabled
        else "deepspeed"
        if trainer.is_deepspeed_enabled
        else "ddp"
        if acc.num_processes > 1
        else "none"
    )
    # Only the kind of sharding in use is named on the card (fsdp_version or zero_stage).
    sharding: dict[str, int] = {}
    if trainer.is_fsdp_enabled:
        sharding["fsdp_version"] = acc.state.fsdp_plugin.fsdp_version
    if trainer.is_deepspeed_enabled:
        sharding["zero_stage"] = acc.state.deepspeed_plugin.zero_stage
    return Distribution(
        type=kind,
        processes=acc.num_processes,
        device=acc.device.type,
        **sharding,
        # FSDP2 holds parameters as DTensor shards; ZeRO-3 as empty tensors tagged with their DeepSpeed id.
        parameters_sharded=any(
            isinstance(p, DTensor) or hasattr(p, "ds_id") for p in trainer.model.parameters()
        ),
    )


def _fmt_log(step: int, logs: dict[str, Any], max_steps: int | None = None) -> str:
    parts = [f"step {step}" + (f"/{max_steps}" if max_steps else "")]
    for k, v in logs.items():
        parts.append(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
    return "  ".join(parts)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min {seconds % 60:02d} s"


def _eta(elapsed: float, done: int, left: int) -> str:
    """``"35 s so far, about 1 min 10 s left"``: the time left at the pace of the steps done so far
    (evaluations included, so it is a little pessimistic between them)."""
    if done <= 0:
        return f"{_duration(elapsed)} so far"
    return f"{_duration(elapsed)} so far, about {_duration(elapsed / done * max(left, 0))} left"


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
    _state()
    from judge.models.loading import check_model_source

    check_model_source(
        cfg.model.path,
        hint="point the config at the folder: --set model.path=DIR; to try the pipeline without a "
        "checkpoint, train the tiny local model: judge-train --config demo",
    )
    _check_launch(cfg)
    checkpoints = cfg.out / "checkpoints"
    resume_from = _last_checkpoint(checkpoints) if resume else None
    if resume and resume_from is None:
        raise ConfigError(f"`resume`: no checkpoint in {checkpoints} to resume from")
    rubric = load_rubric(cfg.rubric)
    data_path = prepare_data(cfg, config_path, data_dir)

    from transformers import ProgressCallback, set_seed

    from judge.data.sft import load_sft_dataset

    set_seed(cfg.train_seed)
    dd = load_sft_dataset(data_path)
    validation = ValidationSet(dd["validation"], rubric) if len(dd["validation"]) else None
    model, processor, dtype = build_model(cfg)

    out = cfg.out
    if not resume and _is_main() and checkpoints.exists():
        # A fresh run must not pick up (or be confused by) checkpoints of an earlier one.
        shutil.rmtree(checkpoints)
    args = _sft_config(cfg, dtype, checkpoints, _report_to(cfg))
    from judge.train.collator import JudgeCollator

    JudgeTrainer, CompactProgress, FullCheckpoints = _make_trainer_class()
    ev = cfg.eval
    trainer = JudgeTrainer(
        model=model,
        args=args,
        train_dataset=dd["train"],
        eval_dataset=dd["validation"] if validation is not None else None,
        processing_class=processor,
        data_collator=JudgeCollator(
            processor, cfg.max_length, labels_last=not cfg.train.packing, packed=cfg.train.packing
        ),
        validation=validation if ev.strategy != "no" else None,
        run_cfg=cfg,
        judge_processor=processor,
        # The untrained judge is scored when training begins, on the model as the accelerator prepared it.
        baseline_set=validation if ev.at_start and not resume else None,
    )
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(CompactProgress())
    misload = _trainer_misloads_full_checkpoints(cfg)
    if misload:
        trainer.add_callback(FullCheckpoints(resume_from, load_best=ev.strategy != "no"))
    _check_distributed(trainer, cfg, dd["train"])
    if _is_main():
        st = _state()
        n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
        logger.info(
            f"training {cfg.train.finetune} ({n_train:,} trainable parameters) on {st.device}, world size "
            f"{st.num_processes}, {_describe(trainer)}, {len(dd['train'])} examples"
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
    distribution = _distribution(trainer)
    final = None
    if validation is not None:
        # The best checkpoint is loaded by now (load_best_model_at_end); score it once more.
        final, _ = trainer.score(validation)
    baseline = trainer.baseline
    best_value = trainer.state.best_metric
    judge_dir = out / "judge"
    card = _card(cfg, config_path, rubric, data_path, baseline, final, trainer, train_seconds, distribution)
    # Every process takes part (a sharded model's weights are gathered); the main one writes.
    _save_judge(trainer, processor, card, judge_dir, cfg, merge, dtype)
    if _is_main():
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
    if _is_main():
        logger.info(format_summary(result, train_seconds))
    return result


def _describe(trainer) -> str:
    if trainer.is_fsdp_enabled:
        return f"FSDP{trainer.accelerator.state.fsdp_plugin.fsdp_version}"
    if trainer.is_deepspeed_enabled:
        return f"DeepSpeed ZeRO-{trainer.accelerator.state.deepspeed_plugin.zero_stage}"
    return "DDP" if trainer.accelerator.num_processes > 1 else "one process"


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
            if _is_main():
                shutil.rmtree(d, ignore_errors=True)
    return None


def _headline(metrics: dict[str, Any] | None) -> str:
    if not metrics:
        return "(no validation)"
    return "  ".join(f"{k}={_num(metrics.get(k))}" for k in HEADLINE)


def _num(v) -> str:
    return "undefined" if v is None else f"{v:.3f}"


def _card(
    cfg: RunConfig,
    config_path: Path | None,
    rubric: Rubric,
    data_path: Path,
    baseline: Metrics | None,
    final: Metrics | None,
    trainer,
    train_seconds: float,
    distribution: Distribution,
) -> JudgeCard:
    manifest = json.loads((data_path / "manifest.json").read_text(encoding="utf-8"))
    return JudgeCard(
        judge_card_version=1,
        base_model=cfg.model.path if cfg.model.path != "tiny" else "tiny:seed=0",
        finetune=cfg.train.finetune,
        quantization=cfg.quantization,
        rubric=CardRubric(name=rubric.name, version=rubric.version, hash=rubric.hash),
        scale=rubric.scale.values,
        target_format=cfg.data.target,
        data=CardData(
            hash=manifest["data_hash"],
            examples=manifest["counts"],
            records=manifest["records"],
            annotation_files=manifest["annotation_files"],
            dataset=str(data_path),
        ),
        config_file=str(config_path) if config_path is not None else None,
        config=cfg.model_dump(mode="json"),
        seed=cfg.train_seed,
        git_commit=git_commit(Path(__file__).resolve().parent),
        libraries=library_versions(),
        training=CardTraining(
            steps=trainer.state.global_step,
            epochs=trainer.state.epoch,
            seconds=round(train_seconds, 1),
            best_metric=cfg.eval.best_metric,
            best_value=trainer.state.best_metric,
            best_checkpoint=trainer.state.best_model_checkpoint,
            distributed=distribution,
            evaluations=getattr(trainer, "eval_history", []),
        ),
        validation=CardValidation(untrained=baseline, final=final),
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )


def _save_judge(
    trainer, processor, card: JudgeCard, judge_dir: Path, cfg: RunConfig, merge: bool, dtype
) -> None:
    """Write the judge. Called on every process: a model the accelerator shards is gathered first, a
    collective (FSDP2's full state dict on the main process; ZeRO-3's 16-bit gather, ZeRO-2's replicated
    weights); only the main process writes."""
    acc = trainer.accelerator
    state_dict = None
    if trainer.sharded:
        state_dict = acc.get_state_dict(
            trainer.model_wrapped if trainer.is_deepspeed_enabled else trainer.model
        )
    if acc.is_main_process:
        _write_judge(
            acc.unwrap_model(trainer.model),
            processor,
            card,
            judge_dir,
            cfg,
            merge,
            state_dict=state_dict,
            dtype=dtype,
        )
    acc.wait_for_everyone()


def _write_judge(
    model,
    processor,
    card: JudgeCard,
    judge_dir: Path,
    cfg: RunConfig,
    merge: bool,
    state_dict: dict | None = None,
    dtype=None,
) -> None:
    """Write adapter/ (or merged/), processor/ and the card beside, then swap the folder in.

    ``state_dict``: the full weights gathered from a sharded ``model``, whose own tensors are shards
    (FSDP2 DTensors, ZeRO-3's empty partitions) and are then never read.
    """
    tmp = judge_dir.with_name(judge_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    is_peft = hasattr(model, "peft_config")
    if is_peft:
        model.save_pretrained(tmp / "adapter", state_dict=state_dict)
    if not is_peft or merge:
        if is_peft:
            # A sharded model cannot merge in place: merge the saved adapter into a fresh copy of the base.
            merged = _merged_model(
                model, cfg, tmp / "adapter", reload_dtype=dtype if state_dict is not None else None
            )
            merged.save_pretrained(tmp / "merged", safe_serialization=True)
        else:
            model.save_pretrained(tmp / "merged", safe_serialization=True, state_dict=state_dict)
        processor.save_pretrained(tmp / "merged")
    processor.save_pretrained(tmp / "processor")
    card.outputs = sorted(p.name for p in tmp.iterdir())
    write_card(tmp, card)
    old = judge_dir.with_name(judge_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if judge_dir.exists():
        judge_dir.rename(old)
    tmp.rename(judge_dir)
    shutil.rmtree(old, ignore_errors=True)


def _merged_model(model, cfg: RunConfig, adapter_dir: Path, reload_dtype=None):
    """The adapter merged into the base. ``reload_dtype``: the model is sharded; merge into a fresh copy of
    the base in that dtype (the training dtype) instead of in place."""
    if cfg.quantization == "none" and reload_dtype is None:
        return model.merge_and_unload()
    # A quantized base cannot take merged weights, nor a sharded one: reload the base unquantized, on this
    # process alone, and merge there.
    from peft import PeftModel

    from judge.models.loading import load_scorer

    with _unpartitioned_loading():
        base, _ = load_scorer(
            cfg.model.path,
            dtype=reload_dtype if reload_dtype is not None else cfg.model.dtype,
            trust_remote_code=cfg.model.trust_remote_code,
        )
        return PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()


@contextmanager
def _unpartitioned_loading():
    """Load models whole on this process even while a DeepSpeed ZeRO-3 run is configured: transformers
    would otherwise build them partitioned, a collective that the main process alone never completes."""
    try:
        from transformers.integrations import deepspeed as hf_deepspeed
    except ImportError:  # pragma: no cover - transformers always has it
        yield
        return
    ref = hf_deepspeed._hf_deepspeed_config_weak_ref
    hf_deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = ref


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
