"""bench_score's Qwen2.5-VL judges: the Qwen2.5-VL-3B-Instruct shape (``--shape qwen2.5-vl-3b``) and the tiny
model's (``--shape tiny-qwen2.5-vl``), randomly initialised, and their FLOP count. ``_bench_model`` hands a
:class:`QwenShape` here; everything else of the benches (workload, modes, report) is the InternVL shapes'.

The config is the tiny builder's (``judge.testing.tiny_qwen25vl.qwen_config``: the keys the family's model
reads) at the real checkpoint's widths: a 32-block windowed ViT (1280 wide, 16 heads, MLP 3420, windows of
112 px, full attention in blocks 7/15/23/31, 2x2 patch merging to 2048), a 36-layer Qwen2 language model
(2048 wide, 16 heads of 128, 2 KV heads, MLP 11008, M-RoPE sections 16:24:24, tied 151,936-token
embeddings); the image processor has the recipe's pixel bounds (``rubric6-qwen2.5vl-3b``: 256 to 1,024 merged
tokens an image). The tokenizer is the tiny one (its ids sit inside the real vocabulary).

FLOPs of the vision tower, per image of ``N`` patches (``h x w`` on the patch grid, ``N = h*w``)::

    F_vit(image) = 2 * P_vit * N + 4 * d_vit * (L_full * N**2 + (L_vit - L_full) * sum_windows n_w**2)
                   + 2 * P_proj * N / m**2

``P_vit``: the tower's parameters without the merger (the patch embedding is a matmul); ``L_full`` blocks
attend over the whole image, the others within windows of ``n_w`` patches (the merged grid cut into squares
of ``window / (patch * m)`` merged tokens from its top-left corner, partial at the right and bottom edges);
``P_proj``: the merger's parameters, run on the ``N / m**2`` merged tokens (``m``: the merge size).
"""

from __future__ import annotations

from dataclasses import dataclass

from judge.testing.tiny_qwen25vl import TinyQwenSpec


@dataclass(frozen=True)
class QwenShape:
    """A Qwen2.5-VL judge's shapes: the tiny builder's spec, and what the real config has beyond it."""

    name: str
    spec: TinyQwenSpec
    vocab_size: int  #: the model's vocabulary (the embedding is larger than the tiny tokenizer)
    window_size: int  #: the ViT's attention window, in pixels
    fullatt_block_indexes: tuple[int, ...]  #: ViT blocks with full attention over the image


QWEN_SHAPES = {
    # Qwen/Qwen2.5-VL-3B-Instruct's config.json, and the recipe rubric6-qwen2.5vl-3b's pixel bounds.
    "qwen2.5-vl-3b": QwenShape(
        "qwen2.5-vl-3b",
        TinyQwenSpec(
            text_hidden=2048,
            text_layers=36,
            text_heads=16,
            text_kv_heads=2,
            text_intermediate=11008,
            mrope_section=(16, 24, 24),
            vision_hidden=1280,
            vision_layers=32,
            vision_heads=16,
            vision_intermediate=3420,
            window_size=112,
            min_pixels=200_704,
            max_pixels=802_816,
            max_positions=128_000,
        ),
        vocab_size=151_936,
        window_size=112,
        fullatt_block_indexes=(7, 15, 23, 31),
    ),
    # The tests' tiny Qwen2.5-VL (judge.testing.tiny_qwen25vl.TinyQwenSpec).
    "tiny-qwen2.5-vl": QwenShape(
        "tiny-qwen2.5-vl", TinyQwenSpec(), vocab_size=3000, window_size=56, fullatt_block_indexes=(1,)
    ),
}


def build_processor(shape: QwenShape, rubric="mmie"):
    from judge.models.loading import build_tiny_qwen_processor

    return build_tiny_qwen_processor(shape.spec, rubric)


def build_config(shape: QwenShape, processor):
    from transformers import Qwen2_5_VLConfig

    from judge.testing.tiny_qwen25vl import qwen_config

    tok = processor.tokenizer
    return qwen_config(
        Qwen2_5_VLConfig,
        tok,
        shape.spec,
        vision={"window_size": shape.window_size, "fullatt_block_indexes": list(shape.fullatt_block_indexes)},
        text={"tie_word_embeddings": True, "vocab_size": max(shape.vocab_size, len(tok))},
        rope={"rope_theta": 1_000_000.0},
    )


def model_class():
    from transformers import Qwen2_5_VLForConditionalGeneration

    return Qwen2_5_VLForConditionalGeneration


def image_tokens(processor) -> int:
    """Prompt tokens of a typical workload image (512 x 512, the middle of its 256-768 px sides), markers
    included: what ``build_workload`` trades words against."""
    from PIL import Image

    grid = processor.image_processor(images=[Image.new("RGB", (512, 512))])["image_grid_thw"][0]
    merge = processor.image_processor.merge_size
    return int(grid.prod()) // merge**2 + 2


@dataclass(frozen=True)
class QwenFlopModel:
    """The FLOP count of the language model (``FlopModel``'s) and of the windowed ViT (this module's doc)."""

    lm_params: int
    lm_layers: int
    attn_dim: int
    head_params: int
    vit_params: int
    vit_layers: int
    vit_dim: int
    vit_full_layers: int
    window_merged: int  #: the window's side in merged tokens
    merge: int
    proj_params: int
    vit_tokens: int = 0  #: per image, not fixed (kept for the InternVL report's fields)
    tile_tokens: int = 0

    def lm(self, new: int, cached: int = 0, logits: int = 1) -> float:
        from _bench_model import FlopModel

        return FlopModel.lm(self, new, cached, logits)  # type: ignore[arg-type]

    def lm_attention(self, new: int, cached: int = 0) -> float:
        from _bench_model import FlopModel

        return FlopModel.lm_attention(self, new, cached)  # type: ignore[arg-type]

    def image(self, h: int, w: int) -> float:
        """One image of ``h x w`` patches (one temporal patch)."""
        n = h * w
        side = self.window_merged
        rows = [min(side, h // self.merge - i) for i in range(0, h // self.merge, side)]
        cols = [min(side, w // self.merge - j) for j in range(0, w // self.merge, side)]
        windows = sum(r * r for r in rows) * sum(c * c for c in cols) * self.merge**4
        attn = (
            4.0
            * self.vit_dim
            * (self.vit_full_layers * n * n + (self.vit_layers - self.vit_full_layers) * windows)
        )
        return 2.0 * self.vit_params * n + attn + 2.0 * self.proj_params * n / self.merge**2

    def vision_input(self, pixel_values, extra) -> float:
        if pixel_values is None:
            return 0.0
        return sum(float(t) * self.image(int(h), int(w)) for t, h, w in extra["image_grid_thw"].tolist())


def flop_model(config, counts: dict[str, int]) -> QwenFlopModel:
    t, v = config.text_config, config.vision_config
    head_dim = getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads
    return QwenFlopModel(
        lm_params=counts["lm_layers"],
        lm_layers=t.num_hidden_layers,
        attn_dim=t.num_attention_heads * head_dim,
        head_params=t.hidden_size * t.vocab_size,
        vit_params=counts["vision_tower"],
        vit_layers=v.depth,
        vit_dim=v.hidden_size,
        vit_full_layers=len(v.fullatt_block_indexes),
        window_merged=v.window_size // v.spatial_merge_size // v.patch_size,
        merge=v.spatial_merge_size,
        proj_params=counts["projector"],
    )


def describe_vision(shape: QwenShape, config) -> dict:
    v = config.vision_config
    return {
        "hidden": v.hidden_size,
        "layers": v.depth,
        "heads": v.num_heads,
        "intermediate": v.intermediate_size,
        "patch_size": v.patch_size,
        "merge_size": v.spatial_merge_size,
        "window_size": v.window_size,
        "full_attention_blocks": list(v.fullatt_block_indexes),
        "min_pixels": shape.spec.min_pixels,
        "max_pixels": shape.spec.max_pixels,
    }


__all__ = [
    "QWEN_SHAPES",
    "QwenFlopModel",
    "QwenShape",
    "build_config",
    "build_processor",
    "describe_vision",
    "flop_model",
    "image_tokens",
    "model_class",
]
