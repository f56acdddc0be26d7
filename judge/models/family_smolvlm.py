"""SmolVLM and Idefics3 checkpoints' processors, without torchvision (:data:`judge.models.families.SMOLVLM`).

SmolVLM's model code is Idefics3's (transformers builds it from Idefics3's), and both families' checkpoints
share the image splitting and the prompt layout of their frames; only the processor classes differ: a
SmolVLM checkpoint's insists on a video processor (torchvision, num2words), an Idefics3 one's has none. A
folder's own ``processor_config.json`` (or, for a model folder or hub id, its config's ``model_type``) says
which to build.
"""

from __future__ import annotations

import json
from pathlib import Path


def load_smolvlm_processor(path: str):
    """The torchvision-free processor of a SmolVLM or Idefics3 checkpoint or saved processor folder."""
    from judge.models.processor import Idefics3ImageTextProcessor, SmolVLMImageTextProcessor

    cls = Idefics3ImageTextProcessor if _is_idefics3(path) else SmolVLMImageTextProcessor
    return cls.from_pretrained(path)


def _is_idefics3(path: str) -> bool:
    pc = Path(path) / "processor_config.json"
    if pc.is_file():
        return "Idefics3" in str(json.loads(pc.read_text(encoding="utf-8")).get("processor_class", ""))
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(path).model_type == "idefics3"
    except (OSError, ValueError):  # a processor folder without either file: SmolVLM's layout
        return False
