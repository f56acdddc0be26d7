"""The trainable model judge-train builds: what is frozen, what trains, in which dtype."""

from __future__ import annotations

import pytest
import torch

from judge.train.config import RunConfig
from judge.train.model import build_model

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


def test_liger_kernel_is_refused_on_a_machine_without_a_gpu(small_demo, tmp_path, capsys):
    """liger-kernel's kernels are Triton GPU kernels (on the CPU Triton finds no driver): judge-train and
    bench_train.py say so before loading anything."""
    from judge.core.errors import ConfigError
    from judge.train.trainer import train_judge

    assert not torch.cuda.is_available()
    overrides = {
        "data.annotations": [str(small_demo)],
        "output_dir": str(tmp_path / "run"),
        "train.liger_kernel": True,
    }
    with pytest.raises(ConfigError, match=r"train\.liger_kernel needs a CUDA GPU: .*Triton GPU kernels"):
        train_judge("demo", overrides=overrides)
    assert not (tmp_path / "run").exists()  # refused before the data was built

    import importlib.util
    import sys

    from serving import REPO

    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("bench_train", REPO / "scripts" / "bench_train.py")
    bt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bt)
    with pytest.raises(SystemExit) as exit_:
        bt.main(["--shape", "tiny", "--liger", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "--liger needs a CUDA GPU" in capsys.readouterr().err


FUSED_CHECK = r"""
import torch
from judge.models.loading import load_scorer
from judge.train.collator import JudgeCollator
from judge.train.loss import labels_only_loss, right_align

torch.manual_seed(0)
model, processor = load_scorer("tiny")
model.train()
examples = [
    {"prompt": [{"role": "user", "content": [{"type": "text", "text": f"Rate response {i}."}]}],
     "completion": [{"role": "assistant", "content": [{"type": "text", "text": f"rationale {i} then {i % 7}"}]}],
     "images": [], "max_patches": None}
    for i in range(3)
]
batch = right_align(JudgeCollator(processor)(examples))
out = {}
for fused in (False, True):
    model.zero_grad(set_to_none=True)
    loss, outputs = labels_only_loss(model, batch, fused=fused)
    assert (outputs.logits.shape[-1] == 0) == fused  # fused: the head's logits were never kept
    loss.backward()
    out[fused] = (float(loss), model.lm_head.weight.grad.clone(), model.model.language_model.layers[-1].mlp.down_proj.weight.grad.clone())
print("losses", out[False][0], out[True][0])
assert abs(out[False][0] - out[True][0]) < 1e-5, out
for a, b in zip(out[False][1:], out[True][1:]):
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), float((a - b).abs().max())
print("OK")
"""


@pytest.mark.slow
def test_fused_loss_equals_the_labels_only_loss_under_tritons_interpreter(tmp_path):
    """The fused loss path (liger's fused linear cross-entropy on the LM head's input, the head's logits
    dropped by a hook) gives judge-train's loss and gradients: run on the CPU by Triton's interpreter
    (TRITON_INTERPRET=1, set before Triton loads, hence a process of its own)."""
    import subprocess
    import sys

    from serving import server_env

    env = {**server_env(), "TRITON_INTERPRET": "1"}
    res = subprocess.run(
        [sys.executable, "-c", FUSED_CHECK],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "OK" in res.stdout
