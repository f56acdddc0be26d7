"""Pieces every benchmark module uses: modes, score records, response text, summary rows."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..data.errors import ConfigError
from ..data.schema import PredictionRecord, ScoreRecord, content_text

OFFICIAL = "official"
STRICT = "strict"
BOTH = "both"
MODES = (OFFICIAL, STRICT, BOTH)
#: The one mode of a benchmark whose public code has no rule-based scorer (MMIE's multiple choice): the
#: toolkit's own scoring, never called official, and with no official-vs-strict disagreement count.
TOOLKIT = "toolkit"

#: Version of this package's metric code, written into every ScoreRecord's producer.
METRICS_VERSION = "judge.metrics 1"
SOURCE_OFFICIAL = "official"
SOURCE_TOOLKIT = "judge toolkit"


def modes_of(mode: str) -> list[str]:
    """``"both"`` -> ``["official", "strict"]``; refuses anything but the three modes."""
    m = str(mode).lower()
    if m not in MODES:
        raise ConfigError(f"unknown scoring mode {mode!r}; use one of {', '.join(MODES)}")
    return [OFFICIAL, STRICT] if m == BOTH else [m]


def response_text(rec: PredictionRecord) -> str:
    """The response as plain text (images, which rule-based metrics cannot read, dropped)."""
    return content_text(rec.response, image_marker="")


def response_missing(rec: PredictionRecord) -> bool:
    """True when the benchmark file had no response at all (null), as opposed to an empty one."""
    return bool(rec.meta.get("response_missing"))


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
    *, benchmark: str, model: str, mode: str, level: str, group: str, metric: str, value: float | None,
    n: int, n_scored: int, n_unscorable: int, source: str, **extra: Any,
) -> dict[str, Any]:
    """One summary row (see :func:`judge.metrics.summarize`)."""
    return {
        "benchmark": benchmark, "model": model, "mode": mode, "level": level, "group": group,
        "metric": metric, "value": value, "n": n, "n_scored": n_scored, "n_unscorable": n_unscorable,
        "source": source, **extra,
    }


def mean_row(records: list[ScoreRecord], *, scale: float = 100.0, **fields: Any) -> dict[str, Any]:
    """A summary row whose value is the mean score of ``records`` times ``scale``."""
    mean, n, n_scored, bad = mean_stats(records)
    return row(value=None if mean is None else mean * scale, n=n, n_scored=n_scored, n_unscorable=bad, **fields)


def macro_row(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A row averaging other rows' values (groups weigh alike); counts are summed."""
    vals = [p["value"] for p in parts if p["value"] is not None]
    return row(
        value=math.fsum(vals) / len(vals) if vals else None,
        n=sum(p["n"] for p in parts), n_scored=sum(p["n_scored"] for p in parts),
        n_unscorable=sum(p["n_unscorable"] for p in parts), **fields,
    )
