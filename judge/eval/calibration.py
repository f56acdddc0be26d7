"""Fitting a judge's calibration on human labels (``judge-calibrate``); applying it is
:mod:`judge.models.calibration`'s.

Input: the judge's raw read-out (expected score and scale distribution) of labelled items, each with its
human score (the mean over annotators) and the annotators' ratings (:func:`labelled_scores` takes them
from a score file matched onto human items, :mod:`judge.eval.matching`).

Steps (:func:`fit_calibration`):

1. **Split** the questions at random (``seed``) into a *fit* part and a *conformal* part
   (``conformal_fraction`` of the questions); all responses to a question stay together. The conformal
   part is held out from everything the maps learn: its residuals give the intervals, and the comparison
   below is measured on it.
2. **A map per criterion** with at least ``min_items`` labelled items in each part, else the **pooled**
   one (fitted on every item of the fit part, for every criterion without its own). Two maps are fitted:

   * ``isotonic``: scikit-learn's ``IsotonicRegression(y_min, y_max, out_of_bounds="clip")`` of the
     human score on the raw expected score (a non-decreasing map, so it never reorders the judge's
     scores of one criterion);
   * ``temperature``: the ``T`` minimising the negative log-likelihood of the annotators' ratings under
     the tempered scale distribution ``p^(1/T)`` (scipy's bounded scalar minimiser over ``log T`` in
     :data:`LOG_T_BOUNDS`).

3. **Choice** (``method="auto"``, the default), per map: ``folds``-fold cross-validation over the fit
   part's questions, repeated over :data:`REPEATS` partitions and averaged, gives each map's held-out NLL
   of the annotators' ratings; the map with the lowest is taken if it beats the read-out's own by more
   than :data:`MARGIN` nats per rating and by more than :data:`SE_MULTIPLE` standard errors of its
   fold-by-fold changes,
   else the read-out is kept (``none``): on a few labels, a lower NLL by chance does not carry over, and
   a choice on a smaller gain flips with the split (the stored ``verdict`` says which, with the margin). A map is refused when
   its fit on the whole fit part **hits its bounds** (a temperature at the end of the search range) or
   **flattens the scores** (the calibrated scores' standard deviation below :data:`COLLAPSE` of the raw
   ones'): under ``auto`` it is no candidate. A **forced** map (``method="temperature"`` or
   ``"isotonic"``) is fitted and measured the same way, against the read-out's cross-validated NLL: one that
   is refused, or whose held-out NLL is not below the read-out's, stops with an error that gives both NLLs,
   unless ``force`` (``--force-method``) keeps it, with the warning stored in the choice and printed. The
   fold fits' spread (each fold's temperature, each fold's NLL change) is reported beside the choice.
4. **Conformal intervals**, Mondrian by criterion: each criterion with at least ``min_conformal``
   conformal items (and enough for the level) gets its own halfwidth, from its own residuals
   ``|human - calibrated|``; the others share the pooled group's. The halfwidth is the
   ``ceil(level (n + 1))``-th smallest of the group's ``n`` absolute residuals (:func:`conformal_quantile`):
   for a new item of the criterion, exchangeable with them, the interval covers its human score with
   probability at least ``level`` (and below ``level + 1/(n + 1)``, ties aside); the pooled group
   promises it only on average over its criteria. crepes' ``ConformalRegressor`` (0.9) takes the next
   larger residual when ``(1 - level)(n + 1)`` is whole (n = 19, 29, 39... at 90%: a floating-point
   floor), so its intervals cover ``1/(n + 1)`` more than they need; computed here, they do not.
5. **Comparison** on the conformal part, which neither the maps nor the choice saw: MAE, MSE, NLL,
   Brier score and the two expected calibration errors (:mod:`judge.eval.calibration_metrics`) of the
   raw read-out, of each map and of the chosen calibration, all criteria pooled.

What it fits on. ``judge-train --calibrate`` and ``judge-calibrate`` without ``human`` fit on the
validation split, which also picked the best checkpoint during training: the calibration's own
comparison is on that split's conformal half (unbiased for the choice of map, not for the checkpoint);
the test split's figures (``judge-report``) are unaffected by either.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from judge.core.errors import JudgeError
from judge.eval.bootstrap import seeded_rng
from judge.eval.calibration_metrics import distribution_metrics
from judge.eval.matching import Scorer
from judge.models.calibration import (
    POOLED,
    Calibration,
    CalibrationData,
    CriterionCalibration,
    Method,
    MethodChoice,
    content_fingerprint,
)

METHODS: tuple[Method, ...] = ("isotonic", "temperature")
CHOICES: tuple[MethodChoice, ...] = ("auto", "isotonic", "temperature", "none")
#: Bounds of log(T) for the temperature search (T from 0.018 to 54.6): a fit at either end is refused.
LOG_T_BOUNDS = (-4.0, 4.0)
#: A map whose calibrated scores' standard deviation (on the items it was fitted on) is below this share of
#: the raw scores' flattens them: refused.
COLLAPSE = 0.25
#: Cross-validation folds for the choice of map.
FOLDS = 5
#: Repeats of the cross-validation (each a fresh partition of the questions into folds), averaged: one
#: partition's luck would otherwise decide a choice near the boundary.
REPEATS = 5
#: The least NLL gain (nats per rating, cross-validated) for which ``auto`` trades the read-out for a map.
#: Smaller gains flip with the split (half of the demo's random validation splits chose a temperature on a
#: gain near 0.02 before this margin): they are kept as the read-out, not sold as an improvement.
MARGIN = 0.02
#: How many standard errors (of the fold-by-fold NLL change) the gain must exceed too: about a one-sided
#: 2.5% test that the map does better on new labels.
SE_MULTIPLE = 2.0


@dataclass(frozen=True)
class LabelledScore:
    """One labelled (response, criterion): the judge's raw read-out and the human score."""

    id: str
    criterion: str
    question_id: str
    raw: float  #: the judge's expected score (uncalibrated)
    distribution: tuple[float, ...]  #: the judge's scale distribution, lowest value first
    human: float  #: mean over the annotators
    ratings: tuple[int, ...]  #: each annotator's score
    annotators: tuple[str, ...] = ()  #: who gave each rating (selective evaluation's majority preference)


def conditional_coverage_range(n: int, level: float, mass: float = 0.9) -> list[float]:
    """The central ``mass`` range of the coverage of one split conformal interval fitted on ``n`` items:
    with the ``k = ceil((n + 1) level)``-th smallest score as its quantile, the chance that a new
    exchangeable item falls inside is Beta(k, n + 1 - k) over calibration draws (Vovk 2012; Angelopoulos and
    Bates 2021, section 3.2), for continuous scores; its mean is the promised level (and at most
    ``level + 1/(n + 1)``). [1, 1] when ``k > n`` (the whole scale)."""
    from scipy.stats import beta

    k = math.ceil((n + 1) * level - 1e-12)
    if k > n:
        return [1.0, 1.0]
    tail = (1.0 - mass) / 2.0
    return [float(beta.ppf(tail, k, n + 1 - k)), float(beta.ppf(1.0 - tail, k, n + 1 - k))]


def labelled_scores(scorer: Scorer) -> list[LabelledScore]:
    """The scored matches of a judge's score file on the human items, with the raw read-out (``raw_score`` and
    ``raw_distribution`` when the file is calibrated already, else ``score`` and ``distribution``)."""
    out = []
    for m in scorer.scored:
        rec = m.record
        dist = rec.raw_distribution if rec.raw_distribution is not None else rec.distribution
        if dist is None:
            raise JudgeError(
                f"{scorer.path}: record {rec.id!r} ({m.item.criterion}) has no score distribution; calibration "
                "needs a judge's scores as judge-score writes them (metric judge, with distributions)"
            )
        raw = rec.raw_score if rec.raw_score is not None else rec.score
        assert raw is not None
        it = m.item
        out.append(
            LabelledScore(
                it.id,
                it.criterion,
                it.question_id,
                float(raw),
                tuple(dist),
                it.value,
                tuple(s for _, s in it.ratings),
                tuple(a for a, _ in it.ratings),
            )
        )
    return out


def split_questions(questions: Sequence[str], fraction: float, seed: int) -> set[str]:
    """The conformal part: ``round(fraction * Q)`` of the ``Q`` distinct questions, drawn at random (at least
    one, and one fewer than all when there are two or more)."""
    qs = sorted(set(questions))
    if len(qs) < 2:
        raise JudgeError(
            f"calibration needs labelled responses to at least 2 questions (one part to fit on, one for the "
            f"intervals); got {len(qs)}"
        )
    k = min(max(1, round(fraction * len(qs))), len(qs) - 1)
    rng = seeded_rng(seed, "calibration-split")
    return {qs[i] for i in rng.choice(len(qs), size=k, replace=False)}


def fit_isotonic(
    raw: Sequence[float], human: Sequence[float], scale: tuple[float, float]
) -> tuple[list, list]:
    """The knots ``(x, y)`` of scikit-learn's isotonic regression of ``human`` on ``raw``, bounded to the
    scale; :func:`judge.models.calibration.interpolate` through them is its ``predict``."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=scale[0], y_max=scale[1], increasing=True, out_of_bounds="clip")
    iso.fit(np.asarray(raw, dtype=float), np.asarray(human, dtype=float))
    return [float(v) for v in iso.X_thresholds_], [float(v) for v in iso.y_thresholds_]


def rating_nll(
    distributions: np.ndarray, ratings: Sequence[Sequence[int]], values: Sequence[int], t: float
) -> float:
    """Mean negative log-likelihood of the annotators' ratings under the distributions tempered by ``t``."""
    index = {v: i for i, v in enumerate(values)}
    logp = np.log(np.clip(distributions, 1e-300, None)) / t
    logp -= logp.max(axis=1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    rows = [i for i, rs in enumerate(ratings) for _ in rs]
    cols = [index[r] for rs in ratings for r in rs]
    return float(-logp[rows, cols].mean())


def fit_temperature(
    distributions: Sequence[Sequence[float]], ratings: Sequence[Sequence[int]], values
) -> float:
    """The temperature minimising :func:`rating_nll` (bounded search over ``log T``)."""
    from scipy.optimize import minimize_scalar

    d = np.asarray(distributions, dtype=float)
    res = minimize_scalar(
        lambda lt: rating_nll(d, ratings, values, math.exp(lt)), bounds=LOG_T_BOUNDS, method="bounded"
    )
    return float(math.exp(res.x))


def conformal_quantile(residuals: Sequence[float], level: float) -> float | None:
    """The split conformal halfwidth at ``level``: the ``ceil(level (n + 1))``-th smallest absolute residual
    (None when that exceeds ``n``: too few residuals for the level, the interval is the whole scale)."""
    r = np.sort(np.abs(np.asarray(residuals, dtype=float)))
    k = math.ceil(level * (r.size + 1) - 1e-9)  # level (n + 1) whole: exactly that order statistic
    return None if k > r.size or k < 1 else float(r[k - 1])


def needed_for(level: float) -> int:
    """The fewest residuals a finite halfwidth at ``level`` needs: ``ceil(level (n + 1)) <= n``."""
    return math.ceil(level / (1.0 - level) - 1e-9)


def conformal_halfwidths(
    residuals: Sequence[float], groups: Sequence[str], level: float
) -> dict[str, float | None]:
    """Each group's split conformal halfwidth at ``level`` (Mondrian: from the group's residuals only)."""
    by: dict[str, list[float]] = defaultdict(list)
    for r, g in zip(residuals, groups, strict=True):
        by[g].append(r)
    return {g: conformal_quantile(rs, level) for g, rs in sorted(by.items())}


def _fit_map(method: Method, items: Sequence[LabelledScore], values: Sequence[int]) -> CriterionCalibration:
    scale = (float(values[0]), float(values[-1]))
    if method == "isotonic":
        x, y = fit_isotonic([s.raw for s in items], [s.human for s in items], scale)
        return CriterionCalibration(n_fit=len(items), n_conformal=0, x=x, y=y, halfwidth=None)
    if method == "temperature":
        t = fit_temperature([s.distribution for s in items], [s.ratings for s in items], values)
        return CriterionCalibration(n_fit=len(items), n_conformal=0, temperature=t, halfwidth=None)
    return CriterionCalibration(n_fit=len(items), n_conformal=0, halfwidth=None)


def _views(
    cc: CriterionCalibration, items: Sequence[LabelledScore], values: Sequence[int]
) -> tuple[list[float], list[list[float]]]:
    """The calibrated scores and distributions of ``items`` under ``cc``."""
    out = [cc.view(s.raw, s.distribution, values) for s in items]
    return [o[0] for o in out], [o[1] for o in out]


def refusal(cc: CriterionCalibration, items: Sequence[LabelledScore], values: Sequence[int]) -> str | None:
    """Why a map fitted on ``items`` is refused (None: it is not): a temperature at the end of its search
    range, or calibrated scores flattened (see the module doc)."""
    if cc.temperature is not None:
        lt = math.log(cc.temperature)
        if min(abs(lt - LOG_T_BOUNDS[0]), abs(lt - LOG_T_BOUNDS[1])) < 1e-3:
            return (
                f"the temperature fit hit the end of its search range (T = {cc.temperature:.3f}, "
                f"e^{lt:+.0f}): the read-out carries no usable signal for it on these labels"
            )
    raw_sd = float(np.std([s.raw for s in items]))
    if raw_sd > 1e-9 and cc.method != "none":
        sd = float(np.std(_views(cc, items, values)[0]))
        if sd < COLLAPSE * raw_sd:
            return (
                f"it flattens the scores: the calibrated scores' spread is {sd / raw_sd:.0%} of the raw ones' "
                f"(standard deviation {sd:.3f} against {raw_sd:.3f}; refused below {COLLAPSE:.0%})"
            )
    return None


def _folds(items: Sequence[LabelledScore], k: int, seed: int, key: str) -> list[list[LabelledScore]]:
    qs = sorted({s.question_id for s in items})
    order = seeded_rng(seed, "calibration-folds", key).permutation(len(qs))
    fold_of = {qs[j]: i % k for i, j in enumerate(order)}
    out: list[list[LabelledScore]] = [[] for _ in range(k)]
    for s in items:
        out[fold_of[s.question_id]].append(s)
    return out


def _nll(items: Sequence[LabelledScore], dists: Sequence[Sequence[float]], values: Sequence[int]) -> float:
    return rating_nll(np.asarray(dists, dtype=float), [s.ratings for s in items], values, 1.0)


def _cv_once(
    items: Sequence[LabelledScore], values: Sequence[int], k: int, seed: int, key: str
) -> tuple[dict[str, list[float]], list[float], list[float]]:
    """One partition's per-fold NLLs (per map and the read-out), fold weights (ratings) and temperatures."""
    parts = _folds(items, k, seed, key)
    nll: dict[str, list[float]] = defaultdict(list)
    weight = []
    temps = []
    for i, test in enumerate(parts):
        train = [s for j, p in enumerate(parts) if j != i for s in p]
        weight.append(float(sum(len(s.ratings) for s in test)))
        nll["none"].append(_nll(test, [s.distribution for s in test], values))
        for m in METHODS:
            cc = _fit_map(m, train, values)
            if cc.temperature is not None:
                temps.append(cc.temperature)
            nll[m].append(_nll(test, _views(cc, test, values)[1], values))
    return nll, weight, temps


def cross_validate(
    items: Sequence[LabelledScore],
    values: Sequence[int],
    folds: int,
    seed: int,
    key: str,
    repeats: int = REPEATS,
) -> dict[str, Any] | None:
    """Each map's held-out NLL by ``folds``-fold cross-validation over the questions of ``items``, repeated
    over ``repeats`` partitions and averaged (each repeat scores each item's ratings once, by the maps fitted
    without its fold), the read-out's on the same folds, each map's NLL change's standard error across folds
    (the mean over repeats of each partition's), and the first partition's fold-by-fold changes and
    temperatures; None with fewer than 2 questions."""
    k = min(folds, len({s.question_id for s in items}))
    if k < 2:
        return None
    totals: dict[str, list[float]] = defaultdict(list)  # per repeat, rating-weighted
    se: dict[str, list[float]] = defaultdict(list)
    first: tuple[dict[str, list[float]], list[float]] | None = None
    for r in range(repeats):
        # Repeat 0 keeps the single partition's key (the fold-by-fold columns read as before).
        nll, weight, temps = _cv_once(items, values, k, seed, key if r == 0 else f"{key}#{r}")
        w = np.asarray(weight)
        for m, v in nll.items():
            totals[m].append(float(np.dot(w, v) / w.sum()))
        for m in METHODS:
            change = np.asarray(nll[m]) - np.asarray(nll["none"])
            se[m].append(float(np.std(change, ddof=1) / math.sqrt(k)))
        if first is None:
            first = (nll, temps)
    assert first is not None
    return {
        "folds": k,
        "repeats": repeats,
        "nll": {m: float(np.mean(v)) for m, v in totals.items()},
        # The spread of each NLL over the repeated partitions (their standard deviation): how much the
        # partition alone moves the figure the choice reads.
        "nll_repeat_sd": {m: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for m, v in totals.items()},
        "nll_change_se": {m: float(np.mean(v)) for m, v in se.items()},
        "fold_nll_change": {
            m: [b - a for a, b in zip(first[0]["none"], first[0][m], strict=True)] for m in METHODS
        },
        "fold_temperatures": first[1],
    }


#: A gain within this factor of the gain a map needs (either side) makes the choice a close call.
CLOSE_FACTOR = 1.5


def _close_call(
    gain: Mapping[Method, float],
    need: Mapping[Method, float],
    refused: Mapping[Method, str],
    chosen: Method | None,
) -> str | None:
    """A sentence when the verdict lies within :data:`CLOSE_FACTOR` of flipping: the chosen map's gain below
    ``CLOSE_FACTOR`` times what it needs, or (read-out kept) a map's gain above ``1 / CLOSE_FACTOR`` of it. The
    verdict then rests on which labels fell in the fit part; another split (``--seed``) or a few more labels
    may decide otherwise. None when the choice is clear."""
    if chosen is not None:
        near = [chosen] if gain[chosen] <= need[chosen] * CLOSE_FACTOR else []
    else:
        near = [m for m in gain if m not in refused and gain[m] >= need[m] / CLOSE_FACTOR]
    if not near:
        return None
    parts = ", ".join(f"{m} gains {gain[m]:+.3f} against the {need[m]:.3f} it needs" for m in near)
    return f"a close call: {parts}; another split of the labels (--seed) may choose differently"


def _choose(
    method: MethodChoice,
    key: str,
    items: Sequence[LabelledScore],
    values: Sequence[int],
    folds: int,
    seed: int,
    force: bool = False,
) -> tuple[CriterionCalibration, dict[str, Any], dict[Method, CriterionCalibration]]:
    """The map of one key (a criterion, or ``*``), what the choice saw, and both maps' full fits."""
    fits: dict[Method, CriterionCalibration] = {m: _fit_map(m, items, values) for m in METHODS}
    refused = {m: why for m in METHODS if (why := refusal(fits[m], items, values)) is not None}
    cv = cross_validate(items, values, folds, seed, key)
    info: dict[str, Any] = {"n_fit": len(items), "refused": refused, **(cv or {"folds": 0})}
    where = "the pooled map" if key == POOLED else f"criterion {key!r}"
    if method in METHODS:
        # A forced map answers to the same evidence as auto's: refused, or no better than the read-out on
        # held-out labels, it is an error unless `force` keeps it (with the warning printed and stored).
        worse = None
        if cv is not None and not cv["nll"][method] < cv["nll"]["none"]:
            worse = (
                f"its cross-validated NLL of the annotators' ratings is {cv['nll'][method]:.4f}, not below the "
                f"read-out's {cv['nll']['none']:.4f}"
            )
        problem = "; ".join(p for p in (refused.get(method), worse) if p)
        if problem and not force:
            raise JudgeError(
                f"{method} calibration of {where} refused: {problem}. Use `method` auto (it chooses per "
                "criterion by held-out NLL, or keeps the read-out), fit on more labels, or give `force_method` "
                "to keep it anyway"
            )
        info.update(method=method, reason="asked for")
        if problem:
            info["warning"] = f"{method} kept by force_method although {problem}"
        return fits[method], info, fits
    if method == "none":
        info.update(method="none", reason="asked for")
        return _fit_map("none", items, values), info, fits
    if cv is None:
        info.update(method="none", reason="too few questions to cross-validate a map: the read-out is kept")
        return _fit_map("none", items, values), info, fits
    nll = cv["nll"]
    # A map helps when it lowers the held-out NLL (averaged over the repeated partitions) by more than the
    # margin and more than the standard error of its fold-by-fold changes: a smaller gain flips with the
    # split and would not carry over to new labels.
    se = cv["nll_change_se"]
    need = {m: max(MARGIN, SE_MULTIPLE * se[m]) for m in METHODS}
    info["margin"] = MARGIN
    info["required_gain"] = need
    info["gain"] = {m: nll["none"] - nll[m] for m in METHODS}
    better = [m for m in METHODS if m not in refused and nll["none"] - nll[m] > need[m]]
    chosen = min(better, key=lambda m: nll[m]) if better else None
    close = _close_call(info["gain"], need, refused, chosen)
    if close:
        info["close_call"] = close
    if not better:
        why = "; ".join(f"{m} refused: {r}" for m, r in refused.items())
        gains = ", ".join(f"{m} {nll['none'] - nll[m]:+.4f} (needs > {need[m]:.4f})" for m in METHODS)
        info.update(
            method="none",
            verdict=f"read-out kept: no map lowers the cross-validated NLL by more than {MARGIN} nats per rating "
            "and twice its standard error across folds" + (f" ({close})" if close else ""),
            reason=f"no map lowers the held-out NLL of the read-out by more than the margin {MARGIN} and {SE_MULTIPLE:g} "
            f"standard errors across folds (gains {gains})" + (f"; {why}" if why else ""),
        )
        return _fit_map("none", items, values), info, fits
    best = min(better, key=lambda m: nll[m])
    info.update(
        method=best,
        verdict=f"{best}: lowers the cross-validated NLL by {nll['none'] - nll[best]:.3f} nats per rating "
        f"(margin {MARGIN}, standard error {se[best]:.3f})" + (f" ({close})" if close else ""),
        reason=f"lowest held-out NLL ({nll[best]:.4f}; read-out {nll['none']:.4f}), by more than "
        f"{need[best]:.4f}",
    )
    return fits[best], info, fits


def _metrics(
    items: Sequence[LabelledScore], views: tuple[list[float], list[list[float]]], values: Sequence[int]
) -> dict[str, float]:
    return distribution_metrics(  # type: ignore[return-value]
        views[1], views[0], [s.ratings for s in items], [s.human for s in items], values
    )


def fit_calibration(
    scores: Sequence[LabelledScore],
    values: Sequence[int],
    *,
    method: MethodChoice = "auto",
    level: float = 0.9,
    conformal_fraction: float = 0.5,
    min_items: int = 30,
    min_conformal: int = 20,
    folds: int = FOLDS,
    seed: int = 0,
    force: bool = False,
    human_files: Sequence[dict[str, str]] = (),
    scores_file: str | None = None,
) -> Calibration:
    """Fit the calibration of ``scores`` (see the module doc); ``values`` is the rubric's scale."""
    if method not in CHOICES:
        raise JudgeError(f"calibration method {method!r} is not one of {', '.join(CHOICES)}")
    if not 0 < level < 1:
        raise JudgeError(f"`level` {level} must lie between 0 and 1 (0.9: 90% intervals)")
    if not 0 < conformal_fraction < 1:
        raise JudgeError(f"`conformal_fraction` {conformal_fraction} must lie between 0 and 1")
    min_conformal = min(min_conformal, min_items)  # a criterion with its own map has its own interval too
    held = split_questions([s.question_id for s in scores], conformal_fraction, seed)
    fit = [s for s in scores if s.question_id not in held]
    conf = [s for s in scores if s.question_id in held]
    fit_by: dict[str, list[LabelledScore]] = defaultdict(list)
    conf_by: dict[str, list[LabelledScore]] = defaultdict(list)
    for s in fit:
        fit_by[s.criterion].append(s)
    for s in conf:
        conf_by[s.criterion].append(s)
    own = sorted(c for c in fit_by if len(fit_by[c]) >= min_items and len(conf_by.get(c, [])) >= min_items)
    chosen: dict[str, CriterionCalibration] = {}
    choice: dict[str, dict[str, Any]] = {}
    fits: dict[str, dict[Method, CriterionCalibration]] = {}
    for key, items in [*((c, fit_by[c]) for c in own), (POOLED, fit)]:
        chosen[key], choice[key], fits[key] = _choose(method, key, items, values, folds, seed, force)

    def map_key(s: LabelledScore) -> str:
        return s.criterion if s.criterion in own else POOLED

    # Mondrian conformal groups: a criterion with enough held-out items has its own; the others share the
    # pooled group (each item's residual under the map it takes).
    enough = max(min_conformal, needed_for(level))
    groups = sorted(c for c in conf_by if len(conf_by[c]) >= enough)
    pooled_items = [s for s in conf if s.criterion not in groups] or conf
    half: dict[str, float | None] = {}
    for g, items in [*((c, conf_by[c]) for c in groups), (POOLED, pooled_items)]:
        half[g] = conformal_quantile(
            [s.human - chosen[map_key(s)].view(s.raw, s.distribution, values)[0] for s in items], level
        )
    n_conf = {g: len(conf_by[g]) for g in groups} | {POOLED: len(pooled_items)}
    criteria = {}
    for c in sorted(set(own) | set(groups)):
        g = c if c in groups else POOLED
        cc = chosen[c] if c in own else chosen[POOLED].model_copy(update={"map_from": POOLED})
        criteria[c] = cc.model_copy(update={"n_conformal": n_conf[g], "halfwidth": half[g]})
    pooled = chosen[POOLED].model_copy(update={"n_conformal": n_conf[POOLED], "halfwidth": half[POOLED]})
    comparison: dict[str, Any] = {
        "part": "conformal (held out from the fits and the choice)",
        "n_items": len(conf),
        "raw": _metrics(conf, ([s.raw for s in conf], [list(s.distribution) for s in conf]), values),
    }
    for m in METHODS:
        views = [fits[map_key(s)][m].view(s.raw, s.distribution, values) for s in conf]
        comparison[m] = _metrics(conf, ([v[0] for v in views], [v[1] for v in views]), values)
    final = [chosen[map_key(s)].view(s.raw, s.distribution, values) for s in conf]
    comparison["calibrated"] = _metrics(conf, ([v[0] for v in final], [v[1] for v in final]), values)
    comparison["choice"] = choice
    comparison["conformal"] = {
        g: {
            "n": n_conf[g],
            "halfwidth": half[g],
            # Split conformal's coverage of a new exchangeable item: at least level, below level + 1/(n + 1).
            "coverage_bounds": None if half[g] is None else [level, min(1.0, level + 1.0 / (n_conf[g] + 1))],
            # That is an average over calibration draws; this interval's own coverage varies with the draw.
            "coverage_range": None if half[g] is None else conditional_coverage_range(n_conf[g], level),
        }
        for g in [*groups, POOLED]
    }
    fitted = sorted((s.id, s.criterion, list(s.ratings), s.raw) for s in scores)
    return Calibration(
        method=method,
        level=level,
        scale=list(values),
        min_items=min_items,
        criteria=criteria,
        pooled=pooled,
        data=CalibrationData(
            fingerprint=content_fingerprint(fitted),
            human_files=list(human_files),
            scores_file=scores_file,
            n_items=len(scores),
            n_questions=len({s.question_id for s in scores}),
            ids=sorted({s.id for s in scores}),
            conformal_fraction=conformal_fraction,
            seed=seed,
        ),
        comparison=comparison,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def conformal_part(cal: Calibration, scores: Sequence[LabelledScore]) -> list[LabelledScore]:
    """The items of ``scores`` in the calibration's conformal part (its seed and fraction, the same questions)."""
    held = split_questions([s.question_id for s in scores], cal.data.conformal_fraction, cal.data.seed)
    return [s for s in scores if s.question_id in held]


__all__ = [
    "CHOICES",
    "COLLAPSE",
    "LOG_T_BOUNDS",
    "MARGIN",
    "METHODS",
    "REPEATS",
    "SE_MULTIPLE",
    "LabelledScore",
    "conformal_halfwidths",
    "conformal_part",
    "conformal_quantile",
    "cross_validate",
    "fit_calibration",
    "fit_isotonic",
    "fit_temperature",
    "labelled_scores",
    "needed_for",
    "rating_nll",
    "refusal",
    "split_questions",
]
