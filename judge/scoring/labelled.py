"""Human labels in a leaderboard: judge-only, human-only and prediction-powered means side by side.

``judge-score --labels FILE`` gives human scores for some of the scored responses (annotation records,
matched to score records by :class:`judge.core.identity.LabelMatcher`: ``model`` and ``id``, or ``model``
and ``question_id``; a label's value for a criterion is the mean over its
annotators). On each board of :mod:`judge.scoring.leaderboard` a question's human value is built like
the judge's score on it: the ``overall`` label, or on a ``criteria_mean`` board the mean of the labels of
the criteria the judge's score averages (None unless every one is labelled).

Per model, over the questions it has a judge score for (the judge-only mean's population):

* ``human``: the mean of the labelled questions' human values, with Student's 95% interval
  (:func:`judge.eval.ppi.classical_mean`);
* ``ppi``: the prediction-powered mean (PPI++, :func:`judge.eval.ppi.ppi_mean`): the judge scores of the
  unlabelled questions, corrected by the judge's error on the labelled ones, and its 95% interval.

Both need at least ``min_labels`` labelled questions (default :data:`judge.eval.ppi.MIN_LABELS`, 10):
below it ``mean`` and ``ci`` are null and ``reason`` says why. Both lie on the rubric's scale: an interval
is intersected with it and a mean outside it moved to its end, and ``bounded`` lists what was moved
(:func:`judge.eval.ppi.within`; the leaderboard marks such a cell).

A board is ranked by the PPI means only when every ranked model has one (``ranked_by: "ppi"``; else by
the judge, ``ppi_reason`` saying why): ``rank`` is 1 + the number of models with a higher PPI mean,
``rank_ci`` the percentiles of that rank over the board's question resamples, each resample's PPI mean
computed with the model's ``lam`` fixed at its point value. The win rate of A over B is then the PPI mean
of the per-question win points (1 a win, 1/2 a tie, by the judge's scores on the shared questions, by the
human values on the questions where both are labelled), in [0, 1] with its 95% interval (a rate's: with a
pseudo-label at each end, :func:`judge.eval.ppi.ppi_mean`'s ``ends``); the judge-only win rate stays beside it (``judge_win_rate``, ``judge_ci``). With fewer than ``min_labels`` questions
where both are labelled, the PPI win rate is null with the reason.

The labelled responses must be a random sample of the scored ones, and a pair's win rate needs both
models labelled on the same questions: ``judge-data sample --by question`` draws whole questions (every
model's response to each drawn question). PPI's means are unbiased only for a random sample.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judge.core.errors import JudgeError
from judge.core.identity import LabelMatch, LabelMatcher
from judge.eval.ppi import MIN_LABELS, classical_mean, ppi_mean

LEVEL = 0.95
#: A win rate's range.
RATE = (0.0, 1.0)
#: (model, id) -> criterion -> the mean over the label's annotators
LabelValues = dict[tuple[str, str], dict[str, float]]


@dataclass
class Labels:
    """Human labels read by :func:`load_labels`; ``files`` as the summary names them. ``values`` are keyed by
    the label record's ``(model, id)``, ``questions`` gives a label's ``question_id`` (the two label styles of
    :mod:`judge.core.identity`); :meth:`matched_to` re-keys them by the scored responses they label."""

    values: LabelValues
    files: list[str] = field(default_factory=list)
    questions: dict[tuple[str, str], str] = field(default_factory=dict)

    def match(self, judged: set[tuple[str, str]]) -> LabelMatch:
        """Which scored response ``(model, id)`` each label labels (:class:`~judge.core.identity.LabelMatcher`)."""
        return LabelMatcher(judged).match((m, i, self.questions.get((m, i))) for m, i in self.values)

    def matched_to(self, judged: set[tuple[str, str]]) -> Labels:
        """The labels keyed by the scored responses they label (those that label none left out)."""
        found = self.match(judged)
        values = {found.matched[(m, i, self.questions.get((m, i)))]: v for (m, i), v in self.values.items()
                  if (m, i, self.questions.get((m, i))) in found.matched}  # fmt: skip
        return Labels(values, self.files)

    def describe(self, judged: set[tuple[str, str]]) -> dict[str, Any]:
        """The summary's ``labels`` block: how many labelled responses matched a judge record (by model and id,
        or model and question_id), and examples of those that did not."""
        d = self.match(judged).describe()
        return {
            "files": self.files,
            "responses": d["labels"],
            **{k: v for k, v in d.items() if k != "labels"},
        }


def load_labels(paths: Sequence[str | Path], rubric=None) -> Labels:
    """The human labels of annotation files (images are not needed, so not checked); a response labelled
    in two files is an error naming both."""
    from judge.core.identity import load_labels_checked
    from judge.data.aggregate import aggregate_record

    values: LabelValues = {}
    questions: dict[tuple[str, str], str] = {}
    where: dict[tuple[str, str], str] = {}
    for p in paths:
        for rec in load_labels_checked(p, rubric=rubric):
            key = (rec.model, rec.id)
            if key in where:
                raise JudgeError(
                    f"{p}: the response {rec.id!r} of model {rec.model!r} is labelled in {where[key]} too; "
                    "label each response once"
                )
            where[key] = str(p)
            values[key] = {c: a.value for c, a in aggregate_record(rec, "mean").items()}
            if rec.question_id is not None:
                questions[key] = rec.question_id
    return Labels(values, [str(p) for p in paths], questions)


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
    scores: Mapping[Any, float],
    human: Mapping[Any, float | None],
    level: float = LEVEL,
    *,
    scale: tuple[float, float] | None = None,
    min_labels: int = MIN_LABELS,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(human, ppi)`` of one model: over its scored questions (``scores``), with the labelled ones'
    human values; both inside ``scale``."""
    lab = [q for q in scores if human.get(q) is not None]
    unl = [q for q in scores if human.get(q) is None]
    y = [float(human[q]) for q in lab]  # type: ignore[arg-type]
    hum = classical_mean(y, level=level, bounds=scale, min_labels=min_labels)
    ppi = ppi_mean(
        y,
        [scores[q] for q in lab],
        [scores[q] for q in unl],
        level=level,
        bounds=scale,
        min_labels=min_labels,
    )
    h = {"mean": hum.mean, "ci": hum.ci, "n_labelled": hum.n_labelled}
    for key in ("reason", "bounded"):
        if (v := hum.to_dict().get(key)) is not None:
            h[key] = v
    return h, ppi.to_dict()


def ppi_win_rate(
    judge_points: Mapping[Any, float],
    human_points: Mapping[Any, float],
    level: float = LEVEL,
    *,
    min_labels: int = MIN_LABELS,
) -> dict[str, Any]:
    """The PPI mean of the win points over the shared questions, in [0, 1]: ``judge_points`` on every shared
    question, ``human_points`` on those where both models are labelled."""
    lab = [q for q in judge_points if q in human_points]
    unl = [q for q in judge_points if q not in human_points]
    est = ppi_mean(
        [human_points[q] for q in lab],
        [judge_points[q] for q in lab],
        [judge_points[q] for q in unl],
        level=level,
        bounds=RATE,
        min_labels=min_labels,
        ends=True,
    )
    out: dict[str, Any] = {"win_rate": est.mean, "ci": est.ci, "n_labelled": est.n_labelled, "lam": est.lam}
    if est.reason:
        out["reason"] = est.reason
    if est.bounded:
        out["bounded"] = est.bounded
    return out


__all__ = ["LEVEL", "RATE", "Labels", "load_labels", "model_estimates", "ppi_win_rate", "question_labels"]
