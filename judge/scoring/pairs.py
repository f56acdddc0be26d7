"""Pairs input of ``judge-score``: two responses to one question, and the judge's preference between them.

A pairs file (JSON Lines or a JSON list; ``format="pairs"``, or detected from a first record with
``response_a`` and ``response_b``) holds one pair per record::

    {"id": "q1", "task": "SA", "question": ..., "response_a": ..., "response_b": ...,
     "model_a": "mine", "model_b": "theirs", "reference": ..., "benchmark": ..., "meta": {...}}

``question``, ``response_*`` and ``reference`` are content as in a prediction record; ``model_a`` /
``model_b`` default to ``A`` / ``B`` and must differ; ``benchmark`` defaults to the rubric's name.
Each side becomes a prediction record ``(benchmark, model_X, id)`` scored like any other (so the
leaderboard sees the two models answer the same question), with ``meta.pair`` naming the pair and side.

Once both sides are scored, :func:`preference_records` adds one record per pair and criterion:
``metric="preference"``, ``model="<model_a> vs <model_b>"``, ``score`` = P(A better) + P(tie) / 2 from the
two score distributions (:func:`judge.models.preference.preference`), ``details`` holding
``p_a_better, p_tie, p_b_better, score_a, score_b, score_diff``; unscorable (with the reason) when a
side is. A calibrated judge's sides carry the calibrated view (:mod:`judge.models.calibration`): the
preference and ``score_a``/``score_b`` come from the calibrated distributions and their means, as every
other path computes them; a judge with selective evaluation marks each preference ``trusted`` or not by
its pairwise threshold (:mod:`judge.models.selective`). The summary's ``preferences`` rows (:func:`preference_rows`) give per pair of models, task and
criterion the mean preference and the pairs won, tied and lost (preference above, at, below 0.5).

The leaderboard's win rates are not these: they compare the two models' expected ``overall`` scores
question by question (a win when A's is higher, ties half; :mod:`judge.scoring.leaderboard`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from judge.core.errors import RecordError
from judge.core.io import InvalidRecordsError, iter_json_records, parse_records
from judge.core.rubric import OVERALL
from judge.core.schema import PredictionRecord, ScoreRecord
from judge.models.preference import record_preference

PAIRS = "pairs"
METRIC = "preference"
_SIDES = (("a", "response_a", "model_a", "A"), ("b", "response_b", "model_b", "B"))
_PAIR_KEYS = {
    "id",
    "task",
    "question",
    "response_a",
    "response_b",
    "reference",
    "benchmark",
    "model_a",
    "model_b",
    "meta",
}


def looks_like_pairs(path: str | Path) -> bool:
    """True when the file's first record (a JSON object) has ``response_a`` and ``response_b``."""
    path = Path(path)
    if path.suffix.lower() not in (".json", ".jsonl"):
        return False
    try:
        for _, obj in iter_json_records(path):
            if isinstance(obj, dict):
                return "response_a" in obj and "response_b" in obj
            if not isinstance(obj, RecordError):
                return False
    except Exception:  # noqa: BLE001 - an unreadable file is not a pairs file; its own reader reports it
        return False
    return False


def read_pairs(
    path: str | Path, benchmark: str, root: str | Path | None = None
) -> tuple[list[PredictionRecord], list[RecordError]]:
    """The two prediction records of every pair in ``path`` (side A then B, in file order), and the errors
    (file, line, field: a side's content errors name ``response_a`` / ``response_b``)."""
    path = Path(path)
    records: list[PredictionRecord] = []
    errors: list[RecordError] = []
    for line, obj in iter_json_records(path):
        if isinstance(obj, RecordError):
            errors.append(obj)
            continue
        if not isinstance(obj, dict):
            errors.append(
                RecordError(f"expected a JSON object, got {type(obj).__name__}", file=path, line=line)
            )
            continue
        rid = str(obj.get("id")) if obj.get("id") is not None else None
        unknown = sorted(set(obj) - _PAIR_KEYS)
        if unknown:
            errors.append(
                RecordError(
                    f"unknown key(s) {', '.join(unknown)}; a pair has {', '.join(sorted(_PAIR_KEYS))}",
                    file=path,
                    line=line,
                    field=unknown[0],
                    record_id=rid,
                )
            )
            continue
        if obj.get("meta") is not None and not isinstance(obj.get("meta"), dict):
            errors.append(
                RecordError("expected an object", file=path, line=line, field="meta", record_id=rid)
            )
            continue
        models = [str(obj.get(key) or default) for _, _, key, default in _SIDES]
        if models[0] == models[1]:
            errors.append(
                RecordError(
                    f"model_a and model_b are both {models[0]!r}: a pair's sides must be told apart",
                    file=path,
                    line=line,
                    field="model_b",
                    record_id=rid,
                )
            )
            continue
        sides = []
        for (side, resp_key, _, _), model in zip(_SIDES, models, strict=True):
            other = models[1] if side == "a" else models[0]
            sides.append(
                {
                    "id": obj.get("id"),
                    "benchmark": obj.get("benchmark") or benchmark,
                    "task": obj.get("task"),
                    "question": obj.get("question"),
                    "response": obj.get(resp_key),
                    "reference": obj.get("reference"),
                    "model": model,
                    "meta": {**(obj.get("meta") or {}), "pair": {"id": rid, "side": side, "opponent": other}},
                }
            )
        # Each side on its own, so that an error names the side's field; a shared field's error is kept once.
        side_errors: dict[tuple, RecordError] = {}
        recs = []
        for (_, resp_key, _, _), obj_side in zip(_SIDES, sides, strict=True):
            try:
                recs += parse_records(
                    [obj_side], "prediction", root=root or path.parent, source=str(path), positions=[line]
                )
            except InvalidRecordsError as e:
                for err in e.errors:
                    fld = err.field
                    if fld and fld.split(".")[0].split("[")[0] == "response":
                        fld = resp_key + fld[len("response") :]
                    side_errors.setdefault(
                        (fld, err.message),
                        RecordError(err.message, file=path, line=line, field=fld, record_id=rid),
                    )
        if side_errors:
            errors += side_errors.values()
            continue
        records += [r for r in recs if isinstance(r, PredictionRecord)]
    return records, errors


def pair_of(rec: PredictionRecord | dict[str, Any]) -> dict[str, Any] | None:
    """The ``meta.pair`` of a pairs file's record (``{"id", "side", "opponent"}``), else None."""
    meta = rec.meta if isinstance(rec, PredictionRecord) else rec.get("meta") or {}
    pair = meta.get("pair") if isinstance(meta, dict) else None
    return pair if isinstance(pair, dict) and pair.get("side") in ("a", "b") else None


def preference_records(
    rows: list[dict[str, Any]], records: list[PredictionRecord], values: list[int], selective: Any = None
) -> list[ScoreRecord]:
    """One ``preference`` record per pair of ``records`` and criterion scored on both sides (see the module
    doc); ``rows``: the run's judge records (dicts, as ``scores.jsonl`` holds them); ``selective``: the
    judge's :class:`~judge.models.selective.Selective`, for the ``trusted`` mark."""
    scores = {
        (r["benchmark"], r["model"], r["id"], r.get("criterion") or OVERALL): r
        for r in rows
        if r.get("metric") == "judge"
    }
    out = []
    for a in records:
        pair = pair_of(a)
        if pair is None or pair["side"] != "a":
            continue
        b_model = pair["opponent"]
        crits = [
            c for (bench, model, rid, c) in scores if (bench, model, rid) == (a.benchmark, a.model, a.id)
        ]
        for crit in crits:
            sa, sb = (
                scores.get((a.benchmark, a.model, a.id, crit)),
                scores.get((a.benchmark, b_model, a.id, crit)),
            )
            common = dict(
                id=a.id,
                benchmark=a.benchmark,
                task=a.task,
                model=f"{a.model} vs {b_model}",
                metric=METRIC,
                criterion=crit,
                producer={"metric": METRIC, "from": "the two sides' judge score distributions"},
            )
            missing = [(name, s) for name, s in (("A", sa), ("B", sb)) if s is None or s.get("score") is None]
            if missing:
                side, bad = missing[0]
                why = "not scored" if bad is None else bad.get("reason")
                out.append(
                    ScoreRecord(
                        **common,
                        score=None,
                        status="unscorable",
                        reason=f"response {side}: {why}",
                        details={"model_a": a.model, "model_b": b_model},
                    )
                )
                continue
            assert sa is not None and sb is not None
            pref = record_preference(sa, sb, values)
            details = {**pref.to_dict(), "model_a": a.model, "model_b": b_model}
            details.pop("p_first_better")
            trusted = selective.trusted_pair(crit, pref.p_first_better) if selective is not None else None
            out.append(ScoreRecord(**common, score=pref.p_first_better, details=details, trusted=trusted))
    return out


def trust_counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """``n_trusted`` and ``n_escalated`` of records a judge with selective evaluation marked (``trusted``);
    empty when none is marked."""
    marks = [r["trusted"] for r in records if r.get("trusted") is not None]
    if not marks:
        return {}
    return {"n_trusted": sum(1 for m in marks if m), "n_escalated": sum(1 for m in marks if not m)}


def preference_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summary rows of the preference records: per benchmark, pair of models, criterion, and task (plus
    ``group="all"``): the mean preference, and ``wins`` / ``ties`` / ``losses`` of model A."""
    groups: dict[tuple[str, str, str, str], list[dict]] = defaultdict(list)
    for r in records:
        if r.get("metric") != METRIC:
            continue
        crit = r.get("criterion") or OVERALL
        for group in (r["task"], "all"):
            groups[(r["benchmark"], r["model"], crit, group)].append(r)
    rows = []
    for (benchmark, model, crit, group), recs in sorted(
        groups.items(),
        key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != OVERALL, kv[0][2], kv[0][3] == "all", kv[0][3]),
    ):
        vals = [float(r["score"]) for r in recs if r.get("score") is not None]
        rows.append(
            {
                "benchmark": benchmark,
                "model": model,
                "mode": METRIC,
                "level": "overall" if group == "all" else "task",
                "group": group,
                "metric": f"{METRIC}.{crit}",
                "value": math.fsum(vals) / len(vals) if vals else None,
                "n": len(recs),
                "n_scored": len(vals),
                "n_unscorable": len(recs) - len(vals),
                "source": "judge toolkit",
                "wins": sum(v > 0.5 for v in vals),
                "ties": sum(v == 0.5 for v in vals),
                "losses": sum(v < 0.5 for v in vals),
                **trust_counts(recs),
            }
        )
    return rows
