"""The Gemma 3 family (judge.models.families) on its tiny model: the registry finds it, the scorer gives its
forward the token types of its images' two-way attention, its sliding windows (48 tokens, under every test
prompt) read the same on every scoring path, the packed path is refused with its reason, a rationale-first
score is the model's own generation, and a LoRA step trains and the judge folder loads back alone.

The read-out and path checks are Qwen2.5-VL's (tests/test_family_qwen25vl.py), collected here a second time
with ``tiny_qwen`` bound to the tiny Gemma 3: the same items (0, 1 and 2 images of several sizes, interleaved
with text), the same reference (the model's own forward on the processor's own output, ``token_type_ids``
included) and tolerances."""

from __future__ import annotations

import re

import pytest
import torch
from test_family_qwen25vl import (
    TOL,
    lora_step_and_reload,
    test_shared_prefix_and_unshared_scores_are_equal,
    test_the_scorer_reads_what_the_models_own_forward_gives,
)
from test_packed_scoring import by_key, requests

from judge.core.errors import ConfigError
from judge.models import families

pytestmark = pytest.mark.usefixtures("one_thread")

__all__ = [  # the Qwen2.5-VL checks, run here on the tiny Gemma 3
    "test_shared_prefix_and_unshared_scores_are_equal",
    "test_the_scorer_reads_what_the_models_own_forward_gives",
]


@pytest.fixture(scope="module")
def tiny_qwen(tiny_gemma3):
    """The imported Qwen2.5-VL checks' model: here the tiny Gemma 3."""
    return tiny_gemma3


def _one(req, n: int = 1):
    return type(req)(key=req.key, criteria=req.criteria[:n], prompts=req.prompts[:n], images=req.images)


def _own_expected(model, scorer, inputs: dict) -> float:
    with torch.no_grad():
        logits = model(**inputs).logits[0, -1]
    probs = torch.softmax(logits[scorer.score_ids].double(), -1)
    return float(sum(p * v for p, v in zip(probs.tolist(), scorer.values, strict=True)))


def test_the_registry_names_gemma3_by_its_model_tiny_name_and_processor(tiny_gemma3):
    model, processor = tiny_gemma3
    assert type(model).__name__ == "Gemma3ForConditionalGeneration"
    assert families.of_model(model) is families.GEMMA3
    assert families.of_processor(processor) is families.GEMMA3
    assert families.by_tiny_name("tiny-gemma3:seed=3") is families.GEMMA3
    assert families.by_tiny_name("tiny-gemma3x") is None
    assert families.by_name("gemma3") is families.GEMMA3
    assert families.by_processor_class("Gemma3Processor") is families.GEMMA3
    # gemma-3-4b-it's shape: five sliding layers to a global one, query scaling by the head size, no
    # soft-capping, a fixed number of soft tokens per image.
    text = model.config.text_config
    assert text.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
    assert text.query_pre_attn_scalar == text.head_dim and text.sliding_window == 48
    assert text.final_logit_softcapping is None and text.attn_logit_softcapping is None
    assert model.config.mm_tokens_per_image == processor.image_seq_length == 16
    assert not hasattr(processor, "video_processor")
    # Gemma 3's own template: a system turn folded into the first user turn, text trimmed, the model's turn.
    text = processor.apply_chat_template(
        [
            {"role": "system", "content": "Be fair."},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Score it. "}]},
        ],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text == (
        "<bos><start_of_turn>user\nBe fair.\n\n<start_of_image>Score it.<end_of_turn>\n<start_of_turn>model\n"
    )
    names = [n for n, _ in model.named_modules()]
    pattern = re.compile(families.GEMMA3.lora_pattern())
    adapted = [n for n in names if pattern.fullmatch(n)]
    assert adapted and all(".language_model." in n for n in adapted)
    assert any(n.endswith("vision_tower.encoder.layers.0.self_attn.q_proj") for n in names)
    for part in (*families.GEMMA3.vision_parts, *families.GEMMA3.projector_parts):
        assert any(n.endswith(part) for n in names), part


def test_an_images_soft_tokens_attend_both_ways_in_the_scorers_forward(tiny_gemma3, rubric):
    """The processor marks the 16 soft tokens of each image in ``token_type_ids`` (not the image's markers);
    the model's output depends on them (its images' two-way attention), and the scorer's unshared and
    shared-prefix paths read what the model reads with them, not without."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_gemma3
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    req = _one(requests(rubric, 3)[2])
    assert len(req.images) == 2
    text = processor.apply_chat_template(req.prompts[0], add_generation_prompt=True, tokenize=False)
    out = processor(text=[text], images=req.images, return_tensors="pt", add_special_tokens=False)
    soft = processor.tokenizer.convert_tokens_to_ids("<image_soft_token>")
    assert torch.equal(out["token_type_ids"], (out["input_ids"] == soft).long())
    assert int(out["token_type_ids"].sum()) == 2 * 16
    assert torch.equal(families.image_token_types(processor, out["input_ids"]), out["token_type_ids"])
    own = _own_expected(model, scorer, dict(out))
    causal = _own_expected(model, scorer, {k: v for k, v in out.items() if k != "token_type_ids"})
    assert abs(own - causal) > 100 * TOL  # the two-way blocks change the score: the checks below can fail
    for share in (False, True):
        (got,) = by_key(b for batch in scorer.score([req], share_prefix=share) for b in batch).values()
        assert abs(got.expected - own) < TOL, share


def test_sliding_windows_read_positions_across_a_batchs_padding(tiny_gemma3, rubric):
    """Prompts far over the 48-token window, criteria of several lengths in one batch: on the KV copy the
    suffixes are padded to the longest after their prefix, and each still equals its prompt scored alone
    (the window counts positions, not the padding). A cut-off window shows: scored with the window as wide
    as the prompts, the scores move."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_gemma3
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    reqs = requests(rubric, 3)[:2]
    enc = [scorer.encode(r) for r in reqs]
    lengths = [len(x) - e.prefix_len for e in enc for x in e.input_ids]
    assert min(len(x) for e in enc for x in e.input_ids) > 2 * 48 and len(set(lengths)) > 2
    shared = by_key(b for batch in scorer.score(reqs, batch_tokens=100_000) for b in batch)
    alone = by_key(b for r in reqs for c in range(len(r.criteria)) for b in _alone(scorer, r, c))
    assert shared.keys() == alone.keys()
    for k in shared:
        assert abs(shared[k].expected - alone[k].expected) < TOL, k
    cfg = model.config.text_config
    cfg.sliding_window = 100_000
    try:
        wide = by_key(b for batch in scorer.score(reqs[:1], share_prefix=False) for b in batch)
    finally:
        cfg.sliding_window = 48
    assert max(abs(wide[k].expected - shared[k].expected) for k in wide) > 100 * TOL


def _alone(scorer, req, c: int):
    one = type(req)(key=req.key, criteria=[req.criteria[c]], prompts=[req.prompts[c]], images=req.images)
    return [b for batch in scorer.score([one], share_prefix=False) for b in batch]


def test_the_packed_path_is_refused_for_gemma3_with_its_reason(tiny_gemma3, rubric, monkeypatch):
    """``packed: flex`` names why (two-way image attention, windows in positions); ``auto`` takes the KV copy
    (on the CPU it would anyway; the family's refusal is checked where ``auto`` would pack: a CUDA device)."""
    from judge.models import packed
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_gemma3
    with pytest.raises(ConfigError, match="does not score Gemma 3: its image tokens attend to each other"):
        ExpectedScorer(model, processor, rubric.scale.values, packed="flex")
    monkeypatch.setattr(packed, "flex_unavailable", lambda device: None)
    assert packed.resolve_packed("auto", model, torch.device("cuda")) is False
    assert packed.resolve_packed("auto", model.model.language_model, torch.device("cuda")) is True


def test_a_rationale_first_score_is_the_models_own_generation_and_read_out(tiny_gemma3, rubric):
    """score_with_rationale on an item with two images: the rationale is what the model's own ``generate``
    writes (greedy) on the processor's full output (ids, pixels, token types), and the score is the model's
    own forward on that prompt with the rationale and the score cue appended."""
    from judge.core.template import SCORE_CUE
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_gemma3
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    req = _one(requests(rubric, 3)[2])
    (got,) = scorer.score_with_rationale(req, max_new_tokens=12)
    text = processor.apply_chat_template(req.prompts[0], add_generation_prompt=True, tokenize=False)
    out = processor(text=[text], images=req.images, return_tensors="pt", add_special_tokens=False)
    assert set(out) >= {"pixel_values", "token_type_ids"}
    n = out["input_ids"].shape[1]
    with torch.no_grad():
        gen = model.generate(**out, max_new_tokens=12, do_sample=False)
    written = processor.tokenizer.decode(gen[0, n:], skip_special_tokens=True)
    assert gen.shape[1] > n and got.rationale == written.split(SCORE_CUE.strip())[0].rstrip()
    cont = processor.tokenizer(got.rationale + "\n" + SCORE_CUE, add_special_tokens=False)["input_ids"]
    full = dict(out)
    full["input_ids"] = torch.cat([out["input_ids"], torch.tensor([cont])], 1)
    full["attention_mask"] = torch.ones_like(full["input_ids"])
    full["token_type_ids"] = torch.cat(
        [out["token_type_ids"], torch.zeros((1, len(cont)), dtype=torch.long)], 1
    )
    assert abs(got.expected - _own_expected(model, scorer, full)) < TOL and got.num_tokens == n


@pytest.mark.slow
def test_a_lora_step_trains_and_the_judge_folder_loads_back_alone(small_demo, tmp_path, rubric):
    """judge-train's real trainer on the tiny Gemma 3 (LoRA, two steps, token types in the batch): finite
    losses, moved adapters, the card's family, the folder loading alone; the demo recipe trains the SigLIP
    tower and the projector in full."""
    weights = lora_step_and_reload(families.GEMMA3, small_demo, tmp_path, rubric)
    assert any("multi_modal_projector.mm_input_projection_weight" in k for k in weights)


def test_training_batches_carry_the_token_types_scoring_gives(tiny_gemma3, rubric):
    """judge-train's collator gives Gemma 3's forward the token types of the images' soft tokens (where the
    ids end up, right-aligned too), as the scorer does, so the judge trains on the attention it is scored
    with; a packed training row, which has no place for them, is refused naming why."""
    from judge.core.errors import JudgeError
    from judge.data.sft import completion_messages
    from judge.train.collator import JudgeCollator

    _, processor = tiny_gemma3
    soft = processor.tokenizer.convert_tokens_to_ids("<image_soft_token>")
    reqs = requests(rubric, 3)
    examples = [
        {"id": r.key, "prompt": r.prompts[0], "completion": completion_messages("4"), "images": r.images}
        for r in reqs
    ]
    for labels_last in (False, True):
        batch = JudgeCollator(processor, labels_last=labels_last)(examples)
        assert torch.equal(batch["token_type_ids"], (batch["input_ids"] == soft).long())
        assert int(batch["token_type_ids"].sum()) == 3 * 16  # 0, 1 and 2 images
    with pytest.raises(JudgeError, match="gemma3 family yet \\(its image-block attention mask"):
        JudgeCollator(processor, packed=True)


def test_reproducible_scores_are_bit_identical_across_batchings():
    """``reproducible=True`` on a Gemma 3 judge: an item's scores are the same bits alone, with the others
    (images and windows in one batch) and in reverse order."""
    from test_reproducible import DEMO, by_key, demo_items, unequal

    import judge

    items = demo_items(2)
    repro = judge.Judge.load("tiny-gemma3", rubric="mmie", reproducible=True)
    root = DEMO.parent
    alone = {k: v for it in items for k, v in by_key(repro.score_records([it], root=root)).items()}
    assert len(alone) > 6 and all(v is not None for v in alone.values())
    assert unequal(alone, by_key(repro.score_records(items, root=root))) == 0
    assert unequal(alone, by_key(repro.score_records(items[::-1], root=root))) == 0
