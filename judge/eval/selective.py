"""Fitting selective evaluation (``judge-calibrate --selective``): the confidence thresholds above which the
judge's scores agree with humans at a guaranteed rate; applying them is :mod:`judge.models.selective`'s.

The guarantee (Jung, Brahman and Choi, "Trust or Escalate", ICLR 2025): for a target agreement ``1 - alpha``
and an error rate ``delta``, the threshold ``lambda_hat`` is chosen on labelled items so that

    P( agreement of the judge with the humans on new items with confidence >= lambda_hat  <  1 - alpha )  <=  delta,

the probability being over the draw of the labelled items, the new items exchangeable with them.

How (:func:`fixed_sequence_threshold`): a fixed grid of thresholds over the confidence's range, tested from
the most confident down. At threshold ``lambda`` the ``n`` labelled items with confidence ``>= lambda``
hold ``k`` disagreements; the null hypothesis "the disagreement rate above ``lambda`` exceeds ``alpha``"
has the exact binomial p-value ``P(Binomial(n, alpha) <= k)``. Going down the grid, every threshold whose
p-value is at most ``delta`` is accepted, and the first that is not stops the test (fixed-sequence
testing: no correction for the number of thresholds, since each is tested only if all above it passed);
``lambda_hat`` is the last accepted (None: none was, every score is escalated). Thresholds that keep fewer
than :data:`START` items (or fewer than any test could accept: ``(1 - alpha)^n > delta``) are passed over,
not tested: at the top of a fine grid a handful of items would stop the test on one disagreement. Which
thresholds are passed over depends on the confidences only, not on the agreements; the guarantee is
checked empirically (``tests/test_selective.py``: over many random calibration/test splits of synthetic
data whose agreement is known, the promise failed in at most ``delta`` of them).

What it is fitted on: the calibration's conformal part (:func:`judge.eval.calibration.conformal_part`), the
labelled items the calibration maps were not fitted on, in their calibrated view; one threshold per
criterion with at least ``min_items`` of them, and a pooled one (``*``) for the other criteria, whose
guarantee holds on average over them. Pairwise, the pairs of responses to one question that the annotators'
majority orders (each annotator who rated both votes; a tied vote leaves the pair out).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timezone
from itertools import combinations
from typing import Any

import numpy as np

from judge.core.errors import JudgeError
from judge.eval.calibration import LabelledScore, conformal_part
from judge.models.calibration import POOLED, Calibration
from judge.models.preference import preference
from judge.models.selective import (
    PAIRWISE_RANGE,
    POINTWISE_CONFIDENCE,
    SLACK,
    Selective,
    SelectiveRule,
    pair_confidence,
)

#: Thresholds in a grid over the confidence's range.
GRID = 200
#: Thresholds keeping fewer labelled items than this are passed over: at the top of the grid a handful of
#: items would stop the test on one disagreement before it reaches the sets it could accept.
START = 30


def min_testable(alpha: float, delta: float) -> int:
    """The fewest items a threshold can be accepted on: all agreeing gives the p-value ``(1 - alpha)^n``."""
    return math.ceil(math.log(delta) / math.log(1.0 - alpha) - 1e-9)


def fixed_sequence_threshold(
    confidence: Sequence[float],
    agree: Sequence[bool],
    alpha: float,
    delta: float,
    grid: Sequence[float],
    start: int = START,
) -> SelectiveRule:
    """The threshold of the module doc over ``grid`` (tested from its largest value down); thresholds that
    keep fewer than ``start`` items (or than any test could accept) are passed over."""
    from scipy.stats import binom

    c = np.asarray(confidence, dtype=float)
    wrong = ~np.asarray(agree, dtype=bool)
    order = np.argsort(-c, kind="stable")
    c_desc, errors = c[order], np.concatenate([[0], np.cumsum(wrong[order])])
    lams = np.asarray(sorted(grid, reverse=True), dtype=float)
    # n(lambda): the items whose confidence meets lambda (judge.models.selective.meets: the comparison
    # scoring marks them by, SLACK included), k(lambda) their disagreements.
    n = np.searchsorted(-c_desc, -(lams - SLACK), side="right")
    k = errors[n]
    least = min(max(min_testable(alpha, delta), start), c.size)
    tested = n >= max(least, 1)
    p = np.ones_like(lams)
    p[tested] = binom.cdf(k[tested], n[tested], alpha)
    best = None
    for i in np.nonzero(tested)[0]:
        if p[i] > delta:
            break
        best = i
    if best is None or n[best] < min_testable(alpha, delta):
        return SelectiveRule(threshold=None, n=int(c.size), n_trusted=0, agreement=None, p_value=None)
    return SelectiveRule(
        threshold=float(lams[best]),
        n=int(c.size),
        n_trusted=int(n[best]),
        agreement=1.0 - int(k[best]) / int(n[best]),
        p_value=float(p[best]),
    )


#: How :func:`plan_size` answers, stored with the plan and printed by ``judge-calibrate --selective --plan``.
PLAN_METHOD = (
    "the smallest n (at least the test's least testable set, and START) for which the exact binomial test of "
    "the fixed sequence, P(Binomial(n, 1 - agreement) <= floor((1 - a) n)) <= delta, certifies the target "
    "when the judge agrees at the rate a observed on all held-out items (every score trusted); none when a "
    "is not above the target"
)


def plan_size(
    observed: float, alpha: float, delta: float, start: int = START, cap: int = 200_000
) -> int | None:
    """The labelled items (held out from the calibration maps) a threshold trusting every score needs to be
    certified at ``1 - alpha`` when the agreement is ``observed`` (see :data:`PLAN_METHOD`); None when
    ``observed <= 1 - alpha`` or beyond ``cap``."""
    from scipy.stats import binom

    if observed <= 1.0 - alpha:
        return None
    lo = max(min_testable(alpha, delta), start)
    ns = np.arange(lo, cap + 1)
    ks = np.floor((1.0 - observed) * ns + 1e-9)
    ok = np.nonzero(binom.cdf(ks, ns, alpha) <= delta)[0]
    return int(ns[ok[0]]) if ok.size else None


def _plan(data: Sequence[tuple[str, float, bool]], rules: dict[str, SelectiveRule], alpha: float, delta: float
          ) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per rule key, the agreement observed on its held-out rows and :func:`plan_size` of it."""
    out = {}
    for key in rules:
        rows = [ok for crit, _, ok in data if key in (POOLED, crit)] if key != POOLED else None
        if rows is None:  # the pooled rule's rows: the criteria without their own
            own = set(rules) - {POOLED}
            rows = [ok for crit, _, ok in data if crit not in own] or [ok for _, _, ok in data]
        a = float(np.mean(rows)) if rows else 0.0
        out[key] = {"n": len(rows), "observed_agreement": a, "needed": plan_size(a, alpha, delta)}
    return out


def grid_over(bounds: tuple[float, float], n: int = GRID) -> list[float]:
    return [float(v) for v in np.linspace(bounds[0], bounds[1], n + 1)]


def pointwise_data(
    items: Sequence[LabelledScore], cal: Calibration, tolerance: float, measure: str
) -> list[tuple[str, float, bool]]:
    """Per item ``(criterion, confidence, agrees)``: in the calibrated view, agreement is the calibrated
    score within ``tolerance`` of the human mean."""
    fn, _ = POINTWISE_CONFIDENCE[measure]
    out = []
    for s in items:
        v = cal.apply(s.criterion, s.raw, s.distribution)
        out.append(
            (
                s.criterion,
                fn(v.distribution, v.score, cal.scale, tolerance),
                abs(v.score - s.human) <= tolerance + 1e-9,
            )
        )
    return out


def human_preference(a: LabelledScore, b: LabelledScore) -> int:
    """The annotators' majority preference: 1 for ``a``, -1 for ``b``, 0 for a tie. Each annotator who rated
    both votes; without one in common, the mean scores decide."""
    ra, rb = (
        dict(zip(a.annotators, a.ratings, strict=False)),
        dict(zip(b.annotators, b.ratings, strict=False)),
    )
    both = sorted(set(ra) & set(rb))
    if both:
        votes = sum(int(np.sign(ra[n] - rb[n])) for n in both)
    else:
        votes = int(np.sign(a.human - b.human))
    return int(np.sign(votes))


def pairwise_data(items: Sequence[LabelledScore], cal: Calibration) -> list[tuple[str, float, bool]]:
    """Per pair of responses to one question and criterion that the annotators order, ``(criterion,
    confidence, agrees)``: the judge agrees when its preference from the calibrated distributions points
    the annotators' way (a preference of exactly 1/2 never agrees)."""
    by: dict[tuple[str, str], list[LabelledScore]] = defaultdict(list)
    for s in items:
        by[(s.question_id, s.criterion)].append(s)
    out = []
    for (_, crit), group in sorted(by.items()):
        for a, b in combinations(sorted(group, key=lambda s: s.id), 2):
            h = human_preference(a, b)
            if h == 0:
                continue
            va = cal.apply(crit, a.raw, a.distribution)
            vb = cal.apply(crit, b.raw, b.distribution)
            p = preference(va.distribution, vb.distribution, cal.scale).p_first_better
            judge = 0 if p == 0.5 else (1 if p > 0.5 else -1)
            out.append((crit, pair_confidence(p), judge == h))
    return out


def _rules(
    data: Sequence[tuple[str, float, bool]],
    alpha: float,
    delta: float,
    grid: Sequence[float],
    min_items: int,
) -> dict[str, SelectiveRule]:
    """A rule per criterion with ``min_items`` or more, and the pooled rule over the others (over all when
    every criterion has its own, for a criterion never seen)."""
    by: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for crit, c, ok in data:
        by[crit].append((c, ok))
    own = sorted(k for k, v in by.items() if len(v) >= min_items)
    rest = [(c, ok) for crit, c, ok in data if crit not in own] or [(c, ok) for _, c, ok in data]
    out = {}
    for key, rows in [*((k, by[k]) for k in own), (POOLED, rest)]:
        out[key] = fixed_sequence_threshold([r[0] for r in rows], [r[1] for r in rows], alpha, delta, grid)
    return out


def fit_selective(
    scores: Sequence[LabelledScore],
    cal: Calibration,
    *,
    agreement: float = 0.9,
    delta: float = 0.1,
    tolerance: float = 1.0,
    confidence: str = "mass",
    min_items: int | None = None,
) -> Selective:
    """The selective-evaluation thresholds of a calibrated judge (see the module doc); ``scores``: the labelled
    items the calibration was fitted on (its conformal part is taken from them)."""
    if not 0 < agreement < 1 or not 0 < delta < 1:
        raise JudgeError(f"`agreement` {agreement} and `delta` {delta} must lie between 0 and 1")
    if confidence not in POINTWISE_CONFIDENCE:
        raise JudgeError(f"`confidence` {confidence!r} is not one of {', '.join(POINTWISE_CONFIDENCE)}")
    part = conformal_part(cal, scores)
    if not part:
        raise JudgeError("selective evaluation needs the calibration's held-out items; none are labelled")
    alpha = 1.0 - agreement
    least = min_items if min_items is not None else cal.min_items
    points = pointwise_data(part, cal, tolerance, confidence)
    pairs = pairwise_data(part, cal)
    fitted_on: dict[str, Any] = {
        "part": "the calibration's conformal part (held out from its maps)",
        "items": len(points),
        "pairs": len(pairs),
        "questions": len({s.question_id for s in part}),
        "min_items": least,
        "grid": GRID,
        "min_testable": min_testable(alpha, delta),
    }
    point_rules = _rules(points, alpha, delta, grid_over(POINTWISE_CONFIDENCE[confidence][1]), least)
    pair_rules = _rules(pairs, alpha, delta, grid_over(PAIRWISE_RANGE), least) if pairs else {}
    fitted_on["plan"] = {
        "method": PLAN_METHOD,
        "conformal_fraction": cal.data.conformal_fraction,
        "pointwise": _plan(points, point_rules, alpha, delta),
        "pairwise": _plan(pairs, pair_rules, alpha, delta) if pairs else {},
    }
    return Selective(
        agreement=agreement,
        delta=delta,
        tolerance=tolerance,
        confidence=confidence,
        scale=list(cal.scale),
        calibration=cal.fingerprint(),
        pointwise=point_rules,
        pairwise=pair_rules,
        fitted_on=fitted_on,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def format_selective(sel: Selective) -> str:
    """What ``judge-calibrate --selective`` prints: each threshold and what it keeps of the labelled items."""
    from judge.core.tables import text_table

    def rows(rules: dict[str, SelectiveRule]) -> list[list[str]]:
        return [
            [
                key,
                "none (all escalated)" if r.threshold is None else f"{r.threshold:.3f}",
                str(r.n),
                f"{r.n_trusted} ({r.n_trusted / r.n:.0%})" if r.n else "0",
                "-" if r.agreement is None else f"{r.agreement:.3f}",
                "-" if r.p_value is None else f"{r.p_value:.3g}",
            ]
            for key, r in rules.items()
        ]

    head = ["criterion", "threshold", "items", "trusted", "agreement on trusted", "p-value"]
    lines = [
        f"Selective evaluation: agreement >= {sel.agreement:.0%} on trusted scores with probability >= "
        f"{1 - sel.delta:.0%} (fixed-sequence testing on the {sel.fitted_on.get('items')} held-out items of the "
        f"calibration). Pointwise: calibrated score within {sel.tolerance:g} of the human mean; confidence "
        f"{sel.confidence!r}:",
        text_table(head, rows(sel.pointwise)),
    ]
    if sel.pairwise:
        lines += [
            f"Pairwise ({sel.fitted_on.get('pairs')} pairs the annotators order): the judge prefers the annotators' "
            "majority's response; confidence max(p, 1 - p):",
            text_table(
                ["criterion", "threshold", "pairs", "trusted", "agreement on trusted", "p-value"],
                rows(sel.pairwise),
            ),  # fmt: skip
        ]
    for kind, rules in (("pointwise", sel.pointwise), ("pairwise", sel.pairwise)):
        none = [k for k, r in rules.items() if r.threshold is None]
        if none:
            lines.append(
                f"No {kind} threshold passed for {', '.join(none)}: every such score is escalated to a human "
                f"(no confidence level keeps {sel.agreement:.0%} agreement certifiably on these labels). Label "
                "more items, lower --agreement, or raise --delta."
            )
            lines += [f"  {k}: {plan_advice(sel, kind, k)}" for k in none]
    return "\n".join(lines)


def plan_advice(sel: Selective | dict[str, Any], kind: str, key: str) -> str:
    """One sentence from the fit's plan (``fitted_on["plan"]``) for a rule with no threshold: the agreement
    observed on its held-out rows and how many such rows a promise at it would need (:func:`plan_size`);
    ``sel`` is a :class:`Selective` or its JSON (``selective.json``)."""
    fitted = sel.fitted_on if isinstance(sel, Selective) else (sel.get("fitted_on") or {})
    plan = fitted.get("plan") or {}
    p = (plan.get(kind) or {}).get(key)
    unit = "items" if kind == "pointwise" else "pairs"
    if not p:
        return f"judge-calibrate --selective --plan says how many labelled {unit} the promise needs"
    seen = f"observed agreement {p['observed_agreement']:.1%} on {p['n']} held-out {unit}"
    if p.get("needed") is None:
        return (
            f"{seen}, not above the promise: more labels at this agreement cannot certify it for all of them, "
            "only a more confident subset could be trusted (a lower --agreement, or a better judge)"
        )
    need = int(p["needed"])
    total = (
        ""
        if kind == "pairwise"
        else f" (about {math.ceil(need / (plan.get('conformal_fraction') or 0.5))} labelled items in all)"
    )
    return f"{seen}: a promise at it needs about {need} held-out {unit}{total} (judge-calibrate --selective --plan)"


def format_plan(sel: Selective) -> str:
    """What ``judge-calibrate --selective --plan`` prints: per rule, the agreement observed on the held-out
    items and how many such items a promise at it would need (:func:`plan_size`)."""
    from judge.core.tables import text_table

    plan = sel.fitted_on.get("plan") or {}
    frac = plan.get("conformal_fraction") or 0.5
    lines = [
        f"Plan for a promise of {sel.agreement:.0%} agreement with probability >= {1 - sel.delta:.0%}: {plan.get('method')}.",
    ]
    for kind, unit in (("pointwise", "items"), ("pairwise", "pairs")):
        rows = []
        for key, p in (plan.get(kind) or {}).items():
            need = p.get("needed")
            rows.append(
                [
                    key,
                    str(p.get("n")),
                    f"{p.get('observed_agreement', 0):.3f}",
                    "none (observed agreement not above the target)" if need is None else str(need),
                    "-" if need is None or kind == "pairwise" else str(math.ceil(need / frac)),
                ]
            )
        if rows:
            lines += [
                f"{kind.capitalize()}:",
                text_table(
                    [
                        "criterion",
                        f"held-out {unit}",
                        "observed agreement",
                        f"held-out {unit} needed",
                        f"labelled items in all (held out: {frac:g})",
                    ],
                    rows,
                ),  # fmt: skip
            ]
    lines.append(
        "The observed agreement is itself an estimate: plan above the figure, and a threshold on the more "
        "confident scores can need fewer items if they agree more often."
    )
    return "\n".join(lines)


__all__ = [
    "GRID",
    "PLAN_METHOD",
    "fit_selective",
    "fixed_sequence_threshold",
    "format_plan",
    "plan_advice",
    "format_selective",
    "plan_size",
    "grid_over",
    "human_preference",
    "min_testable",
    "pairwise_data",
    "pointwise_data",
]
