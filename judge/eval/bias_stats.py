"""The statistics of the bias analyses (:mod:`judge.eval.bias`, whose docstring gives the formulas): the partial
Spearman correlation of a score with a length given the human score (and the other length measure), at the
point with scipy's Spearman and on weighted resamples, and why it is undefined; the weighted means of groups
of items on each resample; Kendall's tau-b between two rankings, row by row."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from judge.eval.bootstrap import weighted_spearman

Values = Sequence[float] | np.ndarray  #: one value per item

#: A partial correlation whose denominator ``(1 - r_jh^2)(1 - r_hl^2)`` is at most this is undefined.
_DEN_EPS = 1e-12
_CHUNK = 200  # resamples per block (bounds memory)


def _partial(r_jl: np.ndarray, r_jh: np.ndarray, r_hl: np.ndarray) -> np.ndarray:
    """The partial correlation formula, elementwise; NaN where undefined."""
    r_jl, r_jh, r_hl = (np.asarray(a, dtype=float) for a in (r_jl, r_jh, r_hl))
    den = (1.0 - r_jh**2) * (1.0 - r_hl**2)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (r_jl - r_jh * r_hl) / np.sqrt(den)
    out = np.where(den > _DEN_EPS, out, np.nan)  # NaN in, NaN out (a comparison with NaN is False)
    return np.clip(out, -1.0, 1.0)


def _partial_of(r: Callable[[str, str], np.ndarray], other: bool) -> np.ndarray:
    """The partial correlation of j with l given h (and m when ``other``) from the correlations ``r(a, b)``
    of the variables j (score), l (length), h (human), m (other length measure); the second order by
    the same formula applied to first-order partials: r_jl.hm = (r_jl.h - r_jm.h r_lm.h) /
    sqrt((1 - r_jm.h^2)(1 - r_lm.h^2))."""
    first = _partial(r("j", "l"), r("j", "h"), r("h", "l"))
    if not other:
        return first
    return _partial(
        first,
        _partial(r("j", "m"), r("j", "h"), r("h", "m")),
        _partial(r("l", "m"), r("l", "h"), r("h", "m")),
    )


def _variables(score: Values, length: Values, human: Values, other: Values | None) -> dict[str, np.ndarray]:
    out = {k: np.asarray(v, dtype=float) for k, v in (("j", score), ("l", length), ("h", human))}
    if other is not None:
        out["m"] = np.asarray(other, dtype=float)
    return out


def _pair_cache(v: dict[str, np.ndarray], w: np.ndarray) -> Callable[[str, str], np.ndarray]:
    """``r(a, b)``: the weighted Spearman of variables a and b on each row of ``w``, each pair computed once."""
    done: dict[frozenset[str], np.ndarray] = {}

    def r(a: str, b: str) -> np.ndarray:
        key = frozenset((a, b))
        if key not in done:
            done[key] = weighted_spearman(v[a], v[b], w)
        return done[key]

    return r


def partial_spearman(
    score: Values, length: Values, human: Values, other: Values | None = None
) -> float | None:
    """Partial Spearman correlation of ``score`` with ``length`` given ``human`` (and given ``other`` too,
    when given: the other length measure), as in the docstring of :mod:`judge.eval.bias`, with scipy's
    Spearman rho for each pair; ``None`` where undefined (:func:`partial_undefined_reason`)."""
    from scipy.stats import spearmanr

    if partial_undefined_reason(score, length, human, other) is not None:
        return None
    v = _variables(score, length, human, other)
    value = float(
        _partial_of(lambda a, b: np.asarray(float(spearmanr(v[a], v[b]).statistic)), other is not None)
    )
    return value if np.isfinite(value) else None


def partial_undefined_reason(
    score: Values,
    length: Values,
    human: Values,
    other: Values | None = None,
    what: str = "length",
    other_what: str = "other length measure",
) -> str | None:
    """Why :func:`partial_spearman` is undefined on these values; ``None`` if it is not."""
    from scipy.stats import spearmanr

    v = _variables(score, length, human, other)
    j, ln, h = v["j"], v["l"], v["h"]
    if j.size < 3:
        return f"{j.size} item(s): a partial correlation needs at least 3"
    if np.ptp(ln) == 0:
        return f"every response has the same {what} ({ln[0]:g})"
    if np.ptp(j) == 0:
        return "the scorer gives every item the same score"
    if np.ptp(h) == 0:
        return "the humans give every item the same score"
    if 1.0 - float(spearmanr(j, h).statistic) ** 2 <= _DEN_EPS:
        return (
            "the scorer ranks the items exactly as the humans do (|Spearman| = 1): nothing left to correlate"
        )
    if 1.0 - float(spearmanr(h, ln).statistic) ** 2 <= _DEN_EPS:
        return f"the {what} ranks the items exactly as the human score does (|Spearman| = 1)"
    if "m" in v:
        if np.ptp(v["m"]) == 0:
            return f"every response has the same {other_what} ({v['m'][0]:g}): nothing to control for"
        value = _partial_of(lambda a, b: np.asarray(float(spearmanr(v[a], v[b]).statistic)), True)
        if not np.isfinite(value):
            return f"the human score and the {other_what} together fix the ranks of the scorer or the {what}"
    return None


def weighted_partial_spearman(
    score: Values, length: Values, human: Values, w: np.ndarray, other: Values | None = None
) -> np.ndarray:
    """:func:`partial_spearman` of each row's weighted sample (``w``: ``(B, n)`` integer weights, a
    resample each), with :func:`judge.eval.bootstrap.weighted_spearman` for each pair; equal to it on
    the expanded resample. NaN where undefined."""
    v = _variables(score, length, human, other)
    out = np.empty(w.shape[0])
    for start in range(0, w.shape[0], _CHUNK):
        out[start : start + _CHUNK] = _partial_of(
            _pair_cache(v, w[start : start + _CHUNK]), other is not None
        )
    return out


def weighted_group_means(
    x: Values, codes: Sequence[int] | np.ndarray, n_groups: int, w: np.ndarray
) -> np.ndarray:
    """``(B, n_groups)``: the weighted mean of ``x`` over each group's items in each row of ``w``; NaN for
    a group with no weight in a row (absent from that resample)."""
    xa = np.asarray(x, dtype=float)
    onehot = np.zeros((xa.size, n_groups))
    onehot[np.arange(xa.size), np.asarray(codes, dtype=int)] = 1.0
    sw = w @ onehot
    with np.errstate(invalid="ignore", divide="ignore"):
        m = ((w * xa) @ onehot) / sw
    m[sw <= 0] = np.nan
    return m


def kendall_tau_b_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b between ``x[b]`` and ``y[b]`` for each row ``b`` (``(B, M)`` arrays; exact ties).

    tau-b = S / sqrt((n0 - n1)(n0 - n2)), S = sum over pairs i < k of sgn(x_i - x_k) sgn(y_i - y_k),
    n0 = M(M - 1)/2, n1 and n2 the pairs tied in x and in y. NaN for a row with a NaN or where a
    ranking ties every pair.
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    y = np.atleast_2d(np.asarray(y, dtype=float))
    i, k = np.triu_indices(x.shape[1], 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sx = np.sign(x[:, i] - x[:, k])
        sy = np.sign(y[:, i] - y[:, k])
        s = (sx * sy).sum(axis=1)
        n0 = float(i.size)
        n1 = (sx == 0).sum(axis=1)
        n2 = (sy == 0).sum(axis=1)
        tau = s / np.sqrt((n0 - n1) * (n0 - n2))
    tau[(n0 - n1 <= 0) | (n0 - n2 <= 0) | np.isnan(x).any(axis=1) | np.isnan(y).any(axis=1)] = np.nan
    return np.clip(tau, -1.0, 1.0)


__all__ = [
    "Values",
    "kendall_tau_b_rows",
    "partial_spearman",
    "partial_undefined_reason",
    "weighted_group_means",
    "weighted_partial_spearman",
]
