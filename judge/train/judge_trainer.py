"""The Trainer judge-train runs: TRL's ``SFTTrainer`` subclassed to score the validation split against the
human scores, its callbacks (the untrained baseline, the divergence guard, full-checkpoint loading, the
compact progress lines) and the headline numbers they print.

The classes are built inside :func:`_make_trainer_class` (called by ``train_judge``), so importing this module
does not import transformers or TRL.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from judge.train.config import RunConfig
from judge.train.launch import launched_sharding
from judge.train.loss import labels_only_loss
from judge.train.model import liger_on
from judge.train.pair_validation import Validation, run_all_validation

logger = logging.getLogger(__name__)

HEADLINE = (
    "overall_spearman",
    "overall_pearson",
    "overall_kendall",
    "overall_mae",
    "all_spearman",
    "pairs_accuracy",  # with data.pairs only
)


def _trainer_misloads_full_checkpoints(cfg: RunConfig) -> bool:
    """Whether this run's checkpoints are full, unsharded models, which the Trainer's own loader cannot read.

    transformers 5 saves InternVL checkpoints under its legacy key names (``save_pretrained``'s original
    format), and the Trainer reloads a full checkpoint with ``load_state_dict(strict=False)``, which then
    matches no key and keeps the current weights, warning only. ``from_pretrained`` maps the names. A
    PEFT checkpoint (the adapter) and a sharded one (FSDP's or DeepSpeed's own state, under the model's
    own names) load right through the Trainer."""
    return cfg.train.finetune == "full" and launched_sharding() is None


def _make_trainer_class():
    from transformers import ProgressCallback, TrainerCallback
    from trl import SFTTrainer

    class JudgeTrainer(SFTTrainer):
        """SFTTrainer whose evaluation scores the validation split against the human scores."""

        def __init__(
            self,
            *args,
            validation: Validation | None,
            run_cfg: RunConfig,
            judge_processor,
            baseline_set: Validation | None = None,
            pair_objective=None,
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
            self.pair_objective = pair_objective  #: the SFT + pairwise loss of mixed batches (data.pairs)
            if baseline_set is not None:
                self.add_callback(_Baseline(self, baseline_set))
            self.add_callback(_DivergenceGuard(self))

        @property
        def sharded(self) -> bool:
            """Whether the accelerator manages the model (FSDP, DeepSpeed): its own save and load paths apply."""
            return bool(self.is_fsdp_enabled or self.is_deepspeed_enabled)

        def score(self, vset: Validation) -> tuple[dict[str, Any], float]:
            """Validation metrics of the model as it is now (every process takes part)."""
            ev = self.run_cfg.eval
            return run_all_validation(
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
            if self.pair_objective is not None:
                loss, outputs = self.pair_objective(
                    model,
                    inputs,
                    lambda m, b: labels_only_loss(m, b, num_items_in_batch, fused=self.fused_loss),
                )
            else:
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

        def __init__(self, trainer: JudgeTrainer, vset: Validation):
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


def _headline(metrics: dict[str, Any] | None) -> str:
    if not metrics:
        return "(no validation)"
    scored = any("pairs_" not in k for k in metrics)  # correlations shown (as undefined too) when validated
    keys = [k for k in HEADLINE if ((k in metrics) if "pairs_" in k else scored)]
    return "  ".join(f"{k}={_num(metrics.get(k))}" for k in keys)


def _num(v) -> str:
    return "undefined" if v is None else f"{v:.3f}"
