"""The judge card (``judge_card.json``) and loading a judge checkpoint folder.

A judge folder, as ``judge-train`` writes it::

    judge/
      judge_card.json   what the judge is: base, rubric name and hash, data hash, config, metrics
      adapter/          a plain PEFT adapter (LoRA runs)      -> PeftModel.from_pretrained(base, adapter)
      merged/           full weights + processor (full runs, or LoRA with merging asked for)
      processor/        the processor the judge was trained with

:func:`load_judge` loads it for scoring: ``merged/`` when present, else the base plus
``adapter/``.
"""

from __future__ import annotations

import json
import platform
import subprocess
from pathlib import Path
from typing import Any

from ..data.errors import ConfigError

CARD_NAME = "judge_card.json"


def library_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("judge", "torch", "transformers", "peft", "trl", "accelerate", "datasets", "bitsandbytes"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The checkout's commit, with ``-dirty`` when tracked files differ from it; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def read_card(judge_dir: str | Path) -> dict[str, Any]:
    path = Path(judge_dir) / CARD_NAME
    if not path.is_file():
        raise ConfigError(f"{judge_dir!s} is not a judge folder: it has no {CARD_NAME} (judge-train writes one; "
                          "for a plain model folder pass --rubric)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from None


def load_judge(judge_dir: str | Path, *, device: str = "cpu", dtype: str = "auto", quantization: str | None = None,
               trust_remote_code: bool = False):
    """Return ``(model, processor, card)`` of a judge folder written by ``judge-train``."""
    from .loading import load_processor, load_scorer

    judge_dir = Path(judge_dir)
    card = read_card(judge_dir)
    merged, adapter = judge_dir / "merged", judge_dir / "adapter"
    if merged.is_dir():
        model, processor = load_scorer(str(merged), dtype=dtype, device=device, quantization=quantization,
                                       trust_remote_code=trust_remote_code)
    elif adapter.is_dir():
        model, processor = load_scorer(card["base_model"], adapter=str(adapter), dtype=dtype, device=device,
                                       quantization=quantization, trust_remote_code=trust_remote_code)
    else:
        raise ConfigError(f"judge folder {str(judge_dir)!r} has neither merged/ nor adapter/")
    if (judge_dir / "processor").is_dir():
        processor = load_processor(str(judge_dir / "processor"), trust_remote_code)
    return model, processor, card
