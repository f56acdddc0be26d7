"""The simulated annotators: true scores from a response's hidden factors, then each annotator's bias, noise
and rounding, and the rationale sentence naming the factor that cost the most."""

from __future__ import annotations

import math
import random

from .drafts import _Draft
from .spec import (
    ANNOTATOR_PROFILES,
    BLANK_CAP,
    CRITERIA,
    CRITERION_FORMULAS,
    FACTORS,
    OVERALL_WEIGHTS,
    SCALE_MAX,
    SCALE_MIN,
)


def _clip(x: float) -> float:
    return min(float(SCALE_MAX), max(float(SCALE_MIN), x))


def true_scores(family: str, factors: dict[str, float], blank: bool = False) -> dict[str, float]:
    """True criterion scores and overall (floats on 0..6) from a response's hidden factors; ``blank``: every
    picture of the response is blank, so each criterion is capped at :data:`BLANK_CAP`."""
    out = {}
    for crit in CRITERIA[family]:
        base, weights = CRITERION_FORMULAS[family][crit]
        out[crit] = _clip(base + sum(w * factors[f] for f, w in weights.items()))
        if blank:
            out[crit] = min(out[crit], BLANK_CAP)
    out["overall"] = sum(OVERALL_WEIGHTS[family][c] * out[c] for c in CRITERIA[family])
    return out


def _factor_impact(family: str) -> dict[str, float]:
    """How many overall points a factor moves between 0 and 1 (ignoring clipping)."""
    impact: dict[str, float] = {}
    for crit, (_, weights) in CRITERION_FORMULAS[family].items():
        for f, w in weights.items():
            impact[f] = impact.get(f, 0.0) + OVERALL_WEIGHTS[family][crit] * w
    return impact


def _main_note(family: str, draft: _Draft) -> str:
    if draft.blank and not draft.off_prompt:  # the failure that capped every score
        return "The pictures are blank: nothing is drawn, so the response fails its task."
    impact = _factor_impact(family)
    best, best_loss = None, 0.25
    for f in FACTORS[family]:
        loss = impact[f] * (1 - draft.factors[f])
        if loss > best_loss and f in draft.notes:
            best, best_loss = f, loss
    return draft.notes[best] if best else draft.notes["_good"]


def _annotator_profile(i: int) -> tuple[float, float]:
    bias, sd = ANNOTATOR_PROFILES[i % len(ANNOTATOR_PROFILES)]
    shift = 0.1 * (i // len(ANNOTATOR_PROFILES))
    return round(bias + (shift if i % 2 else -shift), 2), sd


RATIONALE_LEADS = ["{}", "Main point: {}", "Mostly this: {}"]


def _annotate(
    family: str, truth: dict[str, float], note: str, n_annotators: int, rng: random.Random
) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    scores: dict[str, dict[str, int]] = {}
    rationale: dict[str, str] = {}
    for i in range(n_annotators):
        bias, sd = _annotator_profile(i)
        name = f"ann{i + 1}"
        scores[name] = {
            c: int(min(SCALE_MAX, max(SCALE_MIN, math.floor(truth[c] + bias + rng.gauss(0.0, sd) + 0.5))))
            for c in [*CRITERIA[family], "overall"]
        }
        lead = RATIONALE_LEADS[i % len(RATIONALE_LEADS)]
        rationale[name] = lead.format(note if lead.startswith("{") else note[:1].lower() + note[1:])
    return scores, rationale
