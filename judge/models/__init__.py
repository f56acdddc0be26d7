"""Scorer models: loading (base, adapter, merged), the torchvision-free processor, the tiny model, score tokens."""

from .loading import load_processor, load_scorer
from .processor import InternVLImageTextProcessor
from .score_tokens import ScoreTokenError, score_token_ids
from .tiny import TinySpec, build_tiny_scorer, save_tiny_scorer

__all__ = [
    "InternVLImageTextProcessor", "ScoreTokenError", "TinySpec", "build_tiny_scorer", "load_processor",
    "load_scorer", "save_tiny_scorer", "score_token_ids",
]
