"""Prediction files of any registered format onto :class:`~judge.core.schema.PredictionRecord`.

Formats (:data:`FORMATS`; :func:`detect_format` tells them apart, :func:`load_benchmark_predictions`
reads them):

* ``canonical``: the toolkit's own records (:func:`judge.core.io.load_predictions`).
* ``mmie``: MMIE's JSON (``id, question, answer, model, gt_answer``), through
  :func:`judge.core.io.load_predictions` with ``format="mmie"`` (``answer`` -> response,
  ``gt_answer`` -> reference, task SA/PBL/MSR from the id; image paths resolved, not opened).
* each registered benchmark's own (:class:`~judge.benchmarks.base.Format`): ``milebench``
  (:func:`judge.benchmarks.milebench.read_milebench`), ``mmra``
  (:func:`judge.benchmarks.mmra.read_mmra`), and any a plugin adds.

Bad input becomes a :class:`~judge.core.errors.RecordError` naming file, line and field
(for parquet, ``line`` is the 1-based row number).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import overload

from judge.benchmarks.base import CORE_FORMATS, FORMAT_REGISTRY, ReadContext, check_meta, get_benchmark
from judge.benchmarks.common import TABLE_SUFFIXES, table_columns
from judge.core.errors import ConfigError, JudgeError, Location, RecordError
from judge.core.io import (
    InvalidRecordsError,
    LoadResult,
    RecordFormat,
    is_mmie_native,
    iter_json_records,
    load_predictions,
)
from judge.core.schema import PredictionRecord


class _FormatNames(Sequence[str]):
    """The format names, read from the registry each time: ``canonical``, ``mmie``, then every
    registered benchmark's, in registration order (so a plugin's format is listed once imported)."""

    def _names(self) -> tuple[str, ...]:
        return (*CORE_FORMATS, *FORMAT_REGISTRY)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


#: Every readable prediction format: ``("canonical", "mmie", "milebench", "mmra", ...)``.
FORMATS: Sequence[str] = _FormatNames()


# ----------------------------------------------------------------------------- detection


def detect_format(path: str | Path) -> str:
    """The format of a prediction file, from its first record (a table: from its columns).

    CSV and parquet files are the format whose ``table_columns`` they all have (MMRA's:
    ``Task`` and ``QA_type``). JSON / JSON Lines: the first registered format whose ``detect``
    accepts the first record (MileBench: ``sample_id`` + ``pred_response``/``gt_response``;
    MMRA: ``Task`` + ``QA_type``), else ``mmie`` (``question`` + ``answer`` without
    ``response``), else (an unreadable first record included, so the reader reports it)
    ``canonical``. A format may refuse a file: MileBench's dataset file is not predictions.
    """
    path = Path(path)
    if not path.exists():
        raise JudgeError(f"{path}: file not found")
    if path.suffix.lower() in TABLE_SUFFIXES:
        return _detect_table(path)
    first = None
    try:
        for _, obj in iter_json_records(path):
            if not isinstance(obj, RecordError):
                first = obj
                break
    except RecordError:
        return "canonical"
    if not isinstance(first, dict):
        return "canonical"
    for name, (fmt, _) in FORMAT_REGISTRY.items():
        if fmt.detect is not None and fmt.detect(path, first):
            return name
    if is_mmie_native(first):
        return "mmie"
    return "canonical"


def _detect_table(path: Path) -> str:
    cols = table_columns(path)
    tables = [(name, fmt, bm) for name, (fmt, bm) in FORMAT_REGISTRY.items() if fmt.table_columns]
    for name, fmt, _ in tables:
        if set(fmt.table_columns) <= set(cols):
            return name
    wanted = " or ".join(" and ".join(repr(c) for c in fmt.table_columns) for _, fmt, _ in tables)
    owners = " or ".join(bm.title for _, _, bm in tables) or "no benchmark's"
    raise JudgeError(
        f"{path}: cannot tell the format: a table without {wanted or 'known'} columns "
        f"(has {', '.join(cols) or 'no columns'}); only {owners} rows come as CSV or parquet"
    )


# ----------------------------------------------------------------------------- loading


def load_benchmark_predictions(
    paths: str | Path | Iterable[str | Path],
    format: str = "auto",
    dataset_file: str | Path | None = None,
    skip_invalid: bool = False,
    *,
    root: str | Path | None = None,
) -> LoadResult:
    """Read prediction files of any format (``format="auto"``: per file, :func:`detect_format`).

    ``dataset_file`` (MileBench only): the dataset file ``<ds>.json`` for every pred.json, or a
    folder of them (see :func:`judge.benchmarks.milebench.read_milebench`). ``root``: where
    relative image paths of canonical and MMIE files resolve (default: the file's folder).

    Every bad record of every file is collected, a record whose ``meta`` does not fit its
    benchmark's metadata model included; a (benchmark, model, id) seen twice is an error.
    Raises :class:`~judge.core.io.InvalidRecordsError` listing them all, unless ``skip_invalid``
    (then they are in ``result.errors``, the good records in ``result.records``).
    """
    if format != "auto" and format not in FORMATS:
        raise ConfigError(f"unknown prediction format {format!r}; use auto or one of {', '.join(FORMATS)}")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    result = LoadResult()
    ctx = ReadContext(
        dataset_file=None if dataset_file is None else Path(dataset_file),
        root=None if root is None else Path(root),
    )
    for path in paths:
        path = Path(path)
        result.files.append(str(path))
        fmt = detect_format(path) if format == "auto" else format
        if fmt in CORE_FORMATS:
            # An auto-detected canonical file stays "auto": the core reader then takes MMIE-native records
            # further down the file as MMIE's too.
            io_format: RecordFormat = (
                "mmie" if fmt == "mmie" else "canonical" if format == "canonical" else "auto"
            )
            part = load_predictions(path, root=root, collect=True, format=io_format)
            records, errors = part.records, part.errors
        else:
            records, errors = FORMAT_REGISTRY[fmt][0].read(path, ctx)
        result.records += _meta_checked(records, errors)
        result.errors += errors
    result.records = drop_duplicate_predictions(result.records, result.errors)
    if result.errors and not skip_invalid:
        raise InvalidRecordsError(result.errors, "prediction records")
    return result


def _meta_checked(records: list[PredictionRecord], errors: list[RecordError]) -> list[PredictionRecord]:
    """The records whose ``meta`` fits their benchmark's metadata model; the others become errors."""
    kept = []
    for rec in records:
        err = check_meta(rec)
        if err is None:
            kept.append(rec)
        else:
            errors.append(err)
    return kept


def drop_duplicate_predictions(
    records: list[PredictionRecord], errors: list[RecordError]
) -> list[PredictionRecord]:
    """Keep the first record of each (benchmark, model, id), the key every score is written under; each
    later one becomes an error in ``errors`` naming where the first was seen."""
    seen: dict[tuple[str, str, str], Location | None] = {}
    kept = []
    for rec in records:
        key = (rec.benchmark.lower(), rec.model, rec.id)
        loc = rec._source
        if key in seen:
            first = seen[key]
            where = f"; first seen at {first.file}:{first.line}" if first and first.file else ""
            errors.append(
                RecordError(
                    f"duplicate id {rec.id!r} for model {rec.model!r} in benchmark {rec.benchmark!r}{where}",
                    file=loc.file if loc else None,
                    line=loc.line if loc else None,
                    field="id",
                    record_id=rec.id,
                )
            )
            continue
        seen[key] = loc
        kept.append(rec)
    return kept


def joined_files(records: Iterable[PredictionRecord]) -> list[tuple[str, str, int]]:
    """``(path, label, n records)`` of every file the readers joined records with (MileBench's
    dataset files, labelled ``"milebench dataset file"``), in order of first use."""
    counts: Counter[tuple[str, str]] = Counter()
    for rec in records:
        bm = get_benchmark(rec.benchmark)
        for fmt in bm.formats if bm else ():
            path = fmt.joined_file(rec) if fmt.joined_file else None
            if path:
                counts[(path, fmt.joined_label)] += 1
    return [(path, label, n) for (path, label), n in counts.items()]


__all__ = [
    "FORMATS",
    "detect_format",
    "drop_duplicate_predictions",
    "joined_files",
    "load_benchmark_predictions",
]
