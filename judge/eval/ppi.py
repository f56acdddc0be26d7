"""Prediction-powered inference of a mean (Angelopoulos et al. 2023; PPI++, Angelopoulos, Duchi and Zrnic
2023; Boyeau et al. 2024, "AutoEval done right"): many judge scores and a few human labels give an unbiased
mean with a valid interval that is narrower than the human labels' own.

With ``n`` labelled items (human ``y``, judge ``yhat``) and ``N`` unlabelled ones (judge ``yhat_u``)::

    theta = lam * mean(yhat_u) + mean(y - lam * yhat)
    se    = sqrt(var(lam * yhat_u) / N + var(y - lam * yhat) / n)        (variances with ddof 0)
    interval = theta -/+ z_(1 - alpha/2) * se

``lam`` is power-tuned (PPI++): ``lam = 2 cov(y, yhat) / (2 (1 + n/N) var(yhat, yhat_u))``, the covariance
with ddof 0 over the labelled items and the variance with ddof 1 over all predictions, clipped to
``[0, 1]`` (0: the human mean alone; 1: plain PPI). This is ``ppi_py.ppi_mean_ci`` and
``ppi_mean_pointestimate`` (ppi-python 0.2.3) for one-dimensional unweighted data, and the human-only
interval is ``ppi_py.classical_mean_ci``; ``tests/test_calibration_ppi.py`` checks both against the
library to 1e-9. The library itself is not a run-time dependency: it pulls numba, llvmlite and statsmodels
(about 270 MB) for these few lines.

The labelled items must be a random sample of all items; otherwise neither mean is unbiased.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class MeanEstimate:
    """A mean with its interval; ``None`` values where it is undefined (fewer than 2 labelled items)."""

    mean: float | None
    ci: list[float] | None
    n_labelled: int
    n_unlabelled: int = 0
    lam: float | None = None  #: PPI++'s power-tuning weight (PPI only)

    @property
    def width(self) -> float | None:
        return self.ci[1] - self.ci[0] if self.ci else None

    def to_dict(self) -> dict:
        return {
            "mean": self.mean,
            "ci": self.ci,
            "n_labelled": self.n_labelled,
            "n_unlabelled": self.n_unlabelled,
            "lam": self.lam,
        }


@functools.lru_cache(maxsize=16)
def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1.0 - (1.0 - level) / 2.0))


def power_tuning(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray) -> float:
    """PPI++'s ``lam`` for a mean (see the module doc); 0 when the predictions are all equal."""
    n, big_n = y.size, yhat_u.size
    theta1 = yhat_u.mean() + (y - yhat).mean()
    g, gh = y - theta1, yhat - theta1
    cov = 2.0 * np.sum((g - g.mean()) * (gh - gh.mean())) / n
    var = float(np.var(np.concatenate([yhat, yhat_u]) - theta1, ddof=1))
    if var <= 0 or not math.isfinite(var):
        return 0.0
    return float(np.clip(cov / (2.0 * (1.0 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(
    y: Sequence[float],
    yhat: Sequence[float],
    yhat_unlabelled: Sequence[float],
    *,
    level: float = 0.95,
    lam: float | None = None,
) -> MeanEstimate:
    """The prediction-powered mean and its ``level`` interval (``lam`` None: power-tuned). Without unlabelled
    items it is the human mean (``lam`` 0)."""
    ya, ha, ua = (np.asarray(v, dtype=float) for v in (y, yhat, yhat_unlabelled))
    if ya.shape != ha.shape:
        raise ValueError(f"y and yhat differ in length: {ya.size} vs {ha.size}")
    n, big_n = ya.size, ua.size
    if n < 2:
        return MeanEstimate(None, None, n, big_n)
    if big_n == 0:
        est = classical_mean(ya, level=level)
        est.lam = 0.0
        return est
    lam = power_tuning(ya, ha, ua) if lam is None else float(lam)
    theta = float((lam * ua).mean() + (ya - lam * ha).mean())
    se = math.sqrt(float(np.std(lam * ua)) ** 2 / big_n + float(np.std(ya - lam * ha)) ** 2 / n)
    half = _z(level) * se
    return MeanEstimate(theta, [theta - half, theta + half], n, big_n, lam)


def classical_mean(y: Sequence[float] | np.ndarray, *, level: float = 0.95) -> MeanEstimate:
    """The mean of the labels alone and its normal (CLT) interval, ``mean -/+ z * std / sqrt(n)`` (ddof 0)."""
    ya = np.asarray(y, dtype=float)
    n = ya.size
    if n < 2:
        return MeanEstimate(None, None, n)
    mean = float(ya.mean())
    half = _z(level) * float(ya.std()) / math.sqrt(n)
    return MeanEstimate(mean, [mean - half, mean + half], n)


__all__ = ["MeanEstimate", "classical_mean", "power_tuning", "ppi_mean"]
