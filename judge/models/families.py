"""The families of vision-language bases a judge can be: what differs between them, in one place.

A family owns its model class (through the config's ``model_type``), its processor built without torchvision,
how images become tokens in the prompt (the processor's expansion of the image placeholder, and for Qwen's
dynamic resolution the multi-axis rotary positions of those tokens), the tiny local model of its shape, the
LoRA target of its language model, and where its vision tower and projector are (what training freezes,
what quantization skips). Everything else (data, the training loop, the read-out, shared-prefix and packed
scoring, calibration, serving, the card) is family-free and asks this module.

Adding a family: a :class:`Family` in :data:`FAMILIES` (its ``model_types``, tiny name, processor class and
module names), a torchvision-free processor in :mod:`judge.models.processor` where the stock one insists on
a video processor, and a tiny builder in :mod:`judge.testing` (docs/families.md walks through it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from judge.core.errors import ConfigError

if TYPE_CHECKING:
    import torch

#: The language model's linear projections (attention and MLP) that LoRA adapts (``lora.target_modules: language``).
LANGUAGE_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class Family:
    """One family of bases: names, modules, and how its prompts carry images."""

    name: str  #: what the card records (``internvl``, ``qwen2.5-vl``)
    model_types: tuple[str, ...]  #: the configs' ``model_type`` values of this family
    tiny: str  #: the tiny local model's name (``tiny``, ``tiny-qwen2.5-vl``); ``:seed=N`` may follow
    processor_classes: tuple[str, ...]  #: ``processor_class`` names its saved processors carry
    #: module-name parts of the vision tower without its projector (frozen unless ``lora.train_vision``)
    vision_parts: tuple[str, ...]
    #: module-name parts of the projector from vision to language (frozen unless ``lora.train_projector``)
    projector_parts: tuple[str, ...]
    #: module names quantization leaves in full precision (patterns from the name's start), the head included
    quantization_skip: tuple[str, ...]
    #: what the processor gives beside ``pixel_values`` that the forward needs, per image (``image_grid_thw``)
    vision_inputs: tuple[str, ...] = ()
    #: the rotary positions have several axes (Qwen's M-RoPE: time, height, width), computed per prompt
    multi_axis_positions: bool = False
    #: the per-token type map the model's own ``generate`` places images by (Qwen's ``mm_token_type_ids``,
    #: 1 at an image token), from which it computes its multi-axis positions; None: it needs none
    token_types: str | None = None
    #: the image processor takes pixel bounds (Qwen's ``min_pixels``/``max_pixels``, kept in its ``size`` as
    #: ``shortest_edge``/``longest_edge``), which the run config's ``model.min_pixels``/``max_pixels`` set
    pixel_bounds: bool = False
    #: ``pixel_values`` carry an image axis, (batch, images, C, H, W) with a ``pixel_attention_mask``
    #: (Idefics3/SmolVLM): kept as (frames, 1, C, H, W), one row per frame, so that requests concatenate along
    #: the first axis as every family's do (:func:`frames_first`)
    image_axis: bool = False
    #: the language model's module name, under which ``lora.target_modules: language`` adapts
    language_part: str = "language_model"
    #: the forward takes :attr:`token_types` in every pass (not only in ``generate``): Gemma 3 builds from them
    #: its mask in which an image's soft tokens attend to each other both ways
    image_blocks: bool = False
    #: why the packed shared-prefix path cannot score this family (None: it can); ``packed: flex`` is refused
    #: with this reason, ``auto`` takes the KV copy
    packed_refusal: str | None = None
    #: the image processor takes one prompt's images as one sample, a nested list (LLaVA-OneVision: a lone
    #: image in anyres tiles, each of several at base resolution; ``batch_num_images`` tells the forward which)
    nested_images: bool = False
    _processor: Callable[[str], Any] | None = field(default=None, repr=False, compare=False)

    def lora_pattern(self) -> str:
        """``lora.target_modules: language``: the language model's projections only (the vision tower has
        q/k/v- and MLP-like names of its own)."""
        return r".*" + re.escape(self.language_part) + r".*\.(" + "|".join(LANGUAGE_LINEAR) + r")$"

    def frozen_parts(self, train_vision: bool, train_projector: bool) -> list[str]:
        """Name parts of the parameters full tuning keeps frozen."""
        return [
            *([] if train_vision else self.vision_parts),
            *([] if train_projector else self.projector_parts),
        ]

    def trained_modules(self, train_vision: bool, train_projector: bool) -> list[str]:
        """PEFT's ``modules_to_save``: the vision parts trained in full beside the LoRA adapters."""
        return [
            *(self.vision_parts if train_vision else ()),
            *(self.projector_parts if train_projector else ()),
        ]


def _internvl_processor(path: str):
    from judge.models.processor import InternVLImageTextProcessor

    return InternVLImageTextProcessor.from_pretrained(path)


def _qwen25vl_processor(path: str):
    from judge.models.processor import Qwen2_5_VLImageTextProcessor

    return Qwen2_5_VLImageTextProcessor.from_pretrained(path)


def _qwen3vl_processor(path: str):
    from judge.models.processor import Qwen3VLImageTextProcessor

    return Qwen3VLImageTextProcessor.from_pretrained(path)


def _smolvlm_processor(path: str):
    from judge.models.family_smolvlm import load_smolvlm_processor

    return load_smolvlm_processor(path)


def _gemma3_processor(path: str):
    from transformers import Gemma3Processor  # no video processor: the stock one runs without torchvision

    return Gemma3Processor.from_pretrained(path)


def _llava_onevision_processor(path: str):
    from judge.models.processor import LlavaOnevisionImageTextProcessor

    return LlavaOnevisionImageTextProcessor.from_pretrained(path)


INTERNVL = Family(
    name="internvl",
    model_types=("internvl",),
    tiny="tiny",
    processor_classes=("InternVLProcessor", "InternVLImageTextProcessor"),
    vision_parts=("vision_tower",),
    projector_parts=("multi_modal_projector",),
    quantization_skip=(r".*vision_tower", r".*multi_modal_projector", "lm_head"),
    _processor=_internvl_processor,
)

QWEN25VL = Family(
    name="qwen2.5-vl",
    model_types=("qwen2_5_vl",),
    tiny="tiny-qwen2.5-vl",
    processor_classes=("Qwen2_5_VLProcessor", "Qwen2_5_VLImageTextProcessor"),
    vision_parts=("visual.patch_embed", "visual.blocks"),
    projector_parts=("visual.merger",),
    quantization_skip=(r".*visual", "lm_head"),
    vision_inputs=("image_grid_thw",),
    multi_axis_positions=True,
    token_types="mm_token_type_ids",
    pixel_bounds=True,
    _processor=_qwen25vl_processor,
)

#: Qwen3-VL: Qwen2.5-VL's image tokens and positions (its ``get_rope_index`` places an image as Qwen2.5-VL's
#: does; the interleaving of the M-RoPE axes over the rotary frequencies is inside the model), a learned
#: position grid in the vision tower, and DeepStack mergers beside the projector (the forward adds their
#: features to the first language layers at the image tokens, so a prefix holding every image carries them).
QWEN3VL = Family(
    name="qwen3-vl",
    model_types=("qwen3_vl",),
    tiny="tiny-qwen3-vl",
    processor_classes=("Qwen3VLProcessor", "Qwen3VLImageTextProcessor"),
    vision_parts=("visual.patch_embed", "visual.pos_embed", "visual.blocks"),
    projector_parts=("visual.merger", "visual.deepstack_merger_list"),
    quantization_skip=(r".*visual", "lm_head"),
    vision_inputs=("image_grid_thw",),
    multi_axis_positions=True,
    token_types="mm_token_type_ids",
    pixel_bounds=True,
    _processor=_qwen3vl_processor,
)

#: SmolVLM and Idefics3 (SmolVLM's code is Idefics3's): a SigLIP tower, the pixel-shuffle connector, a Llama;
#: each image split into a grid of sub-images and a global image, every frame its own markers and tokens.
SMOLVLM = Family(
    name="smolvlm",
    model_types=("smolvlm", "idefics3"),
    tiny="tiny-smolvlm",
    processor_classes=(
        "SmolVLMProcessor",
        "SmolVLMImageTextProcessor",
        "Idefics3Processor",
        "Idefics3ImageTextProcessor",
    ),
    vision_parts=("vision_model",),
    projector_parts=("connector",),
    quantization_skip=(r".*vision_model", r".*connector", "lm_head"),
    vision_inputs=("pixel_attention_mask",),
    image_axis=True,
    language_part="text_model",
    _processor=_smolvlm_processor,
)

#: Gemma 3: a fixed number of soft tokens per image, attending to each other both ways (its forward builds that
#: mask from ``token_type_ids``), sliding-window and global layers (:mod:`judge.models.family_gemma3`).
GEMMA3 = Family(
    name="gemma3",
    model_types=("gemma3",),
    tiny="tiny-gemma3",
    processor_classes=("Gemma3Processor",),
    vision_parts=("vision_tower",),
    projector_parts=("multi_modal_projector",),
    quantization_skip=(r".*vision_tower", r".*multi_modal_projector", "lm_head"),
    token_types="token_type_ids",
    image_blocks=True,
    packed_refusal=(
        "does not score Gemma 3: its image tokens attend to each other both ways and its sliding windows "
        "count positions, neither of which the prefix-tree mask has"
    ),
    _processor=_gemma3_processor,
)

#: LLaVA-OneVision: a SigLIP tower, a 2-layer MLP projector and a learned ``image_newline`` (a bare parameter:
#: frozen or trained with the projector in full fine-tuning; PEFT's ``modules_to_save`` copies modules only,
#: so LoRA runs leave it as loaded), a Qwen2 language model with plain 1-D positions. Anyres images: the
#: forward takes each image's size and each prompt's image count beside the pixels
#: (docs/families.md, :mod:`judge.models.pixels` for several prompts' patch stacks in one pass).
LLAVA_ONEVISION = Family(
    name="llava-onevision",
    model_types=("llava_onevision",),
    tiny="tiny-llava-onevision",
    processor_classes=("LlavaOnevisionProcessor", "LlavaOnevisionImageTextProcessor"),
    vision_parts=("vision_tower",),
    projector_parts=("multi_modal_projector", "image_newline"),
    quantization_skip=(r".*vision_tower", r".*multi_modal_projector", "lm_head"),
    vision_inputs=("image_sizes", "batch_num_images"),
    nested_images=True,
    _processor=_llava_onevision_processor,
)

#: Every family, the default (``tiny``, a model of no known family) first.
FAMILIES: tuple[Family, ...] = (INTERNVL, QWEN25VL, QWEN3VL, LLAVA_ONEVISION, SMOLVLM, GEMMA3)

#: ``tiny``, ``tiny-qwen2.5-vl``, ... with an optional ``:seed=N``: a family's tiny local model.
TINY_NAME = re.compile(
    r"^(?P<name>" + "|".join(re.escape(f.tiny) for f in FAMILIES) + r")(?::seed=(?P<seed>\d+))?$"
)


def by_name(name: str) -> Family:
    """The family a card records (``internvl``, ``qwen2.5-vl``)."""
    for f in FAMILIES:
        if f.name == name:
            return f
    raise ConfigError(f"unknown model family {name!r}; known: {', '.join(f.name for f in FAMILIES)}")


def by_model_type(model_type: str | None) -> Family | None:
    """The family of a config's ``model_type``; None for a model of no family known here."""
    for f in FAMILIES:
        if model_type in f.model_types:
            return f
    return None


def by_tiny_name(source: str) -> Family | None:
    """The family of a tiny model name (``tiny``, ``tiny-qwen2.5-vl:seed=3``); None for any other source."""
    m = TINY_NAME.match(source)
    if not m:
        return None
    return next(f for f in FAMILIES if f.tiny == m.group("name"))


def by_processor_class(cls: str) -> Family | None:
    """The family of a saved processor's ``processor_class``; None when no family here claims it."""
    for f in FAMILIES:
        if cls in f.processor_classes:
            return f
    return None


def of_model(model) -> Family | None:
    """The family of a loaded model (PEFT-wrapped too), from its config's ``model_type``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return by_model_type(getattr(getattr(base, "config", None), "model_type", None))


def of_processor(processor) -> Family | None:
    """The family of a processor, from its class (ours or the stock one it stands in for)."""
    for klass in type(processor).__mro__:
        if (f := by_processor_class(klass.__name__)) is not None:
            return f
    return None


def load_processor(family: Family, path: str):
    """``family``'s torchvision-free processor from a checkpoint or a saved processor folder."""
    assert family._processor is not None
    return family._processor(path)


def set_pixel_bounds(processor, min_pixels: int | None, max_pixels: int | None) -> None:
    """Set the image processor's pixel bounds (``model.min_pixels``/``max_pixels``) as the processor takes
    them; saved with it, so the judge folder scores at the resolution it trained at. Nothing to do for None."""
    if min_pixels is None and max_pixels is None:
        return
    family = of_processor(processor)
    if family is None or not family.pixel_bounds:
        name = family.name if family is not None else type(processor).__name__
        raise ConfigError(f"model.min_pixels/max_pixels: {name}'s images have no pixel bounds to set")
    if min_pixels is not None and max_pixels is not None and min_pixels > max_pixels:
        raise ConfigError(f"model.min_pixels ({min_pixels}) is over model.max_pixels ({max_pixels})")
    ip = processor.image_processor
    if min_pixels is not None:
        ip.size["shortest_edge"] = min_pixels
    if max_pixels is not None:
        ip.size["longest_edge"] = max_pixels


def frames_first(family: Family | None, vision: dict[str, Any]) -> dict[str, Any]:
    """``vision`` of one encoding as the scorer and the collator keep it: for a family with an image axis
    (:attr:`Family.image_axis`), the processor's (batch, images, ...) ``pixel_values`` and
    ``pixel_attention_mask`` as (frames, 1, ...), its padding frames (mask all zero) dropped. The model flattens
    (batch, images) to frames and drops padding frames itself, then places the frames' features at the image
    tokens in order, so this is the same input, and several requests' frames concatenate along the first axis
    whatever their counts. Anything else unchanged."""
    if family is None or not family.image_axis or vision.get("pixel_values") is None:
        return vision
    pv = vision["pixel_values"]
    mask = vision.get("pixel_attention_mask")
    frames = pv.reshape(-1, 1, *pv.shape[2:])
    out = dict(vision, pixel_values=frames)
    if mask is not None:
        mask = mask.reshape(-1, 1, *mask.shape[2:])
        real = mask.flatten(1).any(-1)
        out.update(pixel_values=frames[real], pixel_attention_mask=mask[real])
    return out


def quantization_skip() -> list[str]:
    """The modules no family's quantization touches (a pattern that matches no module of a model is inert)."""
    out: list[str] = []
    for f in FAMILIES:
        out += [m for m in f.quantization_skip if m not in out]
    return out


def generation_inputs(processor, input_ids: torch.Tensor, vision: Mapping[str, Any]) -> dict[str, Any]:
    """What the model's own ``generate`` (or a forward left to place images itself) takes beside the ids and
    the attention mask: ``vision`` (``pixel_values`` and the family's :attr:`~Family.vision_inputs`, already on
    the model's device) and, where the family has one, its per-token type map computed from ``input_ids``
    (Qwen2.5-VL: ``mm_token_type_ids``, with which its generate computes the M-RoPE positions of the prompt
    and of every new token). Empty without images: InternVL's generate fails on ``pixel_values=None``."""
    out = {k: v for k, v in vision.items() if v is not None}
    if not out:
        return {}
    family = of_processor(processor)
    if family is not None and family.token_types is not None:
        out[family.token_types] = image_token_types(processor, input_ids)
    return out


def image_token_types(processor, input_ids: torch.Tensor) -> torch.Tensor:
    """1 at each image token of ``input_ids``, 0 elsewhere: the processor's ``image_token_ids`` (Gemma 3's
    ``image_token_id`` is its ``<start_of_image>`` placeholder, its image tokens the soft tokens)."""
    import torch

    ids = torch.tensor(processor.image_token_ids, dtype=input_ids.dtype, device=input_ids.device)
    return torch.isin(input_ids, ids).to(input_ids.dtype)


def forward_inputs(processor, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """What a scoring forward pass takes beside ids, mask, positions and pixels: for a family whose mask needs
    them (:attr:`Family.image_blocks`), the token types of ``input_ids`` where it holds an image; else nothing."""
    family = of_processor(processor)
    if family is None or not family.image_blocks or family.token_types is None:
        return {}
    types = image_token_types(processor, input_ids)
    return {family.token_types: types} if bool(types.any()) else {}


# --------------------------------------------------------------------- prompt positions
def multi_axis_positions(
    ids: Sequence[int], image_grid_thw: torch.Tensor | None, image_token_id: int, merge_size: int
) -> torch.Tensor:
    """Qwen2.5-VL's and Qwen3-VL's M-RoPE positions of one prompt, shape (3, len(ids)): as the model's
    ``get_rope_index`` computes them for an unpadded row. A text token advances all three axes by one; an image's tokens take
    (time, row, column) positions of its merged patch grid from where the text stopped, and the text after
    it starts one past the image's largest row or column. A test checks them against the model's own."""
    import torch

    out: list[torch.Tensor] = []
    grids = iter(image_grid_thw.tolist() if image_grid_thw is not None else [])
    cur, i, n = 0, 0, len(ids)
    while i < n:
        if ids[i] == image_token_id:
            t, h, w = next(grids)
            h, w = h // merge_size, w // merge_size
            tt, hh, ww = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij")
            out.append(torch.stack([tt + cur, hh + cur, ww + cur]).reshape(3, -1))
            i += t * h * w
            cur += max(h, w)
        else:
            j = i
            while j < n and ids[j] != image_token_id:
                j += 1
            out.append(torch.arange(cur, cur + j - i).expand(3, -1))
            cur += j - i
            i = j
    return torch.cat(out, dim=1) if out else torch.zeros((3, 0), dtype=torch.long)
