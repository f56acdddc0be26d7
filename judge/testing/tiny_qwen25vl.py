"""A tiny Qwen2.5-VL scorer (``tiny-qwen2.5-vl``), built locally and deterministically, as ``tiny`` is for InternVL.

A native ``Qwen2_5_VLForConditionalGeneration`` of Qwen2.5-VL-3B-Instruct's shape scaled down: the windowed
ViT with 2x2 patch merging and its last block on full attention (as the 3B's 7/15/23/31), a Qwen2 language
model with M-RoPE (sections 16:24:24 of the rotary half, here 4:6:6), tied embeddings. The tokenizer is the
tiny one of :mod:`judge.testing.tiny` trained with Qwen's special tokens; the chat template is Qwen2.5-VL's
(its default system turn, ``<|vision_start|><|image_pad|><|vision_end|>`` per image). The image processor is
Qwen's dynamic-resolution one (PIL backend) with small pixel bounds, so an image is 4 to 16 merged tokens.
Nothing is downloaded; the weights are random (seeded).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from judge.core.rubric import Rubric, load_rubric
from judge.testing.tiny import build_tokenizer, tokenizer_corpus

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

#: Qwen2.5-VL-Instruct's template for text and images: a default system turn, each image as its markers.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class TinyQwenSpec:
    """Shapes of the tiny Qwen2.5-VL (the 3B's: vision 1280 x 32 blocks, text 2048 x 36 layers, 16/2 heads)."""

    vocab_size: int = 3000
    text_hidden: int = 128
    text_layers: int = 4
    text_heads: int = 4
    text_kv_heads: int = 2
    text_intermediate: int = 256
    mrope_section: tuple[int, int, int] = (4, 6, 6)  #: sums to head_dim / 2 (128 / 4 / 2)
    vision_hidden: int = 64
    vision_layers: int = 2
    vision_heads: int = 2
    vision_intermediate: int = 128
    patch_size: int = 14
    merge_size: int = 2
    window_size: int = 56
    min_pixels: int = 4 * 28 * 28  #: 4 merged tokens at least
    max_pixels: int = 16 * 28 * 28  #: 16 merged tokens at most
    max_positions: int = 8192


def build_tiny_qwen_tokenizer(
    spec: TinyQwenSpec = TinyQwenSpec(),
    rubric: Rubric | str | None = "mmie",
    chat_template: str = CHAT_TEMPLATE,
):
    """The tiny tokenizer trained with Qwen's special tokens and ``chat_template`` (Qwen2.5-VL's, or Qwen3-VL's
    from :mod:`judge.testing.tiny_qwen3vl`: the two share the vocabulary's special tokens)."""
    if isinstance(rubric, str):
        rubric = load_rubric(rubric)
    return build_tokenizer(
        tokenizer_corpus(rubric),
        spec.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        named_tokens={
            "image_token": "<|image_pad|>",
            "video_token": "<|video_pad|>",
            "vision_bos_token": "<|vision_start|>",
            "vision_eos_token": "<|vision_end|>",
        },
        chat_template=chat_template,
    )


def build_tiny_qwen_image_processor(spec: TinyQwenSpec = TinyQwenSpec(), **kwargs):
    """Qwen2-VL's dynamic-resolution image processor (PIL backend) within the tiny pixel bounds (Qwen3-VL uses
    it too, with 16-pixel patches and its own normalisation in ``kwargs``)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(
        min_pixels=spec.min_pixels,
        max_pixels=spec.max_pixels,
        patch_size=spec.patch_size,
        merge_size=spec.merge_size,
        temporal_patch_size=2,
        **kwargs,
    )


def build_tiny_qwen_model(tokenizer, seed: int = 0, spec: TinyQwenSpec = TinyQwenSpec()):
    """A randomly initialised, seeded tiny ``Qwen2_5_VLForConditionalGeneration`` for ``tokenizer``, in eval mode."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    return build_seeded_qwen_model(
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        tokenizer,
        seed,
        spec,
        vision={"window_size": spec.window_size, "fullatt_block_indexes": [spec.vision_layers - 1]},
        text={"tie_word_embeddings": True},
        rope={"rope_theta": 1000000.0},
    )


def build_seeded_qwen_model(
    config_cls, model_cls, tokenizer, seed: int, spec, *, vision: dict, text: dict, rope: dict
):
    """A Qwen-VL model of ``config_cls``/``model_cls`` with the widths of ``spec`` (a :class:`TinyQwenSpec` or
    one with the same fields), randomly initialised from ``seed``, in eval mode; ``vision``, ``text`` and ``rope``
    add what a family's config has beyond what the Qwen families share."""
    config = qwen_config(config_cls, tokenizer, spec, vision=vision, text=text, rope=rope)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval()


def qwen_config(config_cls, tokenizer, spec, *, vision: dict, text: dict, rope: dict):
    """The config of :func:`build_seeded_qwen_model` (also what scripts/bench_score.py builds the Qwen2.5-VL-3B
    shape from); a key of ``vision`` or ``text`` replaces the shared one (the 3B's 151,936-token ``vocab_size``
    over the tiny tokenizer's)."""
    tok = tokenizer
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    return config_cls(
        vision_config={
            "depth": spec.vision_layers,
            "hidden_size": spec.vision_hidden,
            "intermediate_size": spec.vision_intermediate,
            "num_heads": spec.vision_heads,
            "out_hidden_size": spec.text_hidden,
            "patch_size": spec.patch_size,
            "spatial_merge_size": spec.merge_size,
            "temporal_patch_size": 2,
            **vision,
        },
        text_config={
            "vocab_size": len(tok),
            "hidden_size": spec.text_hidden,
            "num_hidden_layers": spec.text_layers,
            "num_attention_heads": spec.text_heads,
            "num_key_value_heads": spec.text_kv_heads,
            "intermediate_size": spec.text_intermediate,
            "max_position_embeddings": spec.max_positions,
            "rope_parameters": {"rope_type": "default", "mrope_section": list(spec.mrope_section), **rope},
            "eos_token_id": tok.eos_token_id,
            "pad_token_id": tok.pad_token_id,
            "bos_token_id": None,
            **text,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
