"""The SmolVLM family (judge.models.families, Idefics3 with it) on its tiny model: the registry finds it, its
split images (sub-images and a global image per image, 5-D ``pixel_values`` with a ``pixel_attention_mask``)
reach the model as the processor gives them, alone and several requests of different image counts in one
forward, and its scores are equal on every scoring path; a LoRA step trains and the judge folder loads back
alone.

The scoring checks are Qwen2.5-VL's (tests/test_family_qwen25vl.py), collected here a second time with
``tiny_qwen`` bound to the tiny SmolVLM: the same items (0, 1 and 2 images of several sizes, interleaved), the
same references (the model's own forward) and tolerances. Its positions are plain (one axis), so Qwen's
position check does not apply; its rationale check is written here (no token types to give ``generate``)."""

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

__all__ = [  # the Qwen2.5-VL checks, run here on the tiny SmolVLM
    "test_packed_scores_equal_the_kv_copy",
    "test_shared_prefix_and_unshared_scores_are_equal",
    "test_the_scorer_reads_what_the_models_own_forward_gives",
]


@pytest.fixture(scope="module")
def tiny_qwen(tiny_smol):
    """The imported Qwen2.5-VL checks' model: here the tiny SmolVLM."""
    return tiny_smol


@pytest.fixture(scope="module")
def tiny_idefics3():
    from judge.testing.tiny_smolvlm import build_tiny_idefics3_scorer

    return build_tiny_idefics3_scorer(seed=0)


def prompt_inputs(processor, prompt, images):
    """The processor's own encoding of one prompt (what a user of the model would give it)."""
    text = processor.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    return processor(text=[text], images=images or None, return_tensors="pt", add_special_tokens=False)


def test_the_registry_names_smolvlm_by_its_model_tiny_name_and_processor(tiny_smol):
    model, processor = tiny_smol
    assert type(model).__name__ == "SmolVLMForConditionalGeneration"
    assert families.of_model(model) is families.SMOLVLM
    assert families.of_processor(processor) is families.SMOLVLM
    assert families.by_tiny_name("tiny-smolvlm:seed=3") is families.SMOLVLM
    assert families.by_tiny_name("tiny-smolvlm-x") is None
    assert families.by_name("smolvlm") is families.SMOLVLM
    assert families.by_model_type("idefics3") is families.SMOLVLM
    for cls in ("SmolVLMProcessor", "Idefics3Processor"):
        assert families.by_processor_class(cls) is families.SMOLVLM
    # The 256M's shape: SigLIP frames of 8 x 8 patches, pixel shuffle at scale 4 (4 tokens a frame), Llama.
    assert model.config.scale_factor == 4 and model.config.text_config.model_type == "llama"
    assert processor.image_seq_len == 4 == model.model.image_seq_len
    # No video processor (no torchvision, no num2words); SmolVLM's own template.
    assert not hasattr(processor, "video_processor")
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text == "<|im_start|>User: hi<end_of_utterance>\nAssistant:"
    assert processor.tokenizer.eos_token == "<end_of_utterance>"
    # The registry's parts are where the model has them; LoRA adapts the language model's projections only
    # (its text model: the SigLIP tower has q/k/v projections of its own).
    names = [n for n, _ in model.named_modules()]
    pattern = re.compile(families.SMOLVLM.lora_pattern())
    adapted = [n for n in names if pattern.fullmatch(n)]
    assert len(adapted) == 7 * model.config.text_config.num_hidden_layers
    assert all(".text_model." in n for n in adapted)
    assert any(n.endswith("vision_model.encoder.layers.0.self_attn.q_proj") for n in names)
    for part in (*families.SMOLVLM.vision_parts, *families.SMOLVLM.projector_parts):
        assert any(n.endswith(part) for n in names), part
    parts = (*families.SMOLVLM.vision_parts, *families.SMOLVLM.projector_parts)
    outside = {n for n, _ in model.named_parameters() if ".text_model." not in n and "lm_head" not in n}
    assert outside and all(any(p in n for p in parts) for n in outside)  # every vision weight named


def test_an_image_is_split_into_sub_images_and_a_global_image(tiny_smol, rubric):
    """The encoding is the processor's own: each image a grid of sub-images (each after its ``<row_i_col_j>``)
    and a global image (after ``<global-img>``), 4 tokens a frame; the frames kept one per row of
    ``pixel_values`` (frames, 1, C, H, W) in the processor's order, its ``pixel_attention_mask`` with them."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_smol
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    tok = processor.tokenizer
    counts = []
    for req in requests(rubric, 3):
        enc = scorer.encode(req)
        out = prompt_inputs(processor, req.prompts[0], req.images)
        assert out["input_ids"][0].tolist() == enc.input_ids[0]
        if not req.images:
            assert enc.pixel_values is None and not enc.vision_extra
            continue
        frames = out["pixel_values"].shape[1]
        counts.append(frames)
        assert enc.pixel_values.shape == (frames, 1, *out["pixel_values"].shape[2:])
        assert torch.equal(enc.pixel_values[:, 0], out["pixel_values"][0])
        assert torch.equal(enc.vision_extra["pixel_attention_mask"][:, 0], out["pixel_attention_mask"][0])
        ids = enc.input_ids[0]
        globals_ = ids.count(tok.convert_tokens_to_ids("<global-img>"))
        grid = sum(ids.count(tok.convert_tokens_to_ids(t)) for t in ("<row_1_col_1>", "<row_2_col_2>"))
        assert globals_ == len(req.images) and grid == 2 * len(req.images)  # 2 x 2 sub-images each
        assert ids.count(processor.image_token_id) == 4 * frames
    assert counts == [5, 10]  # the two requests with images differ in frames: they concatenate anyway


def test_requests_of_different_image_counts_in_one_forward_are_the_models_own_batch(tiny_smol, rubric):
    """The model's own batch of two prompts with different image counts (its (2, images, ...) pixels padded
    with empty frames) gives the logits of the scorer's frames laid one per row and concatenated."""
    from judge.models.readout import ExpectedScorer, _left_pad

    model, processor = tiny_smol
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    reqs = [r for r in requests(rubric, 3) if r.images]
    texts = [
        processor.apply_chat_template(r.prompts[0], add_generation_prompt=True, tokenize=False) for r in reqs
    ]
    side, processor.tokenizer.padding_side = processor.tokenizer.padding_side, "left"
    try:  # the shared fixture's tokenizer as it was, after
        own = processor(
            text=texts,
            images=[r.images for r in reqs],
            return_tensors="pt",
            add_special_tokens=False,
            padding=True,
        )
    finally:
        processor.tokenizer.padding_side = side
    assert own["pixel_values"].shape[:2] == (2, 10)  # the first prompt's 5 frames padded to 10
    encs = [scorer.encode(r) for r in reqs]
    ids, mask = _left_pad([e.input_ids[0] for e in encs], scorer.pad_id)
    assert torch.equal(ids, own["input_ids"]) and torch.equal(mask, own["attention_mask"])
    pixels = torch.cat([e.pixel_values for e in encs])
    masks = torch.cat([e.vision_extra["pixel_attention_mask"] for e in encs])
    assert pixels.shape[0] == 15
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        want = model(**own, position_ids=positions).logits[:, -1]
        got = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            pixel_values=pixels,
            pixel_attention_mask=masks,
        ).logits[:, -1]
    assert (want - got).abs().max() < TOL


def test_a_rationale_first_score_is_the_models_own_generation_and_read_out(tiny_smol, rubric):
    """score_with_rationale on an item with two images: the rationale is what the model's own ``generate``
    writes (greedy) on the processor's full output, and the score is its own forward on that prompt with the
    rationale and the score cue appended."""
    from judge.core.template import SCORE_CUE
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_smol
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    req = requests(rubric, 3)[2]
    assert len(req.images) == 2
    req = type(req)(key=req.key, criteria=req.criteria[:1], prompts=req.prompts[:1], images=req.images)
    (got,) = scorer.score_with_rationale(req, max_new_tokens=12)
    out = prompt_inputs(processor, req.prompts[0], req.images)
    assert set(out) >= {"pixel_values", "pixel_attention_mask"} and out["pixel_values"].dim() == 5
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


def test_idefics3_goes_through_the_same_code(tiny_idefics3, tiny_smol, rubric):
    """An Idefics3 model of the tiny SmolVLM's shapes is the SmolVLM family: the registry finds it, the scorer
    reads what its own forward gives, and the shared prefix equals the unshared path; seeded alike, its
    weights and scores are the tiny SmolVLM's (the same model code)."""
    from judge.models.readout import ExpectedScorer

    model, processor = tiny_idefics3
    assert type(model).__name__ == "Idefics3ForConditionalGeneration"
    assert (
        families.of_model(model) is families.SMOLVLM and families.of_processor(processor) is families.SMOLVLM
    )
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    reqs = requests(rubric, 3)
    shared = by_key(b for batch in scorer.score(reqs, batch_tokens=1500) for b in batch)
    unshared = by_key(b for batch in scorer.score(reqs, share_prefix=False) for b in batch)
    assert shared.keys() == unshared.keys()
    for k in shared:
        assert abs(shared[k].expected - unshared[k].expected) < TOL, k
    for req in reqs:
        out = prompt_inputs(processor, req.prompts[0], req.images)
        with torch.no_grad():
            logits = model(**out).logits[0, -1]
        probs = torch.softmax(logits[scorer.score_ids].double(), -1)
        expected = float(sum(p * v for p, v in zip(probs.tolist(), scorer.values, strict=True)))
        assert abs(shared[(req.key, req.criteria[0])].expected - expected) < TOL
    smol = dict(tiny_smol[0].named_parameters())
    assert all(torch.equal(p, smol[n]) for n, p in model.named_parameters())
    smol_scores = by_key(
        b
        for batch in ExpectedScorer(*tiny_smol, rubric.scale.values, packed="off").score(
            reqs, batch_tokens=1500
        )
        for b in batch
    )
    assert all(abs(shared[k].expected - smol_scores[k].expected) < TOL for k in shared)


def test_the_processor_folder_loads_back_as_its_class(tiny_smol, tiny_idefics3, tmp_path):
    """A saved processor (a judge's processor/) loads back as SmolVLM's or Idefics3's, by its own config, and
    expands images as before (its image processor reports the grid again)."""
    from judge.models.loading import load_processor

    for name, (_, processor) in {"smol": tiny_smol, "idefics3": tiny_idefics3}.items():
        processor.save_pretrained(tmp_path / name)
        back = load_processor(str(tmp_path / name))
        assert isinstance(back, type(processor)) and back.image_seq_len == processor.image_seq_len
        from PIL import Image

        msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "x"}]}]
        image = Image.new("RGB", (50, 20), (1, 2, 3))
        from judge.models.readout import encode_vision

        ids, vision = encode_vision(back, [msgs], [image])
        want, _ = encode_vision(processor, [msgs], [image])
        assert ids == want and vision["pixel_values"].shape[0] == 3  # a 1 x 2 grid and the global image


@pytest.mark.slow
def test_a_lora_step_trains_and_the_judge_folder_loads_back_alone(small_demo, tmp_path, rubric):
    """judge-train's real trainer on the tiny SmolVLM (LoRA, two steps on the demo's image items): finite
    losses, moved adapters on the text model only, the vision tower and connector trained in full (the demo
    recipe), the card's family, and the judge folder loading and scoring with nothing but its path
    (Qwen2.5-VL's check, the language model found by the family's ``language_part``)."""
    lora_step_and_reload(families.SMOLVLM, small_demo, tmp_path, rubric)


def test_the_serving_pixel_cap_is_the_longest_edge_square(tiny_smol):
    """judge-serve's default per-image cap is a multiple of what the judge can look at: for SmolVLM and
    Idefics3, a square of the edge an image is scaled to before splitting (the tiny 64; the checkpoints'
    1456), not the 40-megapixel fallback of a processor that says nothing."""
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil
    from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

    from judge.models.processor import tiling_pixels

    assert tiling_pixels(tiny_smol[1]) == 64 * 64
    assert tiling_pixels(SmolVLMImageProcessorPil()) == 1456 * 1456
    assert tiling_pixels(Idefics3ImageProcessorPil()) == 1456 * 1456
