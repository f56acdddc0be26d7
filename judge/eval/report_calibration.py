"""The sections of ``report.md`` / ``report.html`` that set a judge beside MMIE's table, check its calibration,
intervals and selective evaluation on held-out items (:mod:`judge.eval.heldout`), and check prediction-powered
means (:mod:`judge.eval.ppi_check`); and what ``judge-report`` prints of them."""

from __future__ import annotations

import math
from pathlib import Path

from judge.core.tables import text_table
from judge.eval.document import Doc, fmt, fmt_ci, pct
from judge.eval.report_build import SMALL_N
from judge.eval.report_data import (
    CalibrationCheck,
    Interval,
    PPICheck,
    ReportData,
    SelectiveCheck,
    SliceReport,
    trusted_share_text,
)

#: MMIE-Score's agreement with humans as the MMIE paper reports it (on MMIE's own data, not this set).
MMIE_SCORE = {"pearson": 0.113, "cosine": 0.873, "mse": 3.30, "mae": 1.44}


def _mmie_rows(s: SliceReport, data: ReportData) -> list[list[str]]:
    rows = []
    for sc in data.scorers:
        m = s.scorers.get(sc.name)
        if m is None or m.cosine is None:
            continue
        rows.append(
            [
                sc.name,
                str(m.n),
                fmt_ci(m.pearson, m.small_n),
                fmt_ci(m.cosine, m.small_n),
                fmt_ci(m.mse_ci, m.small_n),
                fmt_ci(m.mae_ci, m.small_n),
                fmt_ci(m.spearman, m.small_n),
                fmt_ci(m.kendall, m.small_n),
            ]
        )
    return rows


MMIE_HEADER = ["scorer", "n", "Pearson", "cosine", "MSE", "MAE", "Spearman", "Kendall τb"]


def mmie_section(d: Doc, data: ReportData) -> None:
    """MMIE's four measures beside Spearman and Kendall, on the main slice and all criteria pooled."""
    shown = [s for s in data.slices if s.key in (data.main, "pooled:all criteria")]
    tables = [(s, rows) for s in shown if (rows := _mmie_rows(s, data))]
    if not tables:
        return
    d.h(2, "MMIE's agreement measures")
    d.p(
        "MMIE reports its scorer's agreement with humans as Pearson, cosine similarity, MSE and MAE; here they are "
        "beside Spearman and Kendall τb, each with its 95% interval (questions resampled). For reference, the MMIE "
        f"paper gives MMIE-Score Pearson {MMIE_SCORE['pearson']}, cosine {MMIE_SCORE['cosine']}, MSE "
        f"{MMIE_SCORE['mse']}, MAE {MMIE_SCORE['mae']} on its own validation data, not on this set. Cosine "
        "similarity of non-negative scores is high even for unrelated scorers (two constant vectors give 1): read "
        "it beside the correlations."
    )
    for s, rows in tables:
        d.h(3, s.title)
        d.table(MMIE_HEADER, rows)


def format_mmie_table(data: ReportData) -> str:
    """The main slice's MMIE table as aligned text (what the command prints); empty without one."""
    rows = _mmie_rows(data.main_slice, data)
    return text_table(MMIE_HEADER, rows) if rows else ""


def _iv(x: Interval) -> str:
    return fmt_ci(x)


def _pair(before: Interval | None, after: Interval | None) -> str:
    return "–" if before is None or after is None else f"{fmt_ci(before)} → {fmt_ci(after)}"


def calibration_section(d: Doc, data: ReportData, plots: dict[str, Path]) -> None:
    """Each calibrated scorer on held-out items: errors and distribution fit before and after, coverage and
    width of the intervals, per criterion too."""
    if not data.calibration:
        return
    d.h(2, "Calibration and intervals (held-out items)")
    d.p(
        "Scorers whose records are calibrated (judge-calibrate: `score`, `distribution` and `argmax` the calibrated "
        "view, `raw_score`, `raw_distribution` and `raw_argmax` the judge's own read-out, `interval` a split "
        "conformal interval), on the human items the calibration was not fitted on, all criteria pooled. "
        "Coverage: the share of items whose human score lies in the interval; the calibration promises at least "
        "its level per criterion where a criterion had its own interval, on average over the pooled criteria "
        "otherwise. 95% intervals from the same question resamples as elsewhere."
    )
    d.table(
        ["scorer", "calibration", "n (questions)", "MAE before", "MAE after", "MSE before", "MSE after",
         "coverage (level)", "mean width"],
        [
            [
                c.scorer,
                f"{c.method}, fingerprint `{(c.fingerprint or '')[:12]}`",
                f"{c.n} ({c.n_questions})",
                _iv(c.mae_before),
                _iv(c.mae_after),
                _iv(c.mse_before),
                _iv(c.mse_after),
                f"{fmt_ci(c.coverage)} ({pct(c.level)})",
                _iv(c.mean_width),
            ]
            for c in data.calibration
        ],
    )  # fmt: skip
    if any(c.nll_before is not None for c in data.calibration):
        d.p(
            "How the scale distributions fit the annotators' ratings, raw read-out → calibrated (lower is better): "
            "negative log-likelihood of the ratings, Brier score, top-label expected calibration error (ten "
            "confidence bins) and that of the expected score (one-point bins)."
        )
        d.table(
            ["scorer", "NLL", "Brier", "ECE (top label)", "ECE (score)"],
            [
                [
                    c.scorer,
                    _pair(c.nll_before, c.nll_after),
                    _pair(c.brier_before, c.brier_after),
                    _pair(c.ece_top_before, c.ece_top_after),
                    _pair(c.ece_score_before, c.ece_score_after),
                ]
                for c in data.calibration
                if c.nll_before is not None
            ],
        )
    for c in data.calibration:
        d.h(3, f"{c.scorer}, per criterion")
        d.p(f"Held-out items: {c.held_out}" + (f" ({c.n_excluded} left out)." if c.n_excluded else "."))
        d.table(
            ["criterion", "n", "MAE before", "MAE after", "coverage [95% CI]", "mean width"],
            [
                [
                    k.criterion,
                    str(k.n),
                    fmt(k.mae_before),
                    fmt(k.mae_after),
                    pct(k.coverage)
                    + (f" [{pct(k.coverage_ci[0])}, {pct(k.coverage_ci[1])}]" if k.coverage_ci else ""),
                    fmt(k.mean_width, 2),
                ]
                for k in c.per_criterion
            ],
        )
    if "reliability" in plots:
        d.img(
            plots["reliability"],
            "Reliability before and after calibration: mean human score in one-point bins of the raw and of the "
            "calibrated score (held-out items, all criteria pooled)",
        )
    if "reliability_top" in plots:
        d.img(
            plots["reliability_top"],
            "Top-label reliability before and after calibration: the share of ratings equal to the distribution's "
            "argmax against its largest probability, in ten confidence bins (held-out items)",
        )


def selective_section(d: Doc, data: ReportData) -> None:
    """Selective evaluation on held-out items: what share is trusted, and the agreement on it."""
    if not data.selective:
        return
    d.h(2, "Selective evaluation (held-out items)")
    d.p(
        "Scorers whose records carry the `trusted` mark (judge-calibrate --selective, after Jung et al., Trust or "
        "Escalate, ICLR 2025): the judge keeps a score when its confidence reaches its criterion's threshold and "
        "escalates it to a human otherwise. The thresholds were chosen by fixed-sequence testing so that the "
        "agreement on trusted scores is at least the stated level with probability at least 1 - delta, on items "
        "like those they were fitted on. Agreement: the calibrated score within the tolerance of the human mean "
        "score. Here on the human items the calibration was not fitted on, with 95% intervals (questions "
        "resampled), beside the agreement on every score (no abstention)."
    )
    d.table(
        ["scorer", "promise", "n (questions)", "trusted", "agreement on trusted", "agreement on all"],
        [
            [
                c.scorer,
                f">= {pct(c.agreement)} with prob. >= {pct(1 - c.delta) if c.delta is not None else '–'} "
                f"(tolerance {c.tolerance:g}, confidence {c.confidence})",
                f"{c.n} ({c.n_questions})",
                f"{c.n_trusted}: {trusted_share_text(c.share_trusted, c.no_threshold)}",
                fmt_ci(c.agreement_trusted),
                fmt_ci(c.agreement_all),
            ]
            for c in data.selective
        ],
    )
    for c in data.selective:
        d.h(3, f"{c.scorer}, per criterion")
        d.table(
            ["criterion", "n", "trusted", "agreement on trusted", "agreement on all"],
            [
                [k.criterion, str(k.n), str(k.n_trusted), fmt(k.agreement_trusted), fmt(k.agreement_all)]
                for k in c.per_criterion
            ],
        )
        if c.pairwise is not None:
            pw = c.pairwise
            d.p(
                f"Pairwise, {pw.n} held-out pairs of responses to one question that the annotators order: "
                f"{trusted_share_text(pw.share_trusted, pw.no_threshold, suffix=' trusted')}, agreement "
                f"{fmt_ci(pw.agreement_trusted)} on them, "
                f"{fmt_ci(pw.agreement_all)} on all pairs. The judge ties {pw.n_judge_ties} of the {pw.n} "
                "pairs (no preference): each counts as a disagreement here, and as half in the main table's "
                "pairwise accuracy."
            )


def ppi_section(d: Doc, data: ReportData) -> None:
    """The prediction-powered inference check: one draw's estimates, then coverage and widths over the draws."""
    if not data.ppi:
        return
    first = data.ppi[0]
    d.h(2, "Prediction-powered means from a few labels")
    d.p(
        f"What labelling {first.fraction:.0%} of the questions at random (every model's response to each, as "
        "`judge-data sample --by question` draws them) buys, checked over "
        f"{first.draws} draws (seed {first.seed}): each draw resamples the questions with replacement, a new "
        "test set from the distribution these questions stand for, and labels a share of them; per responding "
        "model the prediction-powered mean (PPI++: the scorer's scores of every response, corrected by its error "
        "on the labelled ones; Student's t interval, the variance by the jackknife) beside the human-only mean "
        "of the same labels (Student's t), each with its 95% interval on the rubric's scale, from at least "
        f"{first.min_labels or '–'} labelled responses; per pair of models the same for the win rate. Coverage: "
        "the share of intervals containing the truth of the world they were drawn from (the model's mean human "
        "score over all its responses here; the pair's human win rate), ± its Monte Carlo standard error. The "
        "scorer's own bias does not enter the PPI mean; a better scorer narrows its interval."
    )
    for c in data.ppi:
        d.h(
            3,
            f"{c.scorer}: {c.n_labelled} of {c.n_questions or '?'} questions labelled per draw ({c.n_items} responses)",
        )
        d.table(
            ["model", "responses", "all-human mean", "one run: labelled", "PPI [95% CI]", "human-only [95% CI]",
             "PPI coverage", "human-only coverage", "PPI mean width", "human-only mean width"],
            [
                [
                    m.model,
                    str(m.n),
                    fmt(m.all_human_mean),
                    str(m.first_draw.n_labelled),
                    _est(m.first_draw.ppi_mean, m.first_draw.ppi_ci, m.first_draw.bounded),
                    _est(m.first_draw.human_mean, m.first_draw.human_ci),
                    pct(m.ppi_coverage),
                    pct(m.human_coverage),
                    fmt(m.ppi_mean_width),
                    fmt(m.human_mean_width),
                ]
                for m in c.models
            ],
        )  # fmt: skip
        if c.win_rates:
            d.table(
                ["model", "against", "questions", "all-human win rate", "one run: PPI [95% CI]", "PPI coverage",
                 "human-only coverage", "PPI mean width", "human-only mean width"],
                [
                    [
                        w.model,
                        w.opponent,
                        str(w.n_shared),
                        fmt(w.all_human_win_rate),
                        _est(w.first_draw.ppi_mean, w.first_draw.ppi_ci, w.first_draw.bounded),
                        pct(w.ppi_coverage),
                        pct(w.human_coverage),
                        fmt(w.ppi_mean_width),
                        fmt(w.human_mean_width),
                    ]
                    for w in c.win_rates
                ],
            )  # fmt: skip
        d.p(
            f"Over all models and {c.draws} draws: {c.n_intervals} PPI intervals, {_share(c.ppi_coverage, c.ppi_coverage_se)} "
            f"contain the all-human mean (human-only: {_share(c.human_coverage, c.human_coverage_se)}); mean width "
            f"{fmt(c.ppi_mean_width)} (human-only {fmt(c.human_mean_width)}). Win rates: {c.win_n_intervals} PPI "
            f"intervals, {_share(c.win_ppi_coverage, c.win_ppi_coverage_se)} cover (human-only "
            f"{_share(c.win_human_coverage)}). {c.n_bounded} PPI estimates were moved into their range (marked ‡; † in "
            f"this report marks fewer than {SMALL_N} items or questions)."
        )


def _est(mean: float | None, ci: list[float] | None, bounded: list[str] | None = None) -> str:
    if mean is None:
        return "undefined"
    return f"{mean:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") + (" ‡" if bounded else "")


def _share(x: float | None, se: float | None = None) -> str:
    if x is None:
        return "–"
    # The ± is the Monte Carlo standard error with the draws as units (ppi_check: a draw's intervals share
    # its labelled questions), said beside it so it is not read as an interval of the coverage.
    return f"{100 * x:.1f}%" + (f" ± {100 * se:.1f} (s.e. over draws)" if se is not None else "")


def format_calibration_summary(
    checks: list[CalibrationCheck], ppi: list[PPICheck], selective: list[SelectiveCheck] | None = None
) -> list[str]:
    """What ``judge-report`` prints of the calibration, selective-evaluation and PPI checks, a line or two per
    scorer."""
    lines = []
    for c in checks:
        lines.append(
            f"  {c.scorer} ({c.method}, held out: {c.n} items, {c.n_questions} questions): coverage of the "
            f"{pct(c.level)} intervals {fmt_ci(c.coverage)}, mean width {fmt(c.mean_width.value)}; "
            f"MAE {fmt(c.mae_before.value)} before, {fmt(c.mae_after.value)} after calibration "
            f"(MSE {fmt(c.mse_before.value)} -> {fmt(c.mse_after.value)})"
        )
        if c.nll_before is not None and c.nll_after is not None:
            lines.append(
                f"    NLL {fmt(c.nll_before.value, 4)} -> {fmt(c.nll_after.value, 4)}, Brier "
                f"{fmt(_v(c.brier_before))} -> {fmt(_v(c.brier_after))}, ECE (top label) "
                f"{fmt(_v(c.ece_top_before))} -> {fmt(_v(c.ece_top_after))}, ECE (score) "
                f"{fmt(_v(c.ece_score_before))} -> {fmt(_v(c.ece_score_after))}"
            )
    for sel in selective or []:
        lines.append(
            f"  {sel.scorer}, selective evaluation (>= {pct(sel.agreement)} agreement promised): "
            f"{sel.n_trusted} of {sel.n} held-out scores trusted "
            f"({trusted_share_text(sel.share_trusted, sel.no_threshold)}), agreement "
            f"{fmt_ci(sel.agreement_trusted)} on them, {fmt_ci(sel.agreement_all)} on all"
        )
    for p in ppi:
        if p.n_intervals == 0 and p.min_labels and p.n_labelled < p.min_labels:
            lines.append(_ppi_too_few(p))
            continue
        lines.append(
            f"  {p.scorer}, PPI with {p.fraction:.0%} of the questions labelled, over {p.draws} draws: "
            f"{_share(p.ppi_coverage, p.ppi_coverage_se)} of {p.n_intervals} PPI intervals cover the model's "
            f"all-human mean (human-only {_share(p.human_coverage, p.human_coverage_se)}), mean width "
            f"{fmt(p.ppi_mean_width)} vs {fmt(p.human_mean_width)}; win rates {_share(p.win_ppi_coverage)} "
            f"(human-only {_share(p.win_human_coverage)})"
        )
    return lines


def _ppi_too_few(p: PPICheck) -> str:
    """The PPI check's line when no draw had the labels an estimate needs: why, and what would give one
    (settings in backticks: the command names them by its flags)."""
    assert p.min_labels is not None
    need = math.ceil(p.min_labels / p.fraction)
    return (
        f"  {p.scorer}, PPI with {p.fraction:.0%} of the questions labelled, over {p.draws} draws: no "
        f"estimate: a draw labels {p.n_labelled} of the {p.n_questions or '–'} labelled questions, fewer than "
        f"the {p.min_labels} an estimate needs (`min_labels`); the check needs {need} labelled questions at "
        f"this `ppi_fraction` (or a larger `ppi_fraction`)"
    )


def _v(x: Interval | None) -> float | None:
    return None if x is None else x.value


__all__ = [
    "MMIE_SCORE",
    "calibration_section",
    "format_calibration_summary",
    "format_mmie_table",
    "mmie_section",
    "ppi_section",
    "selective_section",
]
