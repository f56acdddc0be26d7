"""Point statistics of a scorer against human scores (scipy does the arithmetic)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def correlation_summary(pred: Sequence[float], human: Sequence[float]) -> dict[str, float | int | None]:
    """Pearson, Spearman, Kendall tau-b, MAE and MSE of ``pred`` against ``human``.

    A correlation that is undefined (fewer than 2 items, or a constant input) is ``None``,
    never 0 or NaN, so a table can say "undefined" instead of a misleading number.
    """
    from scipy import stats

    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    if p.shape != h.shape:
        raise ValueError(f"pred and human differ in length: {p.shape[0]} vs {h.shape[0]}")
    out: dict[str, float | int | None] = {"n": int(p.size), "pearson": None, "spearman": None, "kendall": None,
                                          "mae": None, "mse": None}
    if p.size == 0:
        return out
    out["mae"] = float(np.mean(np.abs(p - h)))
    out["mse"] = float(np.mean((p - h) ** 2))
    if p.size < 2 or np.ptp(p) == 0 or np.ptp(h) == 0:
        return out
    out["pearson"] = _finite(stats.pearsonr(p, h).statistic)
    out["spearman"] = _finite(stats.spearmanr(p, h).statistic)
    out["kendall"] = _finite(stats.kendalltau(p, h, variant="b").statistic)
    return out
