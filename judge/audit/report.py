"""What an audit found: the score change each perturbation causes, with intervals and verdicts.

For a scorer (the judge, or CLIPScore), a perturbation and a criterion, the *pairs* are the items whose
original and perturbed copies both got a score. Over the pairs:

* ``change``: the mean of ``perturbed - original`` (scale points), with a 95% percentile interval from
  ``bootstrap`` resamples of *questions* (responses to one question move together, as in judge-report);
* ``fell`` / ``rose``: the share of pairs whose score fell / rose by more than :data:`TOL` (numerical
  noise of batching is far below it);
* ``verdict``, from the interval, the size of the change and what a human would expect of the criterion
  (see :mod:`judge.audit.perturb`). A change counts only when its interval excludes 0 **and** the mean
  change is at least ``min_effect`` (:data:`MIN_EFFECT_SHARE` of the scorer's scale range: 0.06 on a 0-6
  scale); a change that is certain but negligible counts as none:

  ========================  ==========================  =====================  ==================
  expected                  a fall (below 0, large)     no change              a rise (above 0, large)
  ========================  ==========================  =====================  ==================
  ``fall``                  **sensitive**               **blind**              **rewarded**
  ``not_rise``              falls                       steady                 **rewarded**
  none                      falls                       steady                 rises
  ========================  ==========================  =====================  ==================

  ``n/a`` when fewer than two pairs or no interval (too few questions).

Written as ``audit.json`` (:class:`AuditData`), ``audit.md`` and ``audit.png`` (a heatmap of the changes,
perturbation by criterion, one panel per scorer).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from judge.core.atomic import atomic_write, write_json
from judge.core.rubric import OVERALL
from judge.core.schema import StrictModel
from judge.core.tables import md_table
from judge.eval.bootstrap import ClusterBootstrap, percentile_interval, seeded_rng

#: A score change smaller than this (scale points) counts as neither a fall nor a rise.
TOL = 1e-3
#: The smallest mean change a verdict counts, as a share of the scorer's scale range (0.06 on 0-6).
MIN_EFFECT_SHARE = 0.01

Verdict = Literal["sensitive", "blind", "rewarded", "steady", "falls", "rises", "n/a"]
#: the marks the heatmap and the tables put beside a verdict
MARKS = {
    "sensitive": "✓",
    "blind": "✗",
    "rewarded": "↑!",
    "steady": "",
    "falls": "↓",
    "rises": "↑",
    "n/a": "",
}


class AuditCell(StrictModel):
    """One scorer, perturbation and criterion (see the module doc)."""

    scorer: str
    perturbation: str
    criterion: str
    expect: Literal["fall", "not_rise"] | None
    n: int  #: pairs (items scored both ways)
    n_questions: int
    mean_original: float | None = None
    mean_perturbed: float | None = None
    change: float | None = None
    ci: list[float] | None = None
    fell: float | None = None
    rose: float | None = None
    verdict: Verdict = "n/a"


class PerturbationInfo(StrictModel):
    name: str
    group: str
    description: str
    n_applied: int  #: items it changed
    n_not_applicable: int  #: items it could not change (e.g. no images to blank)
    expect: dict[str, Literal["fall", "not_rise"] | None]  #: criterion -> expectation


class AuditData(StrictModel):
    """Everything ``audit.json`` holds."""

    title: str = "Judge audit"
    judge: dict[str, Any]
    inputs: list[str]
    settings: dict[str, Any]
    n_items: int
    n_questions: int
    #: original items the judge could not score (left out of every comparison), by reason code
    unscorable: dict[str, int] = Field(default_factory=dict)
    perturbations: list[PerturbationInfo]
    scorers: list[str]
    criteria: list[str]  #: overall first, then the rubric's criteria in order
    #: the task families each criterion belongs to (a criterion shared by families pools their items)
    criterion_families: dict[str, list[str]] = Field(default_factory=dict)
    cells: list[AuditCell]

    def cell(self, scorer: str, perturbation: str, criterion: str) -> AuditCell | None:
        for c in self.cells:
            if (c.scorer, c.perturbation, c.criterion) == (scorer, perturbation, criterion):
                return c
        return None


def verdict(
    expect: str | None, ci: Sequence[float] | None, change: float | None = None, min_effect: float = 0.0
) -> Verdict:
    """The verdict of a mean ``change`` and its interval under an expectation (the module doc's table): a
    fall or rise needs the interval off 0 and ``|change| >= min_effect``."""
    if ci is None:
        return "n/a"
    lo, hi = ci
    size = abs(change) if change is not None else math.inf
    fell = hi < 0 and size >= min_effect
    rose = lo > 0 and size >= min_effect
    if expect == "fall":
        return "sensitive" if fell else "rewarded" if rose else "blind"
    if fell:
        return "falls"
    if rose:
        return "rewarded" if expect == "not_rise" else "rises"
    return "steady"


def change_cell(
    scorer: str,
    perturbation: str,
    criterion: str,
    expect: Literal["fall", "not_rise"] | None,
    original: Sequence[float],
    perturbed: Sequence[float],
    questions: Sequence[str],
    *,
    n_boot: int,
    seed: int,
    min_effect: float = 0.0,
) -> AuditCell:
    """The cell of paired scores (``original[i]`` and ``perturbed[i]`` of one item, of question
    ``questions[i]``); see the module doc (``min_effect``: the smallest change a verdict counts)."""
    n = len(original)
    cell = AuditCell(
        scorer=scorer,
        perturbation=perturbation,
        criterion=criterion,
        expect=expect,
        n=n,
        n_questions=len(set(questions)),
    )
    if n == 0:
        return cell
    o = np.asarray(original, dtype=float)
    p = np.asarray(perturbed, dtype=float)
    d = p - o
    cell.mean_original = float(o.mean())
    cell.mean_perturbed = float(p.mean())
    cell.change = float(d.mean())
    cell.fell = float((d < -TOL).mean())
    cell.rose = float((d > TOL).mean())
    if n >= 2 and cell.n_questions >= 2:
        plan = ClusterBootstrap(questions, n_boot, seeded_rng(seed, scorer, perturbation, criterion))
        w = plan.weights(questions)
        means = (w @ d) / w.sum(axis=1)  # every resample draws at least one question, so no row is empty
        cell.ci = percentile_interval(means)
    cell.verdict = verdict(expect, cell.ci, cell.change, min_effect)
    return cell


# ----------------------------------------------------------------------------- Markdown


def _num(x: float | None, digits: int = 2, sign: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _ci(ci: Sequence[float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _expect(e: str | None) -> str:
    return {"fall": "falls", "not_rise": "does not rise", None: "-"}[e]


def _verdict(v: str) -> str:
    mark = MARKS.get(v, "")
    return f"**{v}** {mark}".strip() if v in ("sensitive", "blind", "rewarded") else f"{v} {mark}".strip()


def headline_rows(data: AuditData, scorer: str, criterion: str = OVERALL) -> list[list[str]]:
    """One row per perturbation: what it tests, items changed, expectation, change [CI], fell, verdict."""
    rows = []
    for p in data.perturbations:
        c = data.cell(scorer, p.name, criterion)
        if c is None:
            continue
        rows.append(
            [
                f"`{p.name}`",
                p.group,
                f"{c.n} / {p.n_applied}",
                _expect(c.expect),
                _num(c.mean_original) + " → " + _num(c.mean_perturbed),
                _num(c.change, sign=True) + _ci(c.ci),
                _pct(c.fell),
                _verdict(c.verdict),
            ]
        )
    return rows


HEADLINE_HEADERS = [
    "perturbation",
    "tests",
    "pairs / changed",
    "a human expects it to",
    "mean score",
    "change [95% CI]",
    "fell",
    "verdict",
]


def render_markdown(data: AuditData, plot: str | None = None) -> str:
    j = data.judge
    lines = [f"# {data.title}", ""]
    lines.append(
        f"Judge `{j.get('source')}` (rubric `{j.get('rubric')}`, hash `{str(j.get('rubric_hash'))[:12]}`) on "
        f"{data.n_items} responses to {data.n_questions} questions from {', '.join(f'`{i}`' for i in data.inputs)}. "
        "Each response is scored as it is and after one controlled change; a change a human would notice "
        "should move the score. Intervals: 95%, from "
        f"{data.settings.get('bootstrap')} resamples of questions (seed {data.settings.get('seed')})."
    )
    if data.unscorable:
        left = ", ".join(f"{n} ({why})" for why, n in sorted(data.unscorable.items()))
        lines += ["", f"Original responses the judge could not score, left out of every comparison: {left}."]
    lines += ["", "## Headline: the overall score", ""]
    lines.append(md_table(HEADLINE_HEADERS, headline_rows(data, "judge")))
    if "clipscore" in data.scorers:
        lines += ["", "## CLIPScore under the same changes", ""]
        lines += [
            "CLIPScore has no criteria: its response score is held to what a human expects of the overall score.",
            "",
        ]
        lines.append(md_table(HEADLINE_HEADERS, headline_rows(data, "clipscore", "clipscore")))
    if plot:
        lines += ["", f"![score change by perturbation and criterion]({plot})"]
    lines += ["", "## Per criterion", ""]
    for p in data.perturbations:
        lines += [f"### `{p.name}`: {p.description}", ""]
        rows = []
        for crit in data.criteria:
            c = data.cell("judge", p.name, crit)
            if c is None or c.n == 0:
                continue
            rows.append(
                [
                    f"`{crit}`",
                    str(c.n),
                    _expect(c.expect),
                    _num(c.change, sign=True) + _ci(c.ci),
                    _pct(c.fell),
                    _pct(c.rose),
                    _verdict(c.verdict),
                ]
            )
        if rows:
            headers = [
                "criterion",
                "pairs",
                "a human expects it to",
                "change [95% CI]",
                "fell",
                "rose",
                "verdict",
            ]
            lines.append(md_table(headers, rows))
        else:
            lines.append(f"Not applicable to any item ({p.n_not_applicable} items could not be changed).")
        lines.append("")
    lines += [
        "## How to read this",
        "",
        "- **change**: mean of (perturbed - original) score, in scale points; **fell** / **rose**: share of "
        f"pairs whose score moved down / up by more than {TOL:g}.",
        "- A score **falls** or **rises** when the whole interval is below or above 0 and the mean change is at "
        f"least {_effect(data)} (a certain but negligible change counts as none).",
        "- **sensitive** ✓: a human expects the score to fall, and it falls.",
        "- **blind** ✗: a human expects a fall and there is none: the judge does not see the change.",
        "- **rewarded** ↑!: the score rises where a human expects it to fall or at least not to rise.",
        "- **falls** ↓ / **rises** ↑ / **steady**: where no fall is expected (or none is stated); reported, not "
        "judged.",
        "- Expectations are set per criterion by its id (image criteria, relevance criteria): see "
        "`judge.audit.perturb` and the JSON's `perturbations[].expect`.",
        "",
    ]
    return "\n".join(lines)


def _effect(data: AuditData) -> str:
    effect = data.settings.get("min_effect") or {}
    return ", ".join(f"{v:g} ({k})" for k, v in effect.items()) or "0"


def _column(data: AuditData, criterion: str) -> str:
    """A heatmap column's label: the criterion and the families whose items it pools."""
    fams = data.criterion_families.get(criterion)
    if criterion == OVERALL or not fams:
        return criterion
    return f"{criterion}\n({', '.join(fams)})"


# ----------------------------------------------------------------------------- heatmap


def heatmap(data: AuditData, path: str | Path) -> Path | None:
    """``audit.png``: the mean change per perturbation (rows) and criterion (columns), one panel per scorer,
    a diverging colour scale centred on 0, each cell marked with its verdict."""
    from judge.eval.plots import _plt, _save

    plt = _plt()
    panels = []
    for scorer in data.scorers:
        cols = data.criteria if scorer == "judge" else ["clipscore"]
        cols = [c for c in cols if any(x.scorer == scorer and x.criterion == c and x.n for x in data.cells)]
        if cols:
            panels.append((scorer, cols))
    if not panels:
        return None
    rows = [p.name for p in data.perturbations]
    widths = [max(2.5, 0.75 * len(cols) + 1.5) for _, cols in panels]
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(sum(widths) + 1.5, 0.55 * len(rows) + 2.2),
        gridspec_kw={"width_ratios": widths},
        squeeze=False,
    )
    for ax, (scorer, cols) in zip(axes[0], panels, strict=True):
        m = np.full((len(rows), len(cols)), np.nan)
        for i, r in enumerate(rows):
            for k, c in enumerate(cols):
                cell = data.cell(scorer, r, c)
                if cell is not None and cell.change is not None:
                    m[i, k] = cell.change
        lim = float(np.nanmax(np.abs(m))) if np.isfinite(m).any() else 1.0
        im = ax.imshow(m, cmap="RdBu", vmin=-max(lim, 1e-6), vmax=max(lim, 1e-6), aspect="auto")
        for i, r in enumerate(rows):
            for k, c in enumerate(cols):
                cell = data.cell(scorer, r, c)
                if cell is None or cell.change is None:
                    continue
                ax.text(
                    k,
                    i,
                    f"{cell.change:+.2f}{MARKS.get(cell.verdict, '')}",
                    ha="center",
                    va="center",
                    fontsize=7,
                )
        ax.set_xticks(range(len(cols)), [_column(data, c) for c in cols], rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        j = data.judge
        title = f"judge {j.get('source')} (rubric {j.get('rubric')})" if scorer == "judge" else "CLIPScore"
        ax.set_title(title, fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.8, label="mean change (perturbed - original)")
    fig.suptitle(
        "Score change under each perturbation. Where a human expects a fall: ✓ sensitive (it falls), ✗ blind "
        "(it does not), ↑! rewarded (it rises).\nWhere none is expected: ↓ falls, ↑ rises, unmarked steady. "
        f"A fall or rise needs its 95% interval off 0 and a mean change of at least {_effect(data)}.",
        fontsize=8,
    )
    return _save(fig, path)


def write_outputs(out_dir: str | Path, data: AuditData) -> dict[str, str]:
    """``audit.json``, ``audit.png`` and ``audit.md`` (atomically); returns their paths by kind."""
    out = Path(out_dir)
    files = {"json": str(out / "audit.json")}
    write_json(out / "audit.json", data.model_dump(mode="json"))
    png = heatmap(data, out / "audit.png")
    if png is not None:
        files["png"] = str(png)
    with atomic_write(out / "audit.md", "w") as f:
        f.write(render_markdown(data, "audit.png" if png is not None else None))
    files["md"] = str(out / "audit.md")
    return files
