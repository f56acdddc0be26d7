"""Packed training (train.packing): one row of examples end to end, nothing padded, gives the padded batch's
loss and gradients; judge-train trains with it; liger-kernel is on by default only where it can run."""

from __future__ import annotations

import pytest
import torch

from judge.core.images import open_image
from judge.core.io import load_annotations
from judge.core.template import build_judge_prompt, build_target, completion_messages
from judge.train.collator import IGNORE_INDEX, JudgeCollator
from judge.train.loss import is_packed, labels_only_loss

pytestmark = pytest.mark.usefixtures("one_thread")


def examples(rubric, small_demo, n: int = 4) -> list[dict]:
    recs = load_annotations(small_demo, rubric=rubric).records[:n]
    out = []
    for i, r in enumerate(recs):
        crit = rubric.families[r.task].criterion_ids[i % 3]
        p = build_judge_prompt(rubric, r.task, crit, r.question, r.response, r.reference)
        target = (
            build_target(2, "Two of the images match the text.", "rationale_score")
            if i == 1
            else build_target(i)
        )
        out.append(
            {
                "id": f"{r.id}::{crit}",
                "prompt": p.messages,
                "completion": completion_messages(target),
                "images": [open_image(x) for x in p.images],
                "max_patches": None,
            }
        )
    return out


def lora_model(seed: int = 0):
    from peft import LoraConfig, get_peft_model

    from judge.models import build_tiny_scorer
    from judge.train.config import LANGUAGE_LINEAR

    model, processor = build_tiny_scorer(seed=seed)
    target = r".*language_model.*\.(" + "|".join(LANGUAGE_LINEAR) + r")$"
    torch.manual_seed(1)  # lora_A's random init too: the same adapters whatever ran before in the process
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=target))
    for n, p in model.named_parameters():
        if "lora_B" in n:  # non-zero adapters, so that their gradients depend on everything upstream
            torch.nn.init.normal_(p, std=0.05)
    return model, processor


def test_a_packed_row_gives_the_padded_batchs_loss_and_gradients(rubric, small_demo):
    """Float32 on the CPU: the packed row and the padded batch run the same sums in another order (other
    matmul shapes, a longer attention row), which moves a loss near 8 by about 1e-6; the tolerance of 1e-5
    (relative 1e-4 for gradients) is ten times that, while a row whose examples see each other, or whose
    positions do not restart, moves the loss by more than 1e-3, a hundred times it (checked below)."""
    model, processor = lora_model()
    model.train()
    exs = examples(rubric, small_demo)
    padded = JudgeCollator(processor, labels_last=True)(exs)
    packed = JudgeCollator(processor, packed=True)(exs)
    assert is_packed(packed) and not is_packed(padded)
    # Nothing padded: the row is the examples' tokens, and the labels are the same tokens.
    assert packed["input_ids"].shape == (1, int(padded["attention_mask"].sum()))
    assert sorted(packed["labels"][packed["labels"] != IGNORE_INDEX].tolist()) == sorted(
        padded["labels"][padded["labels"] != IGNORE_INDEX].tolist()
    )
    assert torch.equal(packed["pixel_values"], padded["pixel_values"])
    starts = (packed["position_ids"][0] == 0).nonzero()[:, 0].tolist()
    assert len(starts) == len(exs) and starts[0] == 0

    def loss_and_grads(batch, n_items=None):
        model.zero_grad()
        loss, out = labels_only_loss(model, batch, n_items)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        return loss.item(), grads, out

    ref, ref_grads, _ = loss_and_grads(padded)
    got, got_grads, out = loss_and_grads(packed)
    assert abs(got - ref) < 1e-5, (got, ref)
    for n, g in ref_grads.items():
        assert torch.allclose(got_grads[n], g, rtol=1e-4, atol=1e-7), n
    # The head ran on the label positions only: one logit row per label token, not the whole row.
    n_labels = int((packed["labels"] != IGNORE_INDEX).sum())
    assert out.logits.shape[:2] == (1, n_labels)
    # Gradient accumulation's normaliser (num_items_in_batch) is honoured the same way.
    assert abs(loss_and_grads(packed, 3 * n_labels)[0] - loss_and_grads(padded, 3 * n_labels)[0]) < 1e-5

    # The test can fail: without the restarts the row is one long document (examples attend to each
    # other, positions run on), and the loss moves well beyond the tolerance.
    run_on = dict(packed, position_ids=torch.arange(packed["input_ids"].shape[1])[None])
    with torch.no_grad():
        wrong, _ = labels_only_loss(model, run_on)
    assert abs(wrong.item() - ref) > 1e-3, (wrong.item(), ref)  # 7e-3 with these seeded adapters


@pytest.mark.slow
def test_judge_train_packed_trains_the_same_judge_as_padded(small_demo, tmp_path):
    """Through judge-train (the real Trainer, collator and loss): 3 steps packed and 3 padded, no dropout,
    end with the same validation scores (float32; the runs differ by rounding only)."""
    import json

    from judge.train import train_judge

    finals = {}
    for packing in (True, False):
        out = tmp_path / f"packed_{packing}"
        result = train_judge(
            "demo",
            overrides={
                "data.annotations": [str(small_demo)],
                "output_dir": str(out),
                "train.max_steps": 3,
                "train.per_device_train_batch_size": 4,
                "train.learning_rate": 1e-3,
                "train.warmup_steps": 0,
                "train.packing": packing,
                "lora.dropout": 0.0,
                "eval.strategy": "no",
            },
        )
        assert result.steps == 3
        card = json.loads((out / "judge" / "judge_card.json").read_text())
        assert card["config"]["train"]["packing"] is packing
        finals[packing] = result.final
    assert finals[True]["all_n"] == finals[False]["all_n"] > 0
    for k in ("all_mae", "all_spearman", "overall_mae"):
        assert abs(finals[True][k] - finals[False][k]) < 1e-4, (k, finals)


def test_liger_is_on_by_default_only_where_it_can_run():
    from judge.train.config import RunConfig
    from judge.train.model import liger_on, liger_unavailable

    auto = RunConfig.model_validate({"data": {"annotations": ["x.jsonl"]}})
    assert auto.train.liger_kernel is None
    # This machine has no CUDA GPU: the default is off here, and would be on where liger can run.
    assert liger_unavailable() is not None and liger_on(auto) is False
    off = RunConfig.model_validate({"data": {"annotations": ["x.jsonl"]}, "train": {"liger_kernel": False}})
    on = RunConfig.model_validate({"data": {"annotations": ["x.jsonl"]}, "train": {"liger_kernel": True}})
    assert liger_on(off) is False and liger_on(on) is True
