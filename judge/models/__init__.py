"""Scorer models: loading (base, adapter, merged), the torchvision-free processor, the tiny model, score tokens.

A judge loads through one call, :func:`judge.models.load` (:mod:`judge.models.loader`): a judge folder, a model
folder or hub id with a rubric, or ``tiny`` in; a :class:`~judge.models.loader.LoadedJudge` out.

Names are imported lazily: importing transformers' InternVL classes takes seconds, and a
submodule such as ``judge.testing.tiny_clip`` should not pay for them.
"""

from importlib import import_module

#: Tokens per forward pass, padding included: the one default budget of every scoring path (judge-score's
#: ``batch_tokens``, the validation during training, the read-out's batching).
BATCH_TOKENS = 16384

_EXPORTS = {
    "load": "loader",
    "resolve": "loader",
    "LoadedJudge": "loader",
    "JudgeSpec": "loader",
    "load_processor": "loading",
    "load_scorer": "loading",
    "InternVLImageTextProcessor": "processor",
    "tiling_pixels": "processor",
    "ScoreTokenError": "score_tokens",
    "score_token_ids": "score_tokens",
    "build_tiny_processor": "loading",
    "build_tiny_scorer": "loading",
    "save_tiny_scorer": "loading",
    "ExpectedScorer": "readout",
    "ScoreRequest": "readout",
    "CriterionScore": "readout",
    "load_judge": "card",
    "read_card": "card",
}

__all__ = ["BATCH_TOKENS", *sorted(_EXPORTS)]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
