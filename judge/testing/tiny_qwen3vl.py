"""A tiny Qwen3-VL scorer (``tiny-qwen3-vl``), built locally and deterministically, as ``tiny`` is for InternVL.

A native ``Qwen3VLForConditionalGeneration`` of Qwen3-VL-4B-Instruct's shape scaled down: a ViT of 16-pixel
patches with a learned (interpolated) position grid and 2x2 patch merging, whose DeepStack mergers feed
features of three of its blocks (the 4B's 5/11/17 of 24, here 0/1/2 of 4) into the first language layers at
the image tokens; a Qwen3 language model (q/k norms, explicit head size) with interleaved M-RoPE (sections
24:20:20 of the rotary half, here 6:5:5), tied embeddings. The tokenizer and the image processor are the tiny
Qwen2.5-VL's (:mod:`judge.testing.tiny_qwen25vl`: the same special tokens and dynamic-resolution processor,
PIL backend) with Qwen3-VL's chat template (no default system turn), patch size and normalisation. Nothing
is downloaded; the weights are random (seeded).
"""

from __future__ import annotations

from dataclasses import dataclass

from judge.core.rubric import Rubric
from judge.testing.tiny_qwen25vl import (
    TinyQwenSpec,
    build_seeded_qwen_model,
    build_tiny_qwen_image_processor,
    build_tiny_qwen_tokenizer,
)

#: Qwen3-VL-Instruct's template for text and images: a system turn only when given, each image as its markers.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class TinyQwen3Spec(TinyQwenSpec):
    """Shapes of the tiny Qwen3-VL (the 4B's: vision 1024 x 24 blocks, text 2560 x 36 layers, 32/8 heads of 128)."""

    text_head_dim: int = 32
    mrope_section: tuple[int, int, int] = (6, 5, 5)  #: interleaved; sums to text_head_dim / 2
    vision_layers: int = 4
    deepstack_indexes: tuple[int, ...] = (0, 1, 2)  #: the vision blocks whose features DeepStack adds
    position_grid: int = 8  #: the learned vision position grid's side (the 4B's 48)
    patch_size: int = 16
    min_pixels: int = 4 * 32 * 32  #: 4 merged tokens at least
    max_pixels: int = 16 * 32 * 32  #: 16 merged tokens at most


def build_tiny_qwen3_tokenizer(spec: TinyQwen3Spec = TinyQwen3Spec(), rubric: Rubric | str | None = "mmie"):
    return build_tiny_qwen_tokenizer(spec, rubric, chat_template=CHAT_TEMPLATE)


def build_tiny_qwen3_image_processor(spec: TinyQwen3Spec = TinyQwen3Spec()):
    """Qwen3-VL's image processor (Qwen2-VL's, PIL backend): 16-pixel patches, mean and std 0.5."""
    return build_tiny_qwen_image_processor(spec, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])


def build_tiny_qwen3_model(tokenizer, seed: int = 0, spec: TinyQwen3Spec = TinyQwen3Spec()):
    """A randomly initialised, seeded tiny ``Qwen3VLForConditionalGeneration`` for ``tokenizer``, in eval mode."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    return build_seeded_qwen_model(
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        tokenizer,
        seed,
        spec,
        vision={
            "num_position_embeddings": spec.position_grid**2,
            "deepstack_visual_indexes": list(spec.deepstack_indexes),
        },
        text={"head_dim": spec.text_head_dim},
        rope={"rope_theta": 5000000.0, "mrope_interleaved": True},
    )
