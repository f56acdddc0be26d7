r"""Bias against humans: where a scorer departs from the human scores in a systematic way that a
correlation can hide. ``judge-report`` runs three analyses on the headline criterion ``overall``
(every task family together), each scorer on the human items it scored, under the main table's
cluster bootstrap (the same questions resampled, same seed and number of resamples); a resample where
a statistic is undefined is left out and counted (``n_valid``), as in :mod:`judge.eval.bootstrap`.

**Length.** A response's length is measured two ways: *text tokens*, the number of matches of the
regular expression ``\w+`` (Python's, Unicode-aware) over its text parts joined with spaces (an
unspaced run of CJK characters counts as one token), and *images*, the number of its image parts.
For each, the partial Spearman correlation of the scorer's score ``j`` with the length ``l`` given
the human score ``h``::

    r_jl.h = (r_jl - r_jh * r_hl) / sqrt((1 - r_jh^2) * (1 - r_hl^2))

where ``r`` is Spearman's rho (so this is the Pearson partial correlation of the average ranks).
Positive: among responses the humans scored alike, the scorer gives the longer ones more. The flag is
``rewards length`` when the 95% interval lies entirely above 0 and ``penalises length`` when it lies
entirely below. It is undefined (``None``, with the reason) with fewer than 3 items, a constant score
or length (e.g. every response has one image), or ``|r_jh| = 1`` or ``|r_hl| = 1`` (the scorer, or
the length, ranks the responses exactly as the humans do: nothing is left to correlate). Beside it:
the plain Spearman of the scorer's and of the humans' score with the length, and the partial
correlation given the human score *and* the other length measure (``m``: images for text tokens,
text tokens for images), by the same formula applied to first-order partials::

    r_jl.hm = (r_jl.h - r_jm.h * r_lm.h) / sqrt((1 - r_jm.h^2) * (1 - r_lm.h^2))

Longer texts often come with more images; a scorer that follows only the text is flagged for images
too (it does give more to responses with more images than the humans do), and this second column
tells which of the two it follows. The flag is on the first-order partial.

**Per responding model** (scorers on the rubric scale only): a model's *offset* is ``mean(j - h)``
over its items; its *relative offset* is its offset minus the median of the models' offsets. A
scorer that is off by the same amount for every model (a calibration matter: MAE, the calibration
plot) has relative offsets 0. The median is used, not the mean over all items, because one model
that is scored off on its own would pull the mean and make every other model look off the other way,
while the median of three or more models stays at an unaffected model's offset. (So a model is off
relative to the typical model: when half the models or more are off the same way, the median moves
with them.) With an odd number of models the median model is the *reference*: its relative offset is 0
by construction and is printed so, without an interval (the resamples in which it stays the median
would give ``[0, 0]``). A model is flagged ``over-scored``
(``under-scored``) when its relative offset's interval lies entirely above (below) 0, by more than
``FLAG_EPS``. With two models the median is their mean, so the relative offsets are plus and minus
half their difference and both are flagged together: which of the two is off cannot be told. One
model has no relative offset.

**Ranking.** The models ranked by their mean scorer score and by their mean human score on the same
items (rank 1 = highest mean; means equal to ``RANK_DECIMALS`` decimals tie and share the average
rank), and Kendall's tau-b between the two rankings: ``scipy.stats.kendalltau(variant="b")`` on the
point, the same formula (:func:`kendall_tau_b_rows`) on every resample's model means. A resample that
misses a model is left out. Undefined with fewer than two models, or when either ranking ties every
model. Ranking and length are scale-free: a scorer off the rubric scale (CLIPScore) gets both, and
no offsets.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from judge.core.rubric import OVERALL
from judge.core.schema import AnnotationRecord, Content, TextSegment, content_images
from judge.eval.bias_stats import (
    Values,
    kendall_tau_b_rows,
    partial_spearman,
    partial_undefined_reason,
    weighted_group_means,
    weighted_partial_spearman,
)
from judge.eval.bootstrap import ClusterBootstrap, interval_summary, replicates, seeded_rng
from judge.eval.matching import HumanItem, Scorer
from judge.eval.report_data import (
    BiasReport,
    Interval,
    LengthBias,
    LengthMeasure,
    ModelOffset,
    ModelRanking,
    ScorerBias,
)
from judge.eval.stats import correlation_summary

TOKEN_RE = re.compile(r"\w+")
#: An interval must clear 0 by more than this to raise a flag (a constant offset of +1 computed as
#: ``(h + 1) - h`` is 1 only up to rounding).
FLAG_EPS = 1e-9
#: Model means equal to this many decimals are tied in the rankings.
RANK_DECIMALS = 12
MEASURES: tuple[LengthMeasure, ...] = ("text_tokens", "images")
MEASURE_LABELS = {"text_tokens": "text tokens", "images": "images"}
_WHAT = {"text_tokens": "number of text tokens", "images": "number of images"}

LENGTH_DEFINITION = (
    r"text tokens: matches of the regular expression `\w+` over the response's text parts (joined with "
    "spaces); images: the number of the response's image parts"
)


def response_length(content: Content | None) -> tuple[int, int]:
    """``(text tokens, images)`` of a response: ``\\w+`` matches over its text parts, and its image parts."""
    parts = content or []
    text = " ".join(s.text for s in parts if isinstance(s, TextSegment))
    return len(TOKEN_RE.findall(text)), len(content_images(parts))


def _interval(point: float | None, reps: np.ndarray) -> Interval:
    return Interval.model_validate(interval_summary(point, reps))


def _flag(iv: Interval | None, above: str, below: str) -> Any:
    """``above`` when the interval lies entirely above 0 (by more than FLAG_EPS), ``below`` entirely below."""
    if iv is None or iv.value is None or iv.ci is None:
        return None
    if iv.ci[0] > FLAG_EPS:
        return above
    if iv.ci[1] < -FLAG_EPS:
        return below
    return None


# ----------------------------------------------------------------------------- analyses


def length_bias(
    score: Values,
    human: Values,
    length: Values,
    clusters: Sequence[Hashable],
    plan: ClusterBootstrap,
    measure: LengthMeasure = "text_tokens",
    other: Values | None = None,
) -> LengthBias:
    """The length analysis of one scorer and one length measure (module docstring), intervals under
    ``plan``; ``other``: the other length measure (images for text tokens, text tokens for images), for
    ``partial_other``, the partial correlation given the human score and the other measure."""
    j, h, ln = (np.asarray(a, dtype=float) for a in (score, human, length))
    w = plan.weights(clusters)
    what = _WHAT[measure]
    other_what = _WHAT[MEASURES[1 - MEASURES.index(measure)]]
    reason = partial_undefined_reason(j, ln, h, what=what)
    point = None if reason else partial_spearman(j, ln, h)
    reps = weighted_partial_spearman(j, ln, h, w) if j.size >= 3 else np.full(w.shape[0], np.nan)
    partial = _interval(point, reps)
    other_reason: str | None
    if other is None:
        partial_other, other_reason = _interval(None, np.full(w.shape[0], np.nan)), "no other length measure"
    else:
        other_reason = partial_undefined_reason(j, ln, h, other, what=what, other_what=other_what)
        other_point = None if other_reason else partial_spearman(j, ln, h, other)
        other_reps = (
            weighted_partial_spearman(j, ln, h, w, other) if j.size >= 3 else np.full(w.shape[0], np.nan)
        )
        partial_other = _interval(other_point, other_reps)
    spear = {}
    for key, x in (("scorer", j.tolist()), ("human", h.tolist())):
        rep = replicates(x, ln.tolist(), w, stats=("spearman",))["spearman"]
        rho = correlation_summary(x, ln.tolist())["spearman"]
        spear[key] = _interval(None if rho is None else float(rho), rep)
    return LengthBias(
        measure=measure,
        n=int(j.size),
        mean=float(ln.mean()) if ln.size else None,
        distinct=int(np.unique(ln).size),
        partial=partial,
        scorer_spearman=spear["scorer"],
        human_spearman=spear["human"],
        flag=_flag(partial, "rewards length", "penalises length"),
        note=reason,
        partial_other=partial_other,
        other_note=other_reason,
    )


def _ranks(means: np.ndarray) -> np.ndarray:
    """Rank 1 = highest mean; ties (to RANK_DECIMALS) share the average rank."""
    from scipy.stats import rankdata

    return rankdata(-np.round(means, RANK_DECIMALS), method="average")


def per_model(
    score: Values,
    human: Values,
    models: Sequence[str],
    clusters: Sequence[Hashable],
    plan: ClusterBootstrap,
    *,
    on_scale: bool = True,
    small_n: int = 30,
) -> tuple[list[ModelOffset], Interval | None, ModelRanking]:
    """Per responding model: means, offsets and relative offsets (rubric-scale scorers), the median offset
    they are relative to, and the ranking comparison (module docstring). Models are in name order;
    ``small_n``: fewer items or questions than this mark a model's values as rough."""
    j, h = (np.asarray(a, dtype=float) for a in (score, human))
    names = sorted(set(models))
    code = {m: i for i, m in enumerate(names)}
    codes = np.asarray([code[m] for m in models], dtype=int)
    g = len(names)
    w = plan.weights(clusters)
    ones = np.ones((1, j.size))
    h_pt, j_pt, d_pt = (weighted_group_means(x, codes, g, ones)[0] for x in (h, j, j - h))
    h_rep, j_rep, d_rep = (weighted_group_means(x, codes, g, w) for x in (h, j, j - h))
    ref: Interval | None = None
    rel_pt = rel_rep = None
    if on_scale and g >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref_rep = np.median(d_rep, axis=1)  # NaN when a model is absent from the resample
        ref_pt = float(np.median(d_pt))
        ref = _interval(ref_pt, ref_rep)
        rel_pt, rel_rep = d_pt - ref_pt, d_rep - ref_rep[:, None]
    h_rank, j_rank = _ranks(h_pt), _ranks(j_pt)
    rows = []
    for m, i in code.items():
        mine = codes == i
        n_q = len({c for c, k in zip(clusters, mine, strict=True) if k})
        offset = _interval(float(d_pt[i]), d_rep[:, i]) if on_scale else None
        relative = (
            _interval(float(rel_pt[i]), rel_rep[:, i]) if rel_pt is not None and rel_rep is not None else None
        )
        # The median model (an odd count) is the reference: its relative offset is 0 by construction, and
        # the resamples where it stays the median would print a [0, 0] interval, so it gets none.
        reference = bool(relative is not None and g % 2 == 1 and rel_pt is not None and rel_pt[i] == 0.0)
        if reference and relative is not None:
            relative = Interval(value=0.0, ci=None, n_valid=relative.n_valid)
        rows.append(
            ModelOffset(
                model=m,
                n=int(mine.sum()),
                n_questions=n_q,
                small_n=bool(mine.sum() < small_n or n_q < small_n),
                human_mean=_interval(float(h_pt[i]), h_rep[:, i]),
                scorer_mean=_interval(float(j_pt[i]), j_rep[:, i]),
                human_rank=float(h_rank[i]),
                scorer_rank=float(j_rank[i]),
                offset=offset,
                relative=relative,
                flag=_flag(relative, "over-scored", "under-scored"),
                reference=reference,
            )
        )
    return rows, ref, _ranking(names, h_pt, j_pt, h_rep, j_rep)


def _ranking(
    names: list[str], h_pt: np.ndarray, j_pt: np.ndarray, h_rep: np.ndarray, j_rep: np.ndarray
) -> ModelRanking:
    """Model orders and Kendall's tau-b between the rankings by scorer and by human means."""
    from scipy.stats import kendalltau

    g = len(names)
    hr, jr = np.round(h_pt, RANK_DECIMALS), np.round(j_pt, RANK_DECIMALS)
    note = None
    point = None
    if g < 2:
        note = f"a single responding model ({names[0]}): nothing to rank" if g else "no responding model"
    elif np.ptp(hr) == 0:
        note = "the humans give every model the same mean score: no human ranking to compare with"
    elif np.ptp(jr) == 0:
        note = "the scorer gives every model the same mean score: it does not rank the models"
    else:
        point = float(kendalltau(jr, hr, variant="b").statistic)
        if g == 2:
            note = (
                "two models: tau is +1 (same order as the humans) or -1 (swapped); the interval shows "
                "whether resamples swap them"
            )
    reps = (
        kendall_tau_b_rows(np.round(j_rep, RANK_DECIMALS), np.round(h_rep, RANK_DECIMALS))
        if g >= 2
        else np.full(h_rep.shape[0], np.nan)
    )
    return ModelRanking(
        n_models=g,
        human_order=[n for _, n in sorted(zip(_ranks(h_pt), names, strict=True))],
        scorer_order=[n for _, n in sorted(zip(_ranks(j_pt), names, strict=True))],
        kendall=_interval(point, reps),
        note=note,
    )


def scorer_bias(
    sc: Scorer, lengths: dict[str, tuple[int, int]], plan: ClusterBootstrap, small_n: int = 30
) -> ScorerBias | None:
    """Every analysis of one scorer on its scored ``overall`` items; ``None`` with fewer than 2 of them.
    ``lengths``: record id -> :func:`response_length`."""
    ok = [m for m in sc.scored if m.item.criterion == OVERALL and m.score is not None]
    if len(ok) < 2:
        return None
    j = [float(m.score) for m in ok if m.score is not None]
    h = [m.item.value for m in ok]
    clusters = [m.item.question_id for m in ok]
    n_q = len(set(clusters))
    by_measure = [[float(lengths[m.item.id][k]) for m in ok] for k in range(len(MEASURES))]
    length = {
        measure: length_bias(j, h, by_measure[k], clusters, plan, measure, other=by_measure[1 - k])
        for k, measure in enumerate(MEASURES)
    }
    models, ref, ranking = per_model(
        j, h, [m.item.model for m in ok], clusters, plan, on_scale=sc.on_scale, small_n=small_n
    )
    flags = [
        f"{lb.flag} ({MEASURE_LABELS[k]}; partial Spearman {_ci_text(lb.partial)})"
        for k, lb in length.items()
        if lb.flag
    ]
    flags += [
        f"{mo.model} {mo.flag} (relative offset {_ci_text(mo.relative, sign=True)})"
        for mo in models
        if mo.flag
    ]
    notes = []
    if not sc.on_scale:
        notes.append(
            f"{sc.name} is not on the rubric scale: no offsets (a difference between two scales means "
            "nothing); length and ranking only"
        )
    elif len(models) == 1:
        notes.append(
            "a single responding model: its offset cannot be told from an offset shared by all models"
        )
    elif len(models) == 2:
        notes.append(
            "two models: the relative offsets are plus and minus half their difference, flagged together; "
            "which of the two is off cannot be told"
        )
    return ScorerBias(
        on_scale=sc.on_scale,
        n=len(ok),
        n_questions=n_q,
        small_n=len(ok) < small_n or n_q < small_n,
        length=dict(length),
        models=models,
        reference_offset=ref,
        ranking=ranking,
        flags=flags,
        notes=notes,
    )


def _ci_text(iv: Interval | None, sign: bool = False) -> str:
    if iv is None or iv.value is None:
        return "undefined"
    f = "+.2f" if sign else ".2f"
    return f"{iv.value:{f}}" + (f" [{iv.ci[0]:{f}}, {iv.ci[1]:{f}}]" if iv.ci else "")


def build_bias(
    records: Sequence[AnnotationRecord],
    items: Sequence[HumanItem],
    scorers: Sequence[Scorer],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    small_n: int = 30,
) -> BiasReport:
    """Bias against humans of every scorer on the ``overall`` items, with the main table's resampling plan
    (``seeded_rng(seed, "criterion:overall")`` over the overall items' questions)."""
    overall = [it for it in items if it.criterion == OVERALL]
    if not overall:
        return BiasReport(
            criterion=OVERALL,
            n_items=0,
            n_questions=0,
            length_definition=LENGTH_DEFINITION,
            scorers={},
            note="no human overall scores (or `criteria` leaves them out): bias against humans is computed "
            "on the overall score only",
        )
    plan = ClusterBootstrap(
        [it.question_id for it in overall], n_boot, seeded_rng(seed, f"criterion:{OVERALL}")
    )
    lengths = {r.id: response_length(r.response) for r in records}
    out: dict[str, ScorerBias] = {}
    left = []
    for sc in scorers:
        sb = scorer_bias(sc, lengths, plan, small_n)
        if sb is None:
            left.append(sc.name)
        else:
            out[sc.name] = sb
    return BiasReport(
        criterion=OVERALL,
        n_items=len(overall),
        n_questions=plan.n_clusters,
        length_definition=LENGTH_DEFINITION,
        scorers=out,
        note=f"left out, fewer than 2 scored overall items: {', '.join(left)}" if left else None,
    )


def bias_warnings(bias: BiasReport | None) -> list[str]:
    """One warning per scorer with a flag."""
    if bias is None:
        return []
    return [
        f"{name}: bias against humans: {'; '.join(sb.flags)} (see Bias against humans)"
        for name, sb in bias.scorers.items()
        if sb.flags
    ]


# ----------------------------------------------------------------------------- plot


def bias_plot(path: str | Path, bias: BiasReport, colours: dict[str, tuple]) -> Path | None:
    """Two panels with 95% intervals: each scorer's partial Spearman with length given the human score
    (text tokens, images), and each rubric-scale scorer's relative offset per responding model; ``None``
    when neither has a defined value."""
    from judge.eval.plots import _plt, _save

    length_rows = [
        (f"{name}\n{MEASURE_LABELS[k]}", name, lb.partial)
        for name, sb in bias.scorers.items()
        for k, lb in sb.length.items()
        if lb.partial.value is not None
    ]
    on = {name: sb for name, sb in bias.scorers.items() if any(m.relative is not None for m in sb.models)}
    models = sorted({m.model for sb in on.values() for m in sb.models})
    panels = [p for p, show in (("length", length_rows), ("models", models)) if show]
    if not panels:
        return None
    plt = _plt()
    fig, axes = plt.subplots(
        1, len(panels), figsize=(5.2 * len(panels), max(3.2, 0.5 * len(length_rows) + 1.5))
    )
    axes = np.atleast_1d(axes)
    for ax, panel in zip(axes, panels, strict=True):
        if panel == "length":
            for row, (_, name, iv) in enumerate(length_rows):
                _errorbar(ax, iv, row, colours[name])
            ax.set_yticks(range(len(length_rows)))
            ax.set_yticklabels([label for label, _, _ in length_rows], fontsize=8)
            ax.set_xlim(-1.02, 1.02)
            ax.set_xlabel("partial Spearman with length given the human score")
            ax.set_title("Length", fontsize=11)
        else:
            step = 0.8 / max(len(on), 1)
            for s, (name, sb) in enumerate(on.items()):
                for mo in sb.models:
                    y = models.index(mo.model) + (s - (len(on) - 1) / 2) * step
                    _errorbar(ax, mo.relative, y, colours[name], label=name if mo is sb.models[0] else None)
            ax.set_yticks(range(len(models)))
            ax.set_yticklabels(models, fontsize=8)
            ax.set_xlabel("relative offset: mean(scorer - human) minus the median over models")
            ax.set_title("Per responding model", fontsize=11)
            ax.legend(fontsize=8, frameon=False)
        ax.invert_yaxis()
        ax.axvline(0, color="0.3", linewidth=0.8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Bias against humans (overall score, 95% bootstrap intervals)", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def _errorbar(ax, iv: Interval | None, y: float, colour, label: str | None = None) -> None:
    if iv is None or iv.value is None:
        return
    err = [[max(iv.value - iv.ci[0], 0.0)], [max(iv.ci[1] - iv.value, 0.0)]] if iv.ci else None
    ax.errorbar(
        iv.value, y, xerr=err, fmt="o", color=colour, markersize=4.5, capsize=2, elinewidth=0.9, label=label
    )


__all__ = [
    "FLAG_EPS",
    "LENGTH_DEFINITION",
    "MEASURES",
    "MEASURE_LABELS",
    "bias_plot",
    "bias_warnings",
    "build_bias",
    "length_bias",
    "per_model",
    "response_length",
    "scorer_bias",
]
