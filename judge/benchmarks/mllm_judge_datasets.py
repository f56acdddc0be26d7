"""MLLM-as-a-Judge's datasets, which its score, pair and batch modes share: the analysis notebooks' datasets by
range of ``score_id`` / ``pair_id`` (:data:`ANALYSIS_RANGES`, at :data:`ANALYSIS_COMMIT`), and the rows grouped
by ``original_dataset`` as the official notebook groups them (see :mod:`judge.benchmarks.mllm_judge`)."""

from __future__ import annotations

from typing import Any

from judge.benchmarks.judging import JudgeItem, group_codes

#: The commit of the analysis notebooks (Score_analysis.ipynb, pair_analysis.ipynb).
ANALYSIS_COMMIT = "7238d1a0d9e7524f0c781da2e2cc857641ce0ef1"
#: The analysis notebooks' datasets by key range (half-open), in their order; the mean divides by 10.
ANALYSIS_RANGES = (
    ((0, 300), "coco"),
    ((300, 600), "Concept Caption"),
    ((600, 900), "diffusiondb"),
    ((900, 1200), "infographicsVQA"),
    ((1200, 1800), "mathvista"),
    ((1800, 2100), "textVQA"),
    ((2100, 2400), "WIT"),
    ((2400, 2700), "ChartQA"),
    ((2700, 3000), "VisitBench"),
    ((3000, 3300), "LLaVA"),
)


def analysis_dataset(key: int | None) -> str | None:
    """The analysis notebooks' dataset of a ``score_id`` / ``pair_id`` (None outside the ranges)."""
    if key is None:
        return None
    return next((name for (lo, hi), name in ANALYSIS_RANGES if lo <= key < hi), None)


def _by_dataset(rows: list[tuple[JudgeItem, Any]]) -> list[tuple[JudgeItem, Any]]:
    """Rows grouped by dataset in order of first appearance, file order within (as the notebook appends)."""
    _, names = group_codes([it.info["dataset"] for it, _ in rows])
    rank = {n: i for i, n in enumerate(names)}
    return sorted(rows, key=lambda row: rank[row[0].info["dataset"]])  # stable: file order within
