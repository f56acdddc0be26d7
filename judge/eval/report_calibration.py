"""The sections of ``report.md`` / ``report.html`` that set a judge beside MMIE's table, check its calibration
and intervals on held-out items, and check prediction-powered means (:mod:`judge.eval.heldout` computes the
last two); and what ``judge-report`` prints of them."""

from __future__ import annotations

from pathlib import Path

from judge.core.tables import text_table
from judge.eval.document import Doc, fmt, fmt_ci, pct
from judge.eval.report_data import CalibrationCheck, Interval, PPICheck, ReportData, SliceReport

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


def calibration_section(d: Doc, data: ReportData, plots: dict[str, Path]) -> None:
    """Each calibrated scorer on held-out items: errors before and after, coverage and width of the intervals."""
    if not data.calibration:
        return
    d.h(2, "Calibration and intervals (held-out items)")
    d.p(
        "Scorers whose records are calibrated (judge-calibrate: `score` calibrated, `raw_score` the judge's own "
        "expected score, `interval` a split conformal interval), on the human items the calibration was not "
        "fitted on, all criteria pooled. Coverage: the share of items whose human score lies in the interval; "
        "the calibration aims at its stated level. 95% intervals from the same question resamples as elsewhere."
    )
    d.table(
        [
            "scorer",
            "calibration",
            "n (questions)",
            "MAE before",
            "MAE after",
            "MSE before",
            "MSE after",
            "coverage (level)",
            "mean width",
        ],  # fmt: skip
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
    )
    for c in data.calibration:
        d.h(3, f"{c.scorer}, per criterion")
        d.p(f"Held-out items: {c.held_out}" + (f" ({c.n_excluded} left out)." if c.n_excluded else "."))
        d.table(
            ["criterion", "n", "MAE before", "MAE after", "coverage", "mean width"],
            [
                [
                    k.criterion,
                    str(k.n),
                    fmt(k.mae_before),
                    fmt(k.mae_after),
                    pct(k.coverage),
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


def ppi_section(d: Doc, data: ReportData) -> None:
    """The prediction-powered inference check: one draw's estimates, then coverage and widths over the draws."""
    if not data.ppi:
        return
    first = data.ppi[0]
    d.h(2, "Prediction-powered means from a few labels")
    d.p(
        f"What labelling {first.fraction:.0%} of the responses at random would buy, simulated {first.draws} times "
        f"(seed {first.seed}) on the overall score: per responding model, the prediction-powered mean (PPI++: the "
        "scorer's scores of every response, corrected by its error on the labelled ones) beside the human-only "
        "mean of the same labels, each with its 95% interval; then, over the draws, how often each interval "
        "contains the model's mean human score over all its responses here, and its mean width. The scorer's "
        "own bias does not enter the PPI mean; a better scorer narrows its interval."
    )
    for c in data.ppi:
        d.h(3, f"{c.scorer}: {c.n_labelled} of {c.n_items} responses labelled per draw")
        d.table(
            [
                "model",
                "responses",
                "all-human mean",
                "first draw: labelled",
                "PPI [95% CI]",
                "human-only [95% CI]",
                "PPI coverage",
                "human-only coverage",
                "PPI mean width",
                "human-only mean width",
            ],  # fmt: skip
            [
                [
                    m.model,
                    str(m.n),
                    fmt(m.all_human_mean),
                    str(m.first_draw.n_labelled),
                    _est(m.first_draw.ppi_mean, m.first_draw.ppi_ci),
                    _est(m.first_draw.human_mean, m.first_draw.human_ci),
                    pct(m.ppi_coverage),
                    pct(m.human_coverage),
                    fmt(m.ppi_mean_width),
                    fmt(m.human_mean_width),
                ]
                for m in c.models
            ],
        )
        d.p(
            f"Over all models and draws: {c.n_intervals} PPI intervals, {_share(c.ppi_coverage)} contain the "
            f"all-human mean (human-only: {_share(c.human_coverage)}); mean width {fmt(c.ppi_mean_width)} "
            f"(human-only {fmt(c.human_mean_width)})."
        )


def _est(mean: float | None, ci: list[float] | None) -> str:
    if mean is None:
        return "undefined"
    return f"{mean:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _share(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def format_calibration_summary(checks: list[CalibrationCheck], ppi: list[PPICheck]) -> list[str]:
    """What ``judge-report`` prints of the calibration and PPI checks, a line or two per scorer."""
    lines = []
    for c in checks:
        lines.append(
            f"  {c.scorer} ({c.method}, held out: {c.n} items, {c.n_questions} questions): coverage of the "
            f"{pct(c.level)} intervals {fmt_ci(c.coverage)}, mean width {fmt(c.mean_width.value)}; "
            f"MAE {fmt(c.mae_before.value)} before, {fmt(c.mae_after.value)} after calibration "
            f"(MSE {fmt(c.mse_before.value)} -> {fmt(c.mse_after.value)})"
        )
    for p in ppi:
        widths = [(m.model, m.first_draw) for m in p.models]
        first = "; ".join(
            f"{name} PPI {_w(fd.ppi_ci)} vs human-only {_w(fd.human_ci)} ({fd.n_labelled} labels)"
            for name, fd in widths
        )
        lines.append(
            f"  {p.scorer}, PPI with {p.fraction:.0%} labels: first draw interval widths {first}; over {p.draws} "
            f"draws {_share(p.ppi_coverage)} of {p.n_intervals} PPI intervals cover the all-human model mean "
            f"(human-only {_share(p.human_coverage)}), mean width {fmt(p.ppi_mean_width)} vs "
            f"{fmt(p.human_mean_width)}"
        )
    return lines


def _w(ci: list[float] | None) -> str:
    return "-" if ci is None else f"{ci[1] - ci[0]:.3f}"


__all__ = [
    "MMIE_SCORE",
    "calibration_section",
    "format_calibration_summary",
    "format_mmie_table",
    "mmie_section",
    "ppi_section",
]
