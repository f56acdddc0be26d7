"""Cluster bootstrap of correlations: questions are resampled, so responses to one question move together.

A resample draws as many questions as there are, with replacement (a seeded numpy ``Generator``);
every item of a drawn question enters once per draw. Such a resample is the original items with
integer *weights* (how often their question was drawn), and the statistic of the resample equals a
weighted statistic of the original items. This module computes those weighted statistics for all
resamples at once (numpy), which makes 1,000 resamples of every slice of a report take seconds;
``tests/test_eval_stats.py`` checks each against scipy on the explicitly expanded resample.

Intervals are percentile intervals (2.5th and 97.5th percentile of the resampled statistic, 95%).
A resample where a statistic is undefined (constant values) is left out and counted (``n_valid``).

Paired comparison of two scorers on the items both scored: the same resamples for both, the
difference ``r_A - r_B`` per resample, its percentile interval and a two-sided p-value

    p = min(1, 2 * (1 + min(#{d* <= 0}, #{d* >= 0})) / (1 + n_valid))

i.e. twice the share of resampled differences on the far side of zero, with the usual +1
correction so that p is never exactly 0 with finitely many resamples. It is the smallest level at
which the percentile interval would exclude 0 (up to that correction): p < 0.05 goes with a 95%
interval that does not contain 0.
"""

from __future__ import annotations

import zlib
from collections.abc import Hashable, Sequence

import numpy as np

STATS = ("pearson", "spearman", "kendall")
#: Above this many items, Kendall's tau replicates use scipy one resample at a time instead of an
#: items x items sign matrix (memory grows with its square).
KENDALL_MATRIX_MAX = 2000
_CHUNK = 200  # resamples per block of the vectorised computations (bounds memory)


def seeded_rng(seed: int, *keys: str) -> np.random.Generator:
    """A Generator from a seed and names (a slice, a scorer), so each result is reproducible on its own.

    Adding a scorer to a report does not move the intervals of the others.
    """
    parts = [int(seed) & 0xFFFFFFFF] + [zlib.crc32(k.encode("utf-8")) for k in keys]
    return np.random.default_rng(parts)


class ClusterBootstrap:
    """One resampling plan: ``n_boot`` draws of the clusters (questions) with replacement.

    Build it once per slice and ask :meth:`weights` for any set of items of that slice; statistics
    that share a plan (two scorers, several annotators) share every resample.
    """

    def __init__(self, clusters: Sequence[Hashable], n_boot: int, rng: np.random.Generator):
        if n_boot < 1:
            raise ValueError(f"n_boot must be at least 1, got {n_boot}")
        self.labels = sorted({c for c in clusters}, key=str)
        self.index = {c: i for i, c in enumerate(self.labels)}
        self.n_boot = int(n_boot)
        q = len(self.labels)
        # q draws with replacement from q clusters = a multinomial count of each cluster.
        self.counts = (
            rng.multinomial(q, np.full(q, 1.0 / q), size=self.n_boot) if q else np.zeros((n_boot, 0))
        )

    @property
    def n_clusters(self) -> int:
        return len(self.labels)

    def weights(self, item_clusters: Sequence[Hashable]) -> np.ndarray:
        """``(n_boot, n_items)`` integer weights: how often each item's cluster was drawn."""
        codes = np.asarray([self.index[c] for c in item_clusters], dtype=int)
        return self.counts[:, codes].astype(float)


# ----------------------------------------------------------------------------- weighted statistics


def weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson's r of each row's weighted sample; ``x``, ``y`` of shape (n,) or (B, n), ``w`` (B, n).

    NaN where a row's sample is constant in ``x`` or ``y`` (or has no weight).
    """
    x = np.broadcast_to(np.asarray(x, dtype=float), w.shape)
    y = np.broadcast_to(np.asarray(y, dtype=float), w.shape)
    sw = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * x).sum(axis=1) / sw
        my = (w * y).sum(axis=1) / sw
        dx = x - mx[:, None]
        dy = y - my[:, None]
        sxy = (w * dx * dy).sum(axis=1)
        sxx = (w * dx * dx).sum(axis=1)
        syy = (w * dy * dy).sum(axis=1)
        r = sxy / np.sqrt(sxx * syy)
    r = np.clip(r, -1.0, 1.0)
    r[_constant_rows(x, w) | _constant_rows(y, w) | (sw <= 0)] = np.nan
    return r


def _constant_rows(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Rows whose weighted sample has a single distinct value (exactly, not up to rounding)."""
    present = w > 0
    hi = np.where(present, x, -np.inf).max(axis=1)
    lo = np.where(present, x, np.inf).min(axis=1)
    return ~(hi > lo)


def _ranks_and_ties(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks of every item in each row's weighted sample, and the tied-pair count per row.

    An item of weight k stands for k equal values: its average rank is the weight of the smaller
    values plus (weight of its tie group + 1) / 2, as ``scipy.stats.rankdata(method="average")``
    gives on the expanded sample. The tie count is sum over groups of T (T - 1) / 2.
    """
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.r_[True, xs[1:] != xs[:-1]]
    group_of_sorted = np.cumsum(starts) - 1
    ends = np.r_[np.nonzero(starts)[0][1:] - 1, len(x) - 1]
    cum = np.cumsum(w[:, order], axis=1)
    through = cum[:, ends]
    below = np.concatenate([np.zeros((w.shape[0], 1)), through[:, :-1]], axis=1)
    total = through - below
    group_rank = below + (total + 1.0) / 2.0
    ranks = np.empty_like(w, dtype=float)
    ranks[:, order] = group_rank[:, group_of_sorted]
    ties = (total * (total - 1.0) / 2.0).sum(axis=1)
    return ranks, ties


def weighted_spearman(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row's weighted sample (Pearson of average ranks); NaN where undefined."""
    rx, _ = _ranks_and_ties(x, w)
    ry, _ = _ranks_and_ties(y, w)
    r = weighted_pearson(rx, ry, w)
    r[_constant_rows(np.broadcast_to(x, w.shape), w) | _constant_rows(np.broadcast_to(y, w.shape), w)] = (
        np.nan
    )
    return r


def weighted_kendall(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, signs: np.ndarray | None = None
) -> np.ndarray:
    """Kendall's tau-b of each row's weighted sample; NaN where undefined.

    tau-b = S / sqrt((n0 - n1)(n0 - n2)) with S = sum over pairs i < j of w_i w_j sgn(dx) sgn(dy)
    (copies of one item tie in both, adding nothing to S), n0 = N(N - 1)/2 for N = sum(w), and n1,
    n2 the pairs tied in x and in y, copies included. ``signs`` is the items x items matrix
    sgn(dx) sgn(dy), if already computed.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = x.size
    if n > KENDALL_MATRIX_MAX:
        return _kendall_by_scipy(x, y, w)
    m = _sign_matrix(x, y) if signs is None else signs
    s = 0.5 * ((w @ m) * w).sum(axis=1)
    big_n = w.sum(axis=1)
    n0 = big_n * (big_n - 1.0) / 2.0
    _, n1 = _ranks_and_ties(x, w)
    _, n2 = _ranks_and_ties(y, w)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = s / np.sqrt((n0 - n1) * (n0 - n2))
    tau[(n0 - n1 <= 0) | (n0 - n2 <= 0)] = np.nan
    return np.clip(tau, -1.0, 1.0)


def _sign_matrix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.sign(x[:, None] - x[None, :]) * np.sign(y[:, None] - y[None, :])


def _kendall_by_scipy(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    from scipy.stats import kendalltau

    out = np.full(w.shape[0], np.nan)
    for b in range(w.shape[0]):
        k = w[b].astype(int)
        xe, ye = np.repeat(x, k), np.repeat(y, k)
        if xe.size >= 2 and np.ptp(xe) > 0 and np.ptp(ye) > 0:
            out[b] = kendalltau(xe, ye, variant="b").statistic
    return out


def weighted_cosine(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row's weighted sample, ``sum(w x y) / sqrt(sum(w x^2) sum(w y^2))`` (the raw
    vectors, not centred: MMIE's measure); NaN where one vector is all zeros."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ (x * y)) / np.sqrt((w @ (x * x)) * (w @ (y * y)))


def weighted_mae(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Mean absolute difference of each row's weighted sample."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ np.abs(np.asarray(x, dtype=float) - np.asarray(y, dtype=float))) / w.sum(axis=1)


def weighted_mse(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Mean squared difference of each row's weighted sample."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ (np.asarray(x, dtype=float) - np.asarray(y, dtype=float)) ** 2) / w.sum(axis=1)


#: MMIE's agreement measures besides Pearson (on the rubric scale only): cosine similarity, MSE, MAE.
SCALE_STATS = ("cosine", "mse", "mae")

_WEIGHTED = {
    "pearson": weighted_pearson,
    "spearman": weighted_spearman,
    "kendall": weighted_kendall,
    "cosine": weighted_cosine,
    "mae": weighted_mae,
    "mse": weighted_mse,
}


def replicates(
    x: Sequence[float], y: Sequence[float], w: np.ndarray, stats: Sequence[str] = STATS
) -> dict[str, np.ndarray]:
    """Each statistic of ``stats`` for every resample (row of ``w``), computed in blocks of resamples."""
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    out = {s: np.empty(w.shape[0]) for s in stats}
    signs = _sign_matrix(xa, ya) if "kendall" in stats and xa.size <= KENDALL_MATRIX_MAX else None
    for start in range(0, w.shape[0], _CHUNK):
        block = w[start : start + _CHUNK]
        for s in stats:
            extra = {"signs": signs} if s == "kendall" and signs is not None else {}
            out[s][start : start + _CHUNK] = _WEIGHTED[s](xa, ya, block, **extra)
    return out


# ----------------------------------------------------------------------------- intervals and tests


def percentile_interval(values: np.ndarray, level: float = 0.95) -> list[float] | None:
    """Percentile interval of the defined (non-NaN) resampled values; ``None`` when fewer than half are defined."""
    v = np.asarray(values, dtype=float)
    ok = v[np.isfinite(v)]
    if ok.size == 0 or ok.size < 0.5 * v.size:
        return None
    a = (1.0 - level) / 2.0
    lo, hi = np.percentile(ok, [100 * a, 100 * (1 - a)])
    return [float(lo), float(hi)]


def sampled_interval(values: np.ndarray, level: float = 0.95) -> list[float] | None:
    """:func:`percentile_interval`, but ``None`` where the resampled values do not vary (one question, or
    every question with the same value): such resamples say nothing about the spread of a sampled
    number, and a ``[x, x]`` interval would claim it is exact. Callers print the ``n`` beside it."""
    ci = percentile_interval(values, level)
    return None if ci is None or not ci[1] > ci[0] else ci


def bootstrap_p_value(diffs: np.ndarray) -> float | None:
    """Two-sided p-value of "no difference" from resampled differences (see the module docstring)."""
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return None
    tail = min(int((d <= 0).sum()), int((d >= 0).sum()))
    return float(min(1.0, 2.0 * (1 + tail) / (1 + d.size)))


def interval_summary(point: float | None, reps: np.ndarray, level: float = 0.95) -> dict:
    """``{"value", "ci", "n_valid"}`` for one statistic: the point estimate and its percentile interval."""
    n_valid = int(np.isfinite(reps).sum())
    return {
        "value": point,
        "ci": percentile_interval(reps, level) if point is not None else None,
        "n_valid": n_valid,
    }


def bootstrap_correlations(
    pred: Sequence[float],
    human: Sequence[float],
    clusters: Sequence[Hashable],
    plan: ClusterBootstrap,
    point: dict | None = None,
) -> dict[str, dict]:
    """Pearson, Spearman and Kendall tau-b with their cluster-bootstrap intervals under ``plan``.

    ``point`` may carry the point estimates already computed (from :func:`correlation_summary`).
    """
    from judge.eval.stats import correlation_summary

    point = point or correlation_summary(pred, human)
    reps = replicates(pred, human, plan.weights(clusters))
    return {s: interval_summary(point[s], reps[s]) for s in STATS}


def bootstrap_scale_stats(
    pred: Sequence[float],
    human: Sequence[float],
    clusters: Sequence[Hashable],
    plan: ClusterBootstrap,
    point: dict | None = None,
) -> dict[str, dict]:
    """Cosine similarity, MSE and MAE (:data:`SCALE_STATS`) with their cluster-bootstrap intervals under
    ``plan``: the same resamples as :func:`bootstrap_correlations`'s. ``point``: the point values."""
    from judge.eval.stats import scale_summary

    point = point or scale_summary(pred, human)
    reps = replicates(pred, human, plan.weights(clusters), SCALE_STATS)
    return {s: interval_summary(point[s], reps[s]) for s in SCALE_STATS}


def paired_bootstrap(
    pred_a: Sequence[float],
    pred_b: Sequence[float],
    human: Sequence[float],
    clusters: Sequence[Hashable],
    plan: ClusterBootstrap,
) -> dict[str, dict]:
    """Difference in correlation with humans, scorer A minus scorer B, on the same items and resamples.

    Per statistic: ``a``, ``b``, ``diff`` (point values), ``ci`` of the difference, ``p`` (two-sided),
    ``n_valid`` resamples where both were defined.
    """
    from judge.eval.stats import correlation_summary

    w = plan.weights(clusters)
    pa, pb = correlation_summary(pred_a, human), correlation_summary(pred_b, human)
    ra, rb = replicates(pred_a, human, w), replicates(pred_b, human, w)
    out = {}
    for s in STATS:
        d = ra[s] - rb[s]
        a, b = pa[s], pb[s]
        diff = a - b if a is not None and b is not None else None
        out[s] = {
            "a": a,
            "b": b,
            "diff": diff,
            "ci": percentile_interval(d) if diff is not None else None,
            "p": bootstrap_p_value(d) if diff is not None else None,
            "n_valid": int(np.isfinite(d).sum()),
        }
    return out


__all__ = [
    "ClusterBootstrap",
    "KENDALL_MATRIX_MAX",
    "SCALE_STATS",
    "STATS",
    "bootstrap_correlations",
    "bootstrap_p_value",
    "bootstrap_scale_stats",
    "interval_summary",
    "paired_bootstrap",
    "percentile_interval",
    "replicates",
    "sampled_interval",
    "seeded_rng",
    "weighted_cosine",
    "weighted_kendall",
    "weighted_mae",
    "weighted_mse",
    "weighted_pearson",
    "weighted_spearman",
]
