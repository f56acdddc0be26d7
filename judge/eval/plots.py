"""The report's figures (matplotlib, Agg backend: no display needed), each written atomically as PNG.

* :func:`scatter_plot`: each scorer against the human score, one panel per scorer, with the
  diagonal (rubric-scale scorers only) and the least-squares fit.
* :func:`criteria_plot`: a correlation per criterion and scorer, with 95% intervals, and the
  human ceiling beside them.
* :func:`confusion_plot`: rounded human score against rounded scorer score, per rubric-scale scorer.
* :func:`calibration_plot`: mean human score in bins of the scorer's score, per rubric-scale scorer.
* :func:`reliability_diagram`: the top-label reliability diagram of scale distributions (raw, calibrated).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from judge.core.atomic import atomic_write
from judge.eval.stats import rounded_on_scale

DPI = 110
FAMILY_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def scorer_colours(names: Sequence[str]) -> dict[str, tuple]:
    """One colour per scorer, stable across figures (matplotlib's tab10 cycle)."""
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return {n: cmap(i % 10) for i, n in enumerate(names)}


def _save(fig, path: str | Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    _plt().close(fig)
    with atomic_write(path, "wb") as f:
        f.write(buf.getvalue())
    return Path(path)


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return (n + cols - 1) // cols, cols


@dataclass
class ScatterPanel:
    """One scorer's points on a slice: its values, the human values, and each point's group (family)."""

    name: str
    pred: Sequence[float]
    human: Sequence[float]
    groups: Sequence[str]
    on_scale: bool
    pearson: float | None


def scatter_plot(
    path: str | Path,
    panels: Sequence[ScatterPanel],
    scale: tuple[int, int],
    slice_label: str,
    colours: dict[str, tuple],
) -> Path:
    """Scorer (x) against human (y), one panel per scorer; diagonal for rubric-scale scorers, and the fit."""
    plt = _plt()
    rows, cols = _grid(len(panels))
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 4.3 * rows), squeeze=False)
    groups = sorted({g for p in panels for g in p.groups})
    markers = {g: FAMILY_MARKERS[i % len(FAMILY_MARKERS)] for i, g in enumerate(groups)}
    rng = np.random.default_rng(0)
    lo, hi = scale
    for ax, p in zip(axes.flat, panels, strict=False):
        x = np.asarray(p.pred, dtype=float)
        y = np.asarray(p.human, dtype=float)
        # Human means take few values; a little vertical jitter shows how many points sit on each.
        jitter = rng.uniform(-0.08, 0.08, size=y.size)
        for g in groups:
            sel = np.asarray([gg == g for gg in p.groups], dtype=bool)
            if sel.any():
                ax.scatter(
                    x[sel],
                    y[sel] + jitter[sel],
                    s=22,
                    alpha=0.6,
                    marker=markers[g],
                    color=colours[p.name],
                    edgecolors="none",
                    label=g,
                )
        if p.on_scale:
            ax.plot([lo, hi], [lo, hi], color="0.5", linestyle="--", linewidth=1, label="y = x")
            ax.set_xlim(lo - 0.3, hi + 0.3)
        if x.size >= 2 and np.ptp(x) > 0:
            slope, intercept = np.polyfit(x, y, 1)
            xs = np.linspace(x.min(), x.max(), 2)
            ax.plot(
                xs,
                slope * xs + intercept,
                color="black",
                linewidth=1.5,
                label=f"fit: y = {slope:.2f}x {'+' if intercept >= 0 else '-'} {abs(intercept):.2f}",
            )
        ax.set_ylim(lo - 0.3, hi + 0.3)
        r = "undefined" if p.pearson is None else f"{p.pearson:.2f}"
        ax.set_title(f"{p.name}  (n = {x.size}, Pearson r = {r})", fontsize=10)
        ax.set_xlabel(f"{p.name} score" + ("" if p.on_scale else " (its own scale)"))
        ax.set_ylabel("human score (mean of annotators)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best", framealpha=0.8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(f"Scorers against human scores ({slice_label})", fontsize=12)
    fig.tight_layout()
    return _save(fig, path)


def criteria_plot(
    path: str | Path,
    labels: Sequence[str],
    series: dict[str, Sequence[dict | None]],
    ceiling: Sequence[dict | None],
    stat: str,
    colours: dict[str, tuple],
) -> Path:
    """Horizontal bars: one group per criterion (top to bottom), one bar per scorer that scores it
    (``{"value", "ci"}`` or ``None``) with its 95% interval, and the human ceiling (leave one
    annotator out) as a black diamond with its interval."""
    plt = _plt()
    slot = 0.26  # height of one bar, in axis units
    rows = []  # (y, kind, name, stat dict)
    y = 0.0
    centres = []
    for i, _ in enumerate(labels):
        present = [
            (n, d) for n, v in series.items() if (d := v[i]) is not None and d.get("value") is not None
        ]
        entries = [("scorer", n, v) for n, v in present] + [("ceiling", "humans", ceiling[i])]
        top = y
        for kind, name, v in entries:
            rows.append((y, kind, name, v))
            y += slot
        centres.append((top + y - slot) / 2)
        y += 0.3  # gap between criteria
    fig, ax = plt.subplots(figsize=(8.5, max(3.5, 0.55 * y + 1.3)))
    labelled = set()
    for yy, kind, name, v in rows:
        if v is None or v.get("value") is None:
            continue
        ci = v.get("ci")
        # A percentile interval need not contain the point estimate (skewed, tied data): clip the whiskers.
        err = [[max(v["value"] - ci[0], 0.0)], [max(ci[1] - v["value"], 0.0)]] if ci else None
        if kind == "scorer":
            ax.barh(
                yy,
                v["value"],
                height=slot * 0.9,
                color=colours[name],
                xerr=err,
                capsize=2,
                error_kw={"elinewidth": 0.9, "ecolor": "0.2"},
                label=None if name in labelled else name,
            )
        else:
            ax.errorbar(
                v["value"],
                yy,
                xerr=err,
                fmt="D",
                color="black",
                markersize=4.5,
                capsize=2,
                elinewidth=0.9,
                label=None if name in labelled else "humans (leave one annotator out)",
            )
        labelled.add(name)
    ax.set_yticks(centres)
    ax.set_yticklabels(labels, fontsize=8.5)
    ax.invert_yaxis()
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.set_xlim(-1.02, 1.02)
    ax.set_xlabel(f"{stat.capitalize()} correlation with the human score (95% bootstrap interval)")
    ax.set_title(f"{stat.capitalize()} correlation per criterion", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return _save(fig, path)


def confusion_plot(
    path: str | Path,
    panels: Sequence[tuple[str, Sequence[float], Sequence[float]]],
    scale: tuple[int, int],
    slice_label: str,
) -> Path:
    """Rounded human score (rows) against rounded scorer score (columns); counts, shaded by row share."""
    plt = _plt()
    lo, hi = scale
    k = hi - lo + 1
    rows, cols = _grid(len(panels))
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 4.3 * rows), squeeze=False)
    for ax, (name, pred, human) in zip(axes.flat, panels, strict=False):
        p = rounded_on_scale(pred, scale) - lo
        h = rounded_on_scale(human, scale) - lo
        mat = np.zeros((k, k), dtype=int)
        np.add.at(mat, (h, p), 1)
        share = mat / np.maximum(mat.sum(axis=1, keepdims=True), 1)
        ax.imshow(share, cmap="Blues", vmin=0, vmax=1, origin="lower")
        for i in range(k):
            for j in range(k):
                if mat[i, j]:
                    ax.text(
                        j,
                        i,
                        str(mat[i, j]),
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if share[i, j] > 0.6 else "black",
                    )
        ticks = list(range(k))
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.set_xticklabels([str(lo + t) for t in ticks])
        ax.set_yticklabels([str(lo + t) for t in ticks])
        ax.set_xlabel(f"{name} score, rounded")
        ax.set_ylabel("human score, rounded")
        agree = np.trace(mat) / max(mat.sum(), 1)
        ax.set_title(f"{name}  (n = {mat.sum()}, exact agreement {agree:.0%})", fontsize=10)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(
        f"Confusion matrix of rounded scores ({slice_label}); shade = share of the human row", fontsize=11
    )
    fig.tight_layout()
    return _save(fig, path)


def calibration_plot(
    path: str | Path,
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    scale: tuple[int, int],
    slice_label: str,
    colours: dict[str, tuple],
) -> Path:
    """Mean human score in one-point bins of the scorer's score (centred on the scale values), with
    95% normal intervals of the mean; marker area grows with the bin's count. On the diagonal = calibrated."""
    plt = _plt()
    lo, hi = scale
    fig, (ax, axn) = plt.subplots(
        2, 1, figsize=(6.4, 6.6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    ax.plot([lo, hi], [lo, hi], color="0.5", linestyle="--", linewidth=1, label="perfect calibration")
    centres = np.arange(lo, hi + 1)
    n_series = max(len(series), 1)
    for k, (name, (pred, human)) in enumerate(series.items()):
        p = np.asarray(pred, dtype=float)
        h = np.asarray(human, dtype=float)
        b = rounded_on_scale(p, scale)
        xs, ys, err, counts, sizes = [], [], [], [], []
        for c in centres:
            sel = b == c
            n = int(sel.sum())
            counts.append(n)
            if n == 0:
                continue
            xs.append(float(p[sel].mean()))
            ys.append(float(h[sel].mean()))
            err.append(1.96 * float(h[sel].std(ddof=1)) / np.sqrt(n) if n > 1 else 0.0)
            sizes.append(12 + 16 * np.sqrt(n))
        ax.errorbar(xs, ys, yerr=err, color=colours[name], linewidth=1.2, capsize=2, label=name, marker=None)
        ax.scatter(xs, ys, s=sizes, color=colours[name], zorder=3)
        offset = (k - (n_series - 1) / 2) * 0.8 / n_series
        axn.bar(centres + offset, counts, width=0.8 / n_series, color=colours[name], label=name)
    ax.set_xlim(lo - 0.5, hi + 0.5)
    ax.set_ylim(lo - 0.3, hi + 0.3)
    ax.set_ylabel("mean human score in the bin")
    ax.set_title(
        f"Calibration ({slice_label}):\nmean human score in one-point bins of the scorer's score", fontsize=10
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    axn.set_xlabel("scorer's score (x: mean score in the bin)")
    axn.set_ylabel("items in bin")
    axn.set_xticks(centres)
    axn.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def reliability_diagram(
    path: str | Path,
    series: dict[str, list[tuple[float, float, int]]],
    title: str,
    colours: dict[str, tuple] | None = None,
) -> Path:
    """The top-label reliability diagram: per series (raw, calibrated...), the mean share of ratings equal to
    the distribution's argmax (accuracy) against the mean largest probability (confidence), in confidence
    bins (:func:`judge.eval.calibration_metrics.reliability_points`); marker area grows with the bin's items.
    On the diagonal = calibrated."""
    plt = _plt()
    colours = colours or scorer_colours(list(series))
    fig, ax = plt.subplots(figsize=(5.6, 5.2))
    ax.plot([0, 1], [0, 1], color="0.5", linestyle="--", linewidth=1, label="perfect calibration")
    for name, points in series.items():
        if not points:
            continue
        xs, ys, ns = zip(*points, strict=True)
        ax.plot(xs, ys, color=colours[name], linewidth=1.2, label=name)
        ax.scatter(xs, ys, s=[12 + 16 * np.sqrt(n) for n in ns], color=colours[name], zorder=3)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence: the distribution's largest probability (bin mean)")
    ax.set_ylabel("accuracy: share of ratings equal to its argmax")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _save(fig, path)


__all__ = [
    "ScatterPanel",
    "calibration_plot",
    "confusion_plot",
    "criteria_plot",
    "reliability_diagram",
    "scatter_plot",
    "scorer_colours",
]
