"""MMIE: open-ended items go to the learned judge; multiple-choice items get the toolkit's accuracy.

MMIE's public code has no rule-based scorer, so multiple-choice accuracy (``mmie.mc_accuracy``)
is the toolkit's own: the strict extractor (:func:`judge.metrics.extract.extract_choice`),
one record per item in mode ``"toolkit"`` (never ``"official"``), labelled "judge toolkit" in
summaries, and no official-vs-strict disagreement count. An item is multiple choice when it has
``choices`` (or ``meta["options"]``: a list, or a dict of key -> text); its gold is ``answer``,
else the reference (``gt_answer``) text, as a key ("B", "(B)"), or an option's text.

Open-ended items produce no record here (:func:`needs_judge` is True). The benchmark's
number for them is the mean judge score on the 0..6 scale, / 6 x 100
(:func:`judge_summary`, over ScoreRecords with ``metric="judge"``, ``criterion="overall"``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..data.schema import PredictionRecord, ScoreRecord
from .common import (
    METRICS_VERSION,
    SOURCE_TOOLKIT,
    gold_text,
    make_score,
    mean_row,
    record_mode,
    response_missing,
    response_text,
    row,
)
from .extract import as_options, extract_choice, option_keys

BENCHMARK = "mmie"
METRIC = "mmie.mc_accuracy"
JUDGE_METRIC = "mmie.judge_score"
SCALE_MAX = 6  # MMIE's judge scale is 0..6


def options_of(rec: PredictionRecord) -> dict[str, str]:
    """``{key: text}`` of a multiple-choice item; empty for an open-ended one."""
    if rec.choices:
        keys = rec.meta.get("option_keys") or option_keys(len(rec.choices))
        return dict(zip((str(k).upper() for k in keys), rec.choices, strict=False))
    opts = rec.meta.get("options")
    if isinstance(opts, (dict, list)) and opts:
        return as_options(opts)
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


def score(records: list[PredictionRecord], mode: str) -> list[ScoreRecord | None]:
    """Multiple-choice items scored by the toolkit's extractor (``mode`` is ``"toolkit"``: the registry
    calls this once); None for open-ended items."""
    out: list[ScoreRecord | None] = []
    for rec in records:
        options = options_of(rec)
        if not options:
            out.append(None)
            continue
        common = dict(benchmark=BENCHMARK, metric=METRIC, mode=mode, version=METRICS_VERSION,
                      extractor="strict")
        if response_missing(rec):
            out.append(make_score(rec, score=None, reason="no response", **common))
            continue
        gold = gold_text(rec)
        gold_key = _gold_key(gold, options) if gold is not None else None
        if gold_key is None:
            out.append(make_score(rec, score=None, reason=f"gold answer {gold!r} is not one of the options",
                                  **common))
            continue
        ex = extract_choice(response_text(rec), options)
        details = {"extracted": ex.answer, "gold": gold_key, "how": ex.how}
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
    return {"mean": mean, "percent": None if mean is None else mean / SCALE_MAX * 100,
            "n": len(recs), "n_scored": len(vals), "n_unscorable": len(recs) - len(vals)}


def summarize(records: list[ScoreRecord]) -> list[dict]:
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
            rows.append(row(benchmark=BENCHMARK, model=model, mode="judge", level=level, group=group,
                            metric=JUDGE_METRIC, value=js["percent"], n=js["n"], n_scored=js["n_scored"],
                            n_unscorable=js["n_unscorable"], source=SOURCE_TOOLKIT, mean_0_6=js["mean"]))
    for (model, mode), recs in mc.items():
        base = dict(benchmark=BENCHMARK, model=model, mode=mode, metric=METRIC, source=SOURCE_TOOLKIT)
        by_task = {}
        for s in recs:
            by_task.setdefault(s.task, []).append(s)
        for task, part in by_task.items():
            rows.append(mean_row(part, level="task", group=task, **base))
        rows.append(mean_row(recs, level="overall", group="all", **base))
    return rows
