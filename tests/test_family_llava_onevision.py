"""The LLaVA-OneVision family (judge.models.families) on its tiny model: the registry finds it, its anyres images
become the processor's own tokens (a lone image in tiles, each of several at base resolution), requests whose
images have different patch counts go through one forward pass, and its scores are equal on every scoring path;
a rationale-first score is the model's own generation; a LoRA step trains and the judge folder loads back alone.

The scoring checks that apply as they are are Qwen2.5-VL's (tests/test_family_qwen25vl.py), collected here again
with ``tiny_qwen`` bound to the tiny LLaVA-OneVision: the same items (0, 1 and 2 images of several sizes between
texts), references (the model's own forward on the processor's output) and tolerances. Its positions are plain
token indices (no multi-axis check), and its own generate takes other image inputs (its own check below)."""

from __future__ import annotations

import re

import pytest
import torch
from test_family_qwen25vl import (
    TOL,
    lora_step_and_reload,
    test_packed_scores_equal_the_kv_copy,
    test_shared_prefix_and_unshared_scores_are_equal,
    test_the_scorer_reads_what_the_models_own_forward_gives,
)
from test_packed_scoring import by_key, requests

from judge.models import families

pytestmark = pytest.mark.usefixtures("one_thread")

__all__ = [  # the Qwen2.5-VL checks, run here on the tiny LLaVA-OneVision
    "test_packed_scores_equal_the_kv_copy",
    "test_shared_prefix_and_unshared_scores_are_equal",
    "test_the_scorer_reads_what_the_models_own_forward_gives",
]

FAMILY = families.LLAVA_ONEVISION


@pytest.fixture(scope="module")
def tiny_qwen(tiny_llava_onevision):
    """The imported Qwen2.5-VL checks' model: here the tiny LLaVA-OneVision."""
    return tiny_llava_onevision


def test_the_registry_names_llava_onevision_by_its_model_tiny_name_and_processor(tiny_llava_onevision):
    model, processor = tiny_llava_onevision
    assert type(model).__name__ == "LlavaOnevisionForConditionalGeneration"
    assert families.of_model(model) is FAMILY and families.of_processor(processor) is FAMILY
    assert families.by_tiny_name("tiny-llava-onevision:seed=3") is FAMILY
    assert families.by_tiny_name("tiny-llava-onevision-x") is None
    assert families.by_name("llava-onevision") is FAMILY
    assert families.by_processor_class("LlavaOnevisionProcessor") is FAMILY
    assert families.by_model_type("llava_onevision") is FAMILY
    # Its shape is the 0.5B's: SigLIP without a head, every patch kept, anyres past a tile budget, tied head.
    cfg = model.config
    assert cfg.vision_config.model_type == "siglip_vision_model" and not cfg.vision_config.vision_use_head
    assert cfg.vision_feature_select_strategy == "full" and cfg.vision_aspect_ratio == "anyres_max_4"
    assert cfg.text_config.model_type == "qwen2" and cfg.tie_word_embeddings
    assert len(cfg.image_grid_pinpoints) == 9 and processor.num_image_tokens == 16
    # No video processor (no torchvision); the checkpoint's template: the turn's images first, then its texts.
    assert not hasattr(processor, "video_processor")
    parts = [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    text = processor.apply_chat_template([{"role": "user", "content": parts}], tokenize=False)
    assert text == "<|im_start|>user\n<image>\nab<|im_end|>\n"
    # The registry's parts are where the model has them; LoRA adapts the language model's projections only.
    names = [n for n, _ in model.named_modules()]
    pattern = re.compile(FAMILY.lora_pattern())
    adapted = [n for n in names if pattern.fullmatch(n)]
    assert adapted and all(".language_model." in n for n in adapted)
    assert any(n.endswith("vision_tower.encoder.layers.0.self_attn.q_proj") for n in names)
    params = [n for n, _ in model.named_parameters()]
    for part in (*FAMILY.vision_parts, *FAMILY.projector_parts):
        assert any(part in n for n in params), part
    vision = [n for n in params if ".language_model." not in n and n != "lm_head.weight"]
    parts_all = (*FAMILY.vision_parts, *FAMILY.projector_parts)
    assert all(
        any(p in n for p in parts_all) for n in vision
    )  # every non-language weight frozen/trained by name


def test_a_lone_image_is_tiled_and_each_of_several_is_its_base_tile(tiny_llava_onevision, rubric):
    """The scorer's encoding is the processor's own for items of 0, 1 and 2 images (ids, pixels, sizes, image
    counts): a lone image takes its anyres tokens (base tile, unpadded grid, a newline per row), each of two
    images its base tile and one newline, and every image sits before the turn's text."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_llava_onevision
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    base = processor.num_image_tokens + 1
    patches = set()
    for req in requests(rubric, 6):
        enc = scorer.encode(req)
        text = processor.apply_chat_template(req.prompts[0], add_generation_prompt=True, tokenize=False)
        out = processor(text=[text], images=req.images or None, return_tensors="pt", add_special_tokens=False)
        assert out["input_ids"][0].tolist() == enc.input_ids[0]
        ids = enc.input_ids[0]
        n_image = ids.count(processor.image_token_id)
        if not req.images:
            assert enc.pixel_values is None and not enc.vision_extra and n_image == 0
            continue
        assert torch.equal(out["pixel_values"], enc.pixel_values)
        assert torch.equal(out["image_sizes"], enc.vision_extra["image_sizes"])
        assert enc.vision_extra["batch_num_images"].tolist() == [len(req.images)]
        h, w = req.images[0].height, req.images[0].width
        if len(req.images) == 1:
            assert n_image == processor._get_number_of_features(h, w, 32, 32) > base
            patches.add(enc.pixel_values.shape[1])
        else:
            assert n_image == base * len(req.images) and enc.pixel_values.shape[1] == 1
        image_at = [i for i, t in enumerate(ids) if t == processor.image_token_id]
        assert image_at[-1] < ids.index(processor.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        assert processor.tokenizer.decode(ids[: image_at[0]]) == "<|im_start|>user\n"
    assert len(patches) == 2  # the lone images have grids of different sizes: different patch counts


def test_requests_with_different_patch_counts_run_in_one_forward(tiny_llava_onevision, rubric):
    """Requests whose pixel stacks differ in the patch axis (anyres grids of 5 and 7 tiles, base tiles only)
    score in one forward batch, equal to each scored alone: the stacks are zero-padded to the longest, and the
    model keeps each image's own patches."""
    from judge.models.pixels import cat_pixel_values
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_llava_onevision
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    reqs = [r for r in requests(rubric, 6) if r.images]
    stacks = [scorer.encode(r).pixel_values for r in reqs]
    assert len({s.shape[1] for s in stacks}) == 3
    joined = cat_pixel_values(stacks)
    assert joined.shape[:2] == (sum(s.shape[0] for s in stacks), max(s.shape[1] for s in stacks))
    at = 0
    for s in stacks:  # each stack as it was, then zeros
        assert torch.equal(joined[at : at + s.shape[0], : s.shape[1]], s)
        assert not joined[at : at + s.shape[0], s.shape[1] :].any()
        at += s.shape[0]
    for share in (True, False):
        batches = list(scorer.score(reqs, share_prefix=share, batch_tokens=100_000))
        assert len(batches) == 1
        together = by_key(batches[0])
        alone = by_key(b for r in reqs for batch in scorer.score([r], share_prefix=share) for b in batch)
        assert together.keys() == alone.keys()
        for k in alone:
            assert abs(together[k].expected - alone[k].expected) < TOL, k


def test_the_anyres_grid_and_its_newlines_reach_the_score(tiny_llava_onevision, rubric):
    """The tiles beyond the base tile and the learned ``image_newline`` are in the score of a lone-image item
    (so the paths' equality covers them): a change to either moves it."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_llava_onevision
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    req = next(r for r in requests(rubric, 3) if len(r.images) == 1)
    req = type(req)(key=req.key, criteria=req.criteria[:1], prompts=req.prompts[:1], images=req.images)
    enc = scorer.encode(req)

    def score():
        (got,) = by_key(
            b for batch in scorer.score_batches([[enc]], share_prefix=False) for b in batch
        ).values()
        return got.expected

    first = score()
    newline = model.model.image_newline
    kept = newline.detach().clone()
    try:
        with torch.no_grad():
            newline.zero_()
        without_newline = score()
    finally:
        with torch.no_grad():
            newline.copy_(kept)
    pixels = enc.pixel_values.clone()
    enc.pixel_values[:, 1:] = 0  # the grid's tiles, the base tile kept
    try:
        without_grid = score()
    finally:
        enc.pixel_values = pixels
    assert score() == first
    assert abs(first - without_newline) > 100 * TOL and abs(first - without_grid) > 100 * TOL


def test_a_rationale_first_score_is_the_models_own_generation_and_read_out(tiny_llava_onevision, rubric):
    """score_with_rationale on items with one and two images: the rationale is what the model's own
    ``generate`` writes (greedy) on the processor's full output (ids, pixels, image sizes, image counts), and
    the score is the model's own forward on that prompt with the rationale and the score cue appended."""
    from judge.core.template import SCORE_CUE
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_llava_onevision
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    for req in requests(rubric, 3)[1:]:
        req = type(req)(key=req.key, criteria=req.criteria[:1], prompts=req.prompts[:1], images=req.images)
        (got,) = scorer.score_with_rationale(req, max_new_tokens=12)
        text = processor.apply_chat_template(req.prompts[0], add_generation_prompt=True, tokenize=False)
        out = processor(text=[text], images=req.images, return_tensors="pt", add_special_tokens=False)
        assert set(out) >= {"pixel_values", "image_sizes", "batch_num_images"}
        n = out["input_ids"].shape[1]
        with torch.no_grad():
            gen = model.generate(**out, max_new_tokens=12, do_sample=False)
        written = processor.tokenizer.decode(gen[0, n:], skip_special_tokens=True)
        assert gen.shape[1] > n and got.rationale == written.split(SCORE_CUE.strip())[0].rstrip()
        cont = processor.tokenizer(got.rationale + "\n" + SCORE_CUE, add_special_tokens=False)["input_ids"]
        full = dict(out)
        full["input_ids"] = torch.cat([out["input_ids"], torch.tensor([cont])], 1)
        full["attention_mask"] = torch.ones_like(full["input_ids"])
        with torch.no_grad():
            logits = model(**full).logits[0, -1]
        probs = torch.softmax(logits[scorer.score_ids].double(), -1)
        expected = float(sum(p * v for p, v in zip(probs.tolist(), scorer.values, strict=True)))
        assert abs(got.expected - expected) < TOL and got.num_tokens == n


@pytest.mark.slow
def test_a_lora_step_trains_and_the_judge_folder_loads_back_alone(small_demo, tmp_path, rubric):
    """judge-train's real trainer on the tiny LLaVA-OneVision (LoRA, two steps): finite losses, moved adapters,
    the card's family, the folder loading alone; the demo recipe trains the SigLIP tower and the projector in
    full (``image_newline``, a bare parameter, stays as loaded under LoRA)."""
    weights = lora_step_and_reload(
        FAMILY, small_demo, tmp_path, rubric, trained=("vision_tower.", "multi_modal_projector.linear_2.")
    )
    assert not any("image_newline" in k for k in weights)


def test_the_serving_pixel_cap_covers_the_largest_anyres_grid(tiny_llava_onevision):
    """judge-serve's default per-image cap is a multiple of what the judge can look at: for anyres, its largest
    grid of tiles (the tiny 3 x 3 of 32 pixels; the checkpoints' 6 x 6 of 384), not one tile."""
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
        LlavaOnevisionImageProcessorPil,
    )

    from judge.models.processor import tiling_pixels

    assert tiling_pixels(tiny_llava_onevision[1]) == 96 * 96
    assert tiling_pixels(LlavaOnevisionImageProcessorPil()) == 2304 * 2304


def test_a_packed_training_row_gives_the_padded_batchs_loss(tiny_llava_onevision, rubric, small_demo):
    """judge-train's collator on the tiny LLaVA-OneVision: a packed row (``train.packing``) carries its
    examples' image sizes and image counts as the padded batch does, and gives the padded batch's loss (the
    tolerance of tests/test_train_packing.py), over examples whose pixel stacks differ in the patch axis."""
    import copy

    from peft import LoraConfig, get_peft_model
    from test_train_packing import examples

    from judge.train.collator import JudgeCollator
    from judge.train.loss import labels_only_loss

    model, processor = tiny_llava_onevision
    torch.manual_seed(1)
    model = get_peft_model(
        copy.deepcopy(model),
        LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=FAMILY.lora_pattern()),
    )
    for n, p in model.named_parameters():
        if "lora_B" in n:  # non-zero adapters, so that the loss depends on them
            torch.nn.init.normal_(p, std=0.05)
    exs = examples(rubric, small_demo, 6)
    for ex in exs[:2]:  # the demo's items have 2-3 images: keep the first alone in two of them
        seen = [0]

        def first_image_only(part, seen=seen):
            seen[0] += part.get("type") == "image"
            return part.get("type") != "image" or seen[0] == 1

        ex["prompt"] = [
            {**m, "content": [x for x in m["content"] if first_image_only(x)]} for m in ex["prompt"]
        ]
        ex["images"] = ex["images"][:1]
    padded = JudgeCollator(processor, labels_last=True)(exs)
    packed = JudgeCollator(processor, packed=True)(exs)
    counts = padded["batch_num_images"].tolist()
    assert 1 in counts and max(counts) > 1  # lone images in tiles and several at base resolution
    assert padded["pixel_values"].shape[1] > 1 and not padded["pixel_values"][-1, 1:].any()
    for key in ("pixel_values", "image_sizes", "batch_num_images"):
        assert torch.equal(packed[key], padded[key]), key
    with torch.no_grad():
        ref, _ = labels_only_loss(model, padded)
        got, _ = labels_only_loss(model, packed)
    assert abs(got.item() - ref.item()) < 1e-5, (got.item(), ref.item())


def test_the_llava_onevision_recipe_is_rubric6_on_its_base():
    """rubric6-llava-ov-0.5b: rubric6's sections and keys, validated by the run config's own loader, the
    llava-onevision-qwen2-0.5b-ov hub id (nothing downloaded), LoRA on the language model, no pixel bounds (its
    images have none), a context budget for a lone anyres image (up to about 7,400 tokens), 16 examples a step."""
    import yaml

    from judge.train.config import load_run_config

    path, cfg = load_run_config("rubric6-llava-ov-0.5b")
    raw = yaml.safe_load(path.read_text())
    base = yaml.safe_load((path.parent / "rubric6.yaml").read_text())
    assert raw.keys() == base.keys() and all(
        raw[k].keys() == base[k].keys() for k in base if isinstance(base[k], dict)
    )
    assert cfg.model.path == "llava-hf/llava-onevision-qwen2-0.5b-ov-hf" and cfg.model.dtype == "bfloat16"
    assert (
        cfg.train.finetune == "lora" and cfg.lora.target_modules == "language" and cfg.quantization == "none"
    )
    assert not cfg.lora.train_vision and not cfg.lora.train_projector
    assert cfg.model.min_pixels is None and cfg.model.max_pixels is None
    assert cfg.data.max_tokens == 8192 > 729 + 81 * 82
    assert cfg.train.per_device_train_batch_size * cfg.train.gradient_accumulation_steps == 16
    assert cfg.eval.best_metric == "overall_spearman" and cfg.rubric == "mmie"
