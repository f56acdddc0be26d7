"""A judge's calibration, applied where its score is read out: the calibrated score and its interval.

``judge-calibrate`` (fitting: :mod:`judge.eval.calibration`, which needs human labels) writes
``calibration.json`` into the judge folder and names it, with its fingerprint, in the judge card.
Every scoring path (``judge-score``, ``judge-serve``'s ``/v1/score``, ``Judge.score``) goes through
:class:`judge.scoring.engine.JudgeEngine`, which calls :func:`calibrated_fields` on each read-out, so
they all apply it the same way: the record's ``score`` is the calibrated score, ``raw_score`` the
judge's own expected score, ``interval`` the conformal interval, and ``producer.calibration`` names
the calibration (:meth:`Calibration.producer`).

What is stored, per criterion (``criteria``; a criterion with too few labelled items to fit on its
own uses ``pooled``, fitted on every criterion's items together):

* ``isotonic``: the knots of scikit-learn's ``IsotonicRegression`` (``X_thresholds_``,
  ``y_thresholds_``); the calibrated score is the piecewise-linear interpolation between them,
  constant beyond the ends: what ``IsotonicRegression(out_of_bounds="clip").predict`` computes
  (a test checks it), without scikit-learn at scoring time;
* ``temperature``: ``T``; the scale distribution ``p`` becomes ``p^(1/T)`` renormalised (the
  logits divided by ``T``), and the calibrated score is its expectation;
* ``halfwidth``: the split conformal quantile of the absolute residuals ``|human - calibrated|`` on
  held-out labelled items (``crepes``' ``ConformalRegressor``): the interval is
  ``[score - halfwidth, score + halfwidth]`` clipped to the scale, and covers the human (mean) score
  of a new item with probability at least ``level`` when the items are exchangeable. ``None``: too
  few held-out items for the level, the interval is the whole scale.

The record's ``distribution`` stays the model's own (uncalibrated) read-out.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from judge.core.atomic import write_json
from judge.core.errors import ConfigError, format_validation_error

CALIBRATION_FILE = "calibration.json"
Method = Literal["isotonic", "temperature"]
#: The key of the pooled calibration in ``producer.calibration.key`` and the fitting report.
POOLED = "*"


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CriterionCalibration(_Part):
    """The calibration of one criterion (or the pooled one)."""

    n_fit: int  #: labelled items the map was fitted on
    n_conformal: int  #: held-out labelled items the interval's halfwidth comes from
    x: list[float] | None = None  #: isotonic knots: raw expected scores, increasing
    y: list[float] | None = None  #: isotonic knots: calibrated scores, non-decreasing
    temperature: float | None = None
    halfwidth: float | None  #: conformal quantile of |human - calibrated|; None: the whole scale

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
        if (self.x is None) == (self.temperature is None):
            raise ValueError("a criterion's calibration is isotonic knots or a temperature, exactly one")
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
    method: Method
    level: float = Field(gt=0, lt=1)  #: the intervals' coverage level (0.9: 90%)
    scale: list[int]  #: the rubric's scale values, lowest first
    min_items: int  #: a criterion with fewer labelled items than this in either half uses ``pooled``
    criteria: dict[str, CriterionCalibration]
    pooled: CriterionCalibration
    data: CalibrationData
    #: held-out comparison of the methods (MAE, MSE of raw and calibrated scores): see judge.eval.calibration
    comparison: dict[str, Any] = Field(default_factory=dict)
    created: str | None = None

    def lookup(self, criterion: str | None) -> tuple[str, CriterionCalibration]:
        """The calibration a criterion's score takes: its own, else the pooled one (key ``*``)."""
        if criterion is not None and criterion in self.criteria:
            return criterion, self.criteria[criterion]
        return POOLED, self.pooled

    def apply(self, criterion: str | None, expected: float, distribution: Sequence[float]) -> Calibrated:
        """The calibrated score and interval of one read-out (``expected`` and ``distribution`` over
        :attr:`scale`)."""
        key, cc = self.lookup(criterion)
        lo, hi = float(self.scale[0]), float(self.scale[-1])
        if cc.x is not None and cc.y is not None:
            score = interpolate(expected, cc.x, cc.y)
        else:
            assert cc.temperature is not None
            score = tempered_expectation(distribution, self.scale, cc.temperature)
        score = min(max(score, lo), hi)
        if cc.halfwidth is None:
            interval = [lo, hi]
        else:
            interval = [max(lo, score - cc.halfwidth), min(hi, score + cc.halfwidth)]
        return Calibrated(score, interval, key)

    def fingerprint(self) -> str:
        """SHA-256 of the calibration's canonical JSON: what the judge card names."""
        return content_fingerprint(self.model_dump(mode="json"))

    def producer(self) -> dict[str, Any]:
        """What ``producer.calibration`` of a calibrated record says."""
        return {"method": self.method, "level": self.level, "fingerprint": self.fingerprint()}


@dataclass
class Calibrated:
    score: float
    interval: list[float]
    key: str  #: the criterion whose calibration was used, or ``*`` (pooled)


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


def calibrated_fields(calibration: Calibration | None, criterion: str | None, read_out) -> dict[str, Any]:
    """The score fields of a judge record from a read-out (``expected``, ``distribution``): ``score`` alone
    without a calibration; with one, the calibrated ``score``, the ``raw_score`` and the ``interval``."""
    if calibration is None:
        return {"score": read_out.expected}
    cal = calibration.apply(criterion, read_out.expected, read_out.distribution)
    return {"score": cal.score, "raw_score": read_out.expected, "interval": cal.interval}


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
    "POOLED",
    "Calibrated",
    "Calibration",
    "CalibrationData",
    "CriterionCalibration",
    "calibrated_fields",
    "content_fingerprint",
    "interpolate",
    "read_calibration",
    "temper",
    "tempered_expectation",
    "write_calibration",
]
