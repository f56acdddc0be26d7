"""The registry of rule-based benchmark metrics, and the three calls the scoring engine uses.

Benchmarks are looked up by name, case-insensitively (``"milebench"``, ``"mmra"``, ``"mmie"``);
:func:`metric_for` names the metric a record (a benchmark's task) gets. Records of a
benchmark not registered here produce no ScoreRecord and are left to the learned judge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..data.schema import PredictionRecord, ScoreRecord
from . import milebench, mmie, mmra
from .common import SOURCE_TOOLKIT, TOOLKIT, modes_of, record_mode, row


@dataclass(frozen=True)
class BenchmarkMetrics:
    """What a benchmark family provides.

    ``score(records, mode)``: one ScoreRecord (or None: not scored by rule) per record, in
    order, for mode "official" or "strict" (or "toolkit" when ``has_official`` is False: the
    benchmark publishes no rule-based scorer, so its records are scored once, in the toolkit's
    own mode, whatever mode was asked for); ``needs_judge(record)``; ``summarize(score_records)``
    (rows of :func:`summarize`); ``metric_for(record)``: the metric name, or None.
    """

    name: str
    score: Callable[[list[PredictionRecord], str], list[ScoreRecord | None]]
    needs_judge: Callable[[PredictionRecord], bool]
    summarize: Callable[[list[ScoreRecord]], list[dict]]
    metric_for: Callable[[PredictionRecord], str | None]
    tasks: tuple[str, ...] = ()
    has_official: bool = True


REGISTRY: dict[str, BenchmarkMetrics] = {}


def register(bm: BenchmarkMetrics) -> None:
    REGISTRY[bm.name.lower()] = bm


def get_benchmark(name: str) -> BenchmarkMetrics | None:
    """The registered benchmark of that name (any case), or None."""
    return REGISTRY.get(str(name).lower())


def metric_for(record: PredictionRecord) -> str | None:
    """The rule-based metric a record gets (e.g. ``"milebench.rouge_l"``), or None (judge or nothing)."""
    bm = get_benchmark(record.benchmark)
    return bm.metric_for(record) if bm else None


register(BenchmarkMetrics(
    name=milebench.BENCHMARK, score=milebench.score, needs_judge=milebench.needs_judge,
    summarize=milebench.summarize, metric_for=milebench.rule_of, tasks=tuple(milebench.DATASETS),
))
register(BenchmarkMetrics(
    name=mmra.BENCHMARK, score=mmra.score, needs_judge=mmra.needs_judge, summarize=mmra.summarize,
    metric_for=lambda r: mmra.METRIC,
))
register(BenchmarkMetrics(
    name=mmie.BENCHMARK, score=mmie.score, needs_judge=mmie.needs_judge, summarize=mmie.summarize,
    metric_for=lambda r: None if mmie.needs_judge(r) else mmie.METRIC, tasks=("SA", "PBL", "MSR"),
    has_official=False,
))


def score_predictions(records: list[PredictionRecord], mode: str = "official") -> list[ScoreRecord]:
    """Rule-based scores of prediction records (they may mix benchmarks and models).

    ``mode``: ``"official"`` (the benchmark's published scoring, bugs included), ``"strict"``
    (the toolkit's fixed extraction) or ``"both"`` (one record per mode per item, official
    first). A benchmark without a published scorer (MMIE's multiple choice) gets one record per
    item in mode ``"toolkit"`` whatever the mode. Output follows the input order; within a benchmark the records are scored in
    input order, which MMRA's official scoring depends on. Items of unregistered benchmarks
    and MMIE open-ended items produce no record (see :func:`needs_judge`).
    """
    modes = modes_of(mode)
    by_bench: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        if get_benchmark(r.benchmark):
            by_bench.setdefault(r.benchmark.lower(), []).append(i)
    per_item: list[list[ScoreRecord]] = [[] for _ in records]
    for name, idxs in by_bench.items():
        bm = REGISTRY[name]
        batch = [records[i] for i in idxs]
        for m in modes if bm.has_official else [TOOLKIT]:
            for i, s in zip(idxs, bm.score(batch, m), strict=True):
                if s is not None:
                    per_item[i].append(s)
    return [s for item in per_item for s in item]


def needs_judge(record: PredictionRecord) -> bool:
    """True when the learned judge must score this record: MMIE open-ended items, and items of
    benchmarks without a rule-based metric here; False for MileBench, MMRA and MMIE multiple choice."""
    bm = get_benchmark(record.benchmark)
    return True if bm is None else bm.needs_judge(record)


def summarize(score_records: list[ScoreRecord]) -> list[dict]:
    """Summary rows of ScoreRecords (rule-based and, for MMIE, the judge's "overall").

    Each row: ``benchmark, model, mode, level`` ("dataset" | "task" | "category" |
    "image_quantity" | "overall"), ``group, metric, value`` (mean x100 like the official
    tables; None when nothing was scored), ``n, n_scored, n_unscorable, source`` ("official"
    for what the benchmark's own tools compute in official mode, else "judge toolkit").
    Plus, per benchmark and model with both official and strict records, one row
    ``mode="official vs strict", level="overall", group="disagreements"``, ``metric`` =
    ``"<benchmark>.disagreements"``, ``value`` = how many items score differently (a count,
    not x100), ``n`` = items scored in both modes. Records of unregistered benchmarks are ignored.
    """
    rows: list[dict] = []
    by_bench: dict[str, list[ScoreRecord]] = {}
    for s in score_records:
        if get_benchmark(s.benchmark):
            by_bench.setdefault(s.benchmark.lower(), []).append(s)
    for name, recs in by_bench.items():
        rows += REGISTRY[name].summarize(recs)
        rows += _disagreement_rows(name, recs)
    return rows


def _disagreement_rows(benchmark: str, recs: list[ScoreRecord]) -> list[dict]:
    pairs: dict[str, dict[tuple[str, str, str], ScoreRecord]] = {}
    for s in recs:
        mode = record_mode(s)
        if mode in ("official", "strict"):
            pairs.setdefault(mode, {})[(s.model, s.id, s.metric)] = s
    official, strict = pairs.get("official", {}), pairs.get("strict", {})
    counts: dict[str, list[int]] = {}  # model -> [pairs, differing, both scored, either unscorable]
    for key, a in official.items():
        b = strict.get(key)
        if b is None:
            continue
        c = counts.setdefault(key[0], [0, 0, 0, 0])
        c[0] += 1
        scored = a.score is not None and b.score is not None
        c[2] += scored
        c[3] += not scored
        if (a.score is None) != (b.score is None) or (scored and abs(a.score - b.score) > 1e-12):
            c[1] += 1
    return [
        row(benchmark=benchmark, model=model, mode="official vs strict", level="overall", group="disagreements",
            metric=f"{benchmark}.disagreements", value=diff, n=n, n_scored=both, n_unscorable=either,
            source=SOURCE_TOOLKIT)
        for model, (n, diff, both, either) in counts.items()
    ]
