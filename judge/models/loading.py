"""Load a scorer (base model, base + LoRA adapter, or merged) and its processor through one code path.

``load_scorer("tiny")`` builds the seeded tiny InternVL model in memory (``tiny-qwen2.5-vl`` the tiny
Qwen2.5-VL, ``tiny-qwen3-vl`` the tiny Qwen3-VL, ``tiny-llava-onevision`` the tiny LLaVA-OneVision,
``tiny-smolvlm`` the tiny SmolVLM, ``tiny-gemma3`` the tiny Gemma 3, :mod:`judge.models.families`); any other
value is a local folder or a hub id that ``AutoModelForImageTextToText`` loads
(native InternVL checkpoints such as ``OpenGVLab/InternVL3-1B-hf`` included).
Weights load from safetensors only, and remote code runs only when asked.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from judge.core.errors import ConfigError
from judge.models.devices import check_device, resolve_dtype
from judge.models.families import (
    FAMILIES,
    GEMMA3,
    INTERNVL,
    LLAVA_ONEVISION,
    QWEN3VL,
    QWEN25VL,
    SMOLVLM,
    by_model_type,
    by_processor_class,
    by_tiny_name,
    quantization_skip,
)
from judge.models.families import load_processor as load_family_processor
from judge.models.sources import TINY_NAME as _TINY
from judge.models.sources import check_model_source, tiny_seed

if TYPE_CHECKING:
    import torch

# Re-exported: callers of these names from here keep working (they live in devices and sources now).
__all__ = [
    "build_tiny_gemma3_processor",
    "build_tiny_llava_onevision_processor",
    "build_tiny_processor",
    "build_tiny_qwen3_processor",
    "build_tiny_qwen_processor",
    "build_tiny_scorer",
    "build_tiny_smolvlm_processor",
    "check_device",
    "check_model_source",
    "load_processor",
    "load_scorer",
    "progress_bars",
    "quantization_config",
    "resolve_dtype",
    "save_tiny_scorer",
    "tiny_seed",
]


@contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """transformers' own progress bars (``Loading weights``, ...) on (as they are) or off for a while."""
    from transformers.utils import logging as hf_logging

    if enabled or not hf_logging.is_progress_bar_enabled():
        yield
        return
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.enable_progress_bar()


def build_tiny_processor(spec=None, rubric="mmie"):
    """The tiny model's processor: its tokenizer and tiling image processor (:mod:`judge.testing.tiny`)."""
    from judge.models.processor import InternVLImageTextProcessor
    from judge.testing.tiny import (
        CHAT_TEMPLATE,
        TinySpec,
        build_tiny_image_processor,
        build_tiny_tokenizer,
        tokens_per_tile,
    )

    spec = spec or TinySpec()
    return InternVLImageTextProcessor(
        image_processor=build_tiny_image_processor(spec),
        tokenizer=build_tiny_tokenizer(spec, rubric),
        image_seq_length=tokens_per_tile(spec),
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_qwen_processor(spec=None, rubric="mmie"):
    """The tiny Qwen2.5-VL's processor: its tokenizer and dynamic-resolution image processor
    (:mod:`judge.testing.tiny_qwen25vl`)."""
    from judge.models.processor import Qwen2_5_VLImageTextProcessor
    from judge.testing.tiny_qwen25vl import (
        CHAT_TEMPLATE,
        TinyQwenSpec,
        build_tiny_qwen_image_processor,
        build_tiny_qwen_tokenizer,
    )

    spec = spec or TinyQwenSpec()
    return Qwen2_5_VLImageTextProcessor(
        image_processor=build_tiny_qwen_image_processor(spec),
        tokenizer=build_tiny_qwen_tokenizer(spec, rubric),
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_qwen3_processor(spec=None, rubric="mmie"):
    """The tiny Qwen3-VL's processor: the tiny Qwen tokenizer with Qwen3-VL's template, and its image processor
    (:mod:`judge.testing.tiny_qwen3vl`)."""
    from judge.models.processor import Qwen3VLImageTextProcessor
    from judge.testing.tiny_qwen3vl import (
        CHAT_TEMPLATE,
        TinyQwen3Spec,
        build_tiny_qwen3_image_processor,
        build_tiny_qwen3_tokenizer,
    )

    spec = spec or TinyQwen3Spec()
    return Qwen3VLImageTextProcessor(
        image_processor=build_tiny_qwen3_image_processor(spec),
        tokenizer=build_tiny_qwen3_tokenizer(spec, rubric),
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_smolvlm_processor(spec=None, rubric="mmie"):
    """The tiny SmolVLM's processor: its tokenizer and image splitting processor
    (:mod:`judge.testing.tiny_smolvlm`)."""
    from judge.models.processor import SmolVLMImageTextProcessor
    from judge.testing.tiny_smolvlm import (
        CHAT_TEMPLATE,
        TinySmolVLMSpec,
        build_tiny_smolvlm_image_processor,
        build_tiny_smolvlm_tokenizer,
        image_seq_len,
    )

    spec = spec or TinySmolVLMSpec()
    return SmolVLMImageTextProcessor(
        image_processor=build_tiny_smolvlm_image_processor(spec),
        tokenizer=build_tiny_smolvlm_tokenizer(spec, rubric),
        image_seq_len=image_seq_len(spec),
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_gemma3_processor(spec=None, rubric="mmie"):
    """The tiny Gemma 3's processor: the stock ``Gemma3Processor`` (no video processor) with the tiny tokenizer
    and Gemma 3's image processor, PIL backend (:mod:`judge.testing.tiny_gemma3`)."""
    from transformers import Gemma3Processor

    from judge.testing.tiny_gemma3 import (
        CHAT_TEMPLATE,
        TinyGemma3Spec,
        build_tiny_gemma3_image_processor,
        build_tiny_gemma3_tokenizer,
    )

    spec = spec or TinyGemma3Spec()
    return Gemma3Processor(
        image_processor=build_tiny_gemma3_image_processor(spec),
        tokenizer=build_tiny_gemma3_tokenizer(spec, rubric),
        chat_template=CHAT_TEMPLATE,
        image_seq_length=spec.tokens_per_image,
    )


def build_tiny_llava_onevision_processor(spec=None, rubric="mmie"):
    """The tiny LLaVA-OneVision's processor: its tokenizer and anyres image processor
    (:mod:`judge.testing.tiny_llava_onevision`)."""
    from judge.models.processor import LlavaOnevisionImageTextProcessor
    from judge.testing.tiny_llava_onevision import (
        CHAT_TEMPLATE,
        TinyLlavaOnevisionSpec,
        build_tiny_llava_onevision_image_processor,
        build_tiny_llava_onevision_tokenizer,
    )

    spec = spec or TinyLlavaOnevisionSpec()
    return LlavaOnevisionImageTextProcessor(
        image_processor=build_tiny_llava_onevision_image_processor(spec),
        tokenizer=build_tiny_llava_onevision_tokenizer(spec, rubric),
        num_image_tokens=spec.features_per_tile,
        vision_feature_select_strategy="full",
        chat_template=CHAT_TEMPLATE,
        vision_aspect_ratio=f"anyres_max_{spec.max_tiles}",
    )


def build_tiny_scorer(seed: int = 0, spec=None, rubric="mmie", name: str = "tiny"):
    """Return ``(model, processor)``: a randomly initialised, seeded tiny judge on the CPU; ``name`` is the
    family's tiny name (``tiny``: InternVL, ``tiny-qwen2.5-vl``: Qwen2.5-VL, ``tiny-qwen3-vl``: Qwen3-VL,
    ``tiny-llava-onevision``: LLaVA-OneVision, ``tiny-smolvlm``: SmolVLM, ``tiny-gemma3``: Gemma 3; no
    ``:seed=``)."""
    family = by_tiny_name(name)
    if family is SMOLVLM:
        from judge.testing.tiny_smolvlm import TinySmolVLMSpec, build_tiny_smolvlm_model

        sspec = spec or TinySmolVLMSpec()
        processor = build_tiny_smolvlm_processor(sspec, rubric)
        return build_tiny_smolvlm_model(processor.tokenizer, seed, sspec), processor
    if family is GEMMA3:
        from judge.testing.tiny_gemma3 import TinyGemma3Spec, build_tiny_gemma3_model

        gspec = spec or TinyGemma3Spec()
        processor = build_tiny_gemma3_processor(gspec, rubric)
        return build_tiny_gemma3_model(processor.tokenizer, seed, gspec), processor
    if family is LLAVA_ONEVISION:
        from judge.testing.tiny_llava_onevision import (
            TinyLlavaOnevisionSpec,
            build_tiny_llava_onevision_model,
        )

        lspec = spec or TinyLlavaOnevisionSpec()
        processor = build_tiny_llava_onevision_processor(lspec, rubric)
        return build_tiny_llava_onevision_model(processor.tokenizer, seed, lspec), processor
    if family is QWEN3VL:
        from judge.testing.tiny_qwen3vl import TinyQwen3Spec, build_tiny_qwen3_model

        q3spec = spec or TinyQwen3Spec()
        processor = build_tiny_qwen3_processor(q3spec, rubric)
        return build_tiny_qwen3_model(processor.tokenizer, seed, q3spec), processor
    if family is QWEN25VL:
        from judge.testing.tiny_qwen25vl import TinyQwenSpec, build_tiny_qwen_model

        qspec = spec or TinyQwenSpec()
        processor = build_tiny_qwen_processor(qspec, rubric)
        return build_tiny_qwen_model(processor.tokenizer, seed, qspec), processor
    if family is not INTERNVL:
        raise ConfigError(f"{name!r} is not a tiny model name ({', '.join(f.tiny for f in FAMILIES)})")
    from judge.testing.tiny import TinySpec, build_tiny_model

    spec = spec or TinySpec()
    processor = build_tiny_processor(spec, rubric)
    return build_tiny_model(processor.tokenizer, seed, spec), processor


def save_tiny_scorer(out_dir: str | Path, seed: int = 0, name: str = "tiny") -> Path:
    """Build a tiny scorer and save model and processor with ``save_pretrained`` (a model folder)."""
    out_dir = Path(out_dir)
    model, processor = build_tiny_scorer(seed, name=name)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir


def load_processor(path_or_id: str, trust_remote_code: bool = False):
    """The processor of a checkpoint; a family's checkpoints (:mod:`judge.models.families`) get its
    torchvision-free one."""
    from transformers import AutoConfig, AutoProcessor

    m = _TINY.match(path_or_id)
    if m:
        family = by_tiny_name(path_or_id)
        if family is GEMMA3:
            return build_tiny_gemma3_processor()
        if family is LLAVA_ONEVISION:
            return build_tiny_llava_onevision_processor()
        if family is QWEN3VL:
            return build_tiny_qwen3_processor()
        if family is SMOLVLM:
            return build_tiny_smolvlm_processor()
        return build_tiny_qwen_processor() if family is QWEN25VL else build_tiny_processor()
    folder = Path(path_or_id)
    if folder.is_dir() and not (folder / "config.json").is_file():
        # A processor saved on its own (a judge's processor/): its processor_config names the class.
        pc = folder / "processor_config.json"
        cls = json.loads(pc.read_text(encoding="utf-8")).get("processor_class", "") if pc.is_file() else ""
        if (family := by_processor_class(cls)) is not None:
            return load_family_processor(family, path_or_id)
        return AutoProcessor.from_pretrained(path_or_id, trust_remote_code=trust_remote_code)
    config = AutoConfig.from_pretrained(path_or_id, trust_remote_code=trust_remote_code)
    if (family := by_model_type(config.model_type)) is not None:
        return load_family_processor(family, path_or_id)
    return AutoProcessor.from_pretrained(path_or_id, trust_remote_code=trust_remote_code)


def load_scorer(
    path_or_id: str,
    adapter: str | None = None,
    dtype: str | torch.dtype = "auto",
    device: str = "cpu",
    quantization: str | None = None,
    trust_remote_code: bool = False,
    attn_implementation: str | None = None,
    device_map: dict | str | None = None,
):
    """Return ``(model, processor)`` ready for scoring (eval mode, on ``device``).

    ``adapter`` is a PEFT adapter folder applied on top of the base. ``quantization``
    is None, ``"4bit"`` (NF4) or ``"8bit"`` through bitsandbytes.
    """
    check_model_source(path_or_id)
    if adapter is not None:
        if not (Path(adapter) / "adapter_config.json").is_file():
            raise ConfigError(f"adapter folder {adapter!r} has no adapter_config.json")
        if not (Path(adapter) / "adapter_model.safetensors").is_file():
            # PEFT would fall back to a pickled adapter_model.bin; weights load from safetensors only.
            raise ConfigError(
                f"adapter folder {adapter!r} has no adapter_model.safetensors (judge loads weights "
                "from safetensors only; re-save the adapter with safe_serialization=True)"
            )
    torch_dtype = resolve_dtype(dtype, device)
    m = _TINY.match(path_or_id)
    if m and quantization is not None:
        # bitsandbytes quantizes while loading: go through a saved copy of the tiny model.
        with tempfile.TemporaryDirectory(prefix="judge-tiny-") as tmp:
            save_tiny_scorer(tmp, seed=tiny_seed(path_or_id), name=m.group("name"))
            return load_scorer(
                tmp, adapter, dtype, device, quantization, trust_remote_code, attn_implementation, device_map
            )
    if m:
        model, processor = build_tiny_scorer(seed=tiny_seed(path_or_id), name=m.group("name"))
        model = model.to(dtype=torch_dtype)
    else:
        from transformers import AutoModelForImageTextToText

        kwargs = dict(dtype=torch_dtype, trust_remote_code=trust_remote_code, use_safetensors=True)
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        if quantization is not None:
            kwargs["quantization_config"] = quantization_config(quantization, torch_dtype)
            if device_map is None and str(device).startswith("cuda"):
                device_map = {"": device}
        if device_map is not None:
            kwargs["device_map"] = device_map
        model = AutoModelForImageTextToText.from_pretrained(path_or_id, **kwargs)
        processor = load_processor(path_or_id, trust_remote_code)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    if quantization is None:
        model = model.to(device)
    return model.eval(), processor


def quantization_config(kind: str, compute_dtype: torch.dtype):
    from transformers import BitsAndBytesConfig

    # Only the language model is quantized: the vision tower and projector are small, keep their
    # precision and stay trainable (lora.train_vision / train_projector), and the head stays exact.
    skip = quantization_skip()  # every family's vision parts and head; patterns match from the name's start
    if kind == "4bit":
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=compute_dtype,
            llm_int8_skip_modules=skip,
        )
    if kind == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=skip)
    raise ConfigError(f"quantization {kind!r} is not one of none, 4bit, 8bit")
