"""The run config of ``judge-train`` (``rubrics/rubric6.yaml``), validated strictly.

One YAML file drives ``judge-data build`` (sections ``rubric`` and ``data``, owned by
``judge.data.config``) and ``judge-train`` (all sections below). Every section is a
pydantic model that forbids unknown keys, so a misspelt key fails with its name and
the keys allowed there. Overrides set any value by its dotted key: ``{"train.learning_rate": 1e-4}``
from Python, ``--set train.learning_rate=1e-4`` on the command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from judge.core.errors import ConfigError, invalid
from judge.core.rubric import OVERALL, Rubric
from judge.core.schema import StrictModel
from judge.data.config import DataConfig, apply_overrides, check_sections, read_config
from judge.models import BATCH_TOKENS
from judge.models.families import LANGUAGE_LINEAR as _LANGUAGE_LINEAR

#: Modules of the language model that LoRA adapts by default (Qwen2/Llama-style names).
LANGUAGE_LINEAR = list(_LANGUAGE_LINEAR)


class ModelConfig(StrictModel):
    path: str = Field(
        "tiny",
        description="Local folder, hub id, or 'tiny[:seed=N]' (the local tiny InternVL), or "
        "'tiny-qwen2.5-vl[:seed=N]' / 'tiny-qwen3-vl[:seed=N]' / 'tiny-llava-onevision[:seed=N]' / "
        "'tiny-smolvlm[:seed=N]' / 'tiny-gemma3[:seed=N]' (the local tiny Qwen2.5-VL / Qwen3-VL / "
        "LLaVA-OneVision / SmolVLM / Gemma 3).",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto: bfloat16 on a GPU, float32 on the CPU."
    )
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2", "flex_attention"] | None = Field(
        None,
        description="None: transformers' default (sdpa), except that packed training (train.packing) on a "
        "CUDA GPU runs the language model with flex_attention, whose block mask skips the other examples "
        "of a row.",
    )
    trust_remote_code: bool = False
    min_pixels: int | None = Field(
        None,
        ge=1,
        description="Qwen2.5-VL's dynamic resolution: an image is resized to at least this many pixels "
        "(the processor's min_pixels; None: the checkpoint's). Refused for a family without these bounds.",
    )
    max_pixels: int | None = Field(
        None,
        ge=1,
        description="...and at most this many (max_pixels; 28 x 28 pixels make one image token).",
    )


class LoraConfig(StrictModel):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | Literal["language"] = Field(
        "language",
        description="'language': the attention and MLP projections of the language model only; "
        "or a list of module names / a regex understood by PEFT.",
    )
    train_vision: bool = Field(False, description="Also train the vision tower (fully); frozen by default.")
    train_projector: bool = Field(False, description="Also train the vision-language projector (fully).")


class PairLossConfig(StrictModel):
    """The Bradley-Terry (Davidson) loss on preference pairs (``data.pairs``); see judge.train.pair_loss."""

    weight: float = Field(
        1.0,
        ge=0,
        allow_inf_nan=False,  # an infinite weight makes an infinite loss, blamed on the learning rate
        description="Weight of the pairwise loss beside the SFT loss (when both kinds of labels exist).",
    )
    beta: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="Scale of the expected-score difference (logits per scale point).",
    )
    tie_strength: float = Field(
        1.0,
        ge=0,
        allow_inf_nan=False,
        description="Davidson's tie parameter nu: P(tie) = nu / (e^(d/2) + e^(-d/2) + nu). 0: Bradley-Terry, "
        "no ties allowed.",
    )


class TrainConfig(StrictModel):
    """The TRL ``SFTConfig`` fields that matter for a judge; the rest keep TRL's defaults."""

    finetune: Literal["lora", "full"] = Field(
        "lora",
        description="lora: train LoRA adapters on a frozen base (the default for real checkpoints); "
        "full: train every language-model weight (for a small randomly initialised base such as 'tiny').",
    )
    learning_rate: float = Field(2e-4, gt=0)
    num_train_epochs: float = Field(3.0, gt=0)
    max_steps: int = Field(
        -1, ge=-1, description="Stop after this many optimizer steps (overrides epochs); -1: off."
    )
    per_device_train_batch_size: int = Field(8, ge=1)
    per_device_eval_batch_size: int = Field(8, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    lr_scheduler_type: str = "cosine"
    warmup_steps: float = Field(0.05, ge=0, description="Steps, or a fraction of all steps when below 1.")
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    optim: str = "adamw_torch"
    gradient_checkpointing: bool = False
    liger_kernel: bool | None = Field(
        None,
        description="liger-kernel's Triton kernels in the Qwen2 language model (RMSNorm, SwiGLU, RoPE) and its "
        "fused linear cross-entropy for the loss. None (default): on where it can run (a CUDA GPU with the "
        "liger extra installed: pip install 'judge[liger]'), off elsewhere (the CPU); true: required, an "
        "error where it cannot run; false: off",
    )
    packing: bool = Field(
        False,
        description="Lay each batch's examples end to end in one row, nothing padded, attention masked "
        "between examples (position ids restart per example); the loss is that of the padded batch.",
    )
    bf16: bool | None = Field(None, description="None: on when the model dtype is bfloat16.")
    max_length: int | None = Field(
        None,
        ge=16,
        description="Longest example in tokens (images expanded); a longer one is an error, never "
        "truncated. None: data.max_tokens.",
    )
    pairs: PairLossConfig = Field(
        default_factory=lambda: PairLossConfig(),
        description="The pairwise term, for data.pairs (judge.train.pair_loss).",
    )
    logging_steps: int = Field(10, ge=1)
    save_steps: int | None = Field(
        None, ge=1, description="Checkpoint every N steps; None: at each evaluation."
    )
    save_total_limit: int | None = Field(2, ge=1)
    dataloader_num_workers: int = Field(0, ge=0)
    seed: int | None = Field(None, ge=0, description="None: the config's top-level seed.")


class EvalConfig(StrictModel):
    strategy: Literal["steps", "epoch", "no"] = "epoch"
    steps: int | None = Field(None, ge=1, description="Evaluate every N steps (strategy: steps).")
    metrics: list[Literal["pearson", "spearman", "kendall", "mae", "mse"]] = [
        "pearson",
        "spearman",
        "kendall",
        "mae",
    ]
    best_metric: str = Field(
        "overall_spearman",
        description="Metric that picks the best checkpoint: '<criterion|overall|all>_<metric>', "
        "e.g. overall_spearman, all_pearson, overall_mae.",
    )
    greater_is_better: bool | None = Field(None, description="None: false for mae/mse, true otherwise.")
    share_prefix: bool = True
    batch_tokens: int = Field(
        BATCH_TOKENS, ge=64, description="Tokens per forward pass, padding included (was max_batch_tokens)."
    )
    at_start: bool = Field(
        True, description="Also score the validation split before training (the baseline)."
    )

    @model_validator(mode="before")
    @classmethod
    def _earlier_name(cls, v: Any) -> Any:
        # Configs written before the rename say max_batch_tokens; as an override it is the newer value.
        if isinstance(v, dict) and "max_batch_tokens" in v:
            v = dict(v)
            v["batch_tokens"] = v.pop("max_batch_tokens")
        return v

    @field_validator("strategy", mode="before")
    @classmethod
    def _yaml_no(cls, v: Any) -> Any:
        return "no" if v is False else v  # YAML 1.1 reads a bare `no` as false

    @field_validator("best_metric")
    @classmethod
    def _known_metric(cls, v: str) -> str:
        pairs = v in ("pairs_accuracy", "pairs_accuracy_with_ties") or v.endswith("_pairs_accuracy")
        if not pairs and not any(
            v.endswith("_" + m) for m in ("pearson", "spearman", "kendall", "mae", "mse")
        ):
            raise ValueError(
                f"best_metric {v!r} must end in _pearson, _spearman, _kendall, _mae or _mse (or, with data.pairs, "
                "be pairs_accuracy, pairs_accuracy_with_ties or <criterion>_pairs_accuracy)"
            )
        return v

    @property
    def greater(self) -> bool:
        if self.greater_is_better is not None:
            return self.greater_is_better
        return not self.best_metric.endswith(("_mae", "_mse"))


class LoggingConfig(StrictModel):
    backend: Literal["none", "wandb", "tensorboard"] = "none"
    project: str = "judge"
    run_name: str | None = None


class RunConfig(StrictModel):
    """A whole run config; see ``rubrics/rubric6.yaml`` for a commented example."""

    rubric: str = "mmie"
    data: DataConfig
    model: ModelConfig = ModelConfig()
    lora: LoraConfig = LoraConfig()
    quantization: Literal["none", "4bit", "8bit"] = "none"
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()
    logging: LoggingConfig = LoggingConfig()
    output_dir: str = "runs/demo"
    seed: int = Field(0, ge=0)

    @field_validator("logging", mode="before")
    @classmethod
    def _logging_shorthand(cls, v: Any) -> Any:
        return {"backend": v} if isinstance(v, str) else v

    @field_validator("quantization", mode="before")
    @classmethod
    def _quant_none(cls, v: Any) -> Any:
        return "none" if v in (None, False) else v

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        if self.quantization != "none" and self.train.finetune == "full":
            raise ValueError(
                "quantization needs train.finetune: lora (a quantized base cannot be trained fully)"
            )
        if self.train.max_steps == 0:
            raise ValueError("train.max_steps must be -1 (train by epochs) or at least 1, got 0")
        if self.eval.strategy == "steps" and self.eval.steps is None:
            raise ValueError("eval.strategy 'steps' needs eval.steps")
        pairs_metric = "pairs_accuracy" in self.eval.best_metric
        if self.eval.strategy != "no" and not self.data.annotations and not pairs_metric:
            raise ValueError(
                f"eval.best_metric {self.eval.best_metric!r} is a correlation with human scores, and the run has "
                "pairs only (no data.annotations): use pairs_accuracy"
            )
        if self.eval.strategy != "no" and not self.data.pairs and pairs_metric:
            raise ValueError(f"eval.best_metric {self.eval.best_metric!r} needs data.pairs")
        return self

    @property
    def out(self) -> Path:
        return Path(self.output_dir)

    @property
    def data_dir(self) -> Path:
        return Path(self.data.output_dir or self.out / "data")

    @property
    def max_length(self) -> int | None:
        return self.train.max_length or self.data.max_tokens

    @property
    def train_seed(self) -> int:
        return self.seed if self.train.seed is None else self.train.seed


def available_metrics(cfg: RunConfig, rubric: Rubric) -> list[str]:
    """Every metric a validation of this run can report (so ``eval.best_metric`` may name it): the
    correlations ``<overall|all|FAMILY/all|FAMILY/CRITERION>_<eval.metrics>`` with data.annotations, the pair
    accuracies (``pairs_accuracy``, ``pairs_accuracy_with_ties``, ``<criterion>_pairs_accuracy``) with
    data.pairs; criteria as data.criteria selects them."""
    from judge.data.sft import selected_criteria

    selected = {
        f: selected_criteria(fam.criterion_ids, cfg.data.criteria) for f, fam in rubric.families.items()
    }
    out: list[str] = []
    if cfg.data.annotations:
        groups = ["all"] + ([OVERALL] if any(OVERALL in c for c in selected.values()) else [])
        for f, crits in selected.items():
            groups += [f"{f}/all"] * bool(crits) + [f"{f}/{c}" for c in crits]
        out += [f"{g}_{m}" for g in groups for m in cfg.eval.metrics]
    if cfg.data.pairs:
        crits = sorted({c for cs in selected.values() for c in cs})
        out += ["pairs_accuracy", "pairs_accuracy_with_ties"] + [f"{c}_pairs_accuracy" for c in crits]
    return out


def check_best_metric(cfg: RunConfig, rubric: Rubric) -> None:
    """Refuse an ``eval.best_metric`` the run's validation never reports (Trainer would fail with a KeyError
    at the first evaluation, the steps done lost)."""
    if cfg.eval.strategy == "no":
        return
    avail = available_metrics(cfg, rubric)
    if cfg.eval.best_metric in avail:
        return
    pairs = [m for m in avail if "pairs_accuracy" in m]
    corr = sorted({m.rsplit("_", 1)[0] for m in avail if m not in pairs})
    parts = []
    if corr:
        parts.append(
            f"<{'|'.join(corr[:12])}{'|...' if len(corr) > 12 else ''}>_<{'|'.join(cfg.eval.metrics)}>"
        )
    parts += pairs
    raise ConfigError(
        f"eval.best_metric {cfg.eval.best_metric!r} is not a metric this run's validation reports "
        f"(rubric {rubric.name!r}, data.criteria {cfg.data.criteria!r}, eval.metrics {cfg.eval.metrics}); "
        f"available: {', '.join(parts)}"
    )


def load_run_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> tuple[Path, RunConfig]:
    """Read, override and validate a run config; errors name the key, the value and what is allowed.

    ``overrides``: dotted keys to typed values, ``{"train.learning_rate": 1e-4, "output_dir": "runs/x"}``."""
    path, raw = read_config(path, overrides)
    if "data" not in raw:
        raise ConfigError(f"{path}: the config has no 'data' section")
    try:
        return path, RunConfig.model_validate(raw)
    except ValidationError as e:
        raise invalid(f"{path}: invalid config", e, RunConfig) from None


def override_run_config(cfg: RunConfig, overrides: Mapping[str, Any] | None) -> RunConfig:
    """``cfg`` with ``overrides`` (dotted keys, as for :func:`load_run_config`) applied and validated again."""
    if not overrides:
        return cfg
    raw = cfg.model_dump()
    apply_overrides(raw, overrides)
    check_sections(raw, "run config")
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as e:
        raise invalid("run config: invalid override", e, RunConfig) from None
