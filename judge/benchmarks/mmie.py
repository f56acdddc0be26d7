"""MMIE: open-ended items go to the learned judge; multiple-choice items get the toolkit's accuracy.

MMIE's public code has no rule-based scorer, so multiple-choice accuracy (``mmie.mc_accuracy``)
is the toolkit's own: the strict extractor (:func:`judge.benchmarks.extract.extract_choice`),
one record per item in mode ``"toolkit"`` (never ``"official"``), labelled "judge toolkit" in
summaries, and no official-vs-strict disagreement count. An item is multiple choice when it has
``choices`` (or ``meta["options"]``: a list, or a dict of key -> text); its gold is ``answer``,
else the reference (``gt_answer``) text, as a key ("B", "(B)"), or an option's text.

Open-ended items produce no record here (:func:`needs_judge` is True). The benchmark's
number for them is the mean judge score on the 0..6 scale, / 6 x 100
(:func:`judge_summary`, over ScoreRecords with ``metric="judge"``, ``criterion="overall"``).

MMIE's files are read by :func:`judge.core.io.load_predictions` (``format="mmie"``), which keeps
an item's own fields (``options`` among them) in ``meta``; :class:`MMIEMeta` is what is read here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pydantic import field_validator

from judge.benchmarks.base import Benchmark, MetricInfo, register_benchmark
from judge.benchmarks.common import (
    METRICS_VERSION,
    SOURCE_TOOLKIT,
    RecordMeta,
    gold_text,
    make_score,
    mean_row,
    record_mode,
    response_text,
    row,
)
from judge.benchmarks.extract import as_options, extract_choice, option_keys
from judge.core.schema import PredictionRecord, ScoreRecord

BENCHMARK = "mmie"
METRIC = "mmie.mc_accuracy"
JUDGE_METRIC = "mmie.judge_score"
SCALE_MAX = 6  # MMIE's judge scale is 0..6


class MMIEMeta(RecordMeta):
    """What the multiple-choice metric reads from ``PredictionRecord.meta``.

    ``options``: the item's options when ``choices`` is not set (a list, or a dict of key ->
    text; anything else an MMIE file calls ``options`` is not taken for options);
    ``option_keys``: the keys of ``choices``, in order (default A, B, ...);
    ``response_missing``: the item has no response at all.
    """

    options: dict[str, Any] | list[Any] | None = None
    option_keys: list[str] | None = None
    response_missing: bool = False

    @field_validator("options", mode="before")
    @classmethod
    def _only_lists_and_dicts(cls, value: Any) -> Any:
        return value if isinstance(value, (dict, list)) else None


def options_of(rec: PredictionRecord, meta: MMIEMeta | None = None) -> dict[str, str]:
    """``{key: text}`` of a multiple-choice item; empty for an open-ended one."""
    meta = meta or MMIEMeta.of(rec)
    if rec.choices:
        keys = meta.option_keys or option_keys(len(rec.choices))
        return dict(zip((k.upper() for k in keys), rec.choices, strict=False))
    if meta.options:
        return as_options(meta.options)
    return {}


def needs_judge(rec: PredictionRecord) -> bool:
    """True for an open-ended MMIE item (scored by the learned judge), False for multiple choice."""
    return not options_of(rec)


def _gold_key(gold: str, options: dict[str, str]) -> str | None:
    g = gold.strip()
    if g.upper() in options:
        return g.upper()
    for k, v in options.items():
        if v.strip() == g:
            return k
    return extract_choice(g, options).answer


def score_records(records: list[PredictionRecord], mode: str) -> list[ScoreRecord | None]:
    """Multiple-choice items scored by the toolkit's extractor (``mode`` is ``"toolkit"``: the registry
    calls this once); None for open-ended items."""
    out: list[ScoreRecord | None] = []
    for rec in records:
        meta = MMIEMeta.of(rec)
        options = options_of(rec, meta)
        if not options:
            out.append(None)
            continue
        common: dict[str, Any] = dict(
            benchmark=BENCHMARK, metric=METRIC, mode=mode, version=METRICS_VERSION, extractor="strict"
        )
        if meta.response_missing:
            out.append(make_score(rec, score=None, reason="no response", **common))
            continue
        gold = gold_text(rec)
        gold_key = _gold_key(gold, options) if gold is not None else None
        if gold_key is None:
            out.append(
                make_score(
                    rec, score=None, reason=f"gold answer {gold!r} is not one of the options", **common
                )
            )
            continue
        ex = extract_choice(response_text(rec), options)
        details: dict[str, Any] = {"extracted": ex.answer, "gold": gold_key, "how": ex.how}
        if ex.no_answer:
            details["no_answer"] = True
        out.append(make_score(rec, score=float(ex.answer == gold_key), details=details, **common))
    return out


def judge_summary(score_records: Iterable[ScoreRecord]) -> dict:
    """Mean overall judge score on 0..6 and the benchmark percentage (mean / 6 x 100).

    Uses ScoreRecords with ``metric == "judge"`` and ``criterion == "overall"``; unscorable
    ones are counted, not averaged. Returns ``{"mean": .., "percent": .., "n", "n_scored",
    "n_unscorable"}`` (mean and percent None when nothing was scored).
    """
    recs = [s for s in score_records if s.metric == "judge" and s.criterion == "overall"]
    vals = [s.score for s in recs if s.score is not None]
    mean = math.fsum(vals) / len(vals) if vals else None
    return {
        "mean": mean,
        "percent": None if mean is None else mean / SCALE_MAX * 100,
        "n": len(recs),
        "n_scored": len(vals),
        "n_unscorable": len(recs) - len(vals),
    }


def summary_rows(records: list[ScoreRecord]) -> list[dict]:
    """Judge rows (per task SA/PBL/MSR and overall; value = mean/6 x 100, ``mean_0_6`` beside it)
    and multiple-choice accuracy rows (per task and overall); all the toolkit's."""
    rows: list[dict] = []
    judge: dict[str, list[ScoreRecord]] = {}
    mc: dict[tuple[str, str], list[ScoreRecord]] = {}
    for s in records:
        if s.metric == "judge":
            if s.criterion == "overall":
                judge.setdefault(s.model, []).append(s)
        elif s.metric == METRIC:
            mc.setdefault((s.model, record_mode(s)), []).append(s)
    for model, recs in judge.items():
        by_task: dict[str, list[ScoreRecord]] = {}
        for s in recs:
            by_task.setdefault(s.task, []).append(s)
        for level, group, part in [*(("task", t, p) for t, p in by_task.items()), ("overall", "all", recs)]:
            js = judge_summary(part)
            rows.append(
                row(
                    benchmark=BENCHMARK,
                    model=model,
                    mode="judge",
                    level=level,
                    group=group,
                    metric=JUDGE_METRIC,
                    value=js["percent"],
                    n=js["n"],
                    n_scored=js["n_scored"],
                    n_unscorable=js["n_unscorable"],
                    source=SOURCE_TOOLKIT,
                    mean_0_6=js["mean"],
                )
            )
    for (model, mode), recs in mc.items():
        base: dict[str, Any] = dict(
            benchmark=BENCHMARK, model=model, mode=mode, metric=METRIC, source=SOURCE_TOOLKIT
        )
        by_task = {}
        for s in recs:
            by_task.setdefault(s.task, []).append(s)
        for task, part in by_task.items():
            rows.append(mean_row(part, level="task", group=task, **base))
        rows.append(mean_row(recs, level="overall", group="all", **base))
    return rows


@register_benchmark
class MMIE(Benchmark):
    """MMIE: open-ended items to the learned judge, multiple choice by the toolkit's accuracy."""

    name = BENCHMARK
    title = "MMIE"
    tasks = ("SA", "PBL", "MSR")
    has_official = False
    meta = MMIEMeta
    metrics = (
        MetricInfo(
            name=METRIC,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            description="multiple-choice accuracy by the toolkit's strict extractor (MMIE publishes no "
            "rule-based scorer); per task and overall",
        ),
        MetricInfo(
            name=JUDGE_METRIC,
            higher_is_better=True,
            scale=(0, 100),
            description="the learned judge's mean overall score on MMIE's 0..6 scale, / 6 x 100 "
            "(mean_0_6 beside it); per task and overall",
        ),
    )

    def score(self, records: list[PredictionRecord], mode: str) -> list[ScoreRecord | None]:
        return score_records(records, mode)

    def needs_judge(self, record: PredictionRecord) -> bool:
        return needs_judge(record)

    def metric_for(self, record: PredictionRecord) -> str | None:
        return None if needs_judge(record) else METRIC

    def summarize(self, score_records: list[ScoreRecord]) -> list[dict]:
        return summary_rows(score_records)
