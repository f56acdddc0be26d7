"""Held-out pairwise accuracy while training, beside the correlations of :mod:`judge.train.validation`.

Each side of each validation pair is scored as any response is (the same requests, batching and processes
as :class:`~judge.train.validation.ValidationSet`: a side's criteria share their prefix); the judge's verdict
on a pair is :func:`judge.models.preference.preference` of the two distributions, read as the judge
benchmarks read it (:func:`judge.benchmarks.judging.pair_verdict`: over 0.5 the first response, under 0.5 the
second, exactly 0.5 undecided). Ties as the judge benchmarks' strict mode counts them (MLLM-as-a-Judge's
pair split):

* ``<criterion>_pairs_accuracy``: per criterion, over the (pair, criterion) preferences humans did not call a
  tie; a right verdict earns 1, an undecided one 1/2;
* ``pairs_accuracy``: per pair, the mean of what its non-tie preferences earn (as above), averaged over the
  pairs with at least one (each pair weighs one, whatever its number of criteria);
* ``pairs_accuracy_with_ties``: per pair, the share of its preferences the verdict matches exactly (a tie only
  for an undecided verdict), averaged over every pair;
* ``pairs_n`` (pairs), ``pairs_ties`` (pairs whose every preference is a tie) and ``pairs_comparisons``
  ((pair, criterion) preferences). With ``data.criteria: overall`` a pair has one preference, and each per-pair
  figure is the plain count or share over the pairs.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judge.core.rubric import Rubric
from judge.models.preference import preference
from judge.train.validation import ValidationRow, ValidationSet, run_validation

FIRST, SECOND, UNDECIDED = "first", "second", "undecided"


def pair_verdict(p: float) -> str:
    """The judge benchmarks' verdict rule (:func:`judge.benchmarks.judging.pair_verdict`, which this layer may
    not import; a test holds them equal): over 0.5 the first response, under 0.5 the second, 0.5 undecided."""
    return FIRST if p > 0.5 else SECOND if p < 0.5 else UNDECIDED


#: The metrics a pair validation gives (``eval.best_metric`` may name them).
PAIR_METRICS = ("pairs_accuracy", "pairs_accuracy_with_ties")
_HUMAN = {"a": FIRST, "b": SECOND, "tie": UNDECIDED}


class PairValidationSet:
    """The validation split's pairs as score requests (one per pair side) and the humans' verdicts."""

    def __init__(self, rows: Sequence[dict], rubric: Rubric):
        sides = []
        self.pairs: list[tuple[str, str, str]] = []  #: (pair id, criterion, preferred)
        self.questions: list[str] = []  #: each pair's question (the unit a paired bootstrap resamples)
        for r in rows:
            self.pairs.append((r["pair_id"], r["criterion"], r["preferred"]))
            self.questions.append(r.get("question_id") or r["pair_id"])
            for side in ("a", "b"):
                sides.append(
                    {
                        "record_id": f"{r['pair_id']}::{side}",
                        "task": r["task"],
                        "criterion": r["criterion"],
                        "prompt": r[f"prompt_{side}"],
                        "images": r[f"images_{side}"],
                        "max_patches": r.get("max_patches"),
                        "human_score": 0.0,  # a side has no score of its own: its pair has the verdict
                    }
                )
        self.sides = ValidationSet(sides, rubric)
        self.values = rubric.scale.values

    def __len__(self) -> int:
        """The pairs (one may carry several criteria's preferences)."""
        return len({pair_id for pair_id, _, _ in self.pairs})

    def verdicts(self, rows: Sequence[ValidationRow]) -> list[str]:
        """The judge's verdict on each pair (:data:`FIRST`, :data:`SECOND`, :data:`UNDECIDED`) from its scored
        sides."""
        dist = {(r.record_id, r.criterion): r.dist for r in rows}
        out = []
        for pair_id, crit, _ in self.pairs:
            a, b = dist[(f"{pair_id}::a", crit)], dist[(f"{pair_id}::b", crit)]
            assert a is not None and b is not None, "the scorer keeps every side's distribution"
            out.append(pair_verdict(preference(a, b, self.values).p_first_better))
        return out

    def credits(self, rows: Sequence[ValidationRow]) -> list[float | None]:
        """Per pair, what it earns in ``pairs_accuracy``: 1 right, 1/2 undecided, 0 wrong; None for a human tie."""
        out: list[float | None] = []
        for (_, _, preferred), verdict in zip(self.pairs, self.verdicts(rows), strict=True):
            human = _HUMAN[preferred]
            out.append(
                None
                if human == UNDECIDED
                else 1.0
                if verdict == human
                else 0.5
                if verdict == UNDECIDED
                else 0.0
            )
        return out

    def metrics(self, rows: Sequence[ValidationRow]) -> dict[str, float | None]:
        """The metrics of the module doc from the scored sides."""
        credit: dict[str, list[float]] = defaultdict(list)
        # Per pair first (a pair weighs one whatever its criteria count), then over the pairs.
        per_pair: dict[str, list[float]] = defaultdict(list)
        per_pair_exact: dict[str, list[float]] = defaultdict(list)
        verdicts = self.verdicts(rows)
        for (pair_id, crit, preferred), verdict, c in zip(
            self.pairs, verdicts, self.credits(rows), strict=True
        ):
            per_pair_exact[pair_id].append(float(verdict == _HUMAN[preferred]))
            if c is not None:
                credit[crit].append(c)
                per_pair[pair_id].append(c)
        pair_ids = list(per_pair_exact)
        out: dict[str, float | None] = {
            "pairs_accuracy": _mean([m for p in pair_ids if (m := _mean(per_pair[p])) is not None]),
            "pairs_accuracy_with_ties": _mean([_mean(per_pair_exact[p]) or 0.0 for p in pair_ids]),
            "pairs_n": float(len(pair_ids)),
            "pairs_ties": float(sum(not per_pair[p] for p in pair_ids)),
            "pairs_comparisons": float(len(self.pairs)),
        }
        for crit in sorted(credit):
            out[f"{crit}_pairs_accuracy"] = _mean(credit[crit])
        return out


def check_pair_metric_defined(best_metric: str, rows) -> None:
    """Refuse a pair ``eval.best_metric`` that the validation split cannot define: ``pairs_accuracy`` (or a
    criterion's) is over the pairs humans did not call a tie, so with ties only it is undefined, and Trainer
    would keep a checkpoint by a placeholder. ``rows``: the validation split's pair examples."""
    from judge.core.errors import ConfigError

    if best_metric not in PAIR_METRICS and not best_metric.endswith("_pairs_accuracy"):
        return
    if best_metric == "pairs_accuracy_with_ties":
        return
    crit = None if best_metric == "pairs_accuracy" else best_metric[: -len("_pairs_accuracy")]
    n = len(rows) if rows is not None else 0
    decided = (
        sum(
            p != "tie" and (crit is None or c == crit)
            for p, c in zip(rows["preferred"], rows["criterion"], strict=True)
        )
        if n
        else 0
    )
    if decided == 0:
        which = "pairs" if crit is None else f"pairs on {crit}"
        raise ConfigError(
            f"eval.best_metric {best_metric!r} is undefined on this run's validation split: its {n} pair "
            f"examples hold no {which} that humans did not call a tie (the accuracy is over those); use "
            "eval.best_metric: pairs_accuracy_with_ties (every pair counts), or give the validation split "
            "pairs with a preference"
        )


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@dataclass
class Validation:
    """What a run validates on: the scored responses (correlations), the pairs (accuracy), or both."""

    scores: ValidationSet | None
    pairs: PairValidationSet | None

    def __len__(self) -> int:
        return (len(self.scores) if self.scores else 0) + (len(self.pairs) if self.pairs else 0)


def build_validation(sft_rows, pair_rows, rubric: Rubric) -> Validation | None:
    """The run's validation (None when the split has neither scores nor pairs)."""
    scores = ValidationSet(sft_rows, rubric) if len(sft_rows) else None
    pairs = PairValidationSet(pair_rows, rubric) if pair_rows is not None and len(pair_rows) else None
    return Validation(scores, pairs) if scores or pairs else None


def run_all_validation(v: Validation, model, processor, **kw: Any) -> tuple[dict[str, float | None], float]:
    """:func:`~judge.train.validation.run_validation` of the scores and of the pairs' sides (every process
    takes part in each); the metrics of both and the seconds taken."""
    t0 = time.perf_counter()
    metrics: dict[str, float | None] = {}
    if v.scores is not None:
        metrics.update(run_validation(v.scores, model, processor, **kw)[0])
    if v.pairs is not None:
        pairs = v.pairs
        metrics.update(run_validation(pairs.sides, model, processor, rows_to=pairs.metrics, **kw)[0])
    return metrics, time.perf_counter() - t0


__all__ = [
    "PAIR_METRICS",
    "check_pair_metric_defined",
    "PairValidationSet",
    "Validation",
    "build_validation",
    "run_all_validation",
]
