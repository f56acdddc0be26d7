"""The Qwen3-VL family (judge.models.families) on its tiny model: the registry finds it, its interleaved M-RoPE
positions are the model's own, its DeepStack features reach the scores, and its scores are equal on every
scoring path; a LoRA step trains and the judge folder loads back alone.

The scoring checks are Qwen2.5-VL's (tests/test_family_qwen25vl.py), collected here a second time with
``tiny_qwen`` bound to the tiny Qwen3-VL: the same items (several images of several sizes, interleaved), the
same references (the model's own ``get_rope_index``, forward and ``generate``) and tolerances."""

from __future__ import annotations

import re

import pytest
import torch
from test_family_qwen25vl import (
    TOL,
    lora_step_and_reload,
    test_a_rationale_first_score_is_the_models_own_generation_and_read_out,
    test_packed_scores_equal_the_kv_copy,
    test_positions_are_the_models_own_for_interleaved_images,
    test_shared_prefix_and_unshared_scores_are_equal,
    test_the_scorer_reads_what_the_models_own_forward_gives,
)
from test_packed_scoring import by_key, requests

from judge.models import families

pytestmark = pytest.mark.usefixtures("one_thread")

__all__ = [  # the Qwen2.5-VL checks, run here on the tiny Qwen3-VL
    "test_a_rationale_first_score_is_the_models_own_generation_and_read_out",
    "test_packed_scores_equal_the_kv_copy",
    "test_positions_are_the_models_own_for_interleaved_images",
    "test_shared_prefix_and_unshared_scores_are_equal",
    "test_the_scorer_reads_what_the_models_own_forward_gives",
]


@pytest.fixture(scope="module")
def tiny_qwen(tiny_qwen3):
    """The imported Qwen2.5-VL checks' model: here the tiny Qwen3-VL."""
    return tiny_qwen3


def test_the_registry_names_qwen3vl_by_its_model_tiny_name_and_processor(tiny_qwen3):
    model, processor = tiny_qwen3
    assert type(model).__name__ == "Qwen3VLForConditionalGeneration"
    assert families.of_model(model) is families.QWEN3VL
    assert families.of_processor(processor) is families.QWEN3VL
    assert families.by_tiny_name("tiny-qwen3-vl:seed=3") is families.QWEN3VL
    assert families.by_tiny_name("tiny-qwen3-vl-x") is None
    assert families.by_name("qwen3-vl") is families.QWEN3VL
    assert families.by_processor_class("Qwen3VLProcessor") is families.QWEN3VL
    # Its shape is the 4B's: interleaved M-RoPE over an explicit head size, DeepStack from three vision blocks.
    text = model.config.text_config
    assert text.rope_parameters["mrope_interleaved"] and sum(text.rope_parameters["mrope_section"]) * 2 == (
        text.head_dim
    )
    assert list(model.config.vision_config.deepstack_visual_indexes) == [0, 1, 2]
    # No video processor (no torchvision), Qwen3-VL's own template (no default system turn).
    assert not hasattr(processor, "video_processor")
    text = processor.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert text == "<|im_start|>user\nhi<|im_end|>\n"
    # The registry's parts are where the model has them; LoRA adapts the language model's projections only.
    names = [n for n, _ in model.named_modules()]
    pattern = re.compile(families.QWEN3VL.lora_pattern())
    adapted = [n for n in names if pattern.fullmatch(n)]
    assert adapted and all(".language_model." in n for n in adapted)
    assert any(n.endswith("visual.blocks.0.mlp.linear_fc1") for n in names)
    for part in (*families.QWEN3VL.vision_parts, *families.QWEN3VL.projector_parts):
        assert any(n.endswith(part) for n in names), part
    vision = {n for n, _ in model.named_parameters() if ".visual." in f".{n}"}
    parts = (*families.QWEN3VL.vision_parts, *families.QWEN3VL.projector_parts)
    assert all(any(p in n for p in parts) for n in vision)  # every vision weight is frozen or trained by name


def test_deepstack_features_reach_the_score(tiny_qwen3, rubric):
    """The scorer's forward gives the image's DeepStack features to the language model: zeroing the DeepStack
    mergers' output changes the score of an item with an image (so the paths' equality covers them)."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_qwen3
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    req = next(r for r in requests(rubric, 3) if r.images)
    req = type(req)(key=req.key, criteria=req.criteria[:1], prompts=req.prompts[:1], images=req.images)
    (base,) = by_key(b for batch in scorer.score([req], share_prefix=False) for b in batch).values()
    hooks = [
        m.register_forward_hook(lambda _m, _i, out: torch.zeros_like(out))
        for m in model.model.visual.deepstack_merger_list
    ]
    try:
        (without,) = by_key(b for batch in scorer.score([req], share_prefix=False) for b in batch).values()
    finally:
        for h in hooks:
            h.remove()
    assert abs(base.expected - without.expected) > 100 * TOL


@pytest.mark.slow
def test_a_lora_step_trains_and_the_judge_folder_loads_back_alone(small_demo, tmp_path, rubric):
    """judge-train's real trainer on the tiny Qwen3-VL (LoRA, two steps): finite losses, moved adapters, the
    card's family, the folder loading alone; the demo recipe's trained projector includes the DeepStack
    mergers and the vision tower its learned position grid."""
    weights = lora_step_and_reload(families.QWEN3VL, small_demo, tmp_path, rubric)
    assert any("visual.deepstack_merger_list.0." in k for k in weights)
    assert any("visual.pos_embed." in k for k in weights)
