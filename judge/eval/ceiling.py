"""The human ceiling: how far annotators agree with each other, on the same items a scorer is judged on.

* **Leave one annotator out (LOAO)**: for each annotator, the correlation of their scores with the
  mean of the *other* annotators' scores, on the items they and at least one other annotator
  scored; the ceiling is the mean over annotators (each annotator's value is kept too). A scorer is
  compared with the mean of *all* annotators, which is less noisy than the mean of the others, so
  a good scorer can exceed this number; it says how well one careful person tracks the consensus.
* **Krippendorff's alpha** (interval and ordinal, over the rubric's scale values) from the
  ``krippendorff`` package, on the annotators x items matrix (missing scores allowed).

Intervals of the LOAO correlations come from the same cluster bootstrap as the scorers'
(:mod:`judge.eval.bootstrap`): the mean over annotators is recomputed on each resample of questions.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from judge.data.aggregate import krippendorff_alpha
from judge.eval.bootstrap import STATS, ClusterBootstrap, interval_summary, replicates
from judge.eval.matching import HumanItem
from judge.eval.stats import correlation_summary


def _mean_defined(values: Sequence[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def leave_one_annotator_out(items: Sequence[HumanItem], plan: ClusterBootstrap | None = None) -> dict:
    """Each annotator against the mean of the others; the mean over annotators, with intervals under ``plan``.

    Returns ``{"pearson": {"value", "ci", "n_valid"}, "spearman": ..., "kendall": ...,
    "n_annotators", "per_annotator": {name: {"n", "pearson", "spearman", "kendall"}}}``; values are
    ``None`` when fewer than two annotators overlap.
    """
    annotators = sorted({a for it in items for a, _ in it.ratings})
    per: dict[str, dict] = {}
    reps: dict[str, list[np.ndarray]] = {s: [] for s in STATS}
    for a in annotators:
        xs, ys, cl = [], [], []
        for it in items:
            r = dict(it.ratings)
            if a in r and len(r) >= 2:
                xs.append(float(r[a]))
                ys.append(float(np.mean([v for b, v in r.items() if b != a])))
                cl.append(it.question_id)
        summary = correlation_summary(xs, ys)
        per[a] = {"n": summary["n"], **{s: summary[s] for s in STATS}}
        if plan is not None and xs:
            rep = replicates(xs, ys, plan.weights(cl))
            for s in STATS:
                if summary[s] is not None:
                    reps[s].append(rep[s])
    out: dict = {"n_annotators": len(annotators)}
    for s in STATS:
        point = _mean_defined([p[s] for p in per.values()])
        if plan is not None and reps[s]:
            stacked = np.vstack(reps[s])
            # A resample where some annotator's correlation is undefined averages the defined ones.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN
                mean_rep = np.nanmean(stacked, axis=0)
            out[s] = interval_summary(point, mean_rep)
        else:
            out[s] = {"value": point, "ci": None, "n_valid": 0}
    out["per_annotator"] = per
    return out


def alpha(items: Sequence[HumanItem], scale: Sequence[int] | None = None) -> dict[str, float | None]:
    """Krippendorff's alpha (interval, ordinal) of the items' annotators; ``None`` when undefined."""
    annotators = sorted({a for it in items for a, _ in it.ratings})
    index = {a: i for i, a in enumerate(annotators)}
    mat = np.full((len(annotators), len(items)), np.nan)
    for j, it in enumerate(items):
        for a, v in it.ratings:
            mat[index[a], j] = v
    out = {}
    for level in ("interval", "ordinal"):
        value = krippendorff_alpha(mat, level, scale) if len(annotators) >= 2 else float("nan")
        out[f"alpha_{level}"] = None if not np.isfinite(value) else float(value)
    return out


def human_ceiling(
    items: Sequence[HumanItem], plan: ClusterBootstrap | None = None, scale: Sequence[int] | None = None
) -> dict:
    """LOAO correlations (with intervals under ``plan``) and Krippendorff's alpha of one slice of human items."""
    n_multi = sum(1 for it in items if len(it.ratings) >= 2)
    return {
        "n_items": len(items),
        "n_items_multi": n_multi,
        **alpha(items, scale),
        "loao": leave_one_annotator_out(items, plan),
    }


__all__ = ["alpha", "human_ceiling", "leave_one_annotator_out"]
