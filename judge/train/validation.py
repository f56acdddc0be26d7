"""Validation while training: score the validation split with the scorer judge-score uses.

Each response of the split becomes one :class:`~judge.models.scoring.ScoreRequest`
holding all its criteria (the prompts share their prefix); the expected scores are
compared with the aggregated human scores by :func:`judge.eval.stats.correlation_summary`,
overall, pooled over every criterion (``all``), per family and per (family, criterion).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ..data.rubric import OVERALL, Rubric
from ..eval.stats import correlation_summary
from ..models.scoring import ExpectedScorer, ScoreRequest

METRICS = ("pearson", "spearman", "kendall", "mae", "mse")


@dataclass
class ValidationRow:
    record_id: str
    task: str
    criterion: str
    human: float
    pred: float


class ValidationSet:
    """The validation split as score requests plus the human scores they are compared with."""

    def __init__(self, rows: Sequence[dict], rubric: Rubric):
        by_record: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            by_record[row["record_id"]].append(row)
        self.rubric = rubric
        self.requests: list[ScoreRequest] = []
        self.human: dict[tuple[str, str], float] = {}
        self.task: dict[str, str] = {}
        for rid, exs in by_record.items():
            first = exs[0]
            self.requests.append(ScoreRequest(
                key=rid, criteria=[e["criterion"] for e in exs], prompts=[e["prompt"] for e in exs],
                images=list(first["images"] or []), max_patches=first.get("max_patches"),
            ))
            self.task[rid] = first["task"]
            for e in exs:
                self.human[(rid, e["criterion"])] = float(e["human_score"])

    def __len__(self) -> int:
        return len(self.human)

    def score(self, model, processor, *, share_prefix: bool = True, max_batch_tokens: int = 16384,
              rank: int = 0, world: int = 1) -> list[ValidationRow]:
        """Expected scores of this process's share of the requests (every ``world``-th from ``rank``)."""
        scorer = ExpectedScorer(model, processor, self.rubric.scale.values)
        rows = []
        for batch in scorer.score(self.requests[rank::world], share_prefix=share_prefix,
                                  max_batch_tokens=max_batch_tokens):
            for req, scores in batch:
                for crit, s in zip(req.criteria, scores, strict=True):
                    rows.append(ValidationRow(req.key, self.task[req.key], crit, self.human[(req.key, crit)],
                                              s.expected))
        return rows


def validation_metrics(rows: Sequence[ValidationRow], metrics: Sequence[str] = METRICS) -> dict[str, float | None]:
    """Flat metric dict: ``overall_spearman``, ``all_mae``, ``SA/overall_pearson``, ``SA/text_quality_kendall``, ...

    ``overall`` pools the overall score of every family; ``all`` pools every criterion.
    A correlation that is undefined (constant predictions) is None.
    """
    groups: dict[str, list[ValidationRow]] = defaultdict(list)
    for r in rows:
        groups["all"].append(r)
        groups[f"{r.task}/all"].append(r)
        groups[f"{r.task}/{r.criterion}"].append(r)
        if r.criterion == OVERALL:
            groups[OVERALL].append(r)
    out: dict[str, float | None] = {}
    for name, rs in sorted(groups.items(), key=lambda kv: (kv[0].count("/"), kv[0])):
        summary = correlation_summary([r.pred for r in rs], [r.human for r in rs])
        out[f"{name}_n"] = summary["n"]
        for m in metrics:
            out[f"{name}_{m}"] = summary[m]
    return out


def run_validation(vset: ValidationSet, model, processor, *, share_prefix: bool, max_batch_tokens: int,
                   metrics: Sequence[str] = METRICS) -> tuple[dict[str, float | None], float]:
    """Score the validation set (sharded across processes when distributed); metrics and seconds taken."""
    from accelerate import PartialState
    from accelerate.utils import gather_object

    state = PartialState()
    t0 = time.perf_counter()
    rows = vset.score(model, processor, share_prefix=share_prefix, max_batch_tokens=max_batch_tokens,
                      rank=state.process_index, world=state.num_processes)
    if state.num_processes > 1:
        rows = gather_object(rows)
    return validation_metrics(rows, metrics), time.perf_counter() - t0
