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


#: How pairs are tested (stored with the fit, printed by ``judge-calibrate --selective``).
PAIRWISE_TEST = (
    "questions as the unit: per question, the sum over its trusted pairs of (agrees - target), tested by a "
    "one-sided Hoeffding bound over the independent questions (pairs of one question share its responses "
    "and annotators, so they are no independent trials)"
)

#: The chance of certifying that ``judge-calibrate --selective --plan`` plans for by default.
POWER = 0.8

#: How :func:`plan_size` answers, stored with the plan and printed by ``judge-calibrate --selective --plan``.
PLAN_METHOD = (
    f"the smallest n (at least the test's least testable set, and {START} items) such that, for that n and every "
    "larger one up to 2 n + 200, the exact binomial test of the fixed sequence (p-value <= delta) certifies "
    "the target with "
    "probability at least the stated power when every score is trusted and the judge's true agreement is "
    "the rate a observed on the held-out items: P(K <= k_max(n)) >= power, K ~ Binomial(n, 1 - a), k_max(n) "
    "the most disagreements the test accepts at n; none when a is not above the target. Pairwise, with "
    "questions as the unit: the number of questions at which the one-sided Hoeffding test certifies with "
    "that power, by the normal approximation of its statistic with the per-question mean and spread observed"
)


def certify_power(observed: float, alpha: float, delta: float, ns: np.ndarray) -> np.ndarray:
    """Per ``n`` in ``ns``, the probability that the exact binomial test certifies ``1 - alpha`` on ``n``
    items all trusted when their true agreement is ``observed`` (0 where no count of disagreements passes)."""
    from scipy.stats import binom

    ns = np.asarray(ns, dtype=int)
    # k_max(n): the largest k with P(Binomial(n, alpha) <= k) <= delta (-1: none; the ppf is the smallest
    # k whose cdf reaches delta, one too many unless the cdf is delta exactly).
    k = binom.ppf(delta, ns, alpha)
    k = np.where(binom.cdf(k, ns, alpha) <= delta, k, k - 1)
    return np.where(k >= 0, binom.cdf(k, ns, 1.0 - observed), 0.0)


def plan_size(
    observed: float,
    alpha: float,
    delta: float,
    start: int = START,
    cap: int = 200_000,
    power: float = POWER,
) -> int | None:
    """The labelled items (held out from the calibration maps) a threshold trusting every score needs to be
    certified at ``1 - alpha`` with probability ``power`` when the agreement is ``observed``, for that
    number and every larger one up to ``2 n + 200`` (the test's floor makes its power saw-toothed in n, so the
    first n that reaches ``power`` can be followed by ones that do not: see :data:`PLAN_METHOD`); None
    when ``observed <= 1 - alpha`` or beyond ``cap``. It is the power of the test on all the items: the
    fixed sequence reaches that test only if the more confident subsets tested before it pass, which an
    informative confidence helps and an uninformative one does not (at 75% agreement for a 60% promise,
    the planned 53 items were certified in 67% of simulated draws with a confidence unrelated to agreement:
    the first subset tested, START items, caps it)."""
    if observed <= 1.0 - alpha:
        return None
    lo = max(min_testable(alpha, delta), start)
    top = min(cap, lo + 2000)
    while True:
        ns = np.arange(lo, top + 1)
        short = np.nonzero(certify_power(observed, alpha, delta, ns) < power)[0]
        n = lo if short.size == 0 else int(ns[short[-1]]) + 1
        bound = min(cap, 2 * n + 200)  # "every larger n": checked up to twice the answer
        if bound <= top and n <= top:
            return n
        if top >= cap:
            return None
        top = min(cap, max(bound, 2 * top))


def hoeffding_p_value(excess: np.ndarray, widths: np.ndarray) -> float:
    """One-sided Hoeffding p-value of "the mean of the independent per-question ``excess`` is at most 0",
    each question's value lying in a range of its ``widths``: ``exp(-2 S^2 / sum(widths^2))`` for a sum
    ``S > 0`` (1 otherwise)."""
    total, w2 = float(np.sum(excess)), float(np.sum(np.square(widths)))
    if total <= 0 or w2 <= 0:
        return 1.0
    return float(min(1.0, math.exp(-2.0 * total * total / w2)))


def clustered_threshold(
    confidence: Sequence[float],
    agree: Sequence[bool],
    clusters: Sequence[str],
    alpha: float,
    delta: float,
    grid: Sequence[float],
    start: int = START,
) -> SelectiveRule:
    """:func:`fixed_sequence_threshold` with the question as the unit, for pairs: the pairs of responses to
    one question share its responses and annotators, so they are no independent trials. Per question ``q``
    with ``m_q(lambda)`` pairs of confidence ``>= lambda``, ``Z_q(lambda) = sum over them of (agrees - (1 -
    alpha))`` lies in a range of width ``m_q(lambda)``; the questions are independent, and the mean of ``Z``
    is at most 0 exactly when the agreement on pairs above ``lambda`` is at most ``1 - alpha``. (Like the
    binomial test's ``n``, the widths are taken given the confidences.) Each threshold is tested by the
    one-sided Hoeffding bound (:func:`hoeffding_p_value`), valid for bounded independent variables whatever
    their correlation within a question; the fixed sequence, the grid and the thresholds passed over are
    :func:`fixed_sequence_threshold`'s. Every question has one pair: the exact binomial test of that function."""
    c = np.asarray(confidence, dtype=float)
    ok = np.asarray(agree, dtype=bool)
    _, q = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    widths = np.bincount(q).astype(float)
    if widths.size == c.size:  # one pair per question: independent pairs, the exact test
        return fixed_sequence_threshold(confidence, agree, alpha, delta, grid, start)
    lams = sorted(grid, reverse=True)
    least = min(max(min_testable(alpha, delta), start), c.size)
    best: tuple[float, int, int, float] | None = None
    for lam in lams:
        kept = c >= lam - SLACK  # judge.models.selective.meets: the comparison scoring marks them by
        n = int(kept.sum())
        if n < max(least, 1):
            continue
        excess = np.bincount(q[kept], weights=ok[kept] - (1.0 - alpha), minlength=widths.size)
        p = hoeffding_p_value(excess, np.bincount(q[kept], minlength=widths.size).astype(float))
        if p > delta:
            break
        best = (float(lam), n, int((~ok[kept]).sum()), p)
    if best is None:
        return SelectiveRule(threshold=None, n=int(c.size), n_trusted=0, agreement=None, p_value=None)
    lam, n, k, p = best
    return SelectiveRule(threshold=lam, n=int(c.size), n_trusted=n, agreement=1.0 - k / n, p_value=p)


def plan_questions(
    agree: Sequence[bool], clusters: Sequence[str], alpha: float, delta: float, power: float = POWER
) -> int | None:
    """The questions :func:`clustered_threshold` needs, every pair trusted, to certify ``1 - alpha`` with
    probability ``power`` if new questions are like the observed ones: with ``mu`` and ``sigma`` the mean
    and spread of the observed ``Z_q`` and ``w`` the root mean square of the pairs per question, the test
    passes when ``mean(Z) >= w sqrt(log(1/delta) / (2 Q))``, so by the normal approximation of ``mean(Z)``
    ``sqrt(Q) >= (w sqrt(log(1/delta) / 2) + z_power sigma) / mu``, increasing in the power and monotone in Q.
    None when the observed agreement is not above the target (or fewer than two questions)."""
    from scipy.stats import norm

    ok = np.asarray(agree, dtype=float)
    _, q = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    if ok.size == 0 or q.max() < 1:
        return None
    z = np.bincount(q, weights=ok - (1.0 - alpha))
    widths = np.bincount(q).astype(float)
    mu, sigma, w = float(z.mean()), float(z.std(ddof=1)), float(np.sqrt(np.mean(widths**2)))
    if mu <= 0:
        return None
    root = (w * math.sqrt(math.log(1.0 / delta) / 2.0) + float(norm.ppf(power)) * sigma) / mu
    return max(2, math.ceil(root * root))


def _plan(data: Sequence[tuple[Any, ...]], rules: dict[str, SelectiveRule], alpha: float, delta: float,
          power: float = POWER, pairwise: bool = False) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per rule key, the agreement observed on its held-out rows and :func:`plan_size` of it (pairwise:
    the questions, :func:`plan_questions`)."""
    out = {}
    for key in rules:
        own = set(rules) - {POOLED}
        if key != POOLED:
            rows = [r for r in data if r[0] == key]
        else:  # the pooled rule's rows: the criteria without their own
            rows = [r for r in data if r[0] not in own] or list(data)
        a = float(np.mean([r[2] for r in rows])) if rows else 0.0
        entry: dict[str, Any] = {"n": len(rows), "observed_agreement": a, "power": power}
        if pairwise:
            qs = [str(r[3]) for r in rows]  # the question: its pairs on every criterion share responses
            entry["questions"] = len(set(qs))
            entry["needed"] = plan_questions([r[2] for r in rows], qs, alpha, delta, power) if rows else None
            entry["unit"] = "questions"
        else:
            entry["needed"] = plan_size(a, alpha, delta, power=power)
        out[key] = entry
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


def pairwise_data(items: Sequence[LabelledScore], cal: Calibration) -> list[tuple[str, float, bool, str]]:
    """Per pair of responses to one question and criterion that the annotators order, ``(criterion,
    confidence, agrees, question)``: the judge agrees when its preference from the calibrated distributions
    points the annotators' way (a preference of exactly 1/2 never agrees)."""
    by: dict[tuple[str, str], list[LabelledScore]] = defaultdict(list)
    for s in items:
        by[(s.question_id, s.criterion)].append(s)
    out = []
    for (question, crit), group in sorted(by.items()):
        for a, b in combinations(sorted(group, key=lambda s: s.id), 2):
            h = human_preference(a, b)
            if h == 0:
                continue
            va = cal.apply(crit, a.raw, a.distribution)
            vb = cal.apply(crit, b.raw, b.distribution)
            p = preference(va.distribution, vb.distribution, cal.scale).p_first_better
            judge = 0 if p == 0.5 else (1 if p > 0.5 else -1)
            out.append((crit, pair_confidence(p), judge == h, question))
    return out


def _rules(
    data: Sequence[tuple[Any, ...]],
    alpha: float,
    delta: float,
    grid: Sequence[float],
    min_items: int,
    clustered: bool = False,
) -> dict[str, SelectiveRule]:
    """A rule per criterion with ``min_items`` or more, and the pooled rule over the others (over all when
    every criterion has its own, for a criterion never seen). ``clustered`` (pairs: rows end with their
    question): :func:`clustered_threshold`, questions as the unit."""
    by: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in data:
        by[row[0]].append(row)
    own = sorted(k for k, v in by.items() if len(v) >= min_items)
    rest = [r for r in data if r[0] not in own] or list(data)
    out = {}
    for key, rows in [*((k, by[k]) for k in own), (POOLED, rest)]:
        conf, ok = [r[1] for r in rows], [r[2] for r in rows]
        out[key] = (
            clustered_threshold(conf, ok, [str(r[3]) for r in rows], alpha, delta, grid)
            if clustered
            else fixed_sequence_threshold(conf, ok, alpha, delta, grid)
        )
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
    power: float = POWER,
) -> Selective:
    """The selective-evaluation thresholds of a calibrated judge (see the module doc); ``scores``: the labelled
    items the calibration was fitted on (its conformal part is taken from them)."""
    if not 0 < agreement < 1 or not 0 < delta < 1:
        raise JudgeError(f"`agreement` {agreement} and `delta` {delta} must lie between 0 and 1")
    if not 0 < power < 1:
        raise JudgeError(f"`power` {power} must lie between 0 and 1")
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
        "pair_questions": len({r[3] for r in pairs}),
        "min_items": least,
        "grid": GRID,
        "min_testable": min_testable(alpha, delta),
    }
    point_rules = _rules(points, alpha, delta, grid_over(POINTWISE_CONFIDENCE[confidence][1]), least)
    pair_rules = (
        _rules(pairs, alpha, delta, grid_over(PAIRWISE_RANGE), least, clustered=True) if pairs else {}
    )
    fitted_on["pairwise_test"] = PAIRWISE_TEST
    fitted_on["plan"] = {
        "method": PLAN_METHOD,
        "power": power,
        "conformal_fraction": cal.data.conformal_fraction,
        "pointwise": _plan(points, point_rules, alpha, delta, power),
        "pairwise": _plan(pairs, pair_rules, alpha, delta, power, pairwise=True) if pairs else {},
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
        qs = sel.fitted_on.get("pair_questions")
        test = sel.fitted_on.get("pairwise_test")
        lines += [
            f"Pairwise ({sel.fitted_on.get('pairs')} pairs the annotators order"
            + (f", on {qs} questions" if qs is not None else "")
            + "): the judge prefers the annotators' majority's response; confidence max(p, 1 - p); "
            + (
                f"tested with {test}:"
                if test
                else "each pair counted as an independent trial (pairs of one question share its responses: "
                "the promise assumes they are independent):"
            ),
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
    observed on its held-out rows and how many such rows (pairwise: questions) a promise at it would need
    with the plan's power (:func:`plan_size`, :func:`plan_questions`); ``sel`` is a :class:`Selective` or
    its JSON (``selective.json``)."""
    fitted = sel.fitted_on if isinstance(sel, Selective) else (sel.get("fitted_on") or {})
    plan = fitted.get("plan") or {}
    p = (plan.get(kind) or {}).get(key)
    unit = "items" if kind == "pointwise" else "pairs"
    if not p:
        return f"judge-calibrate --selective --plan says how many labelled {unit} the promise needs"
    where = f"{p['n']} held-out {unit}" + (f" on {p['questions']} questions" if p.get("questions") else "")
    seen = f"observed agreement {p['observed_agreement']:.1%} on {where} (an estimate)"
    if p.get("needed") is None:
        return (
            f"{seen}, not above the promise: more labels at this agreement cannot certify it for all of them, "
            "only a more confident subset could be trusted (a lower --agreement, or a better judge)"
        )
    need = int(p["needed"])
    need_unit = p.get("unit") or unit
    power = p.get("power") or plan.get("power")
    chance = f" for a {power:.0%} chance of certifying it" if power else ""
    total = "" if kind == "pairwise" else f" (about {_labelled_in_all(plan, need)} labelled items in all)"
    return (
        f"{seen}: a promise at it needs about {need} held-out {need_unit}{total}{chance} if the judge "
        "really agrees that often (judge-calibrate --selective --plan)"
    )


def _labelled_in_all(plan: dict[str, Any], need: int) -> int:
    """Labelled items a plan's ``need`` held-out items take in all: the calibration holds out its
    ``conformal_fraction`` of them (0.5 when the plan does not say)."""
    return math.ceil(need / (plan.get("conformal_fraction") or 0.5))


def format_plan(sel: Selective) -> str:
    """What ``judge-calibrate --selective --plan`` prints: per rule, the agreement observed on the held-out
    items and how many such items (pairwise: questions) a promise at it needs with the stated power
    (:func:`plan_size`, :func:`plan_questions`)."""
    from judge.core.tables import text_table

    plan = sel.fitted_on.get("plan") or {}
    frac = plan.get("conformal_fraction") or 0.5
    power = plan.get("power")
    lines = [
        f"Plan for a promise of {sel.agreement:.0%} agreement with probability >= {1 - sel.delta:.0%}, "
        + (f"power {power:.0%}" if power else "power not stated (a plan of an earlier version: even odds)")
        + f": {plan.get('method')}.",
    ]
    for kind, unit in (("pointwise", "items"), ("pairwise", "pairs")):
        rows = []
        for key, p in (plan.get(kind) or {}).items():
            need = p.get("needed")
            held = str(p.get("n")) + (f" ({p['questions']} questions)" if p.get("questions") else "")
            rows.append(
                [
                    key,
                    held,
                    f"{p.get('observed_agreement', 0):.3f}",
                    "none (observed agreement not above the target)" if need is None else str(need),
                    "-" if need is None or kind == "pairwise" else str(_labelled_in_all(plan, need)),
                ]
            )
        if rows:
            need_unit = "questions" if kind == "pairwise" else unit
            lines += [
                f"{kind.capitalize()}:",
                text_table(
                    [
                        "criterion",
                        f"held-out {unit}",
                        "observed agreement",
                        f"held-out {need_unit} needed",
                        f"labelled items in all (held out: {frac:g})",
                    ],
                    rows,
                ),  # fmt: skip
            ]
    lines.append(
        "The observed agreement is itself an estimate from the held-out items, and the plan assumes the judge "
        "really agrees that often: "
        + (
            f"with the number above, the promise is certified in about {power:.0%} of label draws, "
            if power
            else ""
        )
        + "not always; plan above it if the estimate is rough. The fixed sequence tests the more confident "
        "subsets first: where they agree more, fewer items can do; where the confidence says nothing of "
        "agreement, a stop on an early subset makes the chance lower than stated."
    )
    return "\n".join(lines)


__all__ = [
    "GRID",
    "PAIRWISE_TEST",
    "PLAN_METHOD",
    "POWER",
    "certify_power",
    "clustered_threshold",
    "hoeffding_p_value",
    "plan_questions",
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
