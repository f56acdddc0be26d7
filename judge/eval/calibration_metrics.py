"""How well a judge's scale distributions fit the humans: NLL, Brier score, expected calibration errors,
and the points of a reliability diagram. ``judge-calibrate`` compares the raw and the calibrated
distributions with them on held-out items, ``judge-report`` on its human items.

Every measure is an average over *items* (one labelled response and criterion), each item first
averaging over its annotators' ratings, so that the report can resample items by question with the
cluster bootstrap's weights (``weights``: a ``(resamples, items)`` matrix of counts; None: each item once):

* ``nll``: the negative log-likelihood of the ratings under the distribution (natural log), what
  temperature scaling minimises;
* ``brier``: the multi-class Brier score, ``sum_k (p_k - [rating = k])^2``, between 0 and 2;
* ``ece_top``: the top-label expected calibration error: items binned by the distribution's largest
  probability (its *confidence*, ten equal-width bins over [0, 1]); per bin the gap between the mean
  confidence and the mean share of ratings equal to the argmax (its *accuracy*); the bins' gaps weighted by
  their share of items;
* ``ece_score``: the same for the expected score against the human mean score, items binned in one-point
  bins of the expected score centred on the scale's values (the report's reliability plot);
* ``mae``, ``mse``: of the expected score against the human mean score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: The measures :func:`distribution_metrics` returns, in the order tables show them.
MEASURES = ("mae", "mse", "nll", "brier", "ece_top", "ece_score")
#: Lower is better for every measure.
TOP_BINS = 10
_FLOOR = 1e-300  # as the temperature fit (rating_nll): no cap on a rating the model thought impossible


def _ratings_matrix(ratings: Sequence[Sequence[int]], values: Sequence[int]) -> np.ndarray:
    """``(items, scale)``: each item's share of ratings on each scale value."""
    index = {v: i for i, v in enumerate(values)}
    out = np.zeros((len(ratings), len(values)))
    for i, rs in enumerate(ratings):
        for r in rs:
            out[i, index[int(r)]] += 1.0 / len(rs)
    return out


def _wmean(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ v) / w.sum(axis=1)


def _binned_gap(bins: np.ndarray, gap: np.ndarray, n_bins: int, w: np.ndarray) -> np.ndarray:
    """``sum_b |sum_(i in b) w_i gap_i| / sum_i w_i`` per row of ``w``."""
    onehot = np.zeros((bins.size, n_bins))
    onehot[np.arange(bins.size), bins] = 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.abs(w @ (onehot * gap[:, None])).sum(axis=1) / w.sum(axis=1)


def item_measures(
    distributions: np.ndarray, ratings: Sequence[Sequence[int]], values: Sequence[int]
) -> dict[str, np.ndarray]:
    """Per item: ``nll``, ``brier``, ``confidence``, ``accuracy`` (see the module doc)."""
    p = np.asarray(distributions, dtype=float)
    r = _ratings_matrix(ratings, values)
    nll = -(r * np.log(np.clip(p, _FLOOR, None))).sum(axis=1)
    # Brier of one rating k: sum_j p_j^2 - 2 p_k + 1; averaged over the item's ratings.
    brier = (p * p).sum(axis=1) - 2.0 * (r * p).sum(axis=1) + 1.0
    top = p.argmax(axis=1)
    return {
        "nll": nll,
        "brier": brier,
        "confidence": p.max(axis=1),
        "accuracy": r[np.arange(len(top)), top],
    }


def distribution_metrics(
    distributions: Sequence[Sequence[float]] | np.ndarray,
    expected: Sequence[float] | np.ndarray,
    ratings: Sequence[Sequence[int]],
    human: Sequence[float] | np.ndarray,
    values: Sequence[int],
    weights: np.ndarray | None = None,
) -> dict[str, np.ndarray] | dict[str, float]:
    """The measures of the module doc: floats with ``weights`` None, else one value per row of ``weights``."""
    single = weights is None
    n = len(ratings)
    w = np.ones((1, n)) if weights is None else np.asarray(weights, dtype=float)
    per = item_measures(np.asarray(distributions, dtype=float), ratings, values)
    e, h = np.asarray(expected, dtype=float), np.asarray(human, dtype=float)
    top_bins = np.minimum((per["confidence"] * TOP_BINS).astype(int), TOP_BINS - 1)
    lo = values[0]
    score_bins = np.clip(np.floor(e - lo + 0.5).astype(int), 0, len(values) - 1)
    out = {
        "mae": _wmean(np.abs(e - h), w),
        "mse": _wmean((e - h) ** 2, w),
        "nll": _wmean(per["nll"], w),
        "brier": _wmean(per["brier"], w),
        "ece_top": _binned_gap(top_bins, per["accuracy"] - per["confidence"], TOP_BINS, w),
        "ece_score": _binned_gap(score_bins, h - e, len(values), w),
    }
    if single:
        return {k: float(v[0]) for k, v in out.items()}
    return out


def reliability_points(
    distributions: Sequence[Sequence[float]] | np.ndarray,
    ratings: Sequence[Sequence[int]],
    values: Sequence[int],
) -> list[tuple[float, float, int]]:
    """The top-label reliability diagram's points: per non-empty confidence bin, ``(mean confidence, mean
    accuracy, items)``."""
    per = item_measures(np.asarray(distributions, dtype=float), ratings, values)
    bins = np.minimum((per["confidence"] * TOP_BINS).astype(int), TOP_BINS - 1)
    out = []
    for b in range(TOP_BINS):
        sel = bins == b
        if sel.any():
            out.append(
                (float(per["confidence"][sel].mean()), float(per["accuracy"][sel].mean()), int(sel.sum()))
            )
    return out


__all__ = ["MEASURES", "TOP_BINS", "distribution_metrics", "item_measures", "reliability_points"]
