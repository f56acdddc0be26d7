"""What a benchmark is, the registry of them, and the three calls the scoring engine makes.

A benchmark is one module: a subclass of :class:`Benchmark` decorated with
:func:`register_benchmark`, which names the benchmark, the metrics it emits
(:class:`MetricInfo`), the prediction file formats it reads (:class:`Format`), and scores,
summarises and routes its records. ``judge/benchmarks/__init__.py`` imports the built-in
modules; a package outside this one registers its benchmarks through the entry point group
``judge.benchmarks`` (see :func:`load_plugins`). "Adding a benchmark" in docs/benchmarks.md
walks through it.

Benchmarks are looked up by name, case-insensitively (``"milebench"``, ``"MileBench"``).
Records of a benchmark not registered produce no ScoreRecord and are left to the learned judge.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from judge.benchmarks.common import SOURCE_TOOLKIT, TOOLKIT, RecordMeta, modes_of, record_mode, row
from judge.core.errors import ConfigError, RecordError
from judge.core.schema import PredictionRecord, ScoreRecord

#: The entry point group other packages register benchmark modules under (the value names the module).
ENTRY_POINT_GROUP = "judge.benchmarks"
#: Formats read by :mod:`judge.core.io` itself; no benchmark may claim these names.
CORE_FORMATS = ("canonical", "mmie")
_RESERVED_FORMATS = (*CORE_FORMATS, "auto", "annotations")


@dataclass(frozen=True, kw_only=True)
class MetricInfo:
    """What a metric name in ScoreRecords or summary rows means.

    ``scale``: the range of its summary rows' ``value`` (``(0, 100)`` for means x100 as the
    official tables print them; ``(0, math.inf)`` for a count); ``record_scale``: the range of
    ``ScoreRecord.score`` for a metric scored per item, None for one that exists only in summary
    rows. ``official``: the official code and commit this metric reproduces in official mode
    (``"MileBench evaluate.py+score.py@9583e1f"``), None when it is the toolkit's own.
    """

    name: str
    higher_is_better: bool
    scale: tuple[float, float]
    description: str
    record_scale: tuple[float, float] | None = None
    official: str | None = None


#: Reads one prediction file: its records (in file order) and the errors met (file, line, field each).
Reader = Callable[[Path, "ReadContext"], tuple[list[PredictionRecord], list[RecordError]]]


@dataclass(frozen=True, kw_only=True)
class Format:
    """A prediction file format of a benchmark, with how to recognise it and how to read it.

    ``detect(path, first)``: True when the file's first JSON record (a dict) is this format; it
    may raise :class:`~judge.core.errors.JudgeError` to refuse a file outright (MileBench refuses
    its dataset file given as predictions). Formats are tried in registration order, before
    MMIE's and the canonical one, so a test must be specific. ``table_columns``: a CSV or
    parquet file with all these columns is this format (empty: the format has no tables).
    ``joined_file(record)``: a further file the reader joined this record with (MileBench's
    dataset file), which ``judge-score`` lists among its inputs under ``joined_label``.
    """

    name: str
    read: Reader
    detect: Callable[[Path, dict[str, Any]], bool] | None = None
    table_columns: tuple[str, ...] = ()
    joined_file: Callable[[PredictionRecord], str | None] | None = None
    joined_label: str = "joined file"


@dataclass
class ReadContext:
    """What a reader gets besides the path, shared by every file of one load.

    ``dataset_file``: the ``--dataset-file`` option (MileBench's dataset file or folder);
    ``root``: where relative image paths resolve. :meth:`cache` is a dict per format for what
    several files share (a dataset file parsed once).
    """

    dataset_file: Path | None = None
    root: Path | None = None
    _caches: dict[str, dict[Any, Any]] = field(default_factory=dict)

    def cache(self, format_name: str) -> dict[Any, Any]:
        return self._caches.setdefault(format_name, {})


class Benchmark(ABC):
    """A benchmark: subclass, set the class attributes, implement the three methods, decorate
    with :func:`register_benchmark`.

    Class attributes: ``name`` (lower case; records' ``benchmark`` is matched case-insensitively),
    ``title`` (as the benchmark spells itself), ``metrics`` (a :class:`MetricInfo` for every metric
    name its ScoreRecords and summary rows carry), ``formats`` (its own file formats, if any),
    ``tasks``, ``has_official`` (False: no published rule-based scorer, so records are scored
    once in mode ``"toolkit"`` whatever mode was asked for, with no official-vs-strict count),
    ``meta`` (the :class:`~judge.benchmarks.common.RecordMeta` model of what its readers put in
    ``PredictionRecord.meta``; loading checks every record of the benchmark against it).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    metrics: ClassVar[tuple[MetricInfo, ...]]
    formats: ClassVar[tuple[Format, ...]] = ()
    tasks: ClassVar[tuple[str, ...]] = ()
    has_official: ClassVar[bool] = True
    meta: ClassVar[type[RecordMeta]] = RecordMeta

    @abstractmethod
    def score(self, records: list[PredictionRecord], mode: str) -> list[ScoreRecord | None]:
        """One ScoreRecord (or None: not scored by rule) per record, in order; ``mode`` is
        ``"official"`` or ``"strict"`` (``"toolkit"`` when ``has_official`` is False)."""

    @abstractmethod
    def metric_for(self, record: PredictionRecord) -> str | None:
        """The metric name the record gets, or None (the judge's, or nothing)."""

    @abstractmethod
    def summarize(self, score_records: list[ScoreRecord]) -> list[dict[str, Any]]:
        """Summary rows (see :func:`summarize`) of this benchmark's ScoreRecords."""

    def needs_judge(self, record: PredictionRecord) -> bool:
        """True when the learned judge scores this record instead of a rule (default: never)."""
        return False

    def all_metrics(self) -> tuple[MetricInfo, ...]:
        """``metrics``, plus ``<name>.disagreements`` (added by :func:`summarize`) when ``has_official``."""
        if not self.has_official:
            return self.metrics
        return (*self.metrics, disagreement_metric(self.name))


def disagreement_metric(benchmark: str) -> MetricInfo:
    return MetricInfo(
        name=f"{benchmark}.disagreements",
        higher_is_better=False,
        scale=(0, math.inf),
        description="items whose official and strict scores differ (a count, not x100); "
        "n is the items scored in both modes",
    )


#: Registered benchmarks by name, in registration order.
REGISTRY: dict[str, Benchmark] = {}
#: Every benchmark's formats by name, with the benchmark that owns each.
FORMAT_REGISTRY: dict[str, tuple[Format, Benchmark]] = {}

B = TypeVar("B", bound=type[Benchmark])


def register_benchmark(cls: B) -> B:
    """Class decorator: register an instance of ``cls``; refuses a name or format already taken,
    and metric metadata that is incomplete. Returns the class unchanged."""
    bm = cls()
    name = getattr(cls, "name", None)
    where = f"{cls.__module__}.{cls.__qualname__}"
    if not isinstance(name, str) or not name or name != name.lower():
        raise ConfigError(f"{where}: a benchmark needs a lower-case 'name', got {name!r}")
    if name in REGISTRY:
        other = type(REGISTRY[name])
        raise ConfigError(
            f"{where}: benchmark {name!r} is already registered by {other.__module__}.{other.__qualname__}"
        )
    if not getattr(cls, "title", None):
        raise ConfigError(f"{where}: set 'title', the benchmark's name as it spells it")
    _check_metrics(bm, where)
    for fmt in bm.formats:
        if fmt.name in _RESERVED_FORMATS or fmt.name in FORMAT_REGISTRY:
            raise ConfigError(f"{where}: format name {fmt.name!r} is already taken")
        if fmt.detect is None and not fmt.table_columns:
            raise ConfigError(f"{where}: format {fmt.name!r} needs 'detect' or 'table_columns'")
    REGISTRY[name] = bm
    for fmt in bm.formats:
        FORMAT_REGISTRY[fmt.name] = (fmt, bm)
    return cls


def _check_metrics(bm: Benchmark, where: str) -> None:
    infos = getattr(bm, "metrics", ())
    if not infos:
        raise ConfigError(f"{where}: list the metrics it emits in 'metrics' (MetricInfo each)")
    names = [m.name for m in bm.all_metrics()]
    for m in bm.all_metrics():
        if not m.name.startswith(f"{bm.name}."):
            raise ConfigError(f"{where}: metric {m.name!r} must be named '{bm.name}.<metric>'")
        if names.count(m.name) > 1:
            raise ConfigError(f"{where}: metric {m.name!r} is listed twice")
        if not m.description:
            raise ConfigError(f"{where}: metric {m.name!r} needs a description")
        if not m.scale[0] < m.scale[1] or (m.record_scale and not m.record_scale[0] < m.record_scale[1]):
            raise ConfigError(f"{where}: metric {m.name!r}: a scale is (low, high) with low < high")
    if bm.has_official and not any(m.official for m in infos):
        raise ConfigError(
            f"{where}: has_official is set but no metric names the official code it follows "
            "(MetricInfo.official, e.g. 'evaluate.py@<commit>')"
        )


def unregister_benchmark(name: str) -> None:
    """Remove a benchmark and its formats (tests registering a toy benchmark clean up with it)."""
    bm = REGISTRY.pop(name.lower(), None)
    if bm is not None:
        for fmt in bm.formats:
            FORMAT_REGISTRY.pop(fmt.name, None)


def load_plugins() -> None:
    """Import every module named in the ``judge.benchmarks`` entry point group (importing registers)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as e:  # noqa: BLE001 - any failure of a plugin's import is reported as its own
            dist = f" of {ep.dist.name}" if ep.dist is not None else ""
            raise ConfigError(
                f"benchmark plugin {ep.name!r} ({ep.value}{dist}, entry point group {ENTRY_POINT_GROUP!r}) "
                f"failed to import: {type(e).__name__}: {e}"
            ) from e


def get_benchmark(name: str) -> Benchmark | None:
    """The registered benchmark of that name (any case), or None."""
    return REGISTRY.get(str(name).lower())


def metric_info(metric: str) -> MetricInfo | None:
    """The metadata of a metric name (``"milebench.rouge_l"``), or None when no benchmark emits it."""
    bm = get_benchmark(metric.split(".", 1)[0])
    return next((m for m in bm.all_metrics() if m.name == metric), None) if bm else None


def metric_for(record: PredictionRecord) -> str | None:
    """The rule-based metric a record gets (e.g. ``"milebench.rouge_l"``), or None (judge or nothing)."""
    bm = get_benchmark(record.benchmark)
    return bm.metric_for(record) if bm else None


def check_meta(record: PredictionRecord) -> RecordError | None:
    """The first problem of the record's ``meta`` against its benchmark's metadata model, or None."""
    bm = get_benchmark(record.benchmark)
    if bm is None:
        return None
    try:
        bm.meta.of(record)
    except RecordError as e:
        return e
    return None


def score_predictions(records: list[PredictionRecord], mode: str = "official") -> list[ScoreRecord]:
    """Rule-based scores of prediction records (they may mix benchmarks and models).

    ``mode``: ``"official"`` (the benchmark's published scoring, bugs included), ``"strict"``
    (the toolkit's fixed extraction) or ``"both"`` (one record per mode per item, official
    first). A benchmark without a published scorer (MMIE's multiple choice) gets one record per
    item in mode ``"toolkit"`` whatever the mode. Output follows the input order; within a
    benchmark the records are scored in input order, which MMRA's official scoring depends on.
    Items of unregistered benchmarks and MMIE open-ended items produce no record (see
    :func:`needs_judge`).
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


def summarize(score_records: list[ScoreRecord]) -> list[dict[str, Any]]:
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
    rows: list[dict[str, Any]] = []
    by_bench: dict[str, list[ScoreRecord]] = {}
    for s in score_records:
        if get_benchmark(s.benchmark):
            by_bench.setdefault(s.benchmark.lower(), []).append(s)
    for name, recs in by_bench.items():
        rows += REGISTRY[name].summarize(recs)
        rows += _disagreement_rows(name, recs)
    return rows


def _disagreement_rows(benchmark: str, recs: list[ScoreRecord]) -> list[dict[str, Any]]:
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
        if (a.score is None) != (b.score is None) or (
            a.score is not None and b.score is not None and abs(a.score - b.score) > 1e-12
        ):
            c[1] += 1
    return [
        row(
            benchmark=benchmark,
            model=model,
            mode="official vs strict",
            level="overall",
            group="disagreements",
            metric=disagreement_metric(benchmark).name,
            value=diff,
            n=n,
            n_scored=both,
            n_unscorable=either,
            source=SOURCE_TOOLKIT,
        )
        for model, (n, diff, both, either) in counts.items()
    ]
