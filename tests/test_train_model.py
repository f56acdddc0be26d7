"""The trainable model judge-train builds: what is frozen, what trains, in which dtype."""

from __future__ import annotations

import pytest
import torch

from judge.train.config import RunConfig
from judge.train.trainer import build_model

pytestmark = pytest.mark.usefixtures("one_thread")


def part(name: str) -> str:
    for key, label in (
        ("lora_", "lora"),
        ("vision_tower", "vision"),
        ("multi_modal_projector", "projector"),
        ("embed_tokens", "embeddings"),
        ("norm", "norms"),
    ):
        if key in name:
            return label
    return "language"


@pytest.mark.parametrize("train_vision", [False, True])
def test_qlora_keeps_frozen_modules_in_their_dtype_and_trains_in_float32(train_vision, small_demo):
    """QLoRA in bf16: the 4-bit layers are 4-bit, the frozen rest (vision tower, projector, embeddings, norms)
    stays bf16 instead of being upcast to float32; what trains (the adapters, a vision tower trained in
    full) is float32. A training step runs (bitsandbytes' CPU kernels) and reaches the adapters."""
    cfg = RunConfig.model_validate(
        {
            "data": {"annotations": [str(small_demo)]},
            "model": {"path": "tiny", "dtype": "bfloat16"},
            "quantization": "4bit",
            "lora": {"train_vision": train_vision, "train_projector": False},
            "train": {"gradient_checkpointing": True},
        }
    )
    model, processor, dtype = build_model(cfg)
    assert dtype == torch.bfloat16
    frozen: dict[str, set] = {}
    trained: dict[str, set] = {}
    for name, p in model.named_parameters():
        (trained if p.requires_grad else frozen).setdefault(part(name), set()).add(p.dtype)
    assert frozen["language"] == {torch.uint8, torch.bfloat16}  # packed 4-bit weights; biases in bf16
    for key in ("vision", "projector", "embeddings", "norms"):
        assert frozen[key] == {torch.bfloat16}, (key, frozen[key])
    assert trained.pop("lora") == {torch.float32}
    assert trained == ({"vision": {torch.float32}} if train_vision else {})

    from judge.train.collator import JudgeCollator
    from judge.train.loss import labels_only_loss, right_align

    example = {
        "prompt": [{"role": "user", "content": [{"type": "text", "text": "Rate the response."}]}],
        "completion": [{"role": "assistant", "content": [{"type": "text", "text": "4"}]}],
        "images": [],
        "max_patches": None,
    }
    batch = right_align(JudgeCollator(processor)([example, example]))
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = labels_only_loss(model, batch)
    loss.backward()
    assert torch.isfinite(loss)
    grads = [p.grad for n, p in model.named_parameters() if "lora_B" in n]
    assert grads and all(g is not None and g.dtype == torch.float32 for g in grads)
    assert any(float(g.abs().sum()) > 0 for g in grads)
