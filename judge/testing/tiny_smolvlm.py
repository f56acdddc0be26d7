"""A tiny SmolVLM scorer (``tiny-smolvlm``), built locally and deterministically, as ``tiny`` is for InternVL.

A native ``SmolVLMForConditionalGeneration`` of SmolVLM-256M-Instruct's shape scaled down: a SigLIP vision
tower (here 32-pixel frames of 4-pixel patches, the 256M's 512 of 16), the pixel-shuffle connector at scale 4
(64 patches become 4 image tokens per frame, the 256M's 1,024 become 64), a Llama language model with tied
embeddings. The image processor is SmolVLM's (PIL backend): an image is scaled so its longest edge is 64
pixels, split into a grid of 32-pixel sub-images (at most 2 x 2) and followed by a global image of the whole,
each frame in the prompt as ``<fake_token_around_image><row_i_col_j>`` (``<global-img>`` for the whole) and its
``<image>`` tokens. The tokenizer is the tiny one of :mod:`judge.testing.tiny` trained with SmolVLM's special
tokens; the chat template is transformers' SmolVLM one (``User: ...<end_of_utterance>`` turns, ``Assistant:``).
The tiny Idefics3 (:func:`build_tiny_idefics3_scorer`, the same shapes in ``Idefics3ForConditionalGeneration``)
shows that family's checkpoints go through the same code. Nothing is downloaded; the weights are random
(seeded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from judge.core.rubric import Rubric, load_rubric
from judge.testing.tiny import build_tokenizer, tokenizer_corpus

#: The grid markers of up to 6 x 6 sub-images, as SmolVLM's vocabulary has them.
GRID_TOKENS = [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<end_of_utterance>",
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    *GRID_TOKENS,
]

#: SmolVLM-Instruct's template (transformers' ``SmolVLMProcessor`` default, without its video part): one
#: ``<|im_start|>``, then ``Role: text`` turns closed by ``<end_of_utterance>``, an image as ``<image>``.
CHAT_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'] is string %}{{': ' + message['content']}}"
    "{% else %}{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}{% endif %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)


@dataclass(frozen=True)
class TinySmolVLMSpec:
    """Shapes of the tiny SmolVLM (the 256M's: vision 768 x 12 layers at 512 pixels, patch 16, scale 4; text
    576 x 30 layers, 9/3 heads)."""

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
    frame_size: int = 32  #: a sub-image's side (the image processor's ``max_image_size``)
    patch_size: int = 4
    scale_factor: int = 4  #: pixel shuffle: (32 / 4)^2 / 4^2 = 4 image tokens per frame
    longest_edge: int = 64  #: an image is scaled to this longest edge, so at most 2 x 2 sub-images
    max_positions: int = 8192


def image_seq_len(spec: TinySmolVLMSpec = TinySmolVLMSpec()) -> int:
    """Image tokens per frame: patches per side squared, over the pixel shuffle's scale squared."""
    return (spec.frame_size // spec.patch_size) ** 2 // spec.scale_factor**2


def build_tiny_smolvlm_tokenizer(
    spec: TinySmolVLMSpec = TinySmolVLMSpec(), rubric: Rubric | str | None = "mmie"
):
    """The tiny tokenizer trained with SmolVLM's special tokens and template; its turns end in
    ``<end_of_utterance>`` (the end-of-sequence token, as SmolVLM's)."""
    if isinstance(rubric, str):
        rubric = load_rubric(rubric)
    tok = build_tokenizer(
        tokenizer_corpus(rubric),
        spec.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        named_tokens={
            "image_token": "<image>",
            "fake_image_token": "<fake_token_around_image>",
            "global_image_token": "<global-img>",
            "end_of_utterance_token": "<end_of_utterance>",
        },
        chat_template=CHAT_TEMPLATE,
    )
    tok.eos_token = "<end_of_utterance>"
    return tok


def build_tiny_smolvlm_image_processor(spec: TinySmolVLMSpec = TinySmolVLMSpec(), idefics3: bool = False):
    """SmolVLM's (or Idefics3's: the same code) image splitting processor, PIL backend, at the tiny sizes."""
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil
    from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

    processor_cls: Any = Idefics3ImageProcessorPil if idefics3 else SmolVLMImageProcessorPil
    return processor_cls(
        size={"longest_edge": spec.longest_edge},
        max_image_size={"longest_edge": spec.frame_size},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        do_image_splitting=True,
        # each image's grid, which the processor's replace_image_token reads (the scorer calls it directly)
        return_row_col_info=True,
    )


def build_tiny_smolvlm_model(
    tokenizer, seed: int = 0, spec: TinySmolVLMSpec = TinySmolVLMSpec(), idefics3: bool = False
):
    """A randomly initialised, seeded tiny ``SmolVLMForConditionalGeneration`` (``idefics3``:
    ``Idefics3ForConditionalGeneration``) for ``tokenizer``, in eval mode."""
    from transformers import (
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
    )

    config_cls: Any = Idefics3Config if idefics3 else SmolVLMConfig
    model_cls: Any = Idefics3ForConditionalGeneration if idefics3 else SmolVLMForConditionalGeneration
    tok = tokenizer
    config = config_cls(
        vision_config=dict(
            hidden_size=spec.vision_hidden,
            num_hidden_layers=spec.vision_layers,
            num_attention_heads=spec.vision_heads,
            intermediate_size=spec.vision_intermediate,
            image_size=spec.frame_size,
            patch_size=spec.patch_size,
        ),
        text_config=dict(
            model_type="llama",
            vocab_size=len(tok),
            hidden_size=spec.text_hidden,
            num_hidden_layers=spec.text_layers,
            num_attention_heads=spec.text_heads,
            num_key_value_heads=spec.text_kv_heads,
            intermediate_size=spec.text_intermediate,
            max_position_embeddings=spec.max_positions,
            rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
            tie_word_embeddings=True,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.convert_tokens_to_ids("<|im_start|>"),
        ),
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        scale_factor=spec.scale_factor,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model.eval()


def build_tiny_idefics3_scorer(seed: int = 0, spec: TinySmolVLMSpec = TinySmolVLMSpec(), rubric="mmie"):
    """``(model, processor)``: the tiny SmolVLM's shapes, tokenizer and template as an Idefics3 (its model,
    image processor and processor classes), for the tests that show Idefics3 goes through SmolVLM's code."""
    from transformers import Idefics3Processor

    # The stock processor (an Idefics3 checkpoint's: no video processor to drop); judge.models loads a saved
    # one as its Idefics3ImageTextProcessor.
    processor = Idefics3Processor(
        image_processor=build_tiny_smolvlm_image_processor(spec, idefics3=True),
        tokenizer=build_tiny_smolvlm_tokenizer(spec, rubric),
        image_seq_len=image_seq_len(spec),
        chat_template=CHAT_TEMPLATE,
    )
    return build_tiny_smolvlm_model(processor.tokenizer, seed, spec, idefics3=True), processor
