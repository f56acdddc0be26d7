"""The packed shared-prefix path (judge.models.packed): one forward pass per packed row under a prefix-tree
mask gives the scores of the KV-copy path and of the unshared path, with images, several responses a row."""

from __future__ import annotations

import random

import pytest
import torch

from judge.core.errors import ConfigError
from judge.core.template import build_judge_prompt
from judge.models.batching import batch_cost, kept_prefix_len, plan_batches, real_tokens
from judge.models.packed import dense_mask, pack_row, prefix_tree_mask, resolve_packed
from judge.models.readout import Encoded, ExpectedScorer, ScoreRequest

pytestmark = pytest.mark.usefixtures("one_thread")


def requests(rubric, n: int = 7) -> list[ScoreRequest]:
    """Responses of the three families, 0-2 images of several sizes, lengths that differ; the last one asks
    a single criterion (its whole prompt is the common prefix: the path must keep one token back)."""
    from PIL import Image

    rng = random.Random(0)
    out = []
    for i in range(n):
        family = ("SA", "PBL", "MSR")[i % 3]
        crits = rubric.families[family].criterion_ids if i < n - 1 else ["overall"]
        images = [
            Image.new("RGB", (40 + 24 * j + 8 * i, 36 + 10 * j), (rng.randrange(256), 90, 30 * j))
            for j in range(i % 3)
        ]
        content = [{"type": "text", "text": "the answer " * (6 + 5 * i)}]
        content += [{"type": "image", "image": f"img{j}.png"} for j in range(len(images))]
        prompts = [
            build_judge_prompt(rubric, family, c, f"question {i}?", content, None, "score").messages
            for c in crits
        ]
        out.append(ScoreRequest(key=i, criteria=list(crits), prompts=prompts, images=images))
    return out


def by_key(results) -> dict:
    return {(r.key, c): s for r, scores in results for c, s in zip(r.criteria, scores, strict=True)}


def test_the_mask_lets_a_suffix_see_its_prefix_and_itself_only(tiny, rubric):
    model, processor = tiny
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    encoded = [scorer.encode(r) for r in requests(rubric, 3)]
    row = pack_row(encoded)
    mask = dense_mask(row)
    spans = []  # (request, start, end, is_prefix) of each segment, in row order
    at = 0
    for r, e in enumerate(encoded):
        p = kept_prefix_len(e)
        spans.append((r, at, at + p, True))
        at += p
        for ids in e.input_ids:
            spans.append((r, at, at + len(ids) - p, False))
            at += len(ids) - p
    assert (
        at
        == row.length
        == sum(len(e.input_ids[0][: kept_prefix_len(e)]) for e in encoded)
        + sum(len(x) - kept_prefix_len(e) for e in encoded for x in e.input_ids)
    )
    for rq, a, b, is_prefix in spans:
        for rk, c, d, k_prefix in spans:
            block = mask[a:b, c:d]
            if (rq, a) == (rk, c):  # the segment itself: causal
                assert torch.equal(block, torch.ones(b - a, d - c, dtype=torch.bool).tril())
            elif rq == rk and k_prefix and not is_prefix:  # a suffix sees all of its own request's prefix
                assert block.all()
            else:  # another request, another suffix, or a prefix looking ahead: nothing
                assert not block.any()
    # Positions restart after the prefix for every suffix; the score is read at each suffix's last token.
    for rq, a, b, is_prefix in spans:
        p = kept_prefix_len(encoded[rq])
        assert row.position_ids[0, a:b].tolist() == list(
            range(0 if is_prefix else p, (0 if is_prefix else p) + b - a)
        )
    assert row.readout.tolist() == [b - 1 for _, _, b, is_prefix in spans if not is_prefix]
    # The block mask FlexAttention runs is the same mask (checked through its own mask function).
    block = prefix_tree_mask(row, torch.device("cpu"))
    q = torch.arange(row.length)[:, None]
    assert torch.equal(block.mask_mod(0, 0, q, torch.arange(row.length)[None, :]), mask)


def full_blocks(mask) -> torch.Tensor:
    """(query blocks, key blocks) True where a BlockMask holds a block as full (no mask to evaluate)."""
    dense = torch.zeros_like(mask.to_dense()[0, 0], dtype=torch.bool)
    num, idx = mask.full_kv_num_blocks[0, 0], mask.full_kv_indices[0, 0]
    for i in range(num.shape[0]):
        dense[i, idx[i, : num[i]].long()] = True
    return dense


def test_the_block_mask_is_the_one_flexattention_would_build(tiny):
    """prefix_tree_mask builds the block structure from the segments' ends; torch's create_block_mask
    evaluates the mask function on every pair. The blocks any query sees must be the same, and a block it
    calls full (skipping the mask function) must be full by torch's count too."""
    from torch.nn.attention.flex_attention import create_block_mask

    from judge.models.packed import prefix_tree_mask_mod
    from judge.models.readout import _common_prefix_len

    rng = random.Random(3)
    for _ in range(12):
        batch = []
        for _ in range(rng.randint(1, 4)):
            prefix = [rng.randrange(5, 900) for _ in range(rng.randint(1, 300))]
            ids = [
                prefix + [rng.randrange(5, 900) for _ in range(rng.randint(1, 200))]
                for _ in range(rng.randint(1, 7))
            ]
            if rng.random() < 0.3:
                ids.append(list(prefix))  # a prompt that is the prefix itself: one token kept back
            batch.append(Encoded(None, ids, None, _common_prefix_len(ids)))
        row = pack_row(batch)
        ours = prefix_tree_mask(row, torch.device("cpu"))
        ref = create_block_mask(
            prefix_tree_mask_mod(row.segment, row.request, row.in_prefix), None, None, row.length, row.length
        )
        assert torch.equal(ours.to_dense(), ref.to_dense())
        assert not (full_blocks(ours) & ~full_blocks(ref)).any()
        assert full_blocks(ours).sum() >= full_blocks(ref).sum() - 2


def test_a_packed_row_has_no_padding_and_obeys_the_budget(tiny, rubric):
    model, processor = tiny
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    encoded = [scorer.encode(r) for r in requests(rubric)]
    one = [batch_cost([e], True, packed=True) for e in encoded]
    assert one == [pack_row([e]).length for e in encoded]
    budget = sum(sorted(one)[-3:])
    batches = plan_batches(encoded, batch_tokens=budget, packed=True)
    assert sorted(i for b in batches for i in b) == list(range(len(encoded)))
    for b in batches:
        members = [encoded[i] for i in b]
        assert batch_cost(members, True, True) == real_tokens(members, True, True) == pack_row(members).length
        assert len(b) == 1 or batch_cost(members, True, True) <= budget
    assert any(len(b) > 1 for b in batches)


@pytest.mark.slow  # the first packed pass compiles FlexAttention's CPU kernel (about a minute on 2 cores)
def test_packed_scores_equal_the_kv_copy_and_the_unshared_path(tiny, rubric):
    model, processor = tiny
    reqs = requests(rubric)
    kv = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    packed = ExpectedScorer(model, processor, rubric.scale.values, packed="flex")
    assert packed.packed and not kv.packed

    lm = model.model.language_model
    calls: list[int] = []
    handle = lm.register_forward_pre_hook(lambda _m, args, kwargs: calls.append(1), with_kwargs=True)
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    try:
        got_batches = list(packed.score(reqs, batch_tokens=1500))
        n_packed_calls = len(calls)
        # FlexAttention compiles once for rows of every length and every mask (dynamic shapes), not per row.
        assert len(got_batches) >= 3
        assert counters["stats"]["unique_graphs"] - graphs <= 1
        calls.clear()
        ref_batches = list(kv.score(reqs, batch_tokens=1500))
        n_kv_calls = len(calls)
    finally:
        handle.remove()
    # Several responses in a row, and one forward pass per row (the KV copy runs two per batch).
    assert any(len(b) > 1 for b in got_batches) and n_packed_calls == len(got_batches)
    assert n_kv_calls == 2 * len(ref_batches)

    got, ref = (
        by_key(b for batch in got_batches for b in batch),
        by_key(b for batch in ref_batches for b in batch),
    )
    unshared = by_key(b for batch in kv.score(reqs, share_prefix=False) for b in batch)
    assert got.keys() == ref.keys() == unshared.keys() and len(got) == 6 * 7 + 1
    for k in ref:
        for other in (ref[k], unshared[k]):
            assert abs(got[k].expected - other.expected) < 1e-5, k
            assert (
                max(abs(p - q) for p, q in zip(got[k].distribution, other.distribution, strict=True)) < 1e-5
            )
            assert got[k].num_tokens == other.num_tokens
    # The packed pass leaves the model as it was: its language model's attention is its own again.
    assert model.config.text_config._attn_implementation == "sdpa"

    # Through the engine and the API setting: a whole demo workload, packed against the KV copy.
    import judge

    records = [
        {
            "id": f"q{i}",
            "benchmark": "mmie",
            "task": "SA",
            "model": "m",
            "question": "q?",
            "response": "a " * i,
        }
        for i in range(1, 6)
    ]
    flex = judge.Judge.load("tiny", rubric="mmie", packed="flex")
    off = judge.Judge.load("tiny", rubric="mmie", packed="off")
    assert flex.engine.scorer.packed and flex.engine.packed and not off.engine.scorer.packed
    a = {(r.id, r.criterion): r.score for r in flex.score_records(records)}
    b = {(r.id, r.criterion): r.score for r in off.score_records(records)}
    assert a.keys() == b.keys() and max(abs(a[k] - b[k]) for k in a) < 1e-5


@pytest.mark.slow
def test_auto_falls_back_to_the_kv_copy_when_the_packed_pass_cannot_run(tiny, rubric, monkeypatch, capsys):
    """``auto`` promises the KV-copy path where FlexAttention cannot run: a kernel that fails to build is
    reported once and the scores are the KV copy's; ``flex`` asked for outright raises instead."""
    import judge.models.packed as packed_mod

    model, processor = tiny
    reqs = requests(rubric, 3)
    ref = by_key(
        b
        for batch in ExpectedScorer(model, processor, rubric.scale.values, packed="off").score(reqs)
        for b in batch
    )

    def broken():
        def kernel(*_a, **_k):
            raise RuntimeError("inductor: no working C++ compiler")

        return kernel

    monkeypatch.setattr(packed_mod, "flex_attention_compiled", broken)
    auto = ExpectedScorer(model, processor, rubric.scale.values, packed="auto")
    auto.packed = True  # what auto resolves to on a GPU; the CPU's auto is the KV copy
    got = by_key(b for batch in auto.score(reqs) for b in batch)
    assert not auto.packed and got.keys() == ref.keys()
    assert all(got[k].expected == ref[k].expected for k in ref)
    assert "scoring on copies of the prefix's KV cache instead" in capsys.readouterr().err
    assert model.config.text_config._attn_implementation == "sdpa"
    flex = ExpectedScorer(model, processor, rubric.scale.values, packed="flex")
    with pytest.raises(RuntimeError, match="no working C"):
        list(flex.score(reqs))
    monkeypatch.setenv("JUDGE_PACKED", "flex")  # asked for outright in the environment: no fallback either
    with pytest.raises(RuntimeError, match="no working C"):
        list(ExpectedScorer(model, processor, rubric.scale.values).score(reqs))
    assert model.config.text_config._attn_implementation == "sdpa"


def test_the_setting_is_checked_and_auto_keeps_the_kv_copy_on_the_cpu(tiny, rubric, monkeypatch):
    model, processor = tiny
    cpu = torch.device("cpu")
    assert resolve_packed("auto", model, cpu) is False
    assert resolve_packed("off", model, cpu) is False
    assert resolve_packed("flex", model, cpu) is True
    with pytest.raises(ConfigError, match="packed=fast is not one of auto, flex, off"):
        resolve_packed("fast", model, cpu)
    monkeypatch.setenv("JUDGE_PACKED", "Flex")
    assert ExpectedScorer(model, processor, rubric.scale.values).packed is True
    monkeypatch.setenv("JUDGE_PACKED", "always")
    with pytest.raises(ConfigError, match="JUDGE_PACKED=always is not one of"):
        ExpectedScorer(model, processor, rubric.scale.values)
    monkeypatch.setenv("JUDGE_PACKED", "flex")
    with pytest.raises(ConfigError, match="runs on a CUDA GPU or the CPU, not meta"):
        resolve_packed(None, model, torch.device("meta"))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match="needs a C\\+\\+ compiler"):
        resolve_packed("flex", model, cpu)
    assert resolve_packed("auto", model, cpu) is False


def test_judge_score_names_a_bad_packed_value(tmp_path, capsys):
    from judge.cli.score import main

    with pytest.raises(SystemExit) as e:
        main(["x.jsonl", "--judge", "tiny", "--rubric", "mmie", "--packed", "fast", "--out", str(tmp_path)])
    assert e.value.code == 2
    assert "--packed" in capsys.readouterr().err
