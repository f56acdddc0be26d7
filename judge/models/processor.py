"""Processors for images and text only (InternVL, Qwen2.5-VL, Qwen3-VL, LLaVA-OneVision, SmolVLM), so `judge`
runs without torchvision.

The stock ``InternVLProcessor`` insists on a video processor, and InternVL's video
processor needs torchvision. A judge never sees video, so this subclass drops
that attribute and keeps everything else: the same image expansion
(``<img><IMG_CONTEXT>*N</img>`` per image), the same tiling, the same chat
template. It loads the ``processor_config.json``/tokenizer files of stock
InternVL checkpoints (``OpenGVLab/InternVL3-*-hf``) unchanged; the image
processor comes from ``AutoImageProcessor``, which picks the PIL backend when
torchvision is missing.
"""

from __future__ import annotations

import re

from transformers import (
    Idefics3Processor,
    InternVLProcessor,
    LlavaOnevisionProcessor,
    Qwen2_5_VLProcessor,
    Qwen3VLProcessor,
    SmolVLMProcessor,
)
from transformers.processing_utils import ProcessorMixin


class InternVLImageTextProcessor(InternVLProcessor):
    """``InternVLProcessor`` without the video processor (no torchvision needed)."""

    def __init__(
        self, image_processor=None, tokenizer=None, image_seq_length: int = 256, chat_template=None, **kwargs
    ):
        # Skip InternVLProcessor.__init__, which requires a video processor; set what it sets.
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template, **kwargs)
        self.image_seq_length = image_seq_length
        self.start_image_token = tokenizer.start_image_token
        self.end_image_token = tokenizer.end_image_token
        self.start_image_token_id = tokenizer.start_image_token_id
        self.end_image_token_id = tokenizer.end_image_token_id
        self.image_token = tokenizer.context_image_token
        self.video_token = tokenizer.video_token
        self.image_token_id = tokenizer.context_image_token_id
        self.multimodal_pattern = re.compile(
            f"(?P<image>{re.escape(self.image_token)})|(?P<video>{re.escape(self.video_token)})"
        )

    def __call__(self, images=None, text=None, videos=None, **kwargs):
        if videos is not None:
            raise ValueError("InternVLImageTextProcessor handles images and text only, not video")
        return super().__call__(images=images, text=text, **kwargs)


class Qwen2_5_VLImageTextProcessor(Qwen2_5_VLProcessor):
    """``Qwen2_5_VLProcessor`` without the video processor (no torchvision needed): the same expansion of
    ``<|vision_start|><|image_pad|><|vision_end|>`` to one ``<|image_pad|>`` per merged patch, the same dynamic
    resolution between the image processor's ``min_pixels`` and ``max_pixels`` (its PIL backend)."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        # Skip Qwen2_5_VLProcessor.__init__, which requires a video processor; set what it sets.
        self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
        self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template, **kwargs)

    def __call__(self, images=None, text=None, videos=None, **kwargs):
        if videos is not None:
            raise ValueError("Qwen2_5_VLImageTextProcessor handles images and text only, not video")
        return super().__call__(images=images, text=text, **kwargs)


class Qwen3VLImageTextProcessor(Qwen3VLProcessor):
    """``Qwen3VLProcessor`` without the video processor (no torchvision needed): Qwen2.5-VL's image expansion
    (one ``<|image_pad|>`` per merged patch, dynamic resolution between the pixel bounds, the PIL backend of
    Qwen2-VL's image processor that Qwen3-VL checkpoints name)."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        # Skip Qwen3VLProcessor.__init__, which requires a video processor; set what it sets.
        self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
        self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template, **kwargs)
        self.vision_start_token = getattr(tokenizer, "vision_start_token", None) or "<|vision_start|>"
        self.vision_end_token = getattr(tokenizer, "vision_end_token", None) or "<|vision_end|>"
        self.vision_start_token_id = tokenizer.convert_tokens_to_ids(self.vision_start_token)
        self.vision_end_token_id = tokenizer.convert_tokens_to_ids(self.vision_end_token)

    def __call__(self, images=None, text=None, videos=None, **kwargs):
        if videos is not None:
            raise ValueError("Qwen3VLImageTextProcessor handles images and text only, not video")
        return super().__call__(images=images, text=text, **kwargs)


class SmolVLMImageTextProcessor(SmolVLMProcessor):
    """``SmolVLMProcessor`` without the video processor (no torchvision, and no ``num2words``, which only its
    video prompts need): the same image splitting and expansion of ``<image>`` to each sub-image's
    ``<fake_token_around_image><row_i_col_j>`` and ``<image>`` tokens, then the global image's."""

    def __init__(
        self, image_processor=None, tokenizer=None, image_seq_len: int = 169, chat_template=None, **kwargs
    ):
        # Skip SmolVLMProcessor.__init__, which requires a video processor and num2words; set what it sets.
        self.fake_image_token = getattr(tokenizer, "fake_image_token", None) or "<fake_token_around_image>"
        self.image_token = getattr(tokenizer, "image_token", None) or "<image>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.end_of_utterance_token = (
            getattr(tokenizer, "end_of_utterance_token", None) or "<end_of_utterance>"
        )
        self.global_image_token = getattr(tokenizer, "global_image_token", None) or "<global-img>"
        # Once per image (Idefics3Processor's name): what counts an item's images in its tokens
        self.global_image_token_id = tokenizer.convert_tokens_to_ids(self.global_image_token)
        self.image_seq_len = image_seq_len
        self.video_token = getattr(tokenizer, "video_token", None) or "<video>"
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template, **kwargs)
        _rows_and_cols(image_processor)

    def __call__(self, images=None, text=None, videos=None, **kwargs):
        if videos is not None:
            raise ValueError("SmolVLMImageTextProcessor handles images and text only, not video")
        return super().__call__(images=images, text=text, **kwargs)

    def apply_chat_template(self, conversation, chat_template=None, **kwargs):
        # SmolVLMProcessor's reads the video processor's frame settings; without video there are none.
        return ProcessorMixin.apply_chat_template(self, conversation, chat_template, **kwargs)


class Idefics3ImageTextProcessor(Idefics3Processor):
    """``Idefics3Processor`` (no video processor to drop), whose image processor also reports each image's
    grid, so the scorer can expand the images of several prompts from one preprocessing (as SmolVLM's)."""

    def __init__(
        self, image_processor=None, tokenizer=None, image_seq_len: int = 169, chat_template=None, **kwargs
    ):
        super().__init__(
            image_processor, tokenizer, image_seq_len=image_seq_len, chat_template=chat_template, **kwargs
        )
        _rows_and_cols(image_processor)


def _rows_and_cols(image_processor) -> None:
    """Have the image processor return each image's sub-image grid (``rows``/``cols``), which the processor's
    ``replace_image_token`` reads; its processor asks for them per call, the scorer calls it directly. Not
    saved (its ``to_dict`` drops the setting): set again on every load."""
    if image_processor is not None:
        image_processor.return_row_col_info = True


class LlavaOnevisionImageTextProcessor(LlavaOnevisionProcessor):
    """``LlavaOnevisionProcessor`` without the video processor (no torchvision needed): the same anyres
    expansion of ``<image>`` (base tile, grid tiles unpadded, a newline feature per row), the PIL backend of
    its image processor. One prompt's images are one sample (``batch_num_images``), as the chat template's
    path gives them: a lone image in anyres tiles, each of several at base resolution (LLaVA-OneVision's
    multi-image setting), where the stock call would tile every image of a flat list."""

    def __init__(
        self,
        image_processor=None,
        tokenizer=None,
        num_image_tokens=None,
        vision_feature_select_strategy=None,
        chat_template=None,
        image_token="<image>",
        video_token="<video>",
        vision_aspect_ratio="anyres_max_9",
        **kwargs,
    ):
        # Skip LlavaOnevisionProcessor.__init__, which requires a video processor; set what it sets.
        self.num_image_tokens = num_image_tokens
        self.vision_feature_select_strategy = vision_feature_select_strategy
        self.image_token = getattr(tokenizer, "image_token", None) or image_token
        self.video_token = getattr(tokenizer, "video_token", None) or video_token
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        self.vision_aspect_ratio = vision_aspect_ratio
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template, **kwargs)

    def __call__(self, images=None, text=None, videos=None, **kwargs):
        if videos is not None:
            raise ValueError("LlavaOnevisionImageTextProcessor handles images and text only, not video")
        one_prompt = isinstance(text, str) or (isinstance(text, list) and len(text) == 1)
        if one_prompt and isinstance(images, (list, tuple)) and images and not isinstance(images[0], list):
            images = [list(images)]
        return super().__call__(images=images, text=text, **kwargs)


def tiling_pixels(processor) -> int | None:
    """The most pixels of one image the judge can look at: ``max_patches x tile height x tile width`` of an
    InternVL-style tiling image processor (one tile when it does not crop to patches); ``None`` when the
    processor does not say. An image larger than this is scaled down before the model sees it."""
    ip = getattr(processor, "image_processor", processor)
    size = getattr(ip, "size", None)
    longest = getattr(size, "longest_edge", None) if not isinstance(size, dict) else size.get("longest_edge")
    if isinstance(longest, int) and longest > 0 and hasattr(ip, "merge_size"):
        return longest  # Qwen's dynamic resolution: ``longest_edge`` is max_pixels, the most pixels it keeps
    if isinstance(longest, int) and longest > 0 and hasattr(ip, "max_image_size"):
        # Idefics3/SmolVLM: an image is scaled to ``longest_edge`` on its longer side before it is split into
        # sub-images, so a square of that edge is the most it keeps
        return longest * longest
    pinpoints = getattr(ip, "image_grid_pinpoints", None)
    if isinstance(pinpoints, list) and pinpoints:
        return max(int(h) * int(w) for h, w in pinpoints)  # anyres (LLaVA-OneVision): its largest tile grid
    height = getattr(size, "height", None) if not isinstance(size, dict) else size.get("height")
    width = getattr(size, "width", None) if not isinstance(size, dict) else size.get("width")
    if not isinstance(height, int) or not isinstance(width, int) or height <= 0 or width <= 0:
        return None
    tiles = getattr(ip, "max_patches", None) if getattr(ip, "crop_to_patches", False) else 1
    if not isinstance(tiles, int) or tiles < 1:
        return None
    return tiles * height * width
