"""Rule-based benchmark metrics: MileBench, MMRA, MMIE multiple choice; one module per family.

Public API (the scoring engine's)::

    score_predictions(records, mode="official")  # -> list[ScoreRecord]; mode official|strict|both
    needs_judge(record)                          # -> bool: goes to the learned judge
    summarize(score_records)                     # -> list[dict] summary rows

``official`` reproduces each benchmark's own scoring exactly (its bugs included, so numbers
match the leaderboards); ``strict`` uses the toolkit's extractor (:mod:`.extract`);
``summarize`` counts the items where the two disagree.
"""

from .common import BOTH, MODES, OFFICIAL, STRICT
from .extract import Extraction, extract_choice, extract_yes_no, option_keys
from .registry import (
    REGISTRY,
    BenchmarkMetrics,
    get_benchmark,
    metric_for,
    needs_judge,
    register,
    score_predictions,
    summarize,
)

__all__ = [
    "BOTH", "MODES", "OFFICIAL", "REGISTRY", "STRICT", "BenchmarkMetrics", "Extraction", "extract_choice",
    "extract_yes_no", "get_benchmark", "metric_for", "needs_judge", "option_keys", "register",
    "score_predictions", "summarize",
]
