"""Pieces every benchmark module uses: modes, typed record metadata, readers' helpers, score
records, response text, summary rows."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from judge.core.errors import ConfigError, Location, RecordError
from judge.core.io import iter_json_records, pydantic_errors
from judge.core.schema import PredictionRecord, ScoreRecord, content_text

OFFICIAL = "official"
STRICT = "strict"
BOTH = "both"
MODES = (OFFICIAL, STRICT, BOTH)
#: The one mode of a benchmark whose public code has no rule-based scorer (MMIE's multiple choice): the
#: toolkit's own scoring, never called official, and with no official-vs-strict disagreement count.
TOOLKIT = "toolkit"

#: Version of this package's metric code, written into every ScoreRecord's producer.
METRICS_VERSION = "judge.benchmarks 1"
SOURCE_OFFICIAL = "official"
SOURCE_TOOLKIT = "judge toolkit"


def modes_of(mode: str) -> list[str]:
    """``"both"`` -> ``["official", "strict"]``; refuses anything but the three modes."""
    m = str(mode).lower()
    if m not in MODES:
        raise ConfigError(f"unknown scoring mode {mode!r}; use one of {', '.join(MODES)}")
    return [OFFICIAL, STRICT] if m == BOTH else [m]


# ----------------------------------------------------------------------------- record metadata

M = TypeVar("M", bound="RecordMeta")


class RecordMeta(BaseModel):
    """Base of a benchmark's typed view of ``PredictionRecord.meta``: its reader builds one and
    stores :meth:`to_meta`; its metrics read the record back with :meth:`of`. Other keys of
    ``meta`` (a canonical file's own) are ignored; numbers are accepted where text is expected."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)

    @classmethod
    def of(cls: type[M], rec: PredictionRecord) -> M:
        """The record's metadata; raises RecordError (file, line, ``meta.<field>``) when it does not fit."""
        try:
            return cls.model_validate(rec.meta)
        except ValidationError as e:
            src = rec._source or Location()
            errs = pydantic_errors(e, Location(src.file, src.line, rec.id))
            first = errs[0]
            raise RecordError(
                f"{first.message} ({cls.__name__}, the metadata of benchmark {rec.benchmark!r})",
                file=first.file,
                line=first.line,
                field=f"meta.{first.field}" if first.field else "meta",
                record_id=rec.id,
            ) from None

    def to_meta(self) -> dict[str, Any]:
        """The dict a reader stores in ``PredictionRecord.meta`` (fields left at their default omitted)."""
        return self.model_dump(exclude_defaults=True)


# ----------------------------------------------------------------------------- readers' helpers

#: File suffixes read as tables (CSV, parquet) rather than JSON / JSON Lines.
TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def is_missing(value: Any) -> bool:
    """None, or NaN (how pandas-written files spell a missing value)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def build_record(
    obj: dict[str, Any], path: Path, line: int, rid: str
) -> tuple[PredictionRecord | None, list[RecordError]]:
    """A validated PredictionRecord remembering where it came from, or the errors (file, line, field)."""
    loc = Location(str(path), line, rid)
    try:
        rec = PredictionRecord.model_validate(obj)
    except ValidationError as e:
        return None, pydantic_errors(e, loc)
    rec._source = loc
    return rec, []


def table_columns(path: Path) -> list[str]:
    """The column names of a CSV or parquet file."""
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8-sig") as f:
            return next(csv.reader(f), [])
    import pyarrow.parquet as pq

    return list(pq.read_schema(path).names)


def iter_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, row) of a JSON Lines/JSON/CSV/parquet file; CSV lines are where a row starts,
    parquet "lines" are 1-based row numbers; an empty CSV cell is a missing value. A bad row is
    yielded as a RecordError in its place."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                return
            while True:
                start = reader.line_num + 1
                try:
                    cells = next(reader)
                except StopIteration:
                    return
                except csv.Error as e:
                    yield start, RecordError(f"not valid CSV ({e})", file=path, line=start)
                    return
                if not any(c.strip() for c in cells):
                    continue
                if len(cells) != len(header):
                    yield (
                        start,
                        RecordError(
                            f"expected {len(header)} columns, got {len(cells)}", file=path, line=start
                        ),
                    )
                    continue
                yield start, {h: (c if c != "" else None) for h, c in zip(header, cells, strict=True)}
    elif suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        yield from enumerate(pq.read_table(path).to_pylist(), start=1)
    else:
        yield from iter_json_records(path)


# ----------------------------------------------------------------------------- scoring helpers


def response_text(rec: PredictionRecord) -> str:
    """The response as plain text (images, which rule-based metrics cannot read, dropped)."""
    return content_text(rec.response, image_marker="")


def gold_text(rec: PredictionRecord) -> str | None:
    """The ground truth: ``answer``, else the reference's text."""
    if rec.answer is not None:
        return rec.answer
    if rec.reference:
        return content_text(rec.reference, image_marker="")
    return None


def make_score(
    rec: PredictionRecord,
    *,
    benchmark: str,
    metric: str,
    mode: str,
    score: float | None,
    version: str = METRICS_VERSION,
    reason: str | None = None,
    details: dict[str, Any] | None = None,
    task: str | None = None,
    **producer: Any,
) -> ScoreRecord:
    """A ScoreRecord of a rule-based metric; ``score=None`` needs a ``reason`` (status unscorable)."""
    return ScoreRecord(
        id=rec.id,
        benchmark=benchmark,
        task=task or rec.task,
        model=rec.model,
        metric=metric,
        score=None if score is None else float(score),
        status="ok" if score is not None else "unscorable",
        reason=reason if score is None else None,
        producer={"metric": metric, "mode": mode, "version": version, **producer},
        details=details or {},
    )


def record_mode(s: ScoreRecord) -> str:
    return str((s.producer or {}).get("mode") or ("judge" if s.metric == "judge" else OFFICIAL))


def mean_stats(scores: Iterable[ScoreRecord]) -> tuple[float | None, int, int, int]:
    """(mean of the scored, n, n_scored, n_unscorable); the mean is None when nothing was scored."""
    vals, n, bad = [], 0, 0
    for s in scores:
        n += 1
        if s.score is None:
            bad += 1
        else:
            vals.append(s.score)
    return (math.fsum(vals) / len(vals) if vals else None), n, len(vals), bad


def row(
    *,
    benchmark: str,
    model: str,
    mode: str,
    level: str,
    group: str,
    metric: str,
    value: float | None,
    n: int,
    n_scored: int,
    n_unscorable: int,
    source: str,
    **extra: Any,
) -> dict[str, Any]:
    """One summary row (see :func:`judge.benchmarks.summarize`)."""
    return {
        "benchmark": benchmark,
        "model": model,
        "mode": mode,
        "level": level,
        "group": group,
        "metric": metric,
        "value": value,
        "n": n,
        "n_scored": n_scored,
        "n_unscorable": n_unscorable,
        "source": source,
        **extra,
    }


def mean_row(records: list[ScoreRecord], *, scale: float = 100.0, **fields: Any) -> dict[str, Any]:
    """A summary row whose value is the mean score of ``records`` times ``scale``."""
    mean, n, n_scored, bad = mean_stats(records)
    return row(
        value=None if mean is None else mean * scale, n=n, n_scored=n_scored, n_unscorable=bad, **fields
    )


def macro_row(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A row averaging other rows' values (groups weigh alike); counts are summed."""
    vals = [p["value"] for p in parts if p["value"] is not None]
    return row(
        value=math.fsum(vals) / len(vals) if vals else None,
        n=sum(p["n"] for p in parts),
        n_scored=sum(p["n_scored"] for p in parts),
        n_unscorable=sum(p["n_unscorable"] for p in parts),
        **fields,
    )
