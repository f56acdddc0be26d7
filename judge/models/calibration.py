"""A judge's calibration, applied where its score is read out: the calibrated view of each read-out.

``judge-calibrate`` (fitting: :mod:`judge.eval.calibration`, which needs human labels) writes
``calibration.json`` into the judge folder and names it, with its fingerprint, in the judge card.
Every scoring path (``judge-score``, ``judge-serve``'s ``/v1/score`` and chat route, ``Judge.score``)
goes through :class:`judge.scoring.engine.JudgeEngine`, which calls :func:`calibrated_fields` on each
read-out, so they all apply it the same way.

**One calibrated view.** A calibrated record's ``distribution``, ``score`` (its mean), ``argmax`` (its
most probable value) and ``interval`` belong together: the calibrated distribution, and what follows from
it. The judge's own read-out keeps its values under ``raw_distribution``, ``raw_score`` and
``raw_argmax``. Whatever is computed from a record (a pair's preference, a chat reply's content and
logprobs, a reward) is computed from the calibrated view, so every path gives the same numbers.
``producer.calibration`` names the calibration (:meth:`Calibration.producer`).

What is stored, per criterion (``criteria``; a criterion with too few labelled items to fit on its
own uses the map of ``pooled``, fitted on every criterion's items together):

* ``isotonic``: the knots of scikit-learn's ``IsotonicRegression`` (``X_thresholds_``,
  ``y_thresholds_``); the calibrated score is the piecewise-linear interpolation between them,
  constant beyond the ends: what ``IsotonicRegression(out_of_bounds="clip").predict`` computes
  (a test checks it), without scikit-learn at scoring time. Its calibrated distribution is the read-out
  exponentially tilted until its mean is that score (:func:`tilt`: of the distributions with that
  mean, the one closest to the read-out in Kullback-Leibler divergence);
* ``temperature``: ``T``; the scale distribution ``p`` becomes ``p^(1/T)`` renormalised (the
  logits divided by ``T``), and the calibrated score is its expectation;
* neither (``none``: the fit found no map better than the read-out on held-out labels): the read-out
  itself, with the interval;
* ``halfwidth``: the split conformal quantile of the absolute residuals ``|human - calibrated|`` on
  held-out labelled items of the criterion (its own group, Mondrian by criterion, where it has enough;
  else the pooled group's): the interval is ``[score - halfwidth, score + halfwidth]`` clipped to the
  scale, and covers the human (mean) score of a new item of that criterion with probability at least
  ``level`` when the items are exchangeable (for the pooled group: on average over its criteria).
  ``None``: too few held-out items for the level, the interval is the whole scale;
* ``map_from`` (``"*"``): the criterion has its own interval but the pooled map.

**A floor** (:data:`FLOOR`). A map never gives one scale value probability 1 (nor above ``1 - FLOOR``):
an isotonic map that sends an item to the scale's end would otherwise tilt all its mass there, and a
rating anywhere else would cost an unbounded log-loss (held-out NLL 27.37 against 1.88 for the read-out on
an untrained judge, an item rated 2, 3, 2 given probability 1 on 6). Such a distribution is mixed with the
uniform one just enough to bring its top value to ``1 - FLOOR`` (every other value then has at least
``FLOOR / (K - 1)`` of ``K``), and the calibrated score is that distribution's mean: within
``FLOOR x`` the scale's width of the map's value, and only where the floor applied. The read-out itself
(``none``) is left as the judge gave it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from judge.core.atomic import write_json
from judge.core.errors import ConfigError, format_validation_error

CALIBRATION_FILE = "calibration.json"
#: The most probability a map leaves on one scale value is ``1 - FLOOR`` (see the module doc).
FLOOR = 0.01
#: A fitted map (``none``: the read-out itself).
Method = Literal["isotonic", "temperature", "none"]
#: What ``judge-calibrate`` is asked for: a map, or ``auto`` (chosen per criterion by held-out NLL).
MethodChoice = Literal["auto", "isotonic", "temperature", "none"]
#: The key of the pooled calibration in ``producer.calibration.key`` and the fitting report.
POOLED = "*"


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: Fields added after the first files were written: left out of the file (and so of the fingerprint the
#: judge card names) while None, so that a calibration written before them keeps its fingerprint.
_OPTIONAL = ("map_from",)


class CriterionCalibration(_Part):
    """The calibration of one criterion (or the pooled one)."""

    n_fit: int  #: labelled items the map was fitted on
    n_conformal: int  #: held-out labelled items the interval's halfwidth comes from
    x: list[float] | None = None  #: isotonic knots: raw expected scores, increasing
    y: list[float] | None = None  #: isotonic knots: calibrated scores, non-decreasing
    temperature: float | None = None
    halfwidth: float | None  #: conformal quantile of |human - calibrated|; None: the whole scale
    map_from: str | None = None  #: ``"*"``: the map is the pooled one (this criterion has its own interval)

    @property
    def method(self) -> Method:
        """Which map this is: ``isotonic``, ``temperature`` or ``none`` (the read-out itself)."""
        return "isotonic" if self.x is not None else "temperature" if self.temperature is not None else "none"

    def view(
        self, expected: float, distribution: Sequence[float], scale: Sequence[int]
    ) -> tuple[float, list[float]]:
        """The calibrated score and distribution of one read-out (see the module doc)."""
        lo, hi = float(scale[0]), float(scale[-1])
        if self.x is not None and self.y is not None:
            score = min(max(interpolate(expected, self.x, self.y), lo), hi)
            dist = tilt(distribution, scale, score)
        elif self.temperature is not None:
            dist = temper(distribution, self.temperature)
            score = min(max(math.fsum(p * v for p, v in zip(dist, scale, strict=True)), lo), hi)
        else:
            return float(expected), [float(p) for p in distribution]
        if max(dist) <= 1.0 - FLOOR:
            return score, dist
        dist = floored(dist)
        return min(max(math.fsum(p * v for p, v in zip(dist, scale, strict=True)), lo), hi), dist

    @model_serializer(mode="wrap")
    def _new_fields_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        for key in _OPTIONAL:
            if out.get(key, 0) is None:
                del out[key]
        return out

    @model_validator(mode="after")
    def _one_map(self) -> CriterionCalibration:
        if (self.x is None) != (self.y is None) or (self.x is not None and len(self.x) != len(self.y or [])):
            raise ValueError("isotonic knots x and y must both be given, of equal length")
        if self.x is not None and (
            not self.x or any(b <= a for a, b in zip(self.x, self.x[1:], strict=False))
        ):
            raise ValueError("isotonic knots x must be strictly increasing and not empty")
        if self.temperature is not None and not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be a positive number, got {self.temperature}")
        if self.x is not None and self.temperature is not None:
            raise ValueError(
                "a criterion's calibration is isotonic knots or a temperature (or neither), not both"
            )
        return self


class CalibrationData(_Part):
    """What the calibration was fitted on: enough to tell whether an evaluation set is held out."""

    fingerprint: str  #: SHA-256 of the (id, criterion, human ratings, raw score) items used
    human_files: list[dict[str, str]]  #: path and sha256 of each human file
    scores_file: str | None = None  #: the judge's raw scores of those items
    n_items: int
    n_questions: int
    ids: list[str]  #: the responses used (judge-report leaves them out of its calibration section)
    conformal_fraction: float
    seed: int


class Calibration(_Part):
    """``calibration.json``; see the module doc. :meth:`apply` maps one read-out."""

    calibration_version: int = 1
    #: what was asked for; each criterion's map says what it is (``auto`` chooses per criterion)
    method: MethodChoice
    level: float = Field(gt=0, lt=1)  #: the intervals' coverage level (0.9: 90%)
    scale: list[int]  #: the rubric's scale values, lowest first
    min_items: int  #: a criterion with fewer labelled items than this in either half uses ``pooled``
    criteria: dict[str, CriterionCalibration]
    pooled: CriterionCalibration
    data: CalibrationData
    #: the held-out comparison of the methods (MAE, MSE, NLL, Brier, ECE of raw and calibrated), each
    #: criterion's choice and its spread across folds, the conformal groups: see judge.eval.calibration
    comparison: dict[str, Any] = Field(default_factory=dict)
    created: str | None = None

    def lookup(self, criterion: str | None) -> tuple[str, CriterionCalibration]:
        """The calibration a criterion's score takes: its own, else the pooled one (key ``*``)."""
        if criterion is not None and criterion in self.criteria:
            return criterion, self.criteria[criterion]
        return POOLED, self.pooled

    def apply(self, criterion: str | None, expected: float, distribution: Sequence[float]) -> Calibrated:
        """The calibrated view of one read-out (``expected`` and ``distribution`` over :attr:`scale`): the
        calibrated distribution, its mean and argmax, and the interval."""
        key, cc = self.lookup(criterion)
        lo, hi = float(self.scale[0]), float(self.scale[-1])
        score, dist = cc.view(expected, distribution, self.scale)
        if cc.halfwidth is None:
            interval = [lo, hi]
        else:
            interval = [max(lo, score - cc.halfwidth), min(hi, score + cc.halfwidth)]
        return Calibrated(score, interval, key, dist, argmax_value(dist, self.scale))

    def fingerprint(self) -> str:
        """SHA-256 of the calibration's canonical JSON: what the judge card names."""
        return content_fingerprint(self.model_dump(mode="json"))

    def producer(self) -> dict[str, Any]:
        """What ``producer.calibration`` of a calibrated record says."""
        return {"method": self.method, "level": self.level, "fingerprint": self.fingerprint()}


@dataclass
class Calibrated:
    """One read-out's calibrated view."""

    score: float  #: the calibrated distribution's mean (isotonic: the map's value, which it equals)
    interval: list[float]
    key: str  #: the criterion whose calibration was used, or ``*`` (pooled)
    distribution: list[float]  #: the calibrated distribution over the scale, lowest value first
    argmax: int  #: its most probable scale value (the lowest of equals)


def argmax_value(distribution: Sequence[float], values: Sequence[int]) -> int:
    """The most probable scale value (the lowest of equally probable ones)."""
    best = max(range(len(values)), key=lambda i: (distribution[i], -i))
    return int(values[best])


def tilt(distribution: Sequence[float], values: Sequence[int], target: float) -> list[float]:
    """The distribution ``p_i exp(b v_i)`` (renormalised) whose mean is ``target``: of all distributions over
    ``values`` with that mean, the one of least Kullback-Leibler divergence from ``distribution``. ``b`` is
    found by Newton's method on the mean (whose derivative is the tilted variance), kept inside a bracket
    by bisection; a target at or beyond the reachable ends gives all the mass to the end value."""
    vals = [float(v) for v in values]
    logs = [math.log(q) if q > 0 else -math.inf for q in distribution]
    support = [v for v, lg in zip(vals, logs, strict=True) if lg > -math.inf]
    if not support:
        raise ValueError("a distribution with no mass cannot be tilted")
    lo_v, hi_v = min(support), max(support)
    if target <= lo_v or target >= hi_v:
        end = lo_v if target <= lo_v else hi_v
        return [1.0 if v == end else 0.0 for v in vals]
    span = hi_v - lo_v

    def tilted(b: float) -> tuple[list[float], float, float]:
        z = [lg + b * v for lg, v in zip(logs, vals, strict=True)]
        top = max(z)
        ex = [math.exp(x - top) if x > -math.inf else 0.0 for x in z]
        total = math.fsum(ex)
        q = [e / total for e in ex]
        mean = math.fsum(a * v for a, v in zip(q, vals, strict=True))
        return q, mean, math.fsum(a * (v - mean) ** 2 for a, v in zip(q, vals, strict=True))

    lo_b, hi_b = -math.inf, math.inf  # the bracket: mean(lo_b) < target < mean(hi_b)
    b = 0.0
    q, mean, var = tilted(b)
    for _ in range(200):
        err = mean - target
        if abs(err) <= 1e-12 * span:
            break
        if err < 0:
            lo_b = b
        else:
            hi_b = b
        step = b - err / var if var > 0 else math.nan
        if lo_b < step < hi_b:
            b = step
        elif math.isfinite(lo_b) and math.isfinite(hi_b):
            b = 0.5 * (lo_b + hi_b)
        else:  # no bracket on one side yet: step out
            b = (b if math.isfinite(b) else 0.0) + (4.0 if err < 0 else -4.0) / span * max(1.0, abs(b) * span)
        q, mean, var = tilted(b)
    return q


def floored(distribution: Sequence[float], floor: float = FLOOR) -> list[float]:
    """``distribution`` mixed with the uniform one just enough that no value has more than ``1 - floor``
    (unchanged when none has): ``(1 - e) p + e / K`` with ``e`` solving ``(1 - e) max(p) + e / K = 1 - floor``."""
    k = len(distribution)
    top = max(distribution)
    if top <= 1.0 - floor or k < 2:
        return [float(p) for p in distribution]
    e = (top - (1.0 - floor)) / (top - 1.0 / k)
    return [(1.0 - e) * float(p) + e / k for p in distribution]


def interpolate(x: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    """Piecewise-linear interpolation through the knots, constant beyond the ends (``numpy.interp``)."""
    import numpy as np

    return float(np.interp(x, xs, ys))


def tempered_expectation(distribution: Sequence[float], values: Sequence[int], temperature: float) -> float:
    """The expectation of ``values`` under ``distribution ** (1 / temperature)``, renormalised (the scale
    logits divided by the temperature); a value of probability 0 stays at 0."""
    return float(sum(p * v for p, v in zip(temper(distribution, temperature), values, strict=True)))


def temper(distribution: Sequence[float], temperature: float) -> list[float]:
    """``distribution ** (1 / temperature)`` renormalised, computed in log space."""
    logs = [math.log(p) / temperature if p > 0 else -math.inf for p in distribution]
    top = max(logs)
    ex = [math.exp(v - top) if v > -math.inf else 0.0 for v in logs]
    total = math.fsum(ex)
    return [e / total for e in ex]


def calibrated_fields(
    calibration: Calibration | None, criterion: str | None, read_out, selective: Any = None
) -> dict[str, Any]:
    """The score fields of a judge record from a read-out (``expected``, ``distribution``, ``argmax``):
    without a calibration, the read-out's ``score``, ``distribution`` and ``argmax``; with one, the calibrated
    view (``score``, ``distribution``, ``argmax``, ``interval``) and the read-out's as ``raw_score``,
    ``raw_distribution``, ``raw_argmax``. ``selective``
    (:class:`judge.models.selective.Selective`): also ``trusted``, whether the judge keeps the score or
    escalates it to a human."""
    if calibration is None:
        out = {
            "score": read_out.expected,
            "distribution": list(read_out.distribution),
            "argmax": read_out.argmax,
        }
    else:
        cal = calibration.apply(criterion, read_out.expected, read_out.distribution)
        out = {
            "score": cal.score,
            "distribution": cal.distribution,
            "argmax": cal.argmax,
            "interval": cal.interval,
            "raw_score": read_out.expected,
            "raw_distribution": list(read_out.distribution),
            "raw_argmax": read_out.argmax,
        }
    if selective is not None:
        out["trusted"] = selective.trusted(criterion, out["distribution"], out["score"])
    return out


def content_fingerprint(obj: Any) -> str:
    """SHA-256 of a JSON-able value in canonical form (sorted keys, no spaces)."""
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def read_calibration(path: str | Path) -> Calibration:
    """A ``calibration.json``; an unreadable or invalid one is a ConfigError naming the file and field."""
    path = Path(path)
    try:
        return Calibration.model_validate_json(path.read_bytes())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the calibration ({e})") from None
    except ValidationError as e:
        raise ConfigError(f"{path}: not a calibration file:\n{format_validation_error(e)}") from None


def write_calibration(judge_dir: str | Path, calibration: Calibration) -> Path:
    """Write ``calibration.json`` into a judge folder (atomically); its path."""
    path = Path(judge_dir) / CALIBRATION_FILE
    write_json(path, calibration.model_dump(mode="json"))
    return path


__all__ = [
    "CALIBRATION_FILE",
    "FLOOR",
    "POOLED",
    "Calibrated",
    "Method",
    "MethodChoice",
    "argmax_value",
    "Calibration",
    "CalibrationData",
    "CriterionCalibration",
    "calibrated_fields",
    "content_fingerprint",
    "floored",
    "interpolate",
    "read_calibration",
    "temper",
    "tempered_expectation",
    "tilt",
    "write_calibration",
]
