"""Human labels in a leaderboard: judge-only, human-only and prediction-powered means side by side.

``judge-score --labels FILE`` gives human scores for some of the scored responses (annotation records,
matched to score records by ``model`` and ``id``; a label's value for a criterion is the mean over its
annotators). On each board of :mod:`judge.scoring.leaderboard` a question's human value is built like
the judge's score on it: the ``overall`` label, or on a ``criteria_mean`` board the mean of the labels of
the criteria the judge's score averages (None unless every one is labelled).

Per model, over the questions it has a judge score for (the judge-only mean's population):

* ``human``: the mean of the labelled questions' human values, with its normal 95% interval
  (:func:`judge.eval.ppi.classical_mean`);
* ``ppi``: the prediction-powered mean (PPI++, :func:`judge.eval.ppi.ppi_mean`): the judge scores of the
  unlabelled questions, corrected by the judge's error on the labelled ones, and its 95% interval.

When any model of a board has a PPI mean, the board is ranked by it (``ranked_by: "ppi"``; a model with
fewer than two labelled questions has none, and no rank): ``rank`` is 1 + the number of models with a
higher PPI mean, ``rank_ci`` the percentiles of that rank over the board's question resamples, each
resample's PPI mean computed with the model's ``lam`` fixed at its point value. The win rate of A over
B is then the PPI mean of the per-question win points (1 a win, 1/2 a tie, by the judge's scores on the
shared questions, by the human values on the questions where both are labelled), with its 95% interval;
the judge-only win rate stays beside it (``judge_win_rate``, ``judge_ci``). With fewer than two questions
where both are labelled, the PPI win rate is null.

The labelled responses must be a random sample of the scored ones (``judge-data sample`` draws one):
PPI's means are unbiased only then.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judge.core.errors import JudgeError
from judge.eval.ppi import classical_mean, ppi_mean

LEVEL = 0.95
#: (model, id) -> criterion -> the mean over the label's annotators
LabelValues = dict[tuple[str, str], dict[str, float]]


@dataclass
class Labels:
    """Human labels read by :func:`load_labels`; ``files`` as the summary names them."""

    values: LabelValues
    files: list[str] = field(default_factory=list)

    def describe(self, judged: set[tuple[str, str]]) -> dict[str, Any]:
        """The summary's ``labels`` block: how many labelled responses matched a judge record (by model and
        id), and examples of those that did not."""
        unmatched = sorted(k for k in self.values if k not in judged)
        return {
            "files": self.files,
            "responses": len(self.values),
            "matched": len(self.values) - len(unmatched),
            "unmatched": len(unmatched),
            "unmatched_examples": [f"{m}/{i}" for m, i in unmatched[:5]],
        }


def load_labels(paths: Sequence[str | Path], rubric=None) -> Labels:
    """The human labels of annotation files (images are not needed, so not checked); a response labelled
    in two files is an error naming both."""
    from judge.core.io import load_annotations
    from judge.data.aggregate import aggregate_record

    values: LabelValues = {}
    where: dict[tuple[str, str], str] = {}
    for p in paths:
        for rec in load_annotations(p, rubric=rubric, check_images=False).records:
            key = (rec.model, rec.id)
            if key in where:
                raise JudgeError(
                    f"{p}: the response {rec.id!r} of model {rec.model!r} is labelled in {where[key]} too; "
                    "label each response once"
                )
            where[key] = str(p)
            values[key] = {c: a.value for c, a in aggregate_record(rec, "mean").items()}
    return Labels(values, [str(p) for p in paths])


def question_labels(
    recs: Sequence[Mapping[str, Any]],
    labels: Labels,
    question_of,
) -> dict[str, dict[Any, float | None]]:
    """Each model's human value per question of a board, built as its judge score is (see the module doc).
    ``recs``: the board's judge records its scores came from; ``question_of(rec)``: the record's question."""
    crits: dict[tuple[str, Any], list[float | None]] = defaultdict(list)
    for r in recs:
        lab = labels.values.get((str(r["model"]), str(r["id"])))
        crit = r.get("criterion") or "overall"
        crits[(r["model"], question_of(r))].append(None if lab is None else lab.get(crit))
    out: dict[str, dict[Any, float | None]] = defaultdict(dict)
    for (model, q), vals in crits.items():
        out[model][q] = None if any(v is None for v in vals) else float(np.mean(vals))  # type: ignore[arg-type]
    return out


def model_estimates(
    scores: Mapping[Any, float], human: Mapping[Any, float | None], level: float = LEVEL
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(human, ppi)`` of one model: over its scored questions (``scores``), with the labelled ones'
    human values."""
    lab = [q for q in scores if human.get(q) is not None]
    unl = [q for q in scores if human.get(q) is None]
    y = [float(human[q]) for q in lab]  # type: ignore[arg-type]
    hum = classical_mean(y, level=level)
    ppi = ppi_mean(y, [scores[q] for q in lab], [scores[q] for q in unl], level=level)
    return (
        {"mean": hum.mean, "ci": hum.ci, "n_labelled": hum.n_labelled},
        {k: v for k, v in ppi.to_dict().items()},
    )


def ppi_win_rate(
    judge_points: Mapping[Any, float], human_points: Mapping[Any, float], level: float = LEVEL
) -> dict[str, Any]:
    """The PPI mean of the win points over the shared questions: ``judge_points`` on every shared question,
    ``human_points`` on those where both models are labelled."""
    lab = [q for q in judge_points if q in human_points]
    unl = [q for q in judge_points if q not in human_points]
    est = ppi_mean(
        [human_points[q] for q in lab],
        [judge_points[q] for q in lab],
        [judge_points[q] for q in unl],
        level=level,
    )
    return {"win_rate": est.mean, "ci": est.ci, "n_labelled": est.n_labelled, "lam": est.lam}


__all__ = ["LEVEL", "Labels", "load_labels", "model_estimates", "ppi_win_rate", "question_labels"]
