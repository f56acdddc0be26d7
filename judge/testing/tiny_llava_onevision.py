"""A tiny LLaVA-OneVision scorer (``tiny-llava-onevision``), built locally and deterministically, as ``tiny`` is
for InternVL.

A native ``LlavaOnevisionForConditionalGeneration`` of llava-onevision-qwen2-0.5b-ov's shape scaled down: a
SigLIP vision tower (no pooling head, features of its last layer, every patch kept: ``full``), the 2-layer MLP
projector (GELU), a learned ``image_newline``, a Qwen2 language model with tied embeddings (the 0.5B's). Images
go through anyres: a lone image is a base tile of the whole picture plus the tiles of the best grid of
``image_grid_pinpoints`` (the 0.5B's 1..6 tiles of 384 per side, here 1..3 of 32), unpadded, with a newline
feature closing each row and the grid scaled down past ``anyres_max_N`` tiles (the 0.5B's 9 of 36, here 4 of
9, so the tiny model takes that branch too); each image of a prompt with several is its base tile only, padded
to a square, plus one newline feature (LLaVA-OneVision's multi-image setting). The tokenizer is the tiny one of
:mod:`judge.testing.tiny` trained with LLaVA-OneVision's special tokens; the chat template is the checkpoint's
(every image of a turn first, ``<image>\\n`` each, then its texts). The image processor is LLaVA-OneVision's
PIL backend. Nothing is downloaded; the weights are random (seeded).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from judge.core.rubric import Rubric, load_rubric
from judge.testing.tiny import build_tokenizer, tokenizer_corpus

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>"]

#: llava-onevision-qwen2-*-ov-hf's template (images of a turn first, then its texts), with a string content
#: rendered as it is (the checkpoint's template drops it; the judge's own messages are always part lists).
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n'}}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\\n' }}{% endfor %}"
    "{# Render all video then #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}{{ '<video>\\n' }}{% endfor %}"
    "{# Render all text next #}"
    "{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] }}{% endfor %}"
    "{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] }}{% endgeneration %}{% endfor %}"
    "{% endif %}{% endif %}{{'<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class TinyLlavaOnevisionSpec:
    """Shapes of the tiny LLaVA-OneVision (the 0.5B's: SigLIP 1152 x 26 layers on 384-pixel tiles of 14-pixel
    patches, text 896 x 24 layers, 14/2 heads)."""

    vocab_size: int = 3000
    text_hidden: int = 128
    text_layers: int = 4
    text_heads: int = 4
    text_kv_heads: int = 2
    text_intermediate: int = 256
    vision_hidden: int = 64
    vision_layers: int = 2
    vision_heads: int = 2
    vision_intermediate: int = 128
    tile: int = 32  #: a tile's side in pixels (the 0.5B's 384)
    patch_size: int = 8  #: 4 x 4 = 16 features per tile (the 0.5B's 27 x 27 = 729)
    max_grid: int = 3  #: tiles per side of the largest grid (the 0.5B's 6)
    max_tiles: int = 4  #: ``anyres_max_N``: a grid of more tiles is scaled down to about N (the 0.5B's 9)
    max_positions: int = 8192

    @property
    def grid_pinpoints(self) -> list[list[int]]:
        """Every (height, width) of 1..max_grid tiles per side, as the checkpoint lists them."""
        sides = [self.tile * k for k in range(1, self.max_grid + 1)]
        return [[h, w] for h in sides for w in sides]

    @property
    def features_per_tile(self) -> int:
        return (self.tile // self.patch_size) ** 2


def build_tiny_llava_onevision_tokenizer(
    spec: TinyLlavaOnevisionSpec = TinyLlavaOnevisionSpec(), rubric: Rubric | str | None = "mmie"
):
    """The tiny tokenizer trained with LLaVA-OneVision's (Qwen2's) special tokens and its chat template."""
    if isinstance(rubric, str):
        rubric = load_rubric(rubric)
    return build_tokenizer(
        tokenizer_corpus(rubric),
        spec.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        named_tokens={"image_token": "<image>", "video_token": "<video>"},
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_llava_onevision_image_processor(spec: TinyLlavaOnevisionSpec = TinyLlavaOnevisionSpec()):
    """LLaVA-OneVision's anyres image processor (PIL backend) at the tiny tile size and grid; SigLIP's
    normalisation (mean and std 0.5), as the checkpoints have it."""
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
        LlavaOnevisionImageProcessorPil,
    )

    return LlavaOnevisionImageProcessorPil(
        size={"height": spec.tile, "width": spec.tile},
        image_grid_pinpoints=spec.grid_pinpoints,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )


def build_tiny_llava_onevision_model(
    tokenizer, seed: int = 0, spec: TinyLlavaOnevisionSpec = TinyLlavaOnevisionSpec()
):
    """A randomly initialised, seeded tiny ``LlavaOnevisionForConditionalGeneration`` for ``tokenizer``, in eval
    mode."""
    from transformers import LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration

    tok = tokenizer
    config = LlavaOnevisionConfig(
        vision_config=dict(
            model_type="siglip_vision_model",
            hidden_size=spec.vision_hidden,
            num_hidden_layers=spec.vision_layers,
            num_attention_heads=spec.vision_heads,
            intermediate_size=spec.vision_intermediate,
            image_size=spec.tile,
            patch_size=spec.patch_size,
            vision_use_head=False,
        ),
        text_config=dict(
            model_type="qwen2",
            vocab_size=len(tok),
            hidden_size=spec.text_hidden,
            num_hidden_layers=spec.text_layers,
            num_attention_heads=spec.text_heads,
            num_key_value_heads=spec.text_kv_heads,
            intermediate_size=spec.text_intermediate,
            max_position_embeddings=spec.max_positions,
            tie_word_embeddings=True,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            bos_token_id=None,
        ),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        video_token_index=tok.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=spec.grid_pinpoints,
        vision_aspect_ratio=f"anyres_max_{spec.max_tiles}",
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlavaOnevisionForConditionalGeneration(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model.eval()
