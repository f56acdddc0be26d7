"""MMRA: 11 subtasks of image pairs, scored as the official demo scores them, or strictly.

Official mode follows Wusiwei0410/MMRA ``evaluate/evaluate_demo.py`` (commit 92e8db2):

* ``Choice QA``: letters in parentheses ``(A)``..``(D)``, else standalone capitals ``A``..``D``
  (case-sensitive, word-bounded); ``True or false QA``: the words yes/no, case-insensitive but
  counted as written ("Yes" and "yes" apart). The most frequent wins; among ties the one
  whose first appearance is latest ("A good choice is C" -> C).
* score 1 when the extracted answer equals the gold answer ignoring case; no answer scores 0.
* rows with no response (null) are skipped: an unscorable record, out of the means.
* the bug the official numbers carry: a ``Chooice QA`` row (misspelt) is not extracted and
  keeps the answer extracted for the last row extracted before it (per model, in input
  order; skipped rows do not update it). A ``Chooice QA`` row with nothing before it is
  unscorable here (the official script stops with a NameError).
* reported: the mean accuracy per ``Task``; the official code has no overall average.

Strict mode extracts every choice row, ``Chooice QA`` included, with the toolkit's extractor
(:func:`judge.benchmarks.extract.extract_choice`, case-sensitive so "a" is never a key and the
article "A" is skipped) and yes/no with :func:`judge.benchmarks.extract.extract_yes_no`.

What a record needs: ``task`` (the Task), ``meta.qa_type``, ``choices`` (option texts,
keys in ``meta.option_keys`` or A, B, ...), ``answer`` (gold), ``meta.response_missing``
for rows without a response (:class:`MMRAMeta`). The reader here, :func:`read_mmra`, sets them.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field

from judge.benchmarks.base import Benchmark, Format, MetricInfo, register_benchmark
from judge.benchmarks.common import (
    METRICS_VERSION,
    OFFICIAL,
    SOURCE_OFFICIAL,
    SOURCE_TOOLKIT,
    RecordMeta,
    build_record,
    gold_text,
    is_missing,
    iter_rows,
    make_score,
    mean_row,
    record_mode,
    response_text,
)
from judge.benchmarks.extract import extract_choice, extract_yes_no, option_keys
from judge.core.errors import RecordError
from judge.core.schema import PredictionRecord, ScoreRecord

BENCHMARK = "mmra"
METRIC = "mmra.accuracy"
OFFICIAL_REF = "MMRA evaluate/evaluate_demo.py@92e8db2"
VERSION = f"{METRICS_VERSION} ({OFFICIAL_REF})"

CHOICE_QA = "Choice QA"
CHOICE_QA_MISSPELT = "Chooice QA"
YES_NO_QA = "True or false QA"
QA_TYPES = (CHOICE_QA, CHOICE_QA_MISSPELT, YES_NO_QA)

#: Response column names, in order of preference. The official demo keeps the model's output as
#: ``option`` (not to be confused with ``options``, the choices).
RESPONSE_COLUMNS = ("option", "response", "prediction", "pred", "output")
_REQUIRED = ("Task", "QA_type", "question", "answer")


class MMRAMeta(RecordMeta):
    """What :func:`read_mmra` puts in ``PredictionRecord.meta`` and the metrics read.

    ``qa_type``: the row's ``QA_type`` (a canonical record may spell the key ``QA_type``);
    ``row``: its 0-based index in the file; ``response_column``: the column the response was
    read from; ``option_keys``: the options' keys in order; ``response_missing``: the response
    was null (the official evaluation skips the row).
    """

    qa_type: str | None = Field(default=None, validation_alias=AliasChoices("qa_type", "QA_type"))
    row: int | None = None
    response_column: str | None = None
    option_keys: list[str] | None = None
    response_missing: bool = False


_PAREN_RE = re.compile(r"\(([A-D])\)")
_BARE_RE = re.compile(r"\b([A-D])\b")
_YES_NO_RE = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def _latest_of_most_frequent(matches: list[str]) -> str:
    """Counter.most_common()[...][-1] of the official code: among the most frequent, the one
    first seen last (Counter keeps first-appearance order; the sort is stable)."""
    counts = Counter(matches)
    top = max(counts.values())
    return [m for m, c in counts.items() if c == top][-1]


def extract_option_official(text: str) -> str | None:
    """The official ``extract_option_labels`` (its option-text fallback is never reached: no options are passed)."""
    matches = _PAREN_RE.findall(text) or _BARE_RE.findall(text)
    return _latest_of_most_frequent(matches) if matches else None


def extract_yes_no_official(text: str) -> str | None:
    """The official ``extract_yes_no``: the matched word as written ("Yes" and "yes" count apart)."""
    matches = _YES_NO_RE.findall(text)
    return _latest_of_most_frequent(matches) if matches else None


def _qa_type(rec: PredictionRecord, meta: MMRAMeta) -> str:
    if meta.qa_type:
        return meta.qa_type
    return CHOICE_QA if rec.choices else YES_NO_QA


def _options(rec: PredictionRecord, meta: MMRAMeta) -> dict[str, str]:
    choices = [str(c) for c in rec.choices or []]
    keys = meta.option_keys or option_keys(len(choices))
    return dict(zip((k.upper() for k in keys), choices, strict=False))


def _score(extracted: str | None, gold: str) -> float:
    return float(extracted is not None and gold.lower() == extracted.lower())


def score_records(records: list[PredictionRecord], mode: str) -> list[ScoreRecord | None]:
    """Score MMRA records in one mode, one ScoreRecord per record in input order.

    Official mode runs the carry-over per model in input order, so it depends on row order.
    """
    out: list[ScoreRecord | None] = [None] * len(records)
    by_model: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        by_model.setdefault(r.model, []).append(i)
    for idxs in by_model.values():
        run = _official_run if mode == OFFICIAL else _strict_one
        state: dict = {}
        for i in idxs:
            out[i] = run(records[i], state)
    return out


def _common(rec: PredictionRecord, mode: str) -> dict:
    return dict(benchmark=BENCHMARK, metric=METRIC, mode=mode, task=rec.task)


def _official_run(rec: PredictionRecord, state: dict) -> ScoreRecord:
    meta = MMRAMeta.of(rec)
    qt = _qa_type(rec, meta)
    details: dict[str, Any] = {"qa_type": qt}
    common = _common(rec, OFFICIAL)
    if meta.response_missing:
        return make_score(
            rec,
            score=None,
            reason="no response (the official evaluation skips the row)",
            details=details,
            version=VERSION,
            **common,
        )
    gold = gold_text(rec)
    if gold is None:
        return make_score(
            rec, score=None, reason="no gold answer", details=details, version=VERSION, **common
        )
    text = response_text(rec)
    if qt == YES_NO_QA:
        state.update(extracted=extract_yes_no_official(text), source=rec.id)
    elif qt == CHOICE_QA:
        state.update(extracted=extract_option_official(text), source=rec.id)
    else:
        # The official if/elif has no branch for "Chooice QA": the previous row's answer stays.
        if "source" not in state:
            return make_score(
                rec,
                score=None,
                details=details,
                version=VERSION,
                **common,
                reason=f"{qt!r} row with no earlier extracted row to carry over from "
                "(the official script stops here with a NameError)",
            )
        details.update(
            carried_over_from=state["source"],
            note=f"official bug: {qt!r} rows are not extracted and keep the last extracted answer",
        )
    details.update(extracted=state["extracted"], gold=gold)
    return make_score(rec, score=_score(state["extracted"], gold), details=details, version=VERSION, **common)


def _strict_one(rec: PredictionRecord, state: dict) -> ScoreRecord:
    meta = MMRAMeta.of(rec)
    qt = _qa_type(rec, meta)
    details: dict[str, Any] = {"qa_type": qt}
    common = _common(rec, "strict")
    if meta.response_missing:
        return make_score(
            rec,
            score=None,
            reason="no response (skipped, as the official evaluation does)",
            details=details,
            **common,
        )
    gold = gold_text(rec)
    if gold is None:
        return make_score(rec, score=None, reason="no gold answer", details=details, **common)
    text = response_text(rec)
    if qt == YES_NO_QA:
        ex = extract_yes_no(text)
    else:
        opts = _options(rec, meta) or {k: "" for k in "ABCD"}
        ex = extract_choice(text, opts, case_sensitive=True)
    details.update(extracted=ex.answer, gold=gold, how=ex.how)
    if ex.no_answer:
        details["no_answer"] = True
    return make_score(
        rec, score=_score(ex.answer, gold.strip()), details=details, extractor="strict", **common
    )


def summary_rows(records: list[ScoreRecord]) -> list[dict]:
    """Rows per Task (official in official mode) and overall (the toolkit's: mean over all scored rows)."""
    rows: list[dict] = []
    groups: dict[tuple[str, str], list[ScoreRecord]] = {}
    for s in records:
        if s.metric == METRIC:
            groups.setdefault((s.model, record_mode(s)), []).append(s)
    for (model, mode), recs in groups.items():
        base: dict[str, Any] = dict(benchmark=BENCHMARK, model=model, mode=mode, metric=METRIC)
        by_task: dict[str, list[ScoreRecord]] = {}
        for s in recs:
            by_task.setdefault(s.task, []).append(s)
        for task, tr in by_task.items():
            rows.append(
                mean_row(
                    tr,
                    level="task",
                    group=task,
                    source=SOURCE_OFFICIAL if mode == OFFICIAL else SOURCE_TOOLKIT,
                    **base,
                )
            )
        rows.append(mean_row(recs, level="overall", group="all", source=SOURCE_TOOLKIT, **base))
    return rows


# ----------------------------------------------------------------------------- reading rows


def is_mmra_row(path: Path, first: dict[str, Any]) -> bool:
    """JSON / JSON Lines rows are MMRA's when the first has ``Task`` and ``QA_type``."""
    return "Task" in first and "QA_type" in first


def _image_ref(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, dict) and isinstance(value.get("path"), str) and value["path"].strip():
        return value["path"]  # a datasets Image feature written to parquet: {"bytes", "path"}
    return None


def read_mmra(path: str | Path) -> tuple[list[PredictionRecord], list[RecordError]]:
    """Records of an MMRA rows file, in file order (official MMRA scoring depends on it), and the errors.

    Each row needs ``Task, QA_type`` (``Choice QA``, ``Chooice QA`` or ``True or false QA``),
    ``question, answer``, ``options`` for choice rows (a dict, or one written as a string:
    ``"{'A': 'cat', 'B': 'dog'}"``), and a response column: the first of
    :data:`RESPONSE_COLUMNS` present. A null response marks the row
    ``meta.response_missing`` (the official evaluation skips it). ``model``: the row's
    ``model`` column, else the file's stem; ``id``: the ``id`` column, else ``mmra-<row index>``
    (0-based). ``meta``: :class:`MMRAMeta`.
    """
    path = Path(path)
    records, errors = [], []
    try:
        rows = list(iter_rows(path))
    except RecordError as e:
        return [], [e]
    if not rows:
        return [], [RecordError("the file holds no rows", file=path)]
    for index, (line, obj) in enumerate(rows):
        if isinstance(obj, RecordError):
            errors.append(obj)
            continue
        rec, errs = _mmra_record(obj, path, line, index)
        errors += errs
        if rec is not None:
            records.append(rec)
    return records, errors


def _parse_options(value: Any) -> dict | None:
    """The options dict; None when absent. Raises ValueError when present but not a dict."""
    if is_missing(value) or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return None
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError) as e:
            raise ValueError(
                f"not a dict written as a string ({e.__class__.__name__}): {value[:80]!r}"
            ) from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a dict of letter -> option text, got {type(value).__name__}")
    return value


def _mmra_record(
    obj: Any, path: Path, line: int, index: int
) -> tuple[PredictionRecord | None, list[RecordError]]:
    if not isinstance(obj, dict):
        return None, [RecordError(f"expected a JSON object, got {type(obj).__name__}", file=path, line=line)]
    rid = str(obj["id"]) if not is_missing(obj.get("id")) else f"mmra-{index}"

    def err(msg: str, fld: str | None) -> RecordError:
        return RecordError(msg, file=path, line=line, field=fld, record_id=rid)

    errs = [err("required field is missing", f) for f in _REQUIRED if is_missing(obj.get(f))]
    qa_type = obj.get("QA_type")
    if not is_missing(qa_type) and qa_type not in QA_TYPES:
        errs.append(
            err(
                f"unknown QA_type {qa_type!r}; the official evaluation knows "
                f"{', '.join(repr(t) for t in QA_TYPES)}",
                "QA_type",
            )
        )
    try:
        options = _parse_options(obj.get("options"))
    except ValueError as e:
        options = None
        errs.append(err(str(e), "options"))
    else:
        if options is None and qa_type in ("Choice QA", "Chooice QA"):
            errs.append(err(f"a {qa_type} row needs its options", "options"))
    column = next((c for c in RESPONSE_COLUMNS if c in obj), None)
    if column is None:
        errs.append(
            err(
                f"no response column; expected one of {', '.join(RESPONSE_COLUMNS)}",
                RESPONSE_COLUMNS[0],
            )
        )
    if errs:
        return None, errs
    response = obj[column]
    model = obj.get("model")
    if is_missing(model) or not str(model).strip():
        model = path.stem
    images = [ref for ref in (_image_ref(obj.get("image1")), _image_ref(obj.get("image2"))) if ref]
    meta = MMRAMeta(
        qa_type=qa_type,
        row=index,
        response_column=column,
        option_keys=[str(k) for k in options] if options else None,
        response_missing=is_missing(response),
    )
    rec = {
        "id": rid,
        "benchmark": BENCHMARK,
        "task": str(obj["Task"]),
        "model": str(model),
        "question": [{"type": "text", "text": str(obj["question"])}]
        + [{"type": "image", "image": p} for p in images],
        "response": "" if is_missing(response) else str(response),
        "answer": str(obj["answer"]),
        "choices": [str(v) for v in options.values()] if options else None,
        "meta": meta.to_meta(),
    }
    return build_record(rec, path, line, rid)


# ----------------------------------------------------------------------------- the benchmark


@register_benchmark
class MMRA(Benchmark):
    """MMRA: 11 tasks of image pairs, its rows files, official and strict accuracy (see the module doc)."""

    name = BENCHMARK
    title = "MMRA"
    meta = MMRAMeta
    formats = (
        Format(
            name="mmra",
            detect=is_mmra_row,
            read=lambda path, ctx: read_mmra(path),
            table_columns=("Task", "QA_type"),
        ),
    )
    metrics = (
        MetricInfo(
            name=METRIC,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="accuracy: 1 when the extracted option letter or yes/no equals the gold answer "
            "ignoring case (official: the demo's extraction with its Chooice QA carry-over; strict: the "
            "toolkit's extractor); per Task, and overall (the toolkit's)",
        ),
    )

    def score(self, records: list[PredictionRecord], mode: str) -> list[ScoreRecord | None]:
        return score_records(records, mode)

    def metric_for(self, record: PredictionRecord) -> str | None:
        return METRIC

    def summarize(self, score_records: list[ScoreRecord]) -> list[dict]:
        return summary_rows(score_records)
