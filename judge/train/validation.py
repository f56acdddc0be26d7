"""Validation while training: score the validation split with the scorer judge-score uses.

Each response of the split becomes one :class:`~judge.models.readout.ScoreRequest`
holding all its criteria (the prompts share their prefix); the expected scores are
compared with the aggregated human scores by :func:`judge.eval.stats.correlation_summary`,
overall, pooled over every criterion (``all``), per family and per (family, criterion).

Several processes. The requests are shared out across the processes, yet every process runs
the same number of forward calls, with the same structure: under FSDP or DeepSpeed ZeRO-3
each module's forward gathers its parameters from every process, so a process with one batch
more (or one that skips the vision tower while the others run it) would wait forever. The
batches are planned once, for all requests (:func:`judge.models.readout.plan_batches`, the
batches a single process would run, so the scores are the same), then dealt out by
:func:`schedule_batches`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from judge.core.rubric import OVERALL, Rubric
from judge.eval.stats import correlation_summary
from judge.models import BATCH_TOKENS
from judge.models.readout import ExpectedScorer, ScoreRequest, plan_batches

METRICS = ("pearson", "spearman", "kendall", "mae", "mse")


@dataclass
class ValidationRow:
    record_id: str
    task: str
    criterion: str
    human: float
    pred: float
    #: the read-out's distribution over the scale (a pair's preference is read from both sides')
    dist: list[float] | None = None


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
            self.requests.append(
                ScoreRequest(
                    key=rid,
                    criteria=[e["criterion"] for e in exs],
                    prompts=[e["prompt"] for e in exs],
                    images=list(first["images"] or []),
                    max_patches=first.get("max_patches"),
                )
            )
            self.task[rid] = first["task"]
            for e in exs:
                self.human[(rid, e["criterion"])] = float(e["human_score"])

    def __len__(self) -> int:
        return len(self.human)

    def score(
        self,
        model,
        processor,
        *,
        share_prefix: bool = True,
        batch_tokens: int = BATCH_TOKENS,
        rank: int = 0,
        world: int = 1,
        grad_mode: str = "inference",
    ) -> list[ValidationRow]:
        """Expected scores of this process's share of the requests, in :meth:`ordered` order.

        With ``world > 1`` every process of the (initialised) process group must call it: the
        processes exchange the shapes of their requests, plan the batches for all of them, and each
        runs the same number of forward calls (:func:`schedule_batches`).
        """
        scorer = ExpectedScorer(model, processor, self.rubric.scale.values)
        # Each process encodes (tokens, image tiles) its own share; the shapes plan the batches.
        encoded = {i: scorer.encode(self.requests[i]) for i in range(rank, len(self.requests), world)}
        shapes = {i: e.shape for i, e in encoded.items()}
        if world > 1:
            from accelerate.utils import gather_object

            shapes = {i: sh for part in gather_object([shapes]) for i, sh in part.items()}
        order = [shapes[i] for i in range(len(self.requests))]
        batches = plan_batches(order, share_prefix=share_prefix, batch_tokens=batch_tokens)
        steps = schedule_batches(batches, [sh.has_pixels for sh in order], world)[rank]

        def batch_of(idx: list[int]):
            for i in idx:
                if i not in encoded:  # planned with another process's share
                    encoded[i] = scorer.encode(self.requests[i])
            return [encoded[i] for i in idx]

        rows = []
        results = scorer.score_batches(
            (batch_of(idx) for idx, _ in steps), share_prefix=share_prefix, grad_mode=grad_mode
        )
        for (_, real), batch in zip(steps, results, strict=True):
            if not real:
                continue  # a repeated batch that only keeps this process in step with the others
            for req, scores in batch:
                for crit, s in zip(req.criteria, scores, strict=True):
                    rows.append(
                        ValidationRow(
                            req.key,
                            self.task[req.key],
                            crit,
                            self.human[(req.key, crit)],
                            s.expected,
                            s.distribution,
                        )
                    )
        return self.ordered(rows)

    def ordered(self, rows: Sequence[ValidationRow]) -> list[ValidationRow]:
        """``rows`` in the split's order (requests, then criteria), whichever process scored them."""
        position = {(r.key, c): (i, j) for i, r in enumerate(self.requests) for j, c in enumerate(r.criteria)}
        return sorted(rows, key=lambda r: position[(r.record_id, r.criterion)])


def schedule_batches(
    batches: Sequence[list[int]], has_pixels: Sequence[bool], world: int
) -> list[list[tuple[list[int], bool]]]:
    """Deal ``batches`` (request indices) out to ``world`` processes: per process, ``(batch, real)`` steps.

    Every process gets the same number of steps, and at each step either every process's batch
    runs the vision tower (one of its requests has images) or none does, so all processes call
    the same modules in the same order. Batches go round-robin, those with images first; a process
    left without one at a step repeats the smallest batch of that kind (``real`` False: its
    scores are dropped). Each real batch goes to exactly one process.
    """
    if world < 1:
        raise ValueError(f"world {world} must be at least 1")
    plan: list[list[tuple[list[int], bool]]] = [[] for _ in range(world)]
    for with_pixels in (True, False):
        group = [b for b in batches if any(has_pixels[i] for i in b) == with_pixels]
        if not group:
            continue
        filler = min(group, key=len)
        for start in range(0, len(group), world):
            for rank in range(world):
                k = start + rank
                plan[rank].append((group[k], True) if k < len(group) else (filler, False))
    return plan


def validation_metrics(
    rows: Sequence[ValidationRow], metrics: Sequence[str] = METRICS
) -> dict[str, float | None]:
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


def run_validation(
    vset: ValidationSet,
    model,
    processor,
    *,
    share_prefix: bool,
    batch_tokens: int,
    metrics: Sequence[str] = METRICS,
    grad_mode: str = "inference",
    rows_to: Callable[[list[ValidationRow]], dict[str, float | None]] | None = None,
) -> tuple[dict[str, float | None], float]:
    """Score the validation set (shared out across processes when distributed); metrics and seconds taken.

    Every process must call it; each gets the metrics of the whole split. ``rows_to``: the metrics of the
    scored rows (default :func:`validation_metrics` of ``metrics``; the pairs' accuracy reads them otherwise).
    """
    from accelerate import PartialState
    from accelerate.utils import gather_object

    state = PartialState()
    t0 = time.perf_counter()
    rows = vset.score(
        model,
        processor,
        share_prefix=share_prefix,
        batch_tokens=batch_tokens,
        rank=state.process_index,
        world=state.num_processes,
        grad_mode=grad_mode,
    )
    if state.num_processes > 1:
        rows = vset.ordered(gather_object(rows))
    out = rows_to(list(rows)) if rows_to is not None else validation_metrics(rows, metrics)
    return out, time.perf_counter() - t0
