"""The training collator: loss on the completion only, the scorer's tokens, nothing truncated."""

from __future__ import annotations

import pytest
import torch

from judge.core.images import open_image
from judge.core.io import load_annotations
from judge.core.template import build_judge_prompt, build_target, completion_messages
from judge.models.readout import ExpectedScorer, ScoreRequest
from judge.train.collator import IGNORE_INDEX, JudgeCollator, LengthError


def _examples(rubric, small_demo, n=3, score=4):
    recs = load_annotations(small_demo, rubric=rubric).records[:n]
    out = []
    for r in recs:
        p = build_judge_prompt(rubric, r.task, "overall", r.question, r.response, r.reference)
        out.append(
            {
                "id": f"{r.id}::overall",
                "prompt": p.messages,
                "completion": completion_messages(build_target(score)),
                "images": [open_image(i) for i in p.images],
                "max_patches": None,
            }
        )
    return out


def test_labels_cover_the_completion_only(tiny, rubric, small_demo):
    _, processor = tiny
    tok = processor.tokenizer
    exs = _examples(rubric, small_demo)
    batch = JudgeCollator(processor)(exs)
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"]
    assert ids.shape == labels.shape == mask.shape
    for i in range(len(exs)):
        labelled = (labels[i] != IGNORE_INDEX).nonzero().flatten().tolist()
        # Exactly the answer: the score digit, the end-of-turn token and the template's newline.
        assert tok.decode(ids[i, labelled]) == "4<|im_end|>\n"
        assert labelled == list(range(labelled[0], labelled[0] + 3))
        # Every image token, every rubric/instruction token and the padding carry no loss.
        image_ids = {processor.image_token_id, processor.start_image_token_id, processor.end_image_token_id}
        assert all(labels[i, j] == IGNORE_INDEX for j in range(ids.shape[1]) if int(ids[i, j]) in image_ids)
        assert (labels[i][mask[i] == 0] == IGNORE_INDEX).all()
        assert mask[i, : labelled[-1] + 1].all()
    n_tiles = sum(
        int(processor.image_processor(ex["images"], return_tensors="pt")["num_patches"].sum()) for ex in exs
    )
    assert batch["pixel_values"].shape[0] == n_tiles


def test_prompt_tokens_are_the_scorers(tiny, rubric, small_demo):
    """Train/serve skew check: the collator's prompt ids equal the scorer's and the processor's."""
    model, processor = tiny
    ex = _examples(rubric, small_demo, n=1)[0]
    batch = JudgeCollator(processor)([ex])
    n_prompt = int((batch["labels"][0] == IGNORE_INDEX).logical_and(batch["attention_mask"][0] == 1).sum())
    scorer = ExpectedScorer(model, processor, rubric.scale.values)
    enc = scorer.encode(ScoreRequest("x", ["overall"], [ex["prompt"]], ex["images"]))
    assert batch["input_ids"][0, :n_prompt].tolist() == enc.input_ids[0]
    text = processor.apply_chat_template(ex["prompt"], add_generation_prompt=True, tokenize=False)
    ref = processor(text=[text], images=ex["images"], return_tensors="pt", add_special_tokens=False)
    assert ref["input_ids"][0].tolist() == enc.input_ids[0]
    assert torch.equal(ref["pixel_values"], enc.pixel_values)


def test_max_patches_is_honoured(tiny, rubric, small_demo):
    _, processor = tiny
    from PIL import Image

    ex = _examples(rubric, small_demo, n=1)[0]
    # Wide pictures get several tiles (plus a thumbnail); max_patches=1 leaves one each.
    ex["images"] = [Image.new("RGB", (224, 56), (200, 30, 30)) for _ in ex["images"]]
    full = JudgeCollator(processor)([ex])
    cut = JudgeCollator(processor)([{**ex, "max_patches": 1}])
    assert cut["pixel_values"].shape[0] == len(ex["images"]) < full["pixel_values"].shape[0]
    assert cut["input_ids"].shape[1] < full["input_ids"].shape[1]


def test_too_long_is_an_error_naming_the_example(tiny, rubric, small_demo):
    _, processor = tiny
    ex = _examples(rubric, small_demo, n=1)[0]
    with pytest.raises(LengthError, match=ex["id"].replace("+", r"\+") + r".*tokens.*never truncated"):
        JudgeCollator(processor, max_length=100)([ex])


def test_labels_only_loss_equals_the_stock_loss(tiny, rubric, small_demo):
    from judge.train.loss import labels_only_loss, right_align

    model, processor = tiny
    exs = _examples(rubric, small_demo, n=4)
    exs[1]["completion"] = completion_messages(
        build_target(2, "Two of the images match the text.", "rationale_score")
    )
    batch = JudgeCollator(processor)(exs)
    aligned = right_align(batch)
    # Right-aligned: every row ends in the last column; the same tokens, positions counting real tokens.
    assert (aligned["attention_mask"][:, -1] == 1).all()
    for i in range(len(exs)):
        keep = batch["attention_mask"][i].bool()
        assert torch.equal(
            aligned["input_ids"][i, aligned["attention_mask"][i].bool()], batch["input_ids"][i, keep]
        )
    with torch.no_grad():
        stock = model(**batch).loss
        mine, out = labels_only_loss(model, aligned)
        n = int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
        stock_n = model(**batch, num_items_in_batch=3 * n).loss
        mine_n, _ = labels_only_loss(model, aligned, 3 * n)
    assert abs(stock.item() - mine.item()) < 1e-5 and abs(stock_n.item() - mine_n.item()) < 1e-5
    # The head ran on the completion columns only (the longest completion, plus one), not the whole row.
    k = int((aligned["labels"] != IGNORE_INDEX).any(0).sum())
    assert out.logits.shape[1] == k + 1 < batch["input_ids"].shape[1] // 4
