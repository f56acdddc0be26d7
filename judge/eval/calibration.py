"""Fitting a judge's calibration on human labels (``judge-calibrate``); applying it is
:mod:`judge.models.calibration`'s.

Input: the judge's raw read-out (expected score and scale distribution) of labelled items, each with its
human score (the mean over annotators) and the annotators' ratings (:func:`labelled_scores` takes them
from a score file matched onto human items, :mod:`judge.eval.matching`).

Steps (:func:`fit_calibration`):

1. **Split** the questions at random (``seed``) into a *fit* part and a *conformal* part
   (``conformal_fraction`` of the questions); all responses to a question stay together. Split
   conformal needs residuals of a map fitted without them: fitting on the same items would make them
   optimistically small and the intervals too short.
2. **Per criterion**, when it has at least ``min_items`` labelled items in each part, else **pooled**
   (one map fitted on every item, for every criterion without its own), fit on the fit part:

   * ``isotonic``: scikit-learn's ``IsotonicRegression(y_min, y_max, out_of_bounds="clip")`` of the
     human score on the raw expected score (a non-decreasing map, so it never reorders the judge's
     scores of one criterion);
   * ``temperature``: the ``T`` minimising the negative log-likelihood of the annotators' ratings under
     the tempered scale distribution ``p^(1/T)`` (scipy's bounded scalar minimiser over ``log T``).

   Both are fitted every time; ``method`` says which one is stored (default ``temperature``, see
   below). The other is the comparison.
3. **Conformal**: the absolute residuals ``|human - calibrated|`` of the conformal part, grouped by the
   calibration each item takes (its criterion, or the pooled one: a Mondrian conformal regressor), give
   each group's halfwidth at ``level`` through ``crepes.ConformalRegressor`` (the
   ``ceil((1 - alpha)(n + 1))``-th smallest residual; none when the group is too small for the level).
4. **Comparison**, on the conformal part (which neither map saw): MAE and MSE of the raw score, the
   isotonic and the temperature calibration, pooled over criteria.

Why temperature by default. A judge that ``judge-train`` made learned its scale distribution from the
human scores, so its scores tend to be right on average (the demo judge's reliability bins lie on the
diagonal) and what is off is its confidence, which one temperature per criterion fixes without room to
overfit the few hundred labels a validation split holds. Isotonic regression removes any monotone
distortion, a shift too, but fits a step per run of labels: on the demo judge (calibrated on its
validation split, 525 labelled items, measured on its test split, 1,575 items, five random fit/conformal
splits) the raw MAE 1.384 (MSE 2.905) became 1.401 (2.906) with temperature and 1.418 (3.015) with
isotonic regression. On a judge with a systematic bias and enough labels, isotonic is the one to take
(``method="isotonic"``; ``tests/test_calibration.py`` plants one and sees isotonic remove it).
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from judge.core.errors import JudgeError
from judge.eval.bootstrap import seeded_rng
from judge.eval.matching import Scorer
from judge.models.calibration import (
    POOLED,
    Calibration,
    CalibrationData,
    CriterionCalibration,
    Method,
    content_fingerprint,
    interpolate,
    temper,
)

METHODS: tuple[Method, ...] = ("isotonic", "temperature")
#: Bounds of log(T) for the temperature search (T from 0.02 to 50).
LOG_T_BOUNDS = (-4.0, 4.0)


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


def labelled_scores(scorer: Scorer) -> list[LabelledScore]:
    """The scored matches of a judge's score file on the human items, with the raw read-out (``raw_score``
    when the file is calibrated already, else ``score``) and the distribution each record must carry."""
    out = []
    for m in scorer.scored:
        rec = m.record
        if rec.distribution is None:
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
                tuple(rec.distribution),
                it.value,
                tuple(s for _, s in it.ratings),
            )  # fmt: skip
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


def conformal_halfwidths(
    residuals: Sequence[float], groups: Sequence[str], level: float
) -> dict[str, float | None]:
    """Each group's split conformal halfwidth at ``level`` from crepes' Mondrian ``ConformalRegressor``
    (None: too few residuals in the group for the level: the interval is the whole scale)."""
    from crepes import ConformalRegressor

    groups_arr = np.asarray(groups, dtype=object)
    cr = ConformalRegressor().fit(np.asarray(residuals, dtype=float), bins=groups_arr)
    labels = sorted(set(groups))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "too small for the level": None below says so
        ends = cr.predict_int(np.zeros(len(labels)), bins=np.asarray(labels, dtype=object), confidence=level)
    return {g: (float(hi) if math.isfinite(hi) else None) for g, hi in zip(labels, ends[:, 1], strict=True)}


def _fit_map(method: Method, items: Sequence[LabelledScore], values: Sequence[int]) -> CriterionCalibration:
    scale = (float(values[0]), float(values[-1]))
    if method == "isotonic":
        x, y = fit_isotonic([s.raw for s in items], [s.human for s in items], scale)
        return CriterionCalibration(n_fit=len(items), n_conformal=0, x=x, y=y, halfwidth=None)
    t = fit_temperature([s.distribution for s in items], [s.ratings for s in items], values)
    return CriterionCalibration(n_fit=len(items), n_conformal=0, temperature=t, halfwidth=None)


def _calibrated(cc: CriterionCalibration, s: LabelledScore, values: Sequence[int]) -> float:
    if cc.x is not None and cc.y is not None:
        return interpolate(s.raw, cc.x, cc.y)
    assert cc.temperature is not None
    return float(np.dot(temper(s.distribution, cc.temperature), values))


def _errors(pred: Sequence[float], human: Sequence[float]) -> dict[str, float | None]:
    from judge.eval.stats import error_summary

    return error_summary(pred, human)


def fit_calibration(
    scores: Sequence[LabelledScore],
    values: Sequence[int],
    *,
    method: Method = "temperature",
    level: float = 0.9,
    conformal_fraction: float = 0.5,
    min_items: int = 30,
    seed: int = 0,
    human_files: Sequence[dict[str, str]] = (),
    scores_file: str | None = None,
) -> Calibration:
    """Fit the calibration of ``scores`` (see the module doc); ``values`` is the rubric's scale."""
    if method not in METHODS:
        raise JudgeError(f"calibration method {method!r} is not one of {', '.join(METHODS)}")
    if not 0 < level < 1:
        raise JudgeError(f"`level` {level} must lie between 0 and 1 (0.9: 90% intervals)")
    if not 0 < conformal_fraction < 1:
        raise JudgeError(f"`conformal_fraction` {conformal_fraction} must lie between 0 and 1")
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

    def key(s: LabelledScore) -> str:
        return s.criterion if s.criterion in own else POOLED

    maps = {
        m: {c: _fit_map(m, fit_by[c], values) for c in own} | {POOLED: _fit_map(m, fit, values)}
        for m in METHODS
    }
    human = [s.human for s in conf]
    comparison: dict[str, object] = {
        "part": "conformal (held out from both fits)",
        "n_items": len(conf),
        "raw": _errors([s.raw for s in conf], human),
    }
    for m in METHODS:
        comparison[m] = _errors([_calibrated(maps[m][key(s)], s, values) for s in conf], human)
    chosen = maps[method]
    mine = [s for s in conf if s.criterion in own]
    half = (
        conformal_halfwidths([s.human - _calibrated(chosen[s.criterion], s, values) for s in mine],
                             [s.criterion for s in mine], level)
        if mine else {}
    )  # fmt: skip
    # The pooled map's residuals on the criteria that take it; when every criterion has its own, on all
    # (then only a criterion absent from the labelled data takes the pooled map).
    pooled = [s for s in conf if s.criterion not in own] or conf
    res = [s.human - _calibrated(chosen[POOLED], s, values) for s in pooled]
    half[POOLED] = conformal_halfwidths(res, [POOLED] * len(res), level)[POOLED]
    n_conf = {c: len(conf_by[c]) for c in own} | {POOLED: len(pooled)}
    done = {
        k: cc.model_copy(update={"n_conformal": n_conf[k], "halfwidth": half[k]}) for k, cc in chosen.items()
    }
    items = sorted((s.id, s.criterion, list(s.ratings), s.raw) for s in scores)
    return Calibration(
        method=method,
        level=level,
        scale=list(values),
        min_items=min_items,
        criteria={c: done[c] for c in own},
        pooled=done[POOLED],
        data=CalibrationData(
            fingerprint=content_fingerprint(items),
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


__all__ = [
    "METHODS",
    "LabelledScore",
    "conformal_halfwidths",
    "fit_calibration",
    "fit_isotonic",
    "fit_temperature",
    "format_calibration",
    "labelled_scores",
    "rating_nll",
    "split_questions",
]


def format_calibration(cal: Calibration) -> str:
    """What ``judge-calibrate`` prints: the held-out comparison of the methods, then each criterion's
    calibration and interval halfwidth."""
    from judge.core.tables import text_table

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    cmp = cal.comparison
    rows = [[name, num(cmp[name]["mae"]), num(cmp[name]["mse"])] for name in ("raw", *METHODS) if name in cmp]
    lines = [
        f"Held-out comparison ({cmp.get('n_items')} items of the conformal part, which neither fit saw):",
        text_table(["scores", "MAE", "MSE"], rows),
        "",
        f"Stored: {cal.method}; {cal.level:.0%} intervals (split conformal, crepes), per criterion with at "
        f"least {cal.min_items} items in each part, else pooled ({POOLED}):",
    ]
    body = []
    for key, cc in [*cal.criteria.items(), (POOLED, cal.pooled)]:
        fitted = f"T = {cc.temperature:.3f}" if cc.temperature is not None else f"{len(cc.x or [])} knots"
        half = "whole scale" if cc.halfwidth is None else f"±{cc.halfwidth:.3f}"
        body.append([key, str(cc.n_fit), str(cc.n_conformal), fitted, half])
    lines.append(text_table(["criterion", "fit items", "conformal items", "map", "interval"], body))
    return "\n".join(lines)
