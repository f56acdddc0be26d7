"""The agreement sections of ``report.md`` / ``report.html``: the main table (also what ``judge-report``
prints), coverage, the breakdowns per criterion, task family and responding model, every statistic per scorer,
the paired comparisons and the plots' captions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from judge.core.identity import RULE
from judge.core.tables import text_table
from judge.eval.bootstrap import STATS
from judge.eval.document import Doc, fmt, fmt_ci, pct
from judge.eval.report_build import SMALL_N
from judge.eval.report_data import Pairwise, ReportData, SliceKind, SliceReport

STAT_LABELS = {"pearson": "Pearson", "spearman": "Spearman", "kendall": "Kendall τb"}
#: The statistic of the breakdown tables and plots.
PLOT_STAT = "pearson"


def _coverage_cell(scored: int, expected: int) -> str:
    if not expected:
        return "0 items"
    return f"{scored}/{expected} ({pct(scored / expected)})"


def main_table(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table (the main slice): humans first, then every scorer."""
    main = data.main_slice
    header = [
        "scorer",
        "n",
        "coverage",
        *(f"{STAT_LABELS[s]} [95% CI]" for s in STATS),
        "MAE",
        "QWK",
        "within 1",
        "pairwise acc.",
    ]
    ceil = main.ceiling
    small_h = main.n_items < SMALL_N or main.n_questions < SMALL_N
    rows = [
        [
            "humans (leave one annotator out)",
            str(ceil.n_items_multi),
            "–",
            *(fmt_ci(ceil.loao.stat(s), small_h) for s in STATS),
            "–",
            "–",
            "–",
            "–",
        ]
    ]
    for sc in data.scorers:
        m = main.scorers.get(sc.name)
        if m is None:
            rows.append([sc.name, "0", "0 items", "no item", "", "", "", "", "", ""])
            continue
        pw = m.pairwise
        rows.append(
            [
                sc.name,
                str(m.n),
                _coverage_cell(m.n, m.n_expected),
                *(fmt_ci(m.stat(s), m.small_n) for s in STATS),
                fmt(m.mae),
                fmt(m.qwk),
                pct(m.within1),
                _pairwise_cell(pw),
            ]
        )
    return header, rows


def format_main_table(data: ReportData) -> str:
    """The main table as aligned plain text (what the command prints)."""
    return text_table(*main_table(data))


def _pairwise_cell(pw: Pairwise) -> str:
    """The pairwise accuracy with its pairs, and the scorer's ties when it has some (each counted half)."""
    if pw.accuracy is None:
        return "–"
    ties = f" ({pw.n_scorer_ties} tied, half each)" if pw.n_scorer_ties else ""
    return f"{pct(pw.accuracy)} of {pw.n_pairs}{ties}"


def intro_section(d: Doc, data: ReportData) -> None:
    """Title, note, and what was compared: the human set, the rubric, the resampling."""
    d.h(1, data.title)
    if data.note:
        d.note(data.note)
    hu, rub, st = data.human, data.rubric, data.settings
    d.p(
        f"Human scores: {hu.responses} responses to {hu.questions} questions, {hu.items} (response, "
        f"criterion) items, annotators {', '.join(hu.annotators)} (mean {fmt(hu.mean_annotators_per_item, 1)} "
        f"per item), from {', '.join(f'`{f}`' for f in hu.files)}. Rubric `{rub.name}` (hash "
        f"`{rub.hash[:12]}`), scale {rub.scale[0]}..{rub.scale[1]}. Intervals: {st.bootstrap} "
        f"bootstrap resamples of questions, seed {st.seed}. Generated {data.created}"
        + (f" in {data.elapsed_s:.1f} s." if data.elapsed_s is not None else ".")
    )


def main_section(d: Doc, data: ReportData) -> None:
    main = data.main_slice
    d.h(2, f"Main table: agreement with humans ({main.title})")
    header, rows = main_table(data)
    d.table(header, rows)
    ceil = main.ceiling
    d.p(
        f"Krippendorff's alpha of the annotators on this slice: interval {fmt(ceil.alpha_interval)}, "
        f"ordinal {fmt(ceil.alpha_ordinal)}. n = items scored; coverage = scored / human items of this slice in "
        "the criteria and task families the scorer scores (unscorable and missing items count against it, they "
        "are never dropped silently; see Coverage). Humans: n = items with two or more annotators."
    )


def coverage_section(d: Doc, data: ReportData) -> None:
    """How each score file met the human items, and what it leaves out on purpose."""
    d.h(2, "Coverage")
    cov_rows = []
    for sc in data.scorers:
        c = sc.coverage
        cov_rows.append(
            [
                sc.name,
                f"`{sc.file}`",
                sc.metric,
                "yes" if sc.on_scale else "no",
                str(c.records),
                str(c.expected),
                str(c.scored),
                str(c.unscorable),
                str(c.missing),
                str(c.unknown_ids),
                str(c.unknown_criterion),
                pct(c.coverage),
            ]
        )
    d.table(
        [
            "scorer",
            "file",
            "metric",
            "rubric scale",
            "records",
            "human items expected",
            "scored",
            "unscorable",
            "missing",
            "unknown ids",
            "unknown criterion",
            "coverage",
        ],
        cov_rows,
    )
    notes = []
    for sc in data.scorers:
        c = sc.coverage
        notes.append(f"**{sc.name}**: {sc.scale_note}.")
        if c.labels is not None:
            lab = c.labels
            notes.append(
                f"**{sc.name}**: {lab['matched']} of {lab['labels']} labelled responses matched a record "
                f"({RULE})"
                + (
                    f"; {lab['unmatched']} did not (e.g. {', '.join(lab['unmatched_examples'])})."
                    if lab["unmatched"]
                    else "."
                )
            )
        if c.criteria_not_scored:
            others = c.criteria_not_scored
            named = ", ".join(others) if len(others) <= 4 else f"the {len(others)} other criteria"
            notes.append(
                f"**{sc.name}** scores only {', '.join(c.criteria_scored)}; not compared on "
                f"{named} (not counted as missing)."
            )
        if c.families_not_scored:
            fam = "family" if len(c.families_scored) == 1 else "families"
            notes.append(
                f"**{sc.name}** scores only the task {fam} {', '.join(c.families_scored)}; "
                f"no record for {', '.join(c.families_not_scored)} (not counted as missing)."
            )
        for r in c.unscorable_reasons:
            notes.append(f"**{sc.name}** unscorable ({r.count}): {r.reason}")
    d.ul(notes)


def breakdown_sections(d: Doc, data: ReportData, plots: dict[str, Path]) -> None:
    """Per criterion, per task family and per responding model: every scorer beside the human ceiling."""
    crit_slices = data.slices_of("criterion")
    names = [sc.name for sc in data.scorers]
    if len(crit_slices) > 1:
        d.h(2, f"Per criterion ({STAT_LABELS[PLOT_STAT]} with 95% CI)")
        d.table(
            ["criterion", "human items", "alpha (interval)", "humans (LOAO)", *names],
            _comparison_rows(crit_slices, names),
        )
        if "criteria" in plots:
            d.img(plots["criteria"], "Correlation per criterion with 95% intervals; black: human ceiling")
    breakdowns: tuple[tuple[SliceKind, str], ...] = (
        ("family", "Per task family (overall score)"),
        ("model", "Per responding model (overall score)"),
    )
    for kind, heading in breakdowns:
        group = data.slices_of(kind)
        if group:
            d.h(2, f"{heading}, {STAT_LABELS[PLOT_STAT]} with 95% CI")
            d.table(
                [kind, "human items", "alpha (interval)", "humans (LOAO)", *names],
                _comparison_rows(group, names),
            )


def every_statistic_section(d: Doc, data: ReportData) -> None:
    d.h(2, "Every statistic, per scorer and slice")
    for sc in data.scorers:
        rows = []
        for s in data.slices:
            m = s.scorers.get(sc.name)
            if m is None:
                continue
            pw = m.pairwise
            rows.append(
                [
                    s.title,
                    str(m.n),
                    str(m.n_questions),
                    *(fmt_ci(m.stat(k), m.small_n) for k in STATS),
                    fmt(m.mae),
                    fmt(m.mse),
                    fmt(m.qwk),
                    pct(m.within1),
                    f"{pct(pw.accuracy)} ({pw.n_pairs})",
                ]
            )
        d.h(3, sc.name)
        d.table(
            [
                "slice",
                "n",
                "questions",
                *(STAT_LABELS[k] for k in STATS),
                "MAE",
                "MSE",
                "QWK",
                "within 1",
                "pairwise acc. (pairs)",
            ],
            rows,
        )


def paired_section(d: Doc, data: ReportData) -> None:
    """The paired comparisons whose difference is defined for at least one correlation."""
    defined = [p for p in data.paired if any(p.stat(k).diff is not None for k in STATS)]
    if not defined:
        return
    d.h(2, "Paired comparisons (A − B, same items, same resamples)")
    rows = []
    for p in defined:
        cells = []
        for k in STATS:
            r = p.stat(k)
            if r.diff is None:
                cells.append("undefined")
            else:
                cells.append(
                    f"{r.diff:+.3f}"
                    + (f" [{r.ci[0]:+.3f}, {r.ci[1]:+.3f}]" if r.ci else "")
                    + f", p = {fmt(r.p)}"
                    + (" †" if p.small_n else "")
                )
        rows.append([p.a, p.b, data.slice(p.slice).title, str(p.n), *cells])
    d.table(["A", "B", "slice", "n", *(f"Δ {STAT_LABELS[k]} [95% CI], p" for k in STATS)], rows)
    if len(defined) < len(data.paired):
        d.p(
            f"{len(data.paired) - len(defined)} pair(s) left out: a correlation is undefined for one of "
            "the two (constant scores); report.json lists them."
        )


def plots_section(d: Doc, data: ReportData, plots: dict[str, Path]) -> None:
    d.h(2, "Plots")
    captions = {
        "scatter": f"Each scorer against the human score ({data.main_slice.title}), with the diagonal "
        "(rubric-scale scorers) and the least-squares fit",
        "confusion": "Confusion matrices of rounded scores (rubric-scale scorers, all criteria pooled)",
        "calibration": "Calibration: mean human score per one-point bin of the scorer's score (rubric-scale "
        "scorers, all criteria pooled)",
    }
    for key, cap in captions.items():
        if key in plots:
            d.img(plots[key], cap)
    if "confusion" not in plots:
        d.p("No scorer on the rubric scale: no confusion matrix and no calibration plot.")


def _comparison_rows(slices: Sequence[SliceReport], names: Sequence[str]) -> list[list[str]]:
    rows = []
    for s in slices:
        small_h = s.n_items < SMALL_N or s.n_questions < SMALL_N
        row = [
            s.label,
            str(s.n_items),
            fmt(s.ceiling.alpha_interval),
            fmt_ci(s.ceiling.loao.stat(PLOT_STAT), small_h),
        ]
        for n in names:
            m = s.scorers.get(n)
            row.append("–" if m is None else f"{fmt_ci(m.stat(PLOT_STAT), m.small_n)} (n={m.n})")
        rows.append(row)
    return rows


__all__ = [
    "PLOT_STAT",
    "STAT_LABELS",
    "breakdown_sections",
    "coverage_section",
    "every_statistic_section",
    "format_main_table",
    "intro_section",
    "main_section",
    "main_table",
    "paired_section",
    "plots_section",
]
