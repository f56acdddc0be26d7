"""Everything numeric of a report, as ``report.json`` holds it: :func:`build_report`.

Per slice (each criterion; each task family and each responding model on the overall score; all criteria
pooled) the human ceiling and each scorer's statistics with cluster bootstrap intervals (questions resampled;
:mod:`judge.eval.bootstrap`); for every pair of scorers the paired bootstrap of the difference in correlation;
the bias against humans (:mod:`judge.eval.bias`); the warnings a reader must see first.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from judge.core.rubric import OVERALL, Rubric
from judge.core.schema import AnnotationRecord
from judge.eval.bias import bias_warnings, build_bias
from judge.eval.bootstrap import (
    STATS,
    ClusterBootstrap,
    bootstrap_correlations,
    bootstrap_scale_stats,
    paired_bootstrap,
    seeded_rng,
)
from judge.eval.ceiling import human_ceiling
from judge.eval.matching import HumanItem, Scorer
from judge.eval.ppi import MIN_LABELS
from judge.eval.report_data import (
    Ceiling,
    Coverage,
    HumanSummary,
    PairedComparison,
    ReportData,
    ReportSettings,
    RubricInfo,
    ScorerInfo,
    ScorerStats,
    SliceKind,
    SliceReport,
)
from judge.eval.stats import point_metrics

#: Below this many items (or questions) an interval is flagged as too rough to lean on.
SMALL_N = 30
#: What the mark of a small-sample value means in a report (wherever a report's table is shown).
SMALL_LEGEND = (
    f"† marks a value computed on fewer than {SMALL_N} items or questions: its interval is too wide, and too "
    "unstable, to mean much."
)


DEFINITIONS = [
    "Human score of an item (response x criterion): the mean over its annotators. A score record with "
    "criterion null (one score per response, e.g. CLIPScore) is compared with the human overall score.",
    "Pearson, Spearman and Kendall tau-b: scipy.stats. Intervals: 95% percentile intervals of a cluster "
    "bootstrap that resamples questions with replacement (all responses to a question move together), "
    "{B} resamples, seed {seed}.",
    "MAE and MSE: scikit-learn, raw values. Quadratic-weighted kappa: scikit-learn, on scores rounded half up "
    "and clipped to the scale. Within 1: share of items with |scorer - human| <= 1. These four, the confusion "
    "matrix and the calibration plot only for scorers on the rubric scale.",
    "Pairwise ranking accuracy: pairs of responses to the same question (same criterion) that humans scored "
    "differently; the share the scorer orders the same way (a scorer tie counts half).",
    "MMIE's measures: Pearson, cosine similarity of the raw score vectors (not centred; 1 - "
    "scipy.spatial.distance.cosine), MSE and MAE, with the same resamples' intervals; rubric-scale scorers only.",
    "Calibration (scorers whose records carry raw_score and interval, i.e. a judge calibrated with "
    "judge-calibrate): on the human items the calibration was not fitted on, all criteria pooled, MAE and MSE of "
    "the raw and of the calibrated score, the NLL of the annotators' ratings under the raw and the calibrated "
    "distribution, the Brier score, the top-label expected calibration error (ten confidence bins) and that of "
    "the expected score (one-point bins), and the share of items whose human score lies within the interval "
    "(its coverage; the calibration states the level it aims at) with its mean width, each with the same kind "
    "of interval (questions resampled); per criterion the coverage with its interval.",
    "Selective evaluation (scorers whose records carry the trusted mark, judge-calibrate --selective): on the "
    "same held-out items, the share of scores trusted and the agreement on them (the calibrated score within "
    "the thresholds' tolerance of the human mean score) beside the agreement on every score; pairwise, the "
    "pairs of responses to one question that the annotators' majority orders, the judge agreeing when its "
    "preference from the calibrated distributions points the same way (a pair it ties, no preference, counts as "
    "a disagreement; the main table's pairwise accuracy counts it as half).",
    "Prediction-powered inference check (rubric-scale scorers, overall score): each of {draws} random draws "
    "resamples the questions with replacement (every response to a drawn question with it) and labels "
    "{fraction:.0%} of them (every model's response to each), as judge-data sample --by question does; per "
    "responding model the PPI++ mean (the scorer's scores corrected by its error on the labelled responses; "
    "ppi-python's point estimate, Student's t interval with the jackknife's variance) and the human-only mean "
    "of the same labels (Student's t), and per pair of models their win rates, each with a 95% interval on its "
    "range and from at least the minimum of labels; reported: the share of the intervals containing the "
    "truth of the resampled world (the model's mean human score over all its responses here; the pair's "
    "win rate by the human scores), with its Monte Carlo standard error, and their mean width.",
    "Human ceiling: each annotator against the mean of the other annotators (leave one annotator out), "
    "averaged over annotators; Krippendorff's alpha (krippendorff package). Scorers are compared with the mean "
    "of all annotators, which is less noisy, so a scorer can exceed this ceiling.",
    "Paired comparison: the same question resamples for both scorers on the items both scored; the difference "
    "in correlation (A - B), its 95% percentile interval, and a two-sided p-value "
    "p = min(1, 2 (1 + min(#{{d* <= 0}}, #{{d* >= 0}})) / (1 + resamples)).",
    "Bias against humans (overall score, each scorer on the items it scored): response length = text tokens "
    "(matches of `\\w+` over the response's text parts) and number of images; partial Spearman of the scorer's "
    "score with length given the human score (rank-based partial correlation), flagged when its interval excludes "
    "0; per responding model the offset mean(scorer - human) and the offset relative to the median offset over "
    "models, flagged when that interval excludes 0 (rubric-scale scorers only); Kendall tau-b between the "
    "models ranked by mean scorer score and by mean human score.",
    SMALL_LEGEND,
]


# ----------------------------------------------------------------------------- computation


def slice_test(kind: str, label: str) -> Callable[[HumanItem], bool]:
    """Which human items a slice holds: a criterion; a task family or a responding model on the overall
    score; or everything (``pooled``)."""
    if kind == "criterion":
        return lambda it: it.criterion == label
    if kind == "family":
        return lambda it: it.criterion == OVERALL and it.task == label
    if kind == "model":
        return lambda it: it.criterion == OVERALL and it.model == label
    if kind == "pooled":
        return lambda it: True
    raise ValueError(f"unknown slice kind {kind!r}")


@dataclass
class Slice:
    """Which human items a row of the report covers (see :func:`slice_test`)."""

    kind: SliceKind
    label: str

    @property
    def test(self) -> Callable[[HumanItem], bool]:
        return slice_test(self.kind, self.label)

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.label}"

    @property
    def title(self) -> str:
        if self.kind == "criterion":
            return f"criterion {self.label}"
        if self.kind == "pooled":
            return "all criteria pooled"
        return f"{self.kind} {self.label}, overall score"


def make_slices(items: Sequence[HumanItem], rubric: Rubric) -> list[Slice]:
    """Main slice first (overall, else pooled), then each criterion, family, model, and all criteria pooled."""
    crits = list(dict.fromkeys(it.criterion for it in items))
    order = [OVERALL] + [c.id for f in rubric.families.values() for c in f.criteria]
    crits.sort(key=lambda c: order.index(c) if c in order else len(order))
    slices = [Slice("criterion", c) for c in crits]
    if OVERALL in crits:
        slices += [
            Slice("family", f) for f in dict.fromkeys(it.task for it in items if it.criterion == OVERALL)
        ]
        slices += [Slice("model", m) for m in sorted({it.model for it in items if it.criterion == OVERALL})]
    if len(crits) > 1:
        slices.append(Slice("pooled", "all criteria"))
    if OVERALL not in crits and len(crits) > 1:
        slices.insert(0, slices.pop())  # no human overall: the pooled slice is the main one
    return slices


def scorer_slice_metrics(
    sc: Scorer, sl: Slice, plan: ClusterBootstrap, scale: tuple[int, int], slice_items: Sequence[HumanItem]
) -> ScorerStats | None:
    """One scorer's statistics on one slice, with intervals; ``None`` if it has no item there.

    ``n_expected`` counts the slice's human items of the criteria and families the scorer scores, so
    ``n / n_expected`` is its coverage on the slice.
    """
    test = sl.test
    in_slice = [m for m in sc.matches if test(m.item)]
    if not in_slice:
        return None
    crits, fams = set(sc.coverage["criteria_scored"]), set(sc.coverage["families_scored"])
    n_expected = sum(1 for it in slice_items if it.criterion in crits and it.task in fams)
    ok = [m for m in in_slice if m.score is not None]
    pred = [m.score for m in in_slice if m.score is not None]
    hum = [m.item.value for m in ok]
    clusters = [m.item.question_id for m in ok]
    pm = point_metrics(
        pred, hum, [(m.item.question_id, m.item.criterion) for m in ok], scale=scale if sc.on_scale else None
    )
    corr = (
        bootstrap_correlations(pred, hum, clusters, plan, point=pm)
        if ok
        else {s: {"value": None, "ci": None, "n_valid": 0} for s in STATS}
    )
    n_q = len(set(clusters))
    scale_stats = bootstrap_scale_stats(pred, hum, clusters, plan) if ok and sc.on_scale else {}
    return ScorerStats.model_validate(
        {
            "n": len(ok),
            "n_expected": n_expected,
            "n_unscorable": len(in_slice) - len(ok),
            "n_missing": n_expected - len(in_slice),
            "n_questions": n_q,
            **corr,
            **{k: pm[k] for k in ("mae", "mse", "qwk", "within1", "pairwise")},
            "small_n": len(ok) < SMALL_N or n_q < SMALL_N,
            "cosine": scale_stats.get("cosine"),
            "mse_ci": scale_stats.get("mse"),
            "mae_ci": scale_stats.get("mae"),
        }
    )


def build_report(
    records: Sequence[AnnotationRecord],
    items: Sequence[HumanItem],
    scorers: Sequence[Scorer],
    rubric: Rubric,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    title: str = "Judge agreement with human scores",
    note: str | None = None,
    human_files: Sequence[str] = (),
    criteria: Sequence[str] | None = None,
    ppi_fraction: float = 0.2,
    ppi_draws: int = 2000,
    min_labels: int = MIN_LABELS,
) -> ReportData:
    """Everything numeric of a report, as ``report.json`` holds it (see the module docstring);
    ``ppi_fraction``, ``ppi_draws`` and ``min_labels``: the prediction-powered inference check
    (:mod:`judge.eval.ppi_check`)."""
    from judge.eval.heldout import calibration_checks, selective_checks
    from judge.eval.ppi_check import ppi_checks

    slices, plans = _slice_reports(items, scorers, rubric, n_boot, seed)
    bias = build_bias(records, items, scorers, n_boot=n_boot, seed=seed, small_n=SMALL_N)
    calibration, cal_warnings = calibration_checks(scorers, n_boot, seed, rubric.scale.values)
    selective, sel_warnings = selective_checks(scorers, n_boot, seed, rubric.scale.values)
    return ReportData(
        title=title,
        note=note,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        rubric=RubricInfo(name=rubric.name, hash=rubric.hash, scale=[rubric.scale.min, rubric.scale.max]),
        human=_human_summary(records, items, human_files),
        settings=ReportSettings(
            bootstrap=n_boot,
            seed=seed,
            interval="95% percentile, questions resampled",
            criteria=list(criteria) if criteria else None,
            small_n=SMALL_N,
        ),
        scorers=[_scorer_info(s) for s in scorers],
        main=slices[0].key,
        slices=slices,
        paired=_paired_comparisons(slices, scorers, plans),
        bias=bias,
        calibration=calibration,
        selective=selective,
        ppi=ppi_checks(
            scorers,
            ppi_fraction,
            ppi_draws,
            seed,
            scale=(rubric.scale.min, rubric.scale.max),
            min_labels=min_labels,
        ),
        warnings=[
            *_report_warnings(slices, scorers, n_boot),
            *bias_warnings(bias),
            *cal_warnings,
            *sel_warnings,
        ],
        definitions=[
            d.format(B=n_boot, seed=seed, draws=ppi_draws, fraction=ppi_fraction) for d in DEFINITIONS
        ],
    )


def _slice_reports(
    items: Sequence[HumanItem], scorers: Sequence[Scorer], rubric: Rubric, n_boot: int, seed: int
) -> tuple[list[SliceReport], dict[str, ClusterBootstrap]]:
    """Every slice (the main one first) with its human ceiling and scorers, and each slice's resampling
    plan (the paired comparisons reuse it)."""
    scale = (rubric.scale.min, rubric.scale.max)
    out: list[SliceReport] = []
    plans: dict[str, ClusterBootstrap] = {}
    for sl in make_slices(items, rubric):
        test = sl.test
        hs = [it for it in items if test(it)]
        plan = plans[sl.key] = ClusterBootstrap(
            [it.question_id for it in hs], n_boot, seeded_rng(seed, sl.key)
        )
        stats = {}
        for sc in scorers:
            m = scorer_slice_metrics(sc, sl, plan, scale, hs)
            if m is not None:
                stats[sc.name] = m
        out.append(
            SliceReport(
                key=sl.key,
                kind=sl.kind,
                label=sl.label,
                title=sl.title,
                n_items=len(hs),
                n_questions=plan.n_clusters,
                ceiling=Ceiling.model_validate(human_ceiling(hs, plan, rubric.scale.values)),
                scorers=stats,
            )
        )
    return out, plans


def _paired_comparisons(
    slices: Sequence[SliceReport], scorers: Sequence[Scorer], plans: dict[str, ClusterBootstrap]
) -> list[PairedComparison]:
    """Every pair of scorers on the main slice and on all criteria pooled."""
    main = slices[0]
    paired = []
    compared = [s for s in slices if s.key in (main.key, "pooled:all criteria")]
    for entry, (a, b) in itertools.product(compared, itertools.combinations(scorers, 2)):
        res = _paired(entry, a, b, plans[entry.key])
        if res is not None:
            paired.append(res)
    # The pooled comparison of a pair that only shares overall items repeats the main one: keep one.
    seen = {(p.a, p.b, p.n) for p in paired if p.slice == main.key}
    return [p for p in paired if p.slice == main.key or (p.a, p.b, p.n) not in seen]


def _paired(entry: SliceReport, a: Scorer, b: Scorer, plan: ClusterBootstrap) -> PairedComparison | None:
    test = Slice(entry.kind, entry.label).test
    sa = {m.item.key: m for m in a.scored if test(m.item)}
    sb = {m.item.key: m for m in b.scored if test(m.item)}
    common = [k for k in sa if k in sb]
    if len(common) < 2:
        return None
    res = paired_bootstrap(
        # Matches of ``scored`` all have a score; the filter only tells the type checker so.
        [s for k in common if (s := sa[k].score) is not None],
        [s for k in common if (s := sb[k].score) is not None],
        [sa[k].item.value for k in common],
        [sa[k].item.question_id for k in common],
        plan,
    )
    n_q = len({sa[k].item.question_id for k in common})
    return PairedComparison.model_validate(
        {
            "slice": entry.key,
            "a": a.name,
            "b": b.name,
            "n": len(common),
            "n_questions": n_q,
            "small_n": len(common) < SMALL_N or n_q < SMALL_N,
            **res,
        }
    )


def _report_warnings(slices: Sequence[SliceReport], scorers: Sequence[Scorer], n_boot: int) -> list[str]:
    """What a reader must know before trusting the numbers: each scorer's own warnings, then small samples,
    a missing human ceiling, few resamples and scorers off the rubric scale."""
    main = slices[0]
    warnings: list[str] = []
    small_main = []
    for sc in scorers:
        warnings.extend(f"{sc.name}: {w}" for w in sc.warnings)
        m = main.scorers.get(sc.name)
        if m and m.small_n and m.n >= 2:
            small_main.append(f"{sc.name} (n = {m.n} items from {m.n_questions} questions)")
    if small_main:
        warnings.append(
            f"fewer than {SMALL_N} items or questions in the main table for {', '.join(small_main)}: "
            "these intervals are too wide and unstable to mean much; score more items (more questions "
            "above all: questions are what the bootstrap resamples)"
        )
    if main.ceiling.n_items_multi == 0:
        warnings.append(
            "every human item has a single annotator: the human ceiling (agreement between "
            "annotators) is undefined; have several annotators score at least part of the set"
        )
    n_small = sum(1 for s in slices for m in s.scorers.values() if m.small_n)
    if n_small:
        warnings.append(
            f"{n_small} value(s) in the breakdowns rest on fewer than {SMALL_N} items or questions (marked †)"
        )
    if n_boot < 200:
        warnings.append(
            f"only {n_boot} bootstrap resamples: the interval ends are themselves imprecise; "
            "use --bootstrap 1000 or more"
        )
    off = [s.name for s in scorers if not s.on_scale]
    if off:
        warnings.append(
            f"not on the rubric scale, so without MAE, MSE, kappa, within 1, confusion matrix and "
            f"calibration: {', '.join(off)}"
        )
    return warnings


def _human_summary(
    records: Sequence[AnnotationRecord], items: Sequence[HumanItem], human_files: Sequence[str]
) -> HumanSummary:
    return HumanSummary(
        files=list(human_files),
        responses=len(records),
        questions=len({r.question_id for r in records}),
        items=len(items),
        annotators=sorted({a for it in items for a, _ in it.ratings}),
        criteria=list(dict.fromkeys(it.criterion for it in items)),
        families=dict(Counter(r.task for r in records)),
        models=dict(Counter(r.model for r in records)),
        mean_annotators_per_item=(sum(len(it.ratings) for it in items) / len(items)) if items else None,
    )


def _scorer_info(s: Scorer) -> ScorerInfo:
    return ScorerInfo(
        name=s.name,
        file=s.path,
        metric=s.metric,
        on_scale=s.on_scale,
        scale_note=s.scale_reason,
        coverage=Coverage.model_validate(s.coverage),
        warnings=s.warnings,
        producer=s.matches[0].record.producer if s.matches else None,
    )


__all__ = [
    "DEFINITIONS",
    "SMALL_N",
    "Slice",
    "build_report",
    "make_slices",
    "scorer_slice_metrics",
    "slice_test",
]
