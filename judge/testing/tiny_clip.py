"""A tiny random CLIP, built locally and deterministically, for CLIPScore tests and the demo.

A native ``CLIPModel`` from a small ``CLIPConfig`` (two-layer text and vision transformers,
32x32 images), with a byte-level BPE tokenizer trained here on a few sentences, wrapped like
OpenAI's CLIP tokenizer: ``<|startoftext|> ... <|endoftext|>``, 77 positions. The image
processor is transformers' PIL-backed ``CLIPImageProcessorPil``, so no torchvision is needed.
Nothing is downloaded. The weights are random (seeded): the model proves the CLIPScore
pipeline; its scores mean nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

BOS, EOS = "<|startoftext|>", "<|endoftext|>"

# Words of the demo set's captions and of everyday image descriptions, so texts tokenize compactly.
_CORPUS = """
A photo depicts a red circle, a blue square, a green triangle and a yellow star. A photo depicts three
purple circles and an orange square in the sunny meadow, on the sandy beach, in the snowy field, in the
quiet garden, on a wooden table. One two three four five six seven eight nine ten shapes, groups, bars.
The story continues: the friends found a hidden door and built a small house. Step 1: place the squares
in a row. Step 2: arrange the circles. Tip: count the stars. The bar chart shows how many apples each
child collected. Final answer: 12. The answer is 7. Here is a picture of the result.
"""


@dataclass(frozen=True)
class TinyClipSpec:
    """Shapes of the tiny CLIP; the defaults build in well under a second."""

    vocab_size: int = 600
    hidden: int = 32
    intermediate: int = 64
    layers: int = 2
    heads: int = 2
    projection_dim: int = 32
    image_size: int = 32
    patch_size: int = 8
    max_positions: int = 77  # as OpenAI's CLIP: texts are truncated to 77 tokens


def build_clip_tokenizer(corpus: list[str], vocab_size: int, max_length: int):
    """Train a byte-level BPE tokenizer that wraps each text in CLIP's start and end tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS, EOS],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    bos_id, eos_id = tok.token_to_id(BOS), tok.token_to_id(EOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {EOS}", special_tokens=[(BOS, bos_id), (EOS, eos_id)]
    )
    # Padding with the end token, as OpenAI's CLIP tokenizer does; CLIP pools at the first end token.
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=EOS, model_max_length=max_length
    )


def build_tiny_clip(seed: int = 0, spec: TinyClipSpec = TinyClipSpec()):
    """Return ``(model, processor)``: a seeded random ``CLIPModel`` and its ``CLIPProcessor``, on the CPU."""
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, CLIPProcessor

    tokenizer = build_clip_tokenizer([_CORPUS], spec.vocab_size, spec.max_positions)
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": spec.image_size},
        crop_size={"height": spec.image_size, "width": spec.image_size},
    )
    processor = CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)
    eos_id = tokenizer.eos_token_id
    if eos_id == 2:  # transformers reads eos_token_id == 2 as a legacy config and pools at the largest id
        raise RuntimeError("the tiny CLIP's end token must not have id 2")
    config = CLIPConfig(
        text_config=dict(
            vocab_size=len(tokenizer),
            hidden_size=spec.hidden,
            intermediate_size=spec.intermediate,
            num_hidden_layers=spec.layers,
            num_attention_heads=spec.heads,
            max_position_embeddings=spec.max_positions,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=eos_id,
            pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(
            hidden_size=spec.hidden,
            intermediate_size=spec.intermediate,
            num_hidden_layers=spec.layers,
            num_attention_heads=spec.heads,
            image_size=spec.image_size,
            patch_size=spec.patch_size,
        ),
        projection_dim=spec.projection_dim,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CLIPModel(config)
    return model.eval(), processor


def save_tiny_clip(out_dir: str | Path, seed: int = 0) -> Path:
    """Build the tiny CLIP and save model and processor with ``save_pretrained`` (loadable by ``CLIPModel``)."""
    out_dir = Path(out_dir)
    model, processor = build_tiny_clip(seed)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir


__all__ = ["TinyClipSpec", "build_clip_tokenizer", "build_tiny_clip", "save_tiny_clip"]
