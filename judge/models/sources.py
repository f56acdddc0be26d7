"""Where a model comes from: a ``tiny`` / ``tiny:seed=N`` name, a local folder, or a hub id; checked, in words,
before anything loads. Nothing is loaded here, so code above :mod:`judge.models` may check any model source
(a CLIP checkpoint, a base model) through this module."""

from __future__ import annotations

import re
from pathlib import Path

from judge.core.errors import ConfigError
from judge.models.families import TINY_NAME as _TINY_NAME

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
#: ``tiny`` or ``tiny:seed=N`` (the seeded tiny InternVL, :mod:`judge.testing.tiny`), or another family's tiny
#: model (``tiny-qwen2.5-vl[:seed=N]``): :data:`judge.models.families.TINY_NAME`
TINY_NAME = _TINY_NAME


def tiny_seed(path_or_id: str) -> int:
    """The seed of a tiny model name (``tiny``, ``tiny:seed=N``, ``tiny-qwen2.5-vl:seed=N``; 0 when not given)."""
    m = TINY_NAME.match(path_or_id)
    if not m:
        raise ConfigError(f"{path_or_id!r} is not a tiny model name (tiny or tiny:seed=N)")
    return int(m.group("seed") or 0)


def check_model_source(path_or_id: str, hint: str = "") -> None:
    """Fail early, in words, on a model that cannot be loaded: a folder that is missing, incomplete or holds
    no safetensors weights, or a hub id that is neither in the local Hugging Face cache nor reachable.
    ``hint`` is added to a hub error (e.g. where to go without a checkpoint)."""
    if TINY_NAME.match(path_or_id):
        return
    p = Path(path_or_id)
    if p.exists():
        if not (p / "config.json").is_file():
            raise ConfigError(f"model folder {str(p)!r} has no config.json; is it a saved model?")
        if not any(p.glob("*.safetensors")):
            raise ConfigError(
                f"model folder {str(p)!r} has no .safetensors weights (judge loads weights from "
                "safetensors only; re-save with save_pretrained(..., safe_serialization=True))"
            )
        return
    if not HUB_ID.match(path_or_id) or path_or_id.startswith((".", "/", "~")):
        raise ConfigError(
            f"model folder {path_or_id!r} does not exist (and it is not a hub id like 'org/name')"
        )
    _check_hub_model(path_or_id, hint)


def _check_hub_model(repo_id: str, hint: str) -> None:
    """A hub id is usable when its config is in the local cache, or the hub answers for it (a short probe,
    so a machine without the hub fails in a second instead of after minutes of retries)."""
    import os

    from huggingface_hub import HfApi, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(repo_id, "config.json"), str):
        return
    tail = f"; {hint}" if hint else ""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ConfigError(
            f"model {repo_id!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set: "
            f"download it where the hub is reachable (hf download {repo_id} --local-dir DIR), or use a "
            f"local folder of it{tail}"
        )
    try:
        HfApi().model_info(repo_id, timeout=10)
    except Exception as e:  # noqa: BLE001 - any failure means the same to the user: the model is not to be had
        raise ConfigError(
            f"model {repo_id!r} is not in the local Hugging Face cache and the hub cannot provide "
            f"it ({type(e).__name__}: {str(e).splitlines()[0][:160]}); download it where the hub is "
            f"reachable (hf download {repo_id} --local-dir DIR), or use a local folder of it{tail}"
        ) from None
