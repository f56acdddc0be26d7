"""bench_score's judge and workload: the model shapes (4B-class and tiny InternVL; Qwen2.5-VL-3B and tiny
Qwen2.5-VL from ``_bench_qwen``), a randomly initialised judge built from them, its parameter and FLOP counts
(the formula is in ``bench_score.py``'s doc; the Qwen ViT's in ``_bench_qwen``'s), and the seeded synthetic
workload. ``bench_train``, ``bench_repro`` and ``bench_e2e`` use the same ones."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

import _bench_qwen
from _bench_qwen import QWEN_SHAPES

FILLER_WORDS = (
    "the story then shows a small red house near green trees while two children walk to the river and count "
    "seven stones one by one before the light fades so they build a fire and talk about the next day first "
    "cut the paper into squares then fold each square twice and glue the corners together carefully the "
    "answer is twelve because three rows of four make twelve in total picture matches text colour blue yellow "
    "method step clear practical creative image shows circle square triangle star friend forest morning"
).split()


# ----------------------------------------------------------------------------- model shapes
@dataclass(frozen=True)
class Shape:
    """The judge's shapes: an InternViT-style vision tower, the pixel-shuffle projector, a Qwen2 LM."""

    name: str
    vocab_size: int  #: the model's vocabulary (the embedding may be larger than the tokenizer)
    text_hidden: int
    text_layers: int
    text_heads: int
    text_kv_heads: int
    text_intermediate: int
    tie_word_embeddings: bool
    vision_hidden: int
    vision_layers: int
    vision_heads: int
    vision_intermediate: int
    vision_attention_bias: bool
    image_size: int
    patch_size: int
    max_positions: int
    rope_theta: float = 1_000_000.0

    @property
    def tile_tokens(self) -> int:
        """Language-model tokens one image tile becomes (pixel shuffle at ratio 0.5)."""
        return (self.image_size // self.patch_size) ** 2 // 4


SHAPES = {
    # InternViT-300M (InternVL2/3's 300M tower: 1024 wide, 24 layers, 16 heads, MLP 4096, qkv bias) at 448 px,
    # and a 3.6B Qwen2-class LM (Qwen3-4B's widths with Qwen2 blocks: 2560 wide, 36 layers, 20 heads of 128,
    # 4 KV heads, MLP 9728, Qwen2.5's 151,936-token vocabulary, tied embeddings as in Qwen2.5-3B).
    "4b": Shape(
        "4b",
        vocab_size=151_936,
        text_hidden=2560,
        text_layers=36,
        text_heads=20,
        text_kv_heads=4,
        text_intermediate=9728,
        tie_word_embeddings=True,
        vision_hidden=1024,
        vision_layers=24,
        vision_heads=16,
        vision_intermediate=4096,
        vision_attention_bias=True,
        image_size=448,
        patch_size=14,
        max_positions=32_768,
    ),
    # The tests' tiny judge (judge.testing.tiny.TinySpec's shapes).
    "tiny": Shape(
        "tiny",
        vocab_size=3000,
        text_hidden=128,
        text_layers=4,
        text_heads=4,
        text_kv_heads=2,
        text_intermediate=256,
        tie_word_embeddings=True,
        vision_hidden=64,
        vision_layers=2,
        vision_heads=2,
        vision_intermediate=128,
        vision_attention_bias=False,
        image_size=56,
        patch_size=14,
        max_positions=8192,
    ),
}
# The tiny judge with the 4B shape's 36 language-model layers: how bf16 round-off grows with depth, on the CPU
# (issue 42, Part A.2). Widths stay tiny so that a float32 reference and every path run in minutes.
SHAPES["tiny36"] = dataclasses.replace(SHAPES["tiny"], name="tiny36", text_layers=36)
# Qwen2.5-VL beside them (issue 42, Part A.4): the 3B's shape and the tiny model's.
SHAPES.update(QWEN_SHAPES)  # type: ignore[arg-type]


def is_qwen(config) -> bool:
    return config.model_type == "qwen2_5_vl"


def model_class(config):
    """The model class of a bench config (InternVL or Qwen2.5-VL)."""
    if is_qwen(config):
        return _bench_qwen.model_class()
    from transformers import InternVLForConditionalGeneration

    return InternVLForConditionalGeneration


def image_tokens(processor) -> int:
    """Prompt tokens one workload image becomes (an InternVL tile, or a typical Qwen image), markers included."""
    n = getattr(processor, "image_seq_length", None)
    return n + 2 if n is not None else _bench_qwen.image_tokens(processor)


def build_processor(shape: Shape, max_tiles: int, rubric="mmie"):
    """The tiny judge's tokenizer (trained on the rubric's prompts) with a processor at the shape's tile size
    (a Qwen shape: at its pixel bounds; ``max_tiles`` does not apply)."""
    if isinstance(shape, _bench_qwen.QwenShape):
        return _bench_qwen.build_processor(shape, rubric)
    from judge.models.loading import build_tiny_processor
    from judge.testing.tiny import TinySpec

    spec = TinySpec(image_size=shape.image_size, patch_size=shape.patch_size, max_tiles=max_tiles)
    processor = build_tiny_processor(spec, rubric)
    assert processor.image_seq_length == shape.tile_tokens, (processor.image_seq_length, shape.tile_tokens)
    return processor


def build_config(shape: Shape, processor):
    """An ``InternVLConfig`` (or ``Qwen2_5_VLConfig``) of ``shape`` whose special tokens are the processor's
    (vocab padded up)."""
    if isinstance(shape, _bench_qwen.QwenShape):
        return _bench_qwen.build_config(shape, processor)
    from transformers import InternVLConfig

    tok = processor.tokenizer
    return InternVLConfig(
        vision_config=dict(
            hidden_size=shape.vision_hidden,
            num_hidden_layers=shape.vision_layers,
            num_attention_heads=shape.vision_heads,
            intermediate_size=shape.vision_intermediate,
            image_size=shape.image_size,
            patch_size=shape.patch_size,
            attention_bias=shape.vision_attention_bias,
        ),
        text_config=dict(
            model_type="qwen2",
            vocab_size=max(shape.vocab_size, len(tok)),
            hidden_size=shape.text_hidden,
            num_hidden_layers=shape.text_layers,
            num_attention_heads=shape.text_heads,
            num_key_value_heads=shape.text_kv_heads,
            intermediate_size=shape.text_intermediate,
            max_position_embeddings=shape.max_positions,
            rope_theta=shape.rope_theta,
            tie_word_embeddings=shape.tie_word_embeddings,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            bos_token_id=None,
        ),
        image_token_id=processor.image_token_id,
        image_seq_length=processor.image_seq_length,
        downsample_ratio=0.5,
        tie_word_embeddings=shape.tie_word_embeddings,
    )


def build_model(config, processor, device: str, dtype, attn: str, seed: int = 0):
    """A randomly initialised model, created directly on ``device`` in ``dtype`` (no fp32 copy on the host)."""
    import torch

    torch.manual_seed(seed)
    with torch.device(device):
        model = model_class(config)._from_config(config, dtype=dtype, attn_implementation=attn)
    model.generation_config.eos_token_id = processor.tokenizer.eos_token_id
    model.generation_config.pad_token_id = processor.tokenizer.pad_token_id
    return model.eval()


@dataclass(frozen=True)
class FlopModel:
    """The FLOP count of the module docstring, from the model's real parameter counts."""

    lm_params: int  #: decoder layers + final norm (non-embedding)
    lm_layers: int
    attn_dim: int  #: heads * head_dim
    head_params: int  #: d_model * vocab (the LM head's matmul, tied or not)
    vit_params: int
    vit_layers: int
    vit_dim: int
    vit_tokens: int  #: per tile, class token included
    proj_params: int
    tile_tokens: int  #: LM tokens per tile

    def lm(self, new: int, cached: int = 0, logits: int = 1) -> float:
        ctx = new * cached + new * (new + 1) / 2
        return (
            2.0 * self.lm_params * new
            + 4.0 * self.lm_layers * self.attn_dim * ctx
            + 2.0 * self.head_params * logits
        )

    def lm_attention(self, new: int, cached: int = 0) -> float:
        return 4.0 * self.lm_layers * self.attn_dim * (new * cached + new * (new + 1) / 2)

    def vision_input(self, pixel_values, extra) -> float:
        """F_vit of one forward pass's images, from what the processor gave (InternVL: a row per tile)."""
        return 0.0 if pixel_values is None else self.vision(int(pixel_values.shape[0]))

    def vision(self, tiles: int) -> float:
        per_tile = (
            2.0 * self.vit_params * self.vit_tokens
            + 4.0 * self.vit_layers * self.vit_dim * self.vit_tokens**2
            + 2.0 * self.proj_params * self.tile_tokens
        )
        return tiles * per_tile


def param_counts(config) -> dict[str, int]:
    """Parameter counts by part, from a model built on the meta device (no memory, no init)."""
    import torch

    with torch.device("meta"):
        m = model_class(config)(config)
    out = {"vision_tower": 0, "projector": 0, "lm_embedding": 0, "lm_layers": 0, "lm_head_untied": 0}
    for name, p in m.named_parameters():  # tied weights are listed once
        if "multi_modal_projector" in name or "visual.merger." in name:
            key = "projector"
        elif ".vision_tower." in f".{name}" or ".visual." in f".{name}":
            key = "vision_tower"
        elif "embed_tokens" in name:
            key = "lm_embedding"
        elif name.startswith("lm_head"):
            key = "lm_head_untied"
        else:
            key = "lm_layers"
        out[key] += p.numel()
    out["language_model"] = out["lm_embedding"] + out["lm_layers"] + out["lm_head_untied"]
    out["total"] = sum(out[k] for k in ("vision_tower", "projector", "language_model"))
    return out


def flop_model(config, counts: dict[str, int]) -> FlopModel:
    if is_qwen(config):
        return _bench_qwen.flop_model(config, counts)  # type: ignore[return-value]
    t, v = config.text_config, config.vision_config
    head_dim = getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads
    image = v.image_size[0] if isinstance(v.image_size, list | tuple) else v.image_size
    patch = v.patch_size[0] if isinstance(v.patch_size, list | tuple) else v.patch_size
    return FlopModel(
        lm_params=counts["lm_layers"],
        lm_layers=t.num_hidden_layers,
        attn_dim=t.num_attention_heads * head_dim,
        head_params=t.hidden_size * t.vocab_size,
        vit_params=counts["vision_tower"],
        vit_layers=v.num_hidden_layers,
        vit_dim=v.hidden_size,
        vit_tokens=(image // patch) ** 2 + 1,
        proj_params=counts["projector"],
        tile_tokens=config.image_seq_length,
    )


def attn_used(model) -> dict:
    """The attention implementation each part of a loaded model really uses."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = base.config
    return {
        part: getattr(c, "_attn_implementation", None)
        for part, c in (("text", cfg.text_config), ("vision", cfg.vision_config))
    }


def describe(shape: Shape, config, counts: dict[str, int]) -> dict:
    t, v = config.text_config, config.vision_config
    qwen = isinstance(shape, _bench_qwen.QwenShape)
    return {
        "shape": shape.name,
        "vision": _bench_qwen.describe_vision(shape, config)
        if qwen
        else {
            "hidden": v.hidden_size,
            "layers": v.num_hidden_layers,
            "heads": v.num_attention_heads,
            "intermediate": v.intermediate_size,
            "image_size": shape.image_size,
            "patch_size": shape.patch_size,
            "attention_bias": v.attention_bias,
            "tokens_per_tile": config.image_seq_length,
        },
        "language": {
            "type": t.model_type,
            "hidden": t.hidden_size,
            "layers": t.num_hidden_layers,
            "heads": t.num_attention_heads,
            "kv_heads": t.num_key_value_heads,
            "intermediate": t.intermediate_size,
            "vocab": t.vocab_size,
            "tie_word_embeddings": config.tie_word_embeddings if qwen else shape.tie_word_embeddings,
        },
        "params": counts,
    }


def print_description(d: dict) -> None:
    v, lm, p = d["vision"], d["language"], d["params"]
    images = (
        f"at {v['image_size']} px / patch {v['patch_size']} -> {v['tokens_per_tile']} tokens per tile"
        if "tokens_per_tile" in v
        else f"patch {v['patch_size']}, windows of {v['window_size']} px, merge {v['merge_size']}, "
        f"{v['min_pixels']}-{v['max_pixels']} pixels an image"
    )
    print(
        f"shape {d['shape']}: vision {v['layers']}x{v['hidden']} (heads {v['heads']}, MLP {v['intermediate']}) "
        f"{images}; "
        f"LM {lm['type']} {lm['layers']}x{lm['hidden']} (heads {lm['heads']}, kv {lm['kv_heads']}, "
        f"MLP {lm['intermediate']}, vocab {lm['vocab']}, tied {lm['tie_word_embeddings']})"
    )
    print("params: " + ", ".join(f"{k} {_human(n)}" for k, n in p.items()))


def _human(n: float) -> str:
    for unit, f in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= f:
            return f"{n / f:.3g}{unit}"
    return f"{n:g}"


# ----------------------------------------------------------------------------- workload
@dataclass
class Item:
    """One synthetic response: its content (images as placeholders), its PIL images, its task family."""

    key: str
    family: str
    question: list
    response: list
    reference: list | None
    images: list
    score: int  #: a target score for training examples


def _words(rng, n: int) -> str:
    return " ".join(FILLER_WORDS[i] for i in rng.integers(0, len(FILLER_WORDS), size=n)) if n > 0 else ""


def _make_item(i: int, family: str, n_images: int, n_words: int, seed: int, rubric) -> Item:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng([seed, i])
    images = []
    for _ in range(n_images):
        w, h = (int(x) for x in rng.integers(256, 768, size=2))
        images.append(Image.new("RGB", (w, h), tuple(int(c) for c in rng.integers(0, 256, size=3))))
    q_images = 1 if n_images >= 2 else 0
    q_words = n_words // 4
    question = [{"type": "text", "text": f"Task {i}: " + _words(rng, q_words)}]
    question += [{"type": "image", "image": f"q{i}_{k}.png"} for k in range(q_images)]
    r_images = n_images - q_images
    chunks = max(r_images, 1)
    per = (n_words - q_words) // chunks
    response = []
    for k in range(chunks):
        response.append(
            {"type": "text", "text": _words(rng, per if k < chunks - 1 else n_words - q_words - per * k)}
        )
        if k < r_images:
            response.append({"type": "image", "image": f"r{i}_{k}.png"})
    reference = (
        [{"type": "text", "text": "The answer is 12."}] if rubric.family(family).uses_reference else None
    )
    lo, hi = rubric.scale.min, rubric.scale.max
    return Item(f"r{i:05d}", family, question, response, reference, images, int(rng.integers(lo, hi + 1)))


def prompts_for(item: Item, rubric, target_format: str = "score") -> tuple[list[str], list[list[dict]]]:
    from judge.core.template import build_judge_prompt

    crits = rubric.family(item.family).criterion_ids
    msgs = [
        build_judge_prompt(
            rubric, item.family, c, item.question, item.response, item.reference, target_format
        ).messages
        for c in crits
    ]
    return list(crits), msgs


def request_for(item: Item, rubric, target_format: str = "score"):
    from judge.models.readout import ScoreRequest

    crits, msgs = prompts_for(item, rubric, target_format)
    return ScoreRequest(key=item.key, criteria=crits, prompts=msgs, images=list(item.images))


def build_workload(
    processor,
    rubric,
    *,
    responses: int,
    images: tuple[int, int],
    prompt_tokens: int,
    families: list[str],
    jitter: float,
    seed: int,
    target_format: str = "score",
) -> list[Item]:
    """``responses`` items whose criterion prompts average about ``prompt_tokens`` tokens (images expanded).

    Words per item are calibrated per family from two encodings (0 and 400 filler words), then
    each item's target length is drawn uniformly within +-``jitter`` of ``prompt_tokens``.
    """
    import numpy as np

    from judge.models.readout import encode_prompts

    def mean_len(item: Item) -> float:
        _, msgs = prompts_for(item, rubric, target_format)
        ids, _ = encode_prompts(processor, msgs, item.images)
        return statistics.fmean(len(x) for x in ids)

    rng = np.random.default_rng(seed)
    calib = {}
    for fam in families:
        base = mean_len(_make_item(0, fam, images[1], 0, seed, rubric))
        more = mean_len(_make_item(0, fam, images[1], 400, seed, rubric))
        calib[fam] = (base, max((more - base) / 400, 1e-3))
    items = []
    for i in range(responses):
        fam = families[i % len(families)]
        n_img = int(rng.integers(images[0], images[1] + 1))
        base, per_word = calib[fam]
        image_delta = (images[1] - n_img) * image_tokens(processor)  # fewer images: more words
        target = prompt_tokens * (1 + jitter * (2 * rng.random() - 1))
        words = max(0, round((target - base + image_delta) / per_word))
        items.append(_make_item(i, fam, n_img, words, seed, rubric))
    return items
