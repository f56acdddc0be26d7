"""The Qwen2.5-VL family (judge.models.families) on its tiny model: the registry finds it, its M-RoPE positions
are the model's own, and its scores are equal on every scoring path (unshared, the KV copy of a shared prefix,
the packed row), with InternVL's tolerances and its test items (several images of several sizes, interleaved)."""

from __future__ import annotations

import pytest
import torch
from test_packed_scoring import by_key, requests

from judge.models import families

pytestmark = pytest.mark.usefixtures("one_thread")

#: What every scoring path must agree to (test_packed_scoring's bound for InternVL).
TOL = 1e-5


def test_the_registry_names_each_family_by_its_model_tiny_name_and_processor(tiny, tiny_qwen):
    assert families.of_model(tiny[0]) is families.INTERNVL
    assert families.of_model(tiny_qwen[0]) is families.QWEN25VL
    assert families.of_processor(tiny[1]) is families.INTERNVL
    assert families.of_processor(tiny_qwen[1]) is families.QWEN25VL
    assert families.by_tiny_name("tiny:seed=3") is families.INTERNVL
    assert families.by_tiny_name("tiny-qwen2.5-vl:seed=3") is families.QWEN25VL
    assert families.by_tiny_name("tiny-llava") is None
    assert families.by_name("qwen2.5-vl") is families.QWEN25VL
    # The tiny Qwen2.5-VL is the real family: its vision tower, projector and language model where the
    # registry says, and the LoRA pattern matches the language model's projections only.
    import re

    names = [n for n, _ in tiny_qwen[0].named_modules()]
    pattern = re.compile(families.QWEN25VL.lora_pattern())
    adapted = [n for n in names if pattern.fullmatch(n)]
    assert adapted and all(".language_model." in n for n in adapted)
    assert any(n.endswith("visual.blocks.0.mlp.gate_proj") for n in names)  # a vision MLP it must not adapt
    for part in (*families.QWEN25VL.vision_parts, *families.QWEN25VL.projector_parts):
        assert any(n.endswith(part) for n in names), part


def test_positions_are_the_models_own_for_interleaved_images(tiny_qwen, rubric):
    """The multi-axis positions the scorer computes equal the model's ``get_rope_index`` on the processor's
    own encoding, for prompts with 0, 1 and 2 images of different shapes between texts."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_qwen
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    seen_images = 0
    for req in requests(rubric, 3):
        enc = scorer.encode(req)
        seen_images += len(req.images)
        text = processor.apply_chat_template(req.prompts[0], add_generation_prompt=True, tokenize=False)
        out = processor(text=[text], images=req.images or None, return_tensors="pt", add_special_tokens=False)
        assert out["input_ids"][0].tolist() == enc.input_ids[0]
        if req.images:
            ref, _ = model.model.get_rope_index(
                out["input_ids"], out["mm_token_type_ids"], image_grid_thw=out["image_grid_thw"]
            )
            assert torch.equal(ref[:, 0], enc.positions[0])
            assert torch.equal(out["image_grid_thw"], enc.vision_extra["image_grid_thw"])
        else:
            assert torch.equal(enc.positions[0], torch.arange(len(enc.input_ids[0])).expand(3, -1))
    assert seen_images == 3


def test_the_scorer_reads_what_the_models_own_forward_gives(tiny_qwen, rubric):
    """Scored unshared (explicit positions, left padding), each criterion equals the model run on the
    processor's output alone (the model computing its own positions)."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_qwen
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    reqs = requests(rubric, 3)
    got = by_key(b for batch in scorer.score(reqs, share_prefix=False) for b in batch)
    for req in reqs:
        for crit, prompt in list(zip(req.criteria, req.prompts, strict=True))[:2]:
            text = processor.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
            out = processor(
                text=[text], images=req.images or None, return_tensors="pt", add_special_tokens=False
            )
            with torch.no_grad():
                logits = model(**out).logits[0, -1]
            probs = torch.softmax(logits[scorer.score_ids].double(), -1)
            expected = float(sum(p * v for p, v in zip(probs.tolist(), scorer.values, strict=True)))
            assert abs(got[(req.key, crit)].expected - expected) < TOL, (req.key, crit)


def test_shared_prefix_and_unshared_scores_are_equal(tiny_qwen, rubric):
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_qwen
    kv = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    reqs = requests(rubric)
    ref = by_key(b for batch in kv.score(reqs, batch_tokens=1500) for b in batch)
    unshared = by_key(b for batch in kv.score(reqs, share_prefix=False) for b in batch)
    alone = by_key(b for r in reqs for batch in kv.score([r], share_prefix=False) for b in batch)
    assert ref.keys() == unshared.keys() == alone.keys() and len(ref) == 6 * 7 + 1
    for k in ref:
        for other in (unshared[k], alone[k]):
            assert abs(ref[k].expected - other.expected) < TOL, k
            assert max(abs(p - q) for p, q in zip(ref[k].distribution, other.distribution, strict=True)) < TOL
            assert ref[k].num_tokens == other.num_tokens


@pytest.mark.slow
def test_packed_scores_equal_the_kv_copy(tiny_qwen, rubric):
    """The packed row (FlexAttention compiled on the CPU) with multi-axis positions per suffix."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_qwen
    reqs = requests(rubric)
    kv = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    packed = ExpectedScorer(model, processor, rubric.scale.values, packed="flex")
    batches = list(packed.score(reqs, batch_tokens=1500))
    assert any(len(b) > 1 for b in batches)
    got = by_key(b for batch in batches for b in batch)
    ref = by_key(b for batch in kv.score(reqs, batch_tokens=1500) for b in batch)
    assert got.keys() == ref.keys()
    for k in ref:
        assert abs(got[k].expected - ref[k].expected) < TOL, k
        assert max(abs(p - q) for p, q in zip(got[k].distribution, ref[k].distribution, strict=True)) < TOL


def test_a_rationale_first_score_is_the_models_own_generation_and_read_out(tiny_qwen, rubric):
    """score_with_rationale on an item with two images: the rationale is what the model's own ``generate``
    writes (greedy) on the processor's full output (ids, pixels, grid, token types: its own M-RoPE), and the
    score is the model's own forward on that prompt with the rationale and the score cue appended."""
    from judge.core.template import SCORE_CUE
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_qwen
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    req = requests(rubric, 3)[2]
    assert len(req.images) == 2
    req = type(req)(key=req.key, criteria=req.criteria[:1], prompts=req.prompts[:1], images=req.images)
    (got,) = scorer.score_with_rationale(req, max_new_tokens=12)
    text = processor.apply_chat_template(req.prompts[0], add_generation_prompt=True, tokenize=False)
    out = processor(text=[text], images=req.images, return_tensors="pt", add_special_tokens=False)
    assert set(out) >= {"pixel_values", "image_grid_thw", "mm_token_type_ids"}
    n = out["input_ids"].shape[1]
    with torch.no_grad():
        gen = model.generate(**out, max_new_tokens=12, do_sample=False)
    written = processor.tokenizer.decode(gen[0, n:], skip_special_tokens=True)
    assert gen.shape[1] > n and got.rationale == written.split(SCORE_CUE.strip())[0].rstrip()
    cont = processor.tokenizer(got.rationale + "\n" + SCORE_CUE, add_special_tokens=False)["input_ids"]
    full = dict(out)
    full["input_ids"] = torch.cat([out["input_ids"], torch.tensor([cont])], 1)
    full["attention_mask"] = torch.ones_like(full["input_ids"])
    full["mm_token_type_ids"] = torch.cat(
        [out["mm_token_type_ids"], torch.zeros((1, len(cont)), dtype=torch.long)], 1
    )
    with torch.no_grad():
        logits = model(**full).logits[0, -1]
    probs = torch.softmax(logits[scorer.score_ids].double(), -1)
    expected = float(sum(p * v for p, v in zip(probs.tolist(), scorer.values, strict=True)))
    assert abs(got.expected - expected) < TOL and got.num_tokens == n


@pytest.mark.slow
def test_a_lora_step_trains_and_the_judge_folder_loads_back_alone(small_demo, tmp_path, rubric):
    """judge-train's real trainer on the tiny Qwen2.5-VL (LoRA, two steps on the demo's image items): the
    losses are finite, the adapters moved, the card records the family, and the judge folder loads and scores
    with nothing but its path."""
    lora_step_and_reload(families.QWEN25VL, small_demo, tmp_path, rubric)


def lora_step_and_reload(
    family: families.Family,
    small_demo,
    tmp_path,
    rubric,
    trained: tuple[str, ...] | None = None,
) -> dict:
    """The LoRA step and reload of ``family``'s tiny model (shared with the other families' tests; ``trained``:
    name parts of the vision tower and projector weights the demo recipe trains in full, by default every
    part the family declares); returns the adapter folder's weights."""
    import json
    import math

    from safetensors.torch import load_file

    import judge.models
    from judge.train import train_judge

    out = tmp_path / "run"
    result = train_judge(
        "demo",
        overrides={
            "data.annotations": [str(small_demo)],
            "output_dir": str(out),
            "model.path": family.tiny,
            "train.finetune": "lora",
            "train.max_steps": 2,
            "train.per_device_train_batch_size": 4,
            "train.learning_rate": 1e-3,
            "train.logging_steps": 1,
            "train.warmup_steps": 0,
        },
    )
    assert result.steps == 2
    card = json.loads((result.judge_dir / "judge_card.json").read_text())
    assert card["family"] == family.name and card["base_model"] == family.tiny
    states = sorted(out.glob("checkpoints/checkpoint-*/trainer_state.json")) or sorted(
        out.rglob("trainer_state.json")
    )
    losses = [h["loss"] for s in states for h in json.loads(s.read_text())["log_history"] if "loss" in h]
    assert losses and all(math.isfinite(x) for x in losses)
    weights = load_file(str(result.judge_dir / "adapter" / "adapter_model.safetensors"))
    lora_b = [t for k, t in weights.items() if "lora_B" in k]
    assert lora_b and any(float(t.abs().max()) > 0 for t in lora_b)  # B starts at zero: the step moved it
    # LoRA on the language model only; the demo recipe trains the vision tower and projector in full
    # (lora.train_vision/train_projector), which the registry names as Qwen's visual blocks and merger.
    assert all(f".{family.language_part}." in k for k in weights if "lora_" in k)
    parts = trained or tuple(f"{p}." for p in (*family.vision_parts, *family.projector_parts))
    for part in parts:  # Qwen2.5-VL: visual.patch_embed, visual.blocks, visual.merger
        assert any(part in k for k in weights), part

    loaded = judge.models.load(result.judge_dir)
    assert loaded.family == family.model_types[0] and loaded.card.family == family.name
    from judge.models.readout import ExpectedScorer

    scorer = ExpectedScorer(loaded.model, loaded.processor, rubric.scale.values, packed="off")
    got = by_key(b for batch in scorer.score(requests(rubric, 3)) for b in batch)
    assert got and all(0 <= s.expected <= 6 for s in got.values())
    return weights
