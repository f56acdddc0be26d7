"""The scoring engine on the tiny judge: batch-size and shared-prefix invariance, unscorable items, rubric
checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.core.errors import ConfigError
from judge.core.schema import PredictionRecord, content_images
from judge.scoring.engine import JudgeEngine, JudgeSpec, resolve_judge
from judge.scoring.inputs import load_inputs

TOL = 1e-4


pytestmark = pytest.mark.usefixtures("one_thread")


def subset(demo: Path, name: str, every: int = 4, extra: list[dict] | None = None) -> Path:
    """A few demo records (every ``every``-th: all three families) in a file beside the demo's images."""
    lines = demo.read_text().splitlines()[::every]
    rows = [json.loads(x) for x in lines] + (extra or [])
    out = demo.parent / f"serve_{name}.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


@pytest.fixture(scope="module")
def records(small_demo):
    return load_inputs([subset(small_demo, "engine", every=9)]).records  # SA, SA, PBL, MSR


@pytest.fixture(scope="module")
def scored(tiny, rubric, records):
    """The records scored 8 responses per forward pass (all four in one padded batch)."""
    batches = list(engine(tiny, rubric, batch_size=8).iter_batches(records))
    assert [b.items for b in batches] == [len(records)]
    return [s for b in batches for s in b.records]


def engine(tiny, rubric, **kw) -> JudgeEngine:
    model, processor = tiny
    return JudgeEngine(model, processor, JudgeSpec("tiny", rubric, "score"), **kw)


def by_key(recs):
    return {(r.id, r.criterion): r for r in recs}


def assert_close(a, b):
    a, b = by_key(a), by_key(b)
    assert a.keys() == b.keys()
    for k in a:
        assert abs(a[k].score - b[k].score) < TOL, k
        assert max(abs(x - y) for x, y in zip(a[k].distribution, b[k].distribution, strict=True)) < TOL, k
        assert (
            a[k].argmax == b[k].argmax
            or abs(a[k].distribution[a[k].argmax] - a[k].distribution[b[k].argmax]) < TOL
        )


def test_one_record_per_criterion_with_distribution(rubric, records, scored):
    out = scored
    expected = {(r.id, c) for r in records for c in rubric.family(r.task).criterion_ids}
    assert set(by_key(out)) == expected and len(out) == len(expected)
    for s in out:
        assert s.metric == "judge" and s.status == "ok" and 0 <= s.score <= 6
        assert len(s.distribution) == 7 and abs(sum(s.distribution) - 1) < 1e-9
        assert s.producer["rubric_hash"] == rubric.hash and s.producer["share_prefix"] is True
        assert s.details["num_tokens"] > 0 and 0 < s.details["scale_mass"] <= 1


def test_batch_size_invariance(tiny, rubric, records, scored):
    one = engine(tiny, rubric, batch_size=1).score_records(records)  # one response per forward pass
    assert_close(one, scored)


def test_shared_prefix_equals_unshared(tiny, rubric, records):
    shared = engine(tiny, rubric, share_prefix=True).score_records(records[1:3])
    full = engine(tiny, rubric, share_prefix=False).score_records(records[1:3])
    assert_close(shared, full)
    assert {s.producer["share_prefix"] for s in full} == {False}


def test_unscorable_items_get_null_with_reason(tiny, rubric, small_demo):
    demo = [json.loads(x) for x in small_demo.read_text().splitlines()]
    missing = {
        **demo[0],
        "id": "missing-image",
        "response": [{"type": "text", "text": "see"}, {"type": "image", "image": "images/nope.png"}],
    }
    odd = {**demo[1], "id": "odd-family", "task": "XYZ"}
    recs = load_inputs([subset(small_demo, "unscorable", every=1000, extra=[missing, odd])]).records
    out = engine(tiny, rubric).score_records(recs)
    got = by_key(out)
    for c in rubric.family("SA").criterion_ids:
        s = got[("missing-image", c)]
        assert s.score is None and s.status == "unscorable" and "nope.png" in s.reason
        assert s.details["reason_code"] == "image"
    assert [k for k in got if k[0] == "odd-family"] == [("odd-family", "overall")]
    assert got[("odd-family", "overall")].details["reason_code"] == "unknown_family"
    assert got[(recs[0].id, "overall")].score is not None  # the good record still scored
    # Over the context budget, even with one tile per image: null, never a 0.
    short = engine(tiny, rubric, max_tokens=64).score_records(recs[:1])
    assert {s.details["reason_code"] for s in short} == {"too_long"} and all(s.score is None for s in short)
    assert "over the context budget of 64" in short[0].reason


@pytest.mark.parametrize("family", ["tiny", "tiny_qwen", "tiny_llava_onevision", "tiny_gemma3"])
def test_an_item_whose_images_exceed_the_context_budget_is_refused(family, request, rubric, records):
    """Every family: an item with images one token over the context budget is null with its reason, never a
    0 (InternVL's single-tile images have no tile to drop; Qwen2.5-VL's none at all: their size is the
    processor's pixel bounds; LLaVA-OneVision's neither: its anyres grid follows the image's size; Gemma 3's
    a fixed 16 soft tokens)."""
    model = request.getfixturevalue(family)
    rec = next(r for r in records if content_images(r.response) or content_images(r.question))
    full = engine(model, rubric).score_records([rec])
    assert all(s.score is not None for s in full)
    n = max(s.details["num_tokens"] for s in full)
    over = engine(model, rubric, max_tokens=n - 1).score_records([rec])
    assert {s.details["reason_code"] for s in over} == {"too_long"} and all(s.score is None for s in over)
    assert f"the prompt is {n} tokens" in over[0].reason
    assert f"over the context budget of {n - 1}" in over[0].reason


def write_card(folder: Path, rubric_hash: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    card = {
        "base_model": "tiny",
        "rubric": {"name": "mmie", "version": "1", "hash": rubric_hash},
        "scale": [0, 6],
        "target_format": "score",
        "finetune": "lora",
    }
    (folder / "judge_card.json").write_text(json.dumps(card))
    return folder


def test_rubric_hash_mismatch_refused_unless_forced(tmp_path, rubric, capsys):
    judge = write_card(tmp_path / "judge", "0" * 64)
    with pytest.raises(ConfigError, match="differs from the rubric"):
        resolve_judge(str(judge))
    spec = resolve_judge(str(judge), force=True)
    assert spec.rubric_forced and spec.rubric.hash == rubric.hash
    assert "scoring anyway" in capsys.readouterr().err
    ok = resolve_judge(str(write_card(tmp_path / "ok", rubric.hash)), rationale=True)
    assert ok.target_format == "rationale_score" and ok.source == str((tmp_path / "ok").resolve())
    # The card's judge was trained on score-only targets: asking it for a rationale first is off its training.
    assert "trained on score-only targets" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="`rubric`"):  # the setting, by its field name
        resolve_judge("tiny")


def test_rationale_first_still_reads_the_distribution(tiny, rubric, records):
    import torch

    from judge.core.images import open_image
    from judge.core.template import SCORE_CUE, build_judge_prompt
    from judge.models.score_tokens import score_token_ids

    model, processor = tiny
    eng = JudgeEngine(
        model, processor, JudgeSpec("tiny", rubric, "rationale_score"), rationale=True, max_new_tokens=12
    )
    # The random tiny judge stops at once for some responses and writes a few words for others: the first
    # one it writes for (its overall score only: every other criterion marked done keeps the test short).
    for rec in records:
        done = {
            (rec.benchmark, rec.model, rec.id, "judge", "", c)
            for c in rubric.family(rec.task).criterion_ids[:-1]
        }
        out = [s for b in eng.iter_batches([rec], done) for s in b.records]
        assert [s.criterion for s in out] == ["overall"]
        (s,) = out
        assert s.score is not None and isinstance(s.details["rationale"], str)
        if s.details["rationale"]:
            break
    else:
        pytest.fail("the tiny judge wrote no rationale for any of the records")
    assert abs(sum(s.distribution) - 1) < 1e-9 and s.producer["rationale"] is True

    # By hand, with the stock processor and one forward pass: the prompt, the rationale the judge wrote,
    # then the score cue; the scale tokens' probabilities at the last position, renormalised.
    prompt = build_judge_prompt(
        rubric, rec.task, "overall", rec.question, rec.response, rec.reference, "rationale_score"
    )
    text = processor.apply_chat_template(prompt.messages, add_generation_prompt=True, tokenize=False)
    prompt_ids = processor(
        text=[text],
        images=[open_image(p) for p in prompt.images],
        add_special_tokens=False,
        return_tensors="pt",
    )
    cont = processor.tokenizer(
        s.details["rationale"] + "\n" + SCORE_CUE, add_special_tokens=False, return_tensors="pt"
    )["input_ids"]
    ids = torch.cat([prompt_ids["input_ids"], cont], dim=1)
    with torch.no_grad():
        logits = model(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            pixel_values=prompt_ids["pixel_values"].to(model.dtype),
        ).logits[0, -1]
    values = rubric.scale.values
    probs = torch.softmax(logits.double(), -1)[score_token_ids(processor.tokenizer, values)]
    dist = (probs / probs.sum()).tolist()
    assert max(abs(a - b) for a, b in zip(dist, s.distribution, strict=True)) < 1e-4
    assert abs(sum(v * p for v, p in zip(values, dist, strict=True)) - s.score) < 1e-4
    # Reading at once (no rationale) gives another distribution: the rationale did change what was read.
    (direct,) = [x for x in engine(tiny, rubric).score_records([rec]) if x.criterion == "overall"]
    assert max(abs(a - b) for a, b in zip(direct.distribution, s.distribution, strict=True)) > 1e-4


def test_a_judge_with_nan_weights_gives_unscorable_records_not_a_crash(tiny, rubric, records, tmp_path):
    import copy

    import torch

    from judge.scoring.output import ScoreStore

    model, processor = tiny
    broken = copy.deepcopy(model)
    with torch.no_grad():
        next(p for n, p in broken.named_parameters() if "language_model" in n and "norm" in n).fill_(
            float("nan")
        )
    eng = JudgeEngine(broken, processor, JudgeSpec("tiny", rubric, "score"))
    out = eng.score_records(records[:1])
    assert out and all(s.score is None and s.status == "unscorable" for s in out)
    assert {s.details["reason_code"] for s in out} == {"non_finite"} and "not finite" in out[0].reason
    with ScoreStore(tmp_path) as store:  # JSON without NaN: the records are written
        assert store.append(out) == len(out)


def test_rationale_first_on_a_text_only_item(tiny, rubric):
    # InternVL's generate() fails when handed pixel_values=None; a prompt without images must not pass it.
    model, processor = tiny
    eng = JudgeEngine(
        model, processor, JudgeSpec("tiny", rubric, "rationale_score"), rationale=True, max_new_tokens=4
    )
    rec = PredictionRecord(id="t", benchmark="mmie", task="SA", question="A story?", response="Once upon.")
    (done,) = [p for group in eng.score_prepared([eng.prepare(rec, ["overall"])]) for p in group]
    (s,) = done.records or []
    assert s.status == "ok" and s.score is not None and s.details and "rationale" in s.details


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_scoring_passes_no_argument_transformers_deprecated(records, dtype):
    """transformers 5.24 renamed the forward's ``past_key_values`` to ``cache`` and warns on every call with the
    old name (to be removed in 5.40): no scoring path may trigger that warning, or any other deprecation."""
    import warnings

    import judge

    for options in ({"share_prefix": True}, {"share_prefix": False}, {"reproducible": True}):
        j = judge.Judge.load("tiny", rubric="mmie", dtype=dtype, **options)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert len(j.score_records(records[:2])) == 14
        deprecations = [
            str(w.message) for w in caught if issubclass(w.category, DeprecationWarning | FutureWarning)
        ]
        assert deprecations == [], (options, deprecations)
    j = judge.Judge.load("tiny", rubric="mmie", dtype=dtype, rationale=True, max_new_tokens=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        j.score_records(records[:1])
    deprecations = [
        str(w.message) for w in caught if issubclass(w.category, DeprecationWarning | FutureWarning)
    ]
    assert deprecations == [], deprecations


def test_float32_readout_is_used_for_bf16_weights_and_checks_itself(records, small_demo):
    """bf16 weights: the score is read in float32, so the rounding of the logits no longer amplifies the
    hidden states' own rounding: the shared-prefix and unshared paths (different float orders) disagree less
    than with the model's own bf16 logits (not closer to the float32 model, which differs in every hidden
    state: on this set both are 0.18 away in all). A head the read-out does not model (here its logits
    tripled, as a logit scale would) fails the first batch's check: the model's own logits are read
    instead, with a warning."""
    import logging

    import judge

    fp32 = judge.Judge.load("tiny", rubric="mmie", dtype="float32")
    assert fp32.engine.scorer._head is None  # float32 weights: nothing to gain

    def bf16(share_prefix: bool, head: bool):
        j = judge.Judge.load("tiny", rubric="mmie", dtype="bfloat16", share_prefix=share_prefix)
        if not head:
            j.engine.scorer._head = None
        return j

    # 18 responses (126 scores): on a handful the sums are close enough for rounding to order them.
    many = load_inputs([small_demo]).records[:18]
    ours, plain = bf16(True, head=True), bf16(True, head=False)
    assert ours.engine.scorer._head.usable

    def path_gap(shared, unshared) -> float:
        a = {(r.id, r.criterion): r.score for r in shared.score_records(many)}
        b = {(r.id, r.criterion): r.score for r in unshared.score_records(many)}
        return sum(abs(a[k] - b[k]) for k in a)

    gap_ours = path_gap(ours, bf16(False, head=True))
    gap_own = path_gap(plain, bf16(False, head=False))
    assert 0 < gap_ours < 0.85 * gap_own, (gap_ours, gap_own)  # measured: 0.054 against 0.076

    scaled = judge.Judge.load("tiny", rubric="mmie", dtype="bfloat16")
    head = scaled.engine.scorer._head
    for j in (scaled, plain):
        j.engine.scorer.model.lm_head.register_forward_hook(lambda _m, _a, out: out * 3)
    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("judge.models.float32_head")
    log.addHandler(handler)
    try:
        got = {(r.id, r.criterion): r.score for r in scaled.score_records(records)}
    finally:
        log.removeHandler(handler)
    assert not head.usable and any("reading its own logits instead" in m for m in messages)
    assert got == {(r.id, r.criterion): r.score for r in plain.score_records(records)}
