"""A tiny Gemma 3 scorer (``tiny-gemma3``), built locally and deterministically, as ``tiny`` is for InternVL.

A native ``Gemma3ForConditionalGeneration`` of gemma-3-4b-it's shape scaled down: a SigLIP vision tower on
square images (the 4B's 896 pixels in 14-pixel patches, here 56 in 7: 8 x 8 patches), the multi-modal
projector average-pooling them to a fixed number of soft tokens per image (the 4B's 256, here 16) and
projecting through its soft-embedding norm; a Gemma 3 language model with q/k norms, query pre-attention
scaling (``query_pre_attn_scalar``, the head size as in the 4B), five sliding-window layers to one global
layer (the 4B's pattern, window 1024, here 48 so the test prompts cross it), local and global rotary bases
(10k and 1M with linear scaling 8), tied embeddings scaled by the square root of the width, and no
soft-capping (the 4B's config has none). An image is ``\\n\\n<start_of_image>`` + 16 ``<image_soft_token>`` +
``<end_of_image>\\n\\n`` in the prompt, and its soft tokens attend to each other both ways (the model builds
that mask from ``token_type_ids``).

The tokenizer is the tiny one of :mod:`judge.testing.tiny` trained with Gemma's special tokens; the chat
template is Gemma 3's (``<start_of_turn>user`` / ``model``, a system turn folded into the first user turn,
text parts trimmed, ``<start_of_image>`` per image). The image processor is Gemma 3's (PIL backend, no pan
and scan). Nothing is downloaded; the weights are random (seeded).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from judge.core.rubric import Rubric, load_rubric
from judge.testing.tiny import build_tokenizer, tokenizer_corpus

SPECIAL_TOKENS = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
]

#: gemma-3-4b-it's chat template for text and images (its tool-free part, as shipped).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- if messages[0]['content'] is string -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}"
    "{%- endif -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    '{%- set first_user_prefix = "" -%}'
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    '{{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}'
    "{%- endif -%}"
    "{%- if (message['role'] == 'assistant') -%}"
    '{%- set role = "model" -%}'
    "{%- else -%}"
    "{%- set role = message['role'] -%}"
    "{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}"
    "{%- if message['content'] is string -%}"
    "{{ message['content'] | trim }}"
    "{%- elif message['content'] is iterable -%}"
    "{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}"
    "{{ '<start_of_image>' }}"
    "{%- elif item['type'] == 'text' -%}"
    "{{ item['text'] | trim }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- else -%}"
    '{{ raise_exception("Invalid content type") }}'
    "{%- endif -%}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{'<start_of_turn>model\n'}}"
    "{%- endif -%}"
)


@dataclass(frozen=True)
class TinyGemma3Spec:
    """Shapes of the tiny Gemma 3 (the 4B's: vision 1152 x 27 layers, text 2560 x 34 layers, 8/4 heads of 256)."""

    vocab_size: int = 3000
    text_hidden: int = 128
    text_layers: int = 6  #: five sliding-window layers, then one global (the 4B's pattern of 6)
    text_heads: int = 4
    text_kv_heads: int = 2
    text_head_dim: int = 32
    text_intermediate: int = 256
    sliding_window: int = 48  #: under the test prompts' length, so the windows cut into them
    vision_hidden: int = 64
    vision_layers: int = 2
    vision_heads: int = 2
    vision_intermediate: int = 128
    image_size: int = 56
    patch_size: int = 7
    tokens_per_image: int = 16  #: ``mm_tokens_per_image``: the 8 x 8 patches pooled 2 x 2
    max_positions: int = 8192


def build_tiny_gemma3_tokenizer(
    spec: TinyGemma3Spec = TinyGemma3Spec(), rubric: Rubric | str | None = "mmie"
):
    """The tiny tokenizer trained with Gemma's special tokens and Gemma 3's chat template."""
    if isinstance(rubric, str):
        rubric = load_rubric(rubric)
    return build_tokenizer(
        tokenizer_corpus(rubric),
        spec.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        named_tokens={
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        },
        chat_template=CHAT_TEMPLATE,
        eos_pad_bos=("<eos>", "<pad>", "<bos>"),
    )


def build_tiny_gemma3_image_processor(spec: TinyGemma3Spec = TinyGemma3Spec()):
    """Gemma 3's image processor (PIL backend): square resize, mean and std 0.5, no pan and scan."""
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    return Gemma3ImageProcessorPil(
        size={"height": spec.image_size, "width": spec.image_size},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        do_pan_and_scan=False,
    )


def build_tiny_gemma3_model(tokenizer, seed: int = 0, spec: TinyGemma3Spec = TinyGemma3Spec()):
    """A randomly initialised, seeded tiny ``Gemma3ForConditionalGeneration`` for ``tokenizer``, in eval mode."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    tok = tokenizer
    end_of_turn = tok.convert_tokens_to_ids("<end_of_turn>")
    config = Gemma3Config(
        vision_config=dict(
            model_type="siglip_vision_model",
            hidden_size=spec.vision_hidden,
            num_hidden_layers=spec.vision_layers,
            num_attention_heads=spec.vision_heads,
            intermediate_size=spec.vision_intermediate,
            image_size=spec.image_size,
            patch_size=spec.patch_size,
            vision_use_head=False,
        ),
        text_config=dict(
            vocab_size=len(tok),
            hidden_size=spec.text_hidden,
            num_hidden_layers=spec.text_layers,
            num_attention_heads=spec.text_heads,
            num_key_value_heads=spec.text_kv_heads,
            head_dim=spec.text_head_dim,
            query_pre_attn_scalar=spec.text_head_dim,
            intermediate_size=spec.text_intermediate,
            sliding_window=spec.sliding_window,
            sliding_window_pattern=6,
            max_position_embeddings=spec.max_positions,
            rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            },
            eos_token_id=[tok.eos_token_id, end_of_turn],
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id,
        ),
        mm_tokens_per_image=spec.tokens_per_image,
        boi_token_index=tok.convert_tokens_to_ids("<start_of_image>"),
        eoi_token_index=tok.convert_tokens_to_ids("<end_of_image>"),
        image_token_index=tok.convert_tokens_to_ids("<image_soft_token>"),
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Gemma3ForConditionalGeneration(config)
        # Gemma 3 initialises the projector's weight to zero (the checkpoint fills it); random here, so the
        # images reach the scores.
        torch.nn.init.normal_(model.model.multi_modal_projector.mm_input_projection_weight, std=0.02)
    model.generation_config.eos_token_id = [tok.eos_token_id, end_of_turn]
    model.generation_config.pad_token_id = tok.pad_token_id
    return model.eval()
