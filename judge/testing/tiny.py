"""A tiny InternVL-class scorer, built locally and deterministically, for tests and the demo.

It is a native ``InternVLForConditionalGeneration`` (a small InternViT-style vision
tower, the pixel-shuffle projector, a small Qwen2 language model) with a byte-level
BPE tokenizer trained here, on the judge's own prompt texts, so prompts stay short.
Nothing is downloaded. The tokenizer isolates digits, so every scale value is one
token, as in Qwen2's tokenizer. The weights are random (seeded): it proves the
pipeline, it is not a judge.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from judge.core.rubric import Rubric, load_rubric
from judge.core.template import TARGET_FORMATS, build_judge_prompt, build_target

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<img>",
    "</img>",
    "<IMG_CONTEXT>",
    "<video>",
]

#: ChatML, as InternVL3 uses it; an image part renders as the image context token, which the
#: processor expands to <img><IMG_CONTEXT>*N</img>.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<IMG_CONTEXT>{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Everyday words of interleaved image-text answers (stories, how-tos, counting), so demo responses
# tokenize compactly too.
_GENERIC_CORPUS = """
The story begins with a red circle and a blue square. Then a green triangle appears next to two yellow stars.
One, two, three, four, five, six, seven, eight, nine, ten shapes. The image shows three purple circles and an
orange square. First, place the squares in a row. Second, arrange the circles around them. Finally, count the
stars. Step 1: draw a line. Step 2: colour it blue. How many shapes are there in total? The answer is 7.
Final answer: 12. The chart has bars of height 3, 5 and 2, so the sum is 10. The picture matches the text.
The text says the ball is green but the picture shows a red ball. The character walks into the forest,
meets a friend, and they build a small house together. This method is practical, clear and creative.
"""


#: Words and phrases of interleaved answers about shapes, colours, scenes and steps (frozen from the demo
#: set's texts when it was written, so editing the demo never changes this tokenizer).
_WORDS = (
    "zero one two three four five six seven eight nine",
    "red green blue yellow purple orange",
    "circle square triangle star",
    "circles squares triangles stars",
    "sunny meadow sandy beach snowy field quiet garden",
    "wooden table",
    "black hot pink cyan",
    "apples books shells stickers",
    "zzq qxv blorf xqj vrrk",
    "LOL WHATEVER, THIS IS SO BORING!!!",
    "OMG WHO EVEN CARES LOL!!!",
    "UGH, JUST DO IT ALREADY!!!",
    "Let me work this out step by step.",
    "I will solve this carefully.",
    "Here is how I get the answer.",
    "a straight row a tall column two neat rows",
    "Then the red circle rolled up a tall hill to see the sea.",
    "Suddenly the red circle found a hidden door in the ground.",
    "The red circle met a friendly cloud that told a silly joke.",
    "At noon the red circle built a tiny boat and sailed away.",
    "A gust of wind lifted the red circle high above the trees.",
    "The red circle discovered a glowing key under a stone.",
    "The red circle stayed in the sunny meadow.",
    "The red circle did not move at all.",
    "Nothing else happened to the red circle.",
    "The red circle sat in the sunny meadow as before.",
    "Lay all 4 red circles on a flat table.",
    "Put the first circle where a straight row should begin.",
    "Add the other circles one at a time, from left to right.",
    "Nudge any circle that sits out of line back into place.",
    "Count them again to make sure all 4 are used.",
    "Let's build a straight row together, it only takes a minute!",
    "This is a fun little puzzle, so let's get started!",
    "Ready? You will have a straight row in no time!",
    "Tip: try it again with your eyes closed for a fun challenge!",
    "Tip: time yourself and see if you can beat your record!",
    "Tip: use a ruler to make the lines extra straight!",
    "Here is one red circle and three red circles in the picture.",
    "Here is one red square and three red squares in the picture.",
    "Here is one red triangle and three red triangles in the picture.",
    "Here is one red star and three red stars in the picture.",
    "Here is one green circle and three green circles in the picture.",
    "Here is one green square and three green squares in the picture.",
    "Here is one green triangle and three green triangles in the picture.",
    "Here is one green star and three green stars in the picture.",
    "Here is one blue circle and three blue circles in the picture.",
    "Here is one blue square and three blue squares in the picture.",
    "Here is one blue triangle and three blue triangles in the picture.",
    "Here is one blue star and three blue stars in the picture.",
    "Here is one yellow circle and three yellow circles in the picture.",
    "Here is one yellow square and three yellow squares in the picture.",
    "Here is one yellow triangle and three yellow triangles in the picture.",
    "Here is one yellow star and three yellow stars in the picture.",
    "Here is one purple circle and three purple circles in the picture.",
    "Here is one purple square and three purple squares in the picture.",
    "Here is one purple triangle and three purple triangles in the picture.",
    "Here is one purple star and three purple stars in the picture.",
    "Here is one orange circle and three orange circles in the picture.",
    "Here is one orange square and three orange squares in the picture.",
    "Here is one orange triangle and three orange triangles in the picture.",
    "Here is one orange star and three orange stars in the picture.",
)


@dataclass(frozen=True)
class TinySpec:
    """Shapes of the tiny model; the defaults build in well under a second."""

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
    image_size: int = 56
    patch_size: int = 14
    max_tiles: int = 2
    max_positions: int = 8192


def tokenizer_corpus(rubric: Rubric | None) -> list[str]:
    """The texts the tiny tokenizer is trained on: the judge prompts of every criterion, and everyday words."""
    # The words repeated, so their merges compete with the prompt phrases, which repeat a lot.
    texts = [_GENERIC_CORPUS, *list(_WORDS) * 30]
    if rubric is not None:
        for fam_id, fam in rubric.families.items():
            for crit in fam.criterion_ids:
                for fmt in TARGET_FORMATS:
                    p = build_judge_prompt(
                        rubric,
                        fam_id,
                        crit,
                        [{"type": "text", "text": "question"}],
                        [{"type": "text", "text": "response"}],
                        [{"type": "text", "text": "reference"}],
                        fmt,
                    )
                    texts += [part["text"] for part in p.messages[0]["content"] if part["type"] == "text"]
                    texts.append(build_target(3, "The reason is short.", fmt))
    return texts


def build_tokenizer(
    corpus: list[str],
    vocab_size: int,
    special_tokens: list[str] | None = None,
    named_tokens: dict[str, str] | None = None,
    chat_template: str = CHAT_TEMPLATE,
    eos_pad_bos: tuple[str, str, str | None] = ("<|im_end|>", "<|endoftext|>", None),
):
    """Train a byte-level BPE tokenizer with InternVL's special tokens (or a family's ``special_tokens``,
    ``named_tokens``, ``chat_template`` and end, padding and start tokens); digits are single tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens or SPECIAL_TOKENS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=eos_pad_bos[0],
        pad_token=eos_pad_bos[1],
        **({"bos_token": eos_pad_bos[2]} if eos_pad_bos[2] else {}),
        extra_special_tokens=named_tokens
        or {
            "start_image_token": "<img>",
            "end_image_token": "</img>",
            "context_image_token": "<IMG_CONTEXT>",
            "video_token": "<video>",
        },
        chat_template=chat_template,
        model_max_length=TinySpec.max_positions,
    )


def build_tiny_tokenizer(spec: TinySpec = TinySpec(), rubric: Rubric | str | None = "mmie"):
    """The tiny byte-level BPE tokenizer, trained on the rubric's prompts and :data:`_WORDS`."""
    if isinstance(rubric, str):
        rubric = load_rubric(rubric)
    return build_tokenizer(tokenizer_corpus(rubric), spec.vocab_size)


def build_tiny_image_processor(spec: TinySpec = TinySpec()):
    """InternVL's tiling image processor (PIL backend) at the tiny model's tile size."""
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    return GotOcr2ImageProcessorPil(
        size={"height": spec.image_size, "width": spec.image_size},
        crop_to_patches=True,
        min_patches=1,
        max_patches=spec.max_tiles,
    )


def tokens_per_tile(spec: TinySpec = TinySpec()) -> int:
    """Image context tokens per tile: patches per side squared, over 4 (pixel shuffle at ratio 0.5)."""
    return (spec.image_size // spec.patch_size) ** 2 // 4


def build_tiny_model(tokenizer, seed: int = 0, spec: TinySpec = TinySpec()):
    """A randomly initialised, seeded tiny ``InternVLForConditionalGeneration`` for ``tokenizer``, in eval mode.

    ``judge.models.build_tiny_scorer`` pairs it with its processor; this module stays free of ``judge.models``.
    """
    from transformers import InternVLConfig, InternVLForConditionalGeneration

    tok = tokenizer
    config = InternVLConfig(
        vision_config=dict(
            hidden_size=spec.vision_hidden,
            num_hidden_layers=spec.vision_layers,
            num_attention_heads=spec.vision_heads,
            intermediate_size=spec.vision_intermediate,
            image_size=spec.image_size,
            patch_size=spec.patch_size,
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
        image_token_id=tok.context_image_token_id,
        image_seq_length=tokens_per_tile(spec),
        downsample_ratio=0.5,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = InternVLForConditionalGeneration(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model.eval()
