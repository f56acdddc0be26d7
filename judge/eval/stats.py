"""Point statistics of a scorer against human scores; the arithmetic is scipy's and scikit-learn's.

Every function takes plain sequences (one value per item) and returns plain Python numbers, with
``None`` wherever a statistic is undefined (too few items, a constant input): a table can then
say "undefined" instead of showing a misleading 0 or NaN.

Definitions (also written into every report):

* Pearson, Spearman, Kendall tau-b: ``scipy.stats.pearsonr``, ``spearmanr``, ``kendalltau(variant="b")``.
* MAE, MSE: ``sklearn.metrics.mean_absolute_error`` / ``mean_squared_error`` on the raw values.
* Cosine similarity (MMIE's measure): of the raw score vectors, not centred,
  ``1 - scipy.spatial.distance.cosine``.
* Quadratic-weighted kappa: ``sklearn.metrics.cohen_kappa_score(weights="quadratic")`` on scores
  rounded half up (``floor(x + 0.5)``) and clipped to the rubric scale, with every scale value as a label.
* Within one point: the share of items with ``|scorer - human| <= 1`` on the raw values.
* Pairwise ranking accuracy: over pairs of responses to the same question (and the same criterion)
  that humans scored differently, the share the scorer orders the same way; a scorer tie counts half.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np

from judge.data.aggregate import round_half_up

#: Two human means closer than this are a tie (means of integers can differ by float noise only).
TIE_EPS = 1e-9


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
    out: dict[str, float | int | None] = {
        "n": int(p.size),
        "pearson": None,
        "spearman": None,
        "kendall": None,
        "mae": None,
        "mse": None,
    }
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


def cosine_similarity(pred: Sequence[float], human: Sequence[float]) -> float | None:
    """Cosine similarity of the two score vectors, not centred (MMIE's measure; ``1 -
    scipy.spatial.distance.cosine``); ``None`` for no items or an all-zero vector."""
    from scipy.spatial.distance import cosine

    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    if p.size == 0 or not p.any() or not h.any():
        return None
    return _finite(1.0 - cosine(p, h))


def scale_summary(pred: Sequence[float], human: Sequence[float]) -> dict[str, float | None]:
    """MMIE's measures besides Pearson, for scores on the rubric scale: ``cosine``, ``mse``, ``mae``."""
    return {"cosine": cosine_similarity(pred, human), **error_summary(pred, human)}


def rounded_on_scale(values: Sequence[float] | np.ndarray, scale: tuple[int, int]) -> np.ndarray:
    """Scores rounded half up and clipped to the scale ``(min, max)``: what kappa and the confusion matrix use."""
    return np.clip(round_half_up(values), scale[0], scale[1])


def quadratic_kappa(pred: Sequence[float], human: Sequence[float], scale: tuple[int, int]) -> float | None:
    """Quadratic-weighted Cohen's kappa on rounded scores (scikit-learn); ``None`` when undefined."""
    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import cohen_kappa_score

    p = rounded_on_scale(pred, scale)
    h = rounded_on_scale(human, scale)
    if p.size < 2:
        return None
    with warnings.catch_warnings():
        # sklearn warns and returns NaN when both raters use a single label; we report None instead.
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        k = cohen_kappa_score(h, p, weights="quadratic", labels=list(range(scale[0], scale[1] + 1)))
    return _finite(k)


def within_one(pred: Sequence[float], human: Sequence[float]) -> float | None:
    """Share of items whose scorer value lies within one point of the human value (raw values)."""
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    if p.size == 0:
        return None
    return float(np.mean(np.abs(p - h) <= 1.0 + TIE_EPS))


def error_summary(pred: Sequence[float], human: Sequence[float]) -> dict[str, float | None]:
    """MAE and MSE from scikit-learn (``None`` for no items)."""
    from sklearn.metrics import mean_absolute_error, mean_squared_error

    if len(pred) == 0:
        return {"mae": None, "mse": None}
    return {"mae": float(mean_absolute_error(human, pred)), "mse": float(mean_squared_error(human, pred))}


def pairwise_ranking_accuracy(
    pred: Sequence[float], human: Sequence[float], groups: Sequence[Hashable]
) -> dict[str, float | int | None]:
    """How often the scorer orders two responses to the same question as humans do.

    Pairs are formed within each group (a question, or a question and criterion); pairs that
    humans tied are left out. A pair the scorer ties counts half. Returns ``accuracy``
    (``None`` without pairs), ``n_pairs``, ``n_scorer_ties`` and ``n_human_ties`` (left out).
    """
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    by_group: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        by_group[g].append(i)
    agree = 0.0
    n_pairs = n_scorer_ties = n_human_ties = 0
    for idx in by_group.values():
        if len(idx) < 2:
            continue
        ii = np.asarray(idx)
        dh = h[ii][:, None] - h[ii][None, :]
        dp = p[ii][:, None] - p[ii][None, :]
        upper = np.triu(np.ones_like(dh, dtype=bool), k=1)
        human_tie = np.abs(dh) <= TIE_EPS
        n_human_ties += int((upper & human_tie).sum())
        use = upper & ~human_tie
        scorer_tie = use & (np.abs(dp) <= TIE_EPS)
        same = use & ~scorer_tie & (np.sign(dh) == np.sign(dp))
        n_pairs += int(use.sum())
        n_scorer_ties += int(scorer_tie.sum())
        agree += float(same.sum()) + 0.5 * float(scorer_tie.sum())
    return {
        "accuracy": agree / n_pairs if n_pairs else None,
        "n_pairs": n_pairs,
        "n_scorer_ties": n_scorer_ties,
        "n_human_ties": n_human_ties,
    }


def point_metrics(
    pred: Sequence[float],
    human: Sequence[float],
    groups: Sequence[Hashable],
    *,
    scale: tuple[int, int] | None,
) -> dict:
    """Every point statistic of one slice.

    ``scale`` is the rubric scale ``(min, max)`` when the scorer's values are on it; ``None``
    (e.g. CLIPScore, 0..2.5) leaves MAE, MSE, kappa and within-one as ``None``: a distance
    between numbers on different scales means nothing.
    """
    corr = correlation_summary(pred, human)
    out: dict[str, object] = {
        "n": corr["n"],
        "pearson": corr["pearson"],
        "spearman": corr["spearman"],
        "kendall": corr["kendall"],
        "mae": None,
        "mse": None,
        "qwk": None,
        "within1": None,
    }
    if scale is not None:
        out.update(error_summary(pred, human))
        out["qwk"] = quadratic_kappa(pred, human, scale)
        out["within1"] = within_one(pred, human)
    out["pairwise"] = pairwise_ranking_accuracy(pred, human, groups)
    return out


__all__ = [
    "correlation_summary",
    "cosine_similarity",
    "error_summary",
    "pairwise_ranking_accuracy",
    "point_metrics",
    "quadratic_kappa",
    "rounded_on_scale",
    "scale_summary",
    "within_one",
]
