"""CLIPScore with the seeded tiny random CLIP: the definition, torchmetrics equality, pairing rules."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from judge.core.errors import ConfigError
from judge.core.schema import AnnotationRecord, PredictionRecord
from judge.eval.clipscore import (
    clip_s,
    clipscore_records,
    image_text_pairs,
    load_clip,
    ref_clip_s,
    with_prefix,
)


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    from judge.testing.tiny_clip import save_tiny_clip

    # Seed 3: its random cosines take both signs here, so the clamp at 0 is exercised (seed 0's are all < 0).
    return save_tiny_clip(tmp_path_factory.mktemp("tiny_clip"), seed=3)


@pytest.fixture(scope="module")
def enc(clip_dir):
    """The tiny CLIP loaded back from its folder, as any CLIP checkpoint loads."""
    return load_clip(str(clip_dir))


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    d = tmp_path_factory.mktemp("pics")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(5):
        arr = rng.integers(0, 256, (40 + 8 * i, 56, 3), dtype=np.uint8)
        p = d / f"p{i}.png"
        Image.fromarray(arr).save(p)
        paths.append(str(p))
    return paths


def _rec(response, reference=None, rid="r1", kind=AnnotationRecord):
    fields = dict(
        id=rid,
        task="MSR" if reference else "SA",
        question=[{"type": "text", "text": "Q?"}],
        response=response,
        reference=reference,
    )
    if kind is AnnotationRecord:
        return AnnotationRecord(**fields, scores={"overall": 3})
    return PredictionRecord(**fields, benchmark="mmie")


def test_tiny_clip_saves_and_loads_through_clipmodel(clip_dir, enc):
    from judge.testing.tiny_clip import build_tiny_clip

    assert (clip_dir / "config.json").is_file() and (clip_dir / "model.safetensors").is_file()
    model, processor = build_tiny_clip(seed=3)
    assert type(enc.image_processor).__name__ == "CLIPImageProcessorPil"  # no torchvision needed
    assert enc.max_length == 77
    ids = enc.tokenizer(["a red circle"])["input_ids"][0]
    assert ids[0] == enc.tokenizer.bos_token_id and ids[-1] == enc.tokenizer.eos_token_id
    with torch.inference_mode():
        t = processor.tokenizer(["a red circle"], return_tensors="pt")
        direct = model.get_text_features(**t).pooler_output
    loaded = enc.embed_texts(["a red circle"])
    assert torch.allclose(loaded, direct / direct.norm(dim=-1, keepdim=True), atol=1e-6)


def test_equals_torchmetrics_clipscore_after_scale_and_clamp_order(enc, pictures):
    from torchmetrics.multimodal.clip_score import CLIPScore

    class Features(torch.nn.Module):
        """torchmetrics 1.9 expects tensors from get_*_features; transformers 5 returns a ModelOutput."""

        def __init__(self, model):
            super().__init__()
            self.model, self.config = model, model.config

        def get_image_features(self, *a, **k):
            return self.model.get_image_features(*a, **k).pooler_output

        def get_text_features(self, *a, **k):
            return self.model.get_text_features(*a, **k).pooler_output

    processor = __import__("transformers").CLIPProcessor(
        image_processor=enc.image_processor, tokenizer=enc.tokenizer
    )
    texts = ["a red circle", "three blue squares on a table", "the answer is 7", "a story", "two stars"]
    response = [
        seg
        for p, t in zip(pictures, texts, strict=True)
        for seg in ({"type": "text", "text": t}, {"type": "image", "image": p})
    ]
    rec = clipscore_records([_rec(response)], enc)[0]
    pairs = rec.details["pairs"]
    assert [p["text"] for p in pairs] == texts  # each image with the text just before it

    def tm_score(idx):
        metric = CLIPScore(model_name_or_path=lambda: (Features(enc.model), processor))
        imgs = [
            torch.from_numpy(np.array(Image.open(pictures[i]).convert("RGB"))).permute(2, 0, 1) for i in idx
        ]
        metric.update(imgs, [with_prefix(texts[i]) for i in idx])
        return float(metric.compute())

    cos = np.array([p["cosine"] for p in pairs])
    assert (cos > 0).any() and (cos < 0).any(), cos  # both sides of the clamp
    for i in range(5):  # one pair: torchmetrics = max(100 cos, 0) = CLIP-S * 100 / 2.5
        assert tm_score([i]) == pytest.approx(pairs[i]["score"] * 100 / 2.5, abs=1e-3)
        assert pairs[i]["score"] == pytest.approx(clip_s(cos[i]))
    # A batch: torchmetrics averages first and clamps after; CLIPScore clamps each pair, then averages.
    assert tm_score(range(5)) == pytest.approx(max(100 * cos.mean(), 0), abs=1e-3)
    assert rec.score == pytest.approx(np.mean(2.5 * np.maximum(cos, 0)), abs=1e-9)


def test_pairing_rules():
    content = AnnotationRecord(
        id="x",
        task="SA",
        question="q",
        scores={"overall": 1},
        response=[
            {"type": "image", "image": "/i0.png"},
            {"type": "text", "text": "first"},
            {"type": "image", "image": "/i2.png"},
            {"type": "text", "text": "second"},
            {"type": "text", "text": "  "},
            {"type": "text", "text": "third"},
            {"type": "image", "image": "/i6.png"},
            {"type": "image", "image": "/i7.png"},
            {"type": "text", "text": "last"},
        ],
    ).response
    pairs, reason = image_text_pairs(content, "neighbour")
    assert reason is None
    assert [(p.image, p.text) for p in pairs] == [
        ("/i0.png", "first"),  # nothing before it: the text after
        ("/i2.png", "first"),
        ("/i6.png", "second third"),  # consecutive text segments form one block; blank text is ignored
        ("/i7.png", "second third"),  # follows an image: still the last text before it
    ]
    whole, _ = image_text_pairs(content, "whole")
    assert {p.text for p in whole} == {"first second third last"} and len(whole) == 4
    assert image_text_pairs([], "neighbour") == (
        [],
        "the response has no images; CLIPScore compares images with text",
    )
    with pytest.raises(ValueError, match="pairing"):
        image_text_pairs(content, "nearest")


def test_unscorable_responses_get_null_with_the_reason(enc, pictures):
    recs = [
        _rec([{"type": "text", "text": "only words"}], rid="no-image"),
        _rec([{"type": "image", "image": pictures[0]}], rid="no-text"),
        _rec(
            [{"type": "text", "text": "see"}, {"type": "image", "image": pictures[0] + ".missing.png"}],
            rid="broken",
        ),
        _rec(
            [{"type": "text", "text": "fine"}, {"type": "image", "image": pictures[1]}],
            rid="ok",
            kind=PredictionRecord,
        ),
    ]
    out = {r.id: r for r in clipscore_records(recs, enc)}
    assert len(out) == 4  # none dropped
    assert out["no-image"].score is None and out["no-image"].status == "unscorable"
    assert "no images" in out["no-image"].reason
    assert out["no-text"].score is None and "no text" in out["no-text"].reason
    assert out["broken"].score is None and "missing.png" in out["broken"].reason
    ok = out["ok"]
    assert (
        ok.score is not None and ok.metric == "clipscore" and ok.criterion is None and ok.benchmark == "mmie"
    )
    assert ok.producer["metric"] == "clipscore" and ok.producer["pairing"] == "neighbour"
    assert ok.producer["clip_model"] == enc.name
    json.loads(ok.model_dump_json())  # serialisable as a score record


def test_refclipscore_is_the_harmonic_mean(enc, pictures):
    assert ref_clip_s(0.4, [0.2, 0.5]) == pytest.approx(2 * 1.0 * 0.5 / 1.5)  # HM(2.5 * 0.4, max ref 0.5)
    assert ref_clip_s(-0.1, [0.9]) == 0.0 and ref_clip_s(0.3, [-0.2]) == 0.0

    with_ref = _rec(
        [
            {"type": "text", "text": "I count 7."},
            {"type": "image", "image": pictures[2]},
            {"type": "text", "text": "Final answer: 7."},
            {"type": "image", "image": pictures[3]},
        ],
        reference=[{"type": "text", "text": "The answer is 7."}],
        rid="m1",
    )
    without = _rec([{"type": "text", "text": "a story"}, {"type": "image", "image": pictures[4]}], rid="s1")
    out = clipscore_records([with_ref, without], enc, pairing="neighbour")
    # RefCLIPScore only where there is a reference
    assert [(r.id, r.metric) for r in out] == [
        ("m1", "clipscore"),
        ("m1", "refclipscore"),
        ("s1", "clipscore"),
    ]
    ref = out[1]
    # by hand from the cosines: each pair's text against the reference, both with the prefix
    ref_emb = enc.embed_texts([with_prefix("The answer is 7.")])[0]
    want = []
    for p in ref.details["pairs"]:
        rc = float(enc.embed_texts([with_prefix(p["text"])])[0] @ ref_emb)
        assert p["ref_cosines"][0] == pytest.approx(rc, abs=1e-5)
        a, b = 2.5 * max(p["cosine"], 0), max(rc, 0)
        want.append(0.0 if a <= 0 or b <= 0 else 2 * a * b / (a + b))
    assert ref.score == pytest.approx(np.mean(want), abs=1e-5)


def test_long_texts_are_truncated_to_the_text_encoder(enc):
    long = " ".join(["a red circle next to a blue square"] * 30)
    a, b = enc.embed_texts([with_prefix(long), with_prefix(long + " and then something else entirely")])
    assert torch.allclose(a, b, atol=1e-6)
    assert (
        len(enc.tokenizer(with_prefix(long), truncation=True, max_length=enc.max_length)["input_ids"]) == 77
    )


def test_load_clip_refuses_what_is_not_a_clip(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_clip(str(tmp_path / "nowhere"))
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ConfigError, match="no .safetensors weights"):
        load_clip(str(tmp_path / "bert"))
    (tmp_path / "bert" / "model.safetensors").write_bytes(b"")  # the config is read first
    with pytest.raises(ConfigError, match="CLIP checkpoint"):
        load_clip(str(tmp_path / "bert"))
    assert load_clip("tiny").name == "tiny"
