"""The bias section of ``report.md`` / ``report.html`` (:mod:`judge.eval.bias` computes it): length, the offset
per responding model, the models' ranking."""

from __future__ import annotations

import itertools
from pathlib import Path

from judge.eval.bias import MEASURE_LABELS
from judge.eval.document import Doc, fmt, fmt_ci, fmt_signed
from judge.eval.report_build import SMALL_N
from judge.eval.report_data import ReportData, ScorerBias


def bias_section(d: Doc, data: ReportData, plots: dict[str, Path]) -> None:
    """Bias against humans: length, per responding model, ranking of the models (:mod:`judge.eval.bias`)."""
    bias = data.bias
    if bias is None:
        return
    d.h(2, f"Bias against humans ({bias.criterion} score)")
    d.p(
        "Where a scorer departs from the humans in a systematic way that a correlation can hide: on the "
        f"{bias.criterion} score (every task family), each scorer on the human items it scored, with 95% "
        "intervals from the same question resamples as the main table. Flags are listed under Warnings. "
        f"† marks fewer than {SMALL_N} items or questions."
    )
    if bias.note:
        d.p(bias.note + ".")
    if not bias.scorers:
        return
    scorers = bias.scorers
    d.h(3, "Length")
    d.p(
        f"Response length: {bias.length_definition}. Partial Spearman: the correlation of the scorer's score "
        "with the length among responses the humans scored alike, r_jl.h = (r_jl − r_jh r_hl) / "
        "√((1 − r_jh²)(1 − r_hl²)) with Spearman's r (j scorer, l length, h human). Humans may rightly "
        "prefer more complete, longer responses; only what the scorer adds beyond the human score counts. "
        "Flag: **rewards length** when the interval lies entirely above 0, **penalises length** entirely "
        "below. Text and image counts often go together: the partial given the human score *and* the other "
        "length (the same formula applied again) tells which of the two a scorer follows."
    )
    rows = []
    for name, sb in scorers.items():
        for k, lb in sb.length.items():
            partial = fmt_ci(lb.partial, sb.small_n) if lb.note is None else f"undefined: {lb.note}"
            other = (
                fmt_ci(lb.partial_other, sb.small_n)
                if lb.other_note is None
                else f"undefined: {lb.other_note}"
            )
            rows.append(
                [
                    name,
                    MEASURE_LABELS[k],
                    str(lb.n),
                    fmt(lb.mean, 1),
                    partial,
                    f"**{lb.flag}**" if lb.flag else "–",
                    other,
                    fmt_ci(lb.scorer_spearman, sb.small_n),
                    fmt_ci(lb.human_spearman, sb.small_n),
                ]
            )
    d.table(
        [
            "scorer",
            "length",
            "n",
            "mean length",
            "partial Spearman given human [95% CI]",
            "flag",
            "given human and the other length [95% CI]",
            "scorer Spearman with length",
            "humans' Spearman with length",
        ],
        rows,
    )
    _bias_models(d, scorers)
    _bias_ranking(d, scorers)
    if "bias" in plots:
        d.img(plots["bias"], "Bias against humans: partial Spearman with length, relative offset per model")


def _bias_models(d: Doc, scorers: dict[str, ScorerBias]) -> None:
    d.h(3, "Per responding model")
    d.p(
        "Offset: mean(scorer − human) over the model's items. Relative offset: the offset minus the median of "
        "the models' offsets (with an odd number of models, the median model is the reference: 0 by construction, "
        "no interval), so that an offset every model shares (a calibration matter: see MAE and the "
        "calibration plot) cancels out, and one model scored off on its own does not make the others look off. "
        "Flag: **over-scored** (**under-scored**) when the relative offset's interval lies entirely above "
        "(below) 0. Scorers on the rubric scale only."
    )
    rows, notes = [], []
    for name, sb in scorers.items():
        if not sb.on_scale:
            continue
        ref = sb.reference_offset
        if ref is not None:
            notes.append(f"**{name}**: median offset over models {fmt_ci(ref, sb.small_n)}.")
        notes.extend(f"**{name}**: {n}." for n in sb.notes)
        for mo in sb.models:
            rows.append(
                [
                    name,
                    mo.model,
                    str(mo.n),
                    fmt(mo.human_mean.value),
                    fmt(mo.scorer_mean.value),
                    fmt_signed(mo.offset, mo.small_n),
                    "0 (reference: the median model)"
                    if mo.reference
                    else fmt_signed(mo.relative, mo.small_n)
                    if mo.relative is not None
                    else "–",
                    f"**{mo.flag}**" if mo.flag else "–",
                ]
            )
    off = [name for name, sb in scorers.items() if not sb.on_scale]
    if off:
        notes.append(
            f"Not on the rubric scale, so without offsets (length and ranking only): {', '.join(off)}."
        )
    if rows:
        d.table(
            [
                "scorer",
                "model",
                "n",
                "human mean",
                "scorer mean",
                "offset [95% CI]",
                "relative offset [95% CI]",
                "flag",
            ],
            rows,
        )
    d.ul(notes)


def _bias_ranking(d: Doc, scorers: dict[str, ScorerBias]) -> None:
    d.h(3, "Ranking of responding models")
    d.p(
        "The models ranked by mean score (1 = highest; ties share the average rank), by the humans and by the "
        "scorer, on the items the scorer scored; Kendall τb between the two rankings, its interval from "
        "recomputing both rankings on each resample. τb = 1: the scorer orders the models as the humans do "
        "(what a leaderboard needs); −1: the reverse."
    )
    d.table(
        ["scorer", "models", "Kendall τb [95% CI]", "human order", "scorer order", "note"],
        [
            [
                name,
                str(sb.ranking.n_models),
                fmt_ci(sb.ranking.kendall, sb.small_n),
                _order_text(sb, "human_rank"),
                _order_text(sb, "scorer_rank"),
                sb.ranking.note or "",
            ]
            for name, sb in scorers.items()
        ],
    )
    rows = []
    for name, sb in scorers.items():
        for mo in sorted(sb.models, key=lambda m: (m.human_rank, m.model)):
            rows.append(
                [
                    name,
                    mo.model,
                    str(mo.n),
                    fmt_ci(mo.human_mean, mo.small_n),
                    f"{mo.human_rank:g}",
                    fmt_ci(mo.scorer_mean, mo.small_n),
                    f"{mo.scorer_rank:g}",
                ]
            )
    d.table(
        ["scorer", "model", "n", "human mean [95% CI]", "human rank", "scorer mean [95% CI]", "scorer rank"],
        rows,
    )


def _order_text(sb: ScorerBias, rank: str) -> str:
    """The models best first, ``a > b = c`` (``=`` between models of equal rank)."""
    ranked = sorted((getattr(m, rank), m.model) for m in sb.models)
    out = ranked[0][1] if ranked else ""
    for (r0, _), (r1, name) in itertools.pairwise(ranked):
        out += f" {'=' if r1 == r0 else '>'} {name}"
    return out


__all__ = ["bias_section"]
