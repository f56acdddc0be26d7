"""Selective evaluation, applied where a score is read out: does the judge keep the score (``trusted``) or
escalate it to a human?

After Jung, Brahman and Choi, "Trust or Escalate: LLM Judges with Provable Guarantees for Human Agreement"
(ICLR 2025). ``judge-calibrate --selective`` (fitting: :mod:`judge.eval.selective`, which needs human
labels) writes ``selective.json`` beside ``calibration.json`` and names it, with its fingerprint and the
calibration's, in the judge card. The judge then marks every score: ``trusted`` when its confidence is at
least the criterion's threshold, else escalated (``trusted: false``). On the kind of items it was fitted
on, the judge's agreement with humans on its trusted scores is at least ``agreement`` with probability at
least ``1 - delta`` (over the draw of the labelled items it was fitted on).

Agreement, and so the guarantee, is one of two:

* **pointwise** (a score): the judge's calibrated score lies within ``tolerance`` of the human mean score;
* **pairwise** (a preference between two responses to one question): the judge prefers the response the
  annotators' majority prefers (pairs the annotators tie are outside the guarantee).

Confidence comes from the calibrated view (:mod:`judge.models.calibration`), by a named measure
(:data:`POINTWISE_CONFIDENCE`; another can be registered there):

* ``mass`` (default): the probability the calibrated distribution puts within ``tolerance`` of its mean,
  the judge's own estimate of the chance that the agreement holds;
* ``spread``: minus the calibrated distribution's standard deviation;
* pairwise, ``preference``: ``max(p, 1 - p)`` of the preference ``p`` from the two calibrated distributions.

A threshold of None means no threshold passed the test: every score of that criterion is escalated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judge.core.atomic import write_json
from judge.core.errors import ConfigError, format_validation_error
from judge.models.calibration import POOLED, content_fingerprint

SELECTIVE_FILE = "selective.json"

#: A pointwise confidence: ``(calibrated distribution, calibrated score, scale values, tolerance)`` -> a number
#: (higher: more confident).
Confidence = Callable[[Sequence[float], float, Sequence[int], float], float]


def mass_within(
    distribution: Sequence[float], score: float, values: Sequence[int], tolerance: float
) -> float:
    """The probability ``distribution`` puts within ``tolerance`` of ``score`` (1e-9 slack on the edges)."""
    return math.fsum(
        p for p, v in zip(distribution, values, strict=True) if abs(v - score) <= tolerance + 1e-9
    )


def negative_spread(
    distribution: Sequence[float], score: float, values: Sequence[int], tolerance: float
) -> float:
    """Minus the standard deviation of ``distribution`` (its mean is ``score``)."""
    var = math.fsum(p * (v - score) ** 2 for p, v in zip(distribution, values, strict=True))
    return -math.sqrt(max(var, 0.0))


#: Rounding slack of the threshold comparison: a confidence this close below a threshold meets it.
SLACK = 1e-12


def meets(confidence: float, threshold: float) -> bool:
    """Whether a confidence reaches a threshold: the one comparison fitting counts trusted items by and
    scoring marks them by (``confidence >= threshold - SLACK``), so both agree at the threshold itself."""
    return confidence >= threshold - SLACK


#: The pointwise confidence measures by name, with the range their thresholds are searched in.
POINTWISE_CONFIDENCE: dict[str, tuple[Confidence, tuple[float, float]]] = {
    "mass": (mass_within, (0.0, 1.0)),
    "spread": (negative_spread, (-10.0, 0.0)),
}
#: The pairwise confidence: ``max(p, 1 - p)`` of the preference, in [0.5, 1].
PAIRWISE_RANGE = (0.5, 1.0)


def pair_confidence(p_first_better: float) -> float:
    """How sure a preference is: ``max(p, 1 - p)``."""
    return max(p_first_better, 1.0 - p_first_better)


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SelectiveRule(_Part):
    """One criterion's threshold (or the pooled one's) and what the test saw."""

    threshold: float | None  #: trusted iff confidence >= threshold; None: nothing is trusted
    n: int  #: labelled items (or pairs) the test ran on
    n_trusted: int  #: of them, those at or above the threshold
    agreement: float | None  #: the agreement on those
    p_value: float | None  #: the binomial p-value of the last threshold accepted (None: none was)


class Selective(_Part):
    """``selective.json``: the thresholds of selective evaluation (see the module doc)."""

    selective_version: int = 1
    agreement: float = Field(gt=0, lt=1)  #: the guaranteed agreement on trusted items (1 - alpha)
    delta: float = Field(gt=0, lt=1)  #: the guarantee fails with probability at most delta
    tolerance: float = Field(ge=0)  #: pointwise agreement: |calibrated score - human mean| <= tolerance
    confidence: str  #: the pointwise confidence measure (:data:`POINTWISE_CONFIDENCE`)
    scale: list[int]
    calibration: str  #: the fingerprint of the calibration whose view the confidences come from
    pointwise: dict[str, SelectiveRule]  #: per criterion; ``*`` for the criteria without their own
    pairwise: dict[str, SelectiveRule] = Field(default_factory=dict)
    fitted_on: dict[str, Any] = Field(
        default_factory=dict
    )  #: which labelled items (see judge.eval.selective)
    created: str | None = None

    def _rule(self, rules: dict[str, SelectiveRule], criterion: str | None) -> SelectiveRule | None:
        if criterion is not None and criterion in rules:
            return rules[criterion]
        return rules.get(POOLED)

    def confidence_of(self, distribution: Sequence[float], score: float) -> float:
        fn, _ = POINTWISE_CONFIDENCE[self.confidence]
        return fn(distribution, score, self.scale, self.tolerance)

    def trusted(self, criterion: str | None, distribution: Sequence[float], score: float) -> bool:
        """Whether the judge keeps this calibrated score (see the module doc)."""
        rule = self._rule(self.pointwise, criterion)
        if rule is None or rule.threshold is None:
            return False
        return meets(self.confidence_of(distribution, score), rule.threshold)

    def trusted_pair(self, criterion: str | None, p_first_better: float) -> bool | None:
        """Whether the judge keeps this preference (None: no pairwise thresholds were fitted)."""
        if not self.pairwise:
            return None
        rule = self._rule(self.pairwise, criterion)
        if rule is None or rule.threshold is None:
            return False
        return meets(pair_confidence(p_first_better), rule.threshold)

    def fingerprint(self) -> str:
        return content_fingerprint(self.model_dump(mode="json"))

    def producer(self) -> dict[str, Any]:
        """What ``producer.selective`` of a marked record says."""
        return {
            "agreement": self.agreement,
            "delta": self.delta,
            "tolerance": self.tolerance,
            "confidence": self.confidence,
            "fingerprint": self.fingerprint(),
        }


def read_selective(path: str | Path) -> Selective:
    """A ``selective.json``; an unreadable or invalid one is a ConfigError naming the file and field."""
    path = Path(path)
    try:
        sel = Selective.model_validate_json(path.read_bytes())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the selective-evaluation thresholds ({e})") from None
    except ValidationError as e:
        raise ConfigError(f"{path}: not a selective-evaluation file:\n{format_validation_error(e)}") from None
    if sel.confidence not in POINTWISE_CONFIDENCE:
        raise ConfigError(
            f"{path}: field 'confidence': {sel.confidence!r} is not one of {', '.join(POINTWISE_CONFIDENCE)}"
        )
    return sel


def write_selective(judge_dir: str | Path, selective: Selective) -> Path:
    """Write ``selective.json`` into a judge folder (atomically); its path."""
    path = Path(judge_dir) / SELECTIVE_FILE
    write_json(path, selective.model_dump(mode="json"))
    return path


__all__ = [
    "PAIRWISE_RANGE",
    "POINTWISE_CONFIDENCE",
    "SELECTIVE_FILE",
    "SLACK",
    "Selective",
    "SelectiveRule",
    "mass_within",
    "meets",
    "negative_spread",
    "pair_confidence",
    "read_selective",
    "write_selective",
]
