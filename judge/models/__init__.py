"""Scorer models: loading (base, adapter, merged), the torchvision-free processor, the tiny model, score tokens.

Names are imported lazily: importing transformers' InternVL classes takes seconds, and a
submodule such as ``judge.models.tiny_clip`` should not pay for them.
"""

from importlib import import_module

_EXPORTS = {
    "load_processor": "loading", "load_scorer": "loading",
    "InternVLImageTextProcessor": "processor",
    "ScoreTokenError": "score_tokens", "score_token_ids": "score_tokens",
    "TinySpec": "tiny", "build_tiny_scorer": "tiny", "save_tiny_scorer": "tiny",
    "ExpectedScorer": "scoring", "ScoreRequest": "scoring", "CriterionScore": "scoring",
    "load_judge": "card", "read_card": "card",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
