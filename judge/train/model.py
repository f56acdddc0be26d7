"""The trainable model of a ``judge-train`` run: the base loaded as judge-score loads it (4-/8-bit through
bitsandbytes), LoRA on the language model's projections or full tuning, frozen modules kept in the load
dtype, and liger-kernel's Qwen2 kernels where they can run (``train.liger_kernel``)."""

from __future__ import annotations

import logging
import os

from judge.core.errors import ConfigError
from judge.models.families import INTERNVL, of_model, set_pixel_bounds
from judge.train.config import RunConfig

logger = logging.getLogger(__name__)


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
    set_pixel_bounds(processor, cfg.model.min_pixels, cfg.model.max_pixels)
    model.train()
    if liger_on(cfg):
        apply_liger(model, required=cfg.train.liger_kernel is True)
    if cfg.train.packing and device == "cuda" and cfg.model.attn_implementation is None:
        # A packed row under sdpa gets a dense (tokens x tokens) mask and attends across examples before
        # masking; flex_attention's block mask skips those blocks. The vision tower keeps its own.
        model.set_attn_implementation({"text_config": "flex_attention"})
    # Where the vision tower, projector and language model are: the family's (a model of no known family is
    # taken for InternVL-like names).
    family = of_model(model) or INTERNVL
    frozen_prefixes = family.frozen_parts(cfg.lora.train_vision, cfg.lora.train_projector)
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
        targets = family.lora_pattern()
    modules_to_save = _module_names(
        model, family.trained_modules(cfg.lora.train_vision, cfg.lora.train_projector)
    )
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


def _module_names(model, parts: list[str]) -> list[str]:
    """``parts`` as PEFT's ``modules_to_save`` takes them: a list of modules (Qwen's ``visual.blocks``) as its
    members, which PEFT can copy one by one (it refuses a ``ModuleList``)."""
    import torch

    out: list[str] = []
    for part in parts:
        lists = [
            (name, m)
            for name, m in model.named_modules()
            if name.endswith(part) and isinstance(m, torch.nn.ModuleList)
        ]
        if not lists:
            out.append(part)
            continue
        for _, m in lists[:1]:
            out += [f"{part}.{child}" for child, _ in m.named_children()]
    return out


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


def apply_liger(model, required: bool = True) -> None:
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
