"""How a ``judge-train`` run was launched: accelerate's process state on any machine (CPU processes too),
what FSDP / DeepSpeed cannot run (checked before anything loads), the sharded set-ups judge-train supports
and can save (checked once the accelerator exists), and how the run was distributed, for the judge card."""

from __future__ import annotations

import os

from judge.core.errors import ConfigError
from judge.models.card import Distribution
from judge.train.config import RunConfig
from judge.train.model import check_liger


def launched_sharding() -> str | None:
    """``"fsdp"`` or ``"deepspeed"`` when ``accelerate launch`` was given such a config, else None."""
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        return "deepspeed"
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        return "fsdp"
    return None


def cpu_sharded() -> bool:
    """FSDP or DeepSpeed launched on a machine without a GPU (processes on the CPU, gloo)."""
    import torch

    return launched_sharding() is not None and not torch.cuda.is_available()


def process_state():
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
    sharding = launched_sharding()
    if sharding == "deepspeed" and int(os.environ.get("LOCAL_RANK", -1)) != -1:
        return PartialState(backend="gloo")
    state = PartialState(cpu=True)
    if sharding == "fsdp" and state.distributed_type == DistributedType.MULTI_CPU:
        PartialState._shared_state["distributed_type"] = DistributedType.MULTI_GPU
    return state


def is_main() -> bool:
    return process_state().is_main_process


def check_launch(cfg: RunConfig) -> None:
    """Before any model is loaded: what FSDP / DeepSpeed cannot run."""
    check_liger(cfg)
    sharding = launched_sharding()
    if sharding is not None and cfg.quantization != "none":
        raise ConfigError(
            f"quantization {cfg.quantization!r} (QLoRA) cannot run under {sharding}: bitsandbytes' "
            "quantized weights are not sharded; launch with configs/accelerate/ddp.yaml, or set "
            "quantization: none"
        )


def check_distributed(trainer, cfg: RunConfig, train_split) -> None:
    """Once the accelerator exists, before training: the sharded set-ups judge-train supports and can save."""
    acc = trainer.accelerator
    sharding = launched_sharding()
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
            check_images_everywhere(
                train_split,
                "FSDP / ZeRO-3 shard the vision tower"
                if params_sharded
                else "the vision tower or projector trains",
            )


def check_images_everywhere(train_split, why: str) -> None:
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


def distribution_of(trainer) -> Distribution:
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


def describe(trainer) -> str:
    if trainer.is_fsdp_enabled:
        return f"FSDP{trainer.accelerator.state.fsdp_plugin.fsdp_version}"
    if trainer.is_deepspeed_enabled:
        return f"DeepSpeed ZeRO-{trainer.accelerator.state.deepspeed_plugin.zero_stage}"
    return "DDP" if trainer.accelerator.num_processes > 1 else "one process"
