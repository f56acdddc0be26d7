"""Readers of the benchmarks' own prediction files, onto :class:`~judge.data.schema.PredictionRecord`.

Formats (:func:`detect_format` tells them apart; :func:`load_benchmark_predictions` reads them):

* ``canonical``: the toolkit's own records (:func:`judge.data.io.load_predictions`).
* ``mmie``: MMIE's JSON (``id, question, answer, model, gt_answer``), through
  :func:`judge.data.io.load_predictions` with ``format="mmie"`` (``answer`` -> response,
  ``gt_answer`` -> reference, task SA/PBL/MSR from the id; image paths resolved, not opened).
* ``milebench``: a ``pred.json`` (list of ``sample_id, image, question, gt_response,
  gen_model_id, pred_response, gen_kwargs``) joined by ``sample_id`` with its dataset file
  ``<ds>.json`` (``meta_data`` + ``data``). See :func:`read_milebench`.
* ``mmra``: rows (JSON Lines, JSON, CSV or parquet) with ``Task, QA_type, question, image1,
  image2, options, answer`` and the model's response. See :func:`read_mmra`.

Bad input becomes a :class:`~judge.data.errors.RecordError` naming file, line and field
(for parquet, ``line`` is the 1-based row number). Images of MileBench and MMRA files are
kept as written and neither resolved nor checked: the rule-based metrics do not read them.
"""

from __future__ import annotations

import ast
import csv
import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import ConfigError, JudgeError, Location, RecordError
from .io import (
    InvalidRecordsError,
    LoadResult,
    is_mmie_native,
    iter_json_records,
    load_predictions,
    pydantic_errors,
)
from .schema import PredictionRecord

FORMATS = ("canonical", "mmie", "milebench", "mmra")
#: MMRA response column names, in order of preference. The official demo keeps the model's
#: output as ``option`` (not to be confused with ``options``, the choices).
MMRA_RESPONSE_COLUMNS = ("option", "response", "prediction", "pred", "output")
MMRA_QA_TYPES = ("Choice QA", "Chooice QA", "True or false QA")
_MMRA_REQUIRED = ("Task", "QA_type", "question", "answer")
_MILEBENCH_IMAGE = "<ImageHere>"


# ----------------------------------------------------------------------------- detection


def detect_format(path: str | Path) -> str:
    """``"canonical"``, ``"mmie"``, ``"milebench"`` or ``"mmra"``, from the file's first record.

    CSV and parquet files are MMRA rows (they must have ``Task`` and ``QA_type`` columns).
    JSON/JSON Lines: ``sample_id`` + ``pred_response``/``gt_response`` -> milebench;
    ``Task`` + ``QA_type`` -> mmra; ``question`` + ``answer`` without ``response`` -> mmie;
    anything else (including an unreadable first record, so the reader reports it) -> canonical.
    A MileBench dataset file (``meta_data`` + ``data``) is refused: it goes in ``dataset_file``.
    """
    path = Path(path)
    if not path.exists():
        raise JudgeError(f"{path}: file not found")
    suffix = path.suffix.lower()
    if suffix in (".csv", ".parquet", ".pq"):
        cols = _table_columns(path)
        if {"Task", "QA_type"} <= set(cols):
            return "mmra"
        raise JudgeError(f"{path}: cannot tell the format: a table without 'Task' and 'QA_type' columns "
                         f"(has {', '.join(cols) or 'no columns'}); only MMRA rows come as CSV or parquet")
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
    if "meta_data" in first and "data" in first:
        raise JudgeError(f"{path}: this is a MileBench dataset file, not predictions; give the pred.json and "
                         "pass this file as dataset_file")
    if "sample_id" in first and ("pred_response" in first or "gt_response" in first):
        return "milebench"
    if "Task" in first and "QA_type" in first:
        return "mmra"
    if is_mmie_native(first):
        return "mmie"
    return "canonical"


def _table_columns(path: Path) -> list[str]:
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8-sig") as f:
            return next(csv.reader(f), [])
    import pyarrow.parquet as pq

    return list(pq.read_schema(path).names)


# ----------------------------------------------------------------------------- loading


def load_benchmark_predictions(
    paths: str | Path | Iterable[str | Path],
    format: str = "auto",
    dataset_file: str | Path | None = None,
    skip_invalid: bool = False,
    *,
    root: str | Path | None = None,
) -> LoadResult:
    """Read prediction files of any supported format (``format="auto"``: per file, :func:`detect_format`).

    ``dataset_file`` (MileBench only): the dataset file ``<ds>.json`` for every pred.json, or a
    folder holding ``<ds>/<ds>.json`` or ``<ds>.json``; when not given, the dataset file is
    looked for next to each pred.json as ``<ds>.json`` or ``<ds>/<ds>.json``. ``<ds>`` is the
    name of the folder holding the pred.json (the official layout is
    ``outputs/<model>/<ds>/pred.json``). ``root``: where relative image paths of canonical and
    MMIE files resolve (default: the file's folder).

    Every bad record of every file is collected; a (benchmark, model, id) seen twice is an
    error. Raises :class:`~judge.data.io.InvalidRecordsError` listing them all, unless
    ``skip_invalid`` (then they are in ``result.errors``, the good records in ``result.records``).
    """
    if format != "auto" and format not in FORMATS:
        raise ConfigError(f"unknown prediction format {format!r}; use auto or one of {', '.join(FORMATS)}")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    result = LoadResult()
    cache: dict[Path, _DatasetFile | RecordError] = {}
    for path in paths:
        path = Path(path)
        result.files.append(str(path))
        fmt = detect_format(path) if format == "auto" else format
        if fmt in ("canonical", "mmie"):
            io_format = "mmie" if fmt == "mmie" else format if format == "canonical" else "auto"
            part = load_predictions(path, root=root, collect=True, format=io_format)
            records, errors = part.records, part.errors
        elif fmt == "milebench":
            records, errors = read_milebench(path, dataset_file, _cache=cache)
        else:
            records, errors = read_mmra(path)
        result.records += records
        result.errors += errors
    result.records = drop_duplicate_predictions(result.records, result.errors)
    if result.errors and not skip_invalid:
        raise InvalidRecordsError(result.errors, "prediction records")
    return result


def drop_duplicate_predictions(records: list[PredictionRecord], errors: list[RecordError]) -> list[PredictionRecord]:
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
            errors.append(RecordError(
                f"duplicate id {rec.id!r} for model {rec.model!r} in benchmark {rec.benchmark!r}{where}",
                file=loc.file if loc else None, line=loc.line if loc else None, field="id", record_id=rec.id))
            continue
        seen[key] = loc
        kept.append(rec)
    return kept


def _build(obj: dict, path: Path, line: int, rid: str) -> tuple[PredictionRecord | None, list[RecordError]]:
    loc = Location(str(path), line, rid)
    try:
        rec = PredictionRecord.model_validate(obj)
    except ValidationError as e:
        return None, pydantic_errors(e, loc)
    rec._source = loc
    return rec, []


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


# ----------------------------------------------------------------------------- MileBench


class _DatasetFile:
    """A parsed MileBench dataset file: name, question type, items by sample id with their lines."""

    def __init__(self, path: Path, name: str, question_type: str, items: dict[str, tuple[int, int, dict]]):
        self.path, self.name, self.question_type = path, name, question_type
        self.items = items  # sample key -> (index in data, line, item)


def _sample_key(value: Any) -> str:
    # The official code joins on int(sample_id); "7" and 7 are the same sample.
    try:
        return str(int(value))
    except (TypeError, ValueError):
        return str(value)


def _find_dataset_file(pred_path: Path, dataset_file: str | Path | None) -> tuple[Path | None, list[Path]]:
    ds = pred_path.parent.name
    if dataset_file is not None:
        given = Path(dataset_file)
        if given.is_file():
            return given, [given]
        base = given
        tried = [given / ds / f"{ds}.json", given / f"{ds}.json"]
    else:
        base = pred_path.parent
        tried = [base / f"{ds}.json", base / ds / f"{ds}.json"]
    for cand in tried:
        if cand.is_file():
            return cand, tried
    return None, tried


def _read_dataset_file(path: Path) -> _DatasetFile:
    """Parse a dataset file; raises RecordError (file, line, field) for whole-file problems."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise RecordError(f"not UTF-8 text ({e.reason} at byte {e.start})", file=path,
                          line=data.count(b"\n", 0, e.start) + 1) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(f"not valid JSON ({e.msg} at column {e.colno})", file=path, line=e.lineno) from None
    if not isinstance(obj, dict):
        raise RecordError(f"expected an object with 'meta_data' and 'data', got {type(obj).__name__}", file=path,
                          line=1)
    meta = obj.get("meta_data")
    if not isinstance(meta, dict):
        raise RecordError("required field is missing or not an object", file=path, line=1, field="meta_data")
    data = obj.get("data")
    if not isinstance(data, list):
        raise RecordError("required field is missing or not a list", file=path, line=1, field="data")
    qt = meta.get("question_type")
    if not isinstance(qt, str):
        raise RecordError("required field is missing (multi-choice or open-ended)", file=path, line=1,
                          field="meta_data.question_type")
    lines = _array_item_lines(text, "data")
    items: dict[str, tuple[int, int, dict]] = {}
    for i, item in enumerate(data):
        line = lines[i] if i < len(lines) else 1
        if not isinstance(item, dict) or "sample_id" not in item:
            raise RecordError("each data item needs a 'sample_id'", file=path, line=line, field=f"data[{i}].sample_id")
        items.setdefault(_sample_key(item["sample_id"]), (i, line, item))
    meta_name = str(meta.get("dataset") or "")
    # Variants (<ds>-adv.json, <ds>_combined_N.json) keep their own name; a renamed file keeps meta's.
    stem = path.stem
    name = stem if (not meta_name or stem.startswith(meta_name)) else meta_name
    return _DatasetFile(path, name, qt, items)


def _array_item_lines(text: str, key: str) -> list[int]:
    """1-based start line of each item of the top-level object's array ``key`` (``text`` is valid JSON)."""
    dec = json.JSONDecoder()

    def ws(p: int) -> int:
        while p < len(text) and text[p] in " \t\r\n":
            p += 1
        return p

    pos = ws(0)
    if text[pos:pos + 1] != "{":
        return []
    pos = ws(pos + 1)
    while pos < len(text) and text[pos] != "}":
        name, pos = dec.raw_decode(text, pos)
        pos = ws(ws(pos) + 1)  # past ':'
        if name == key and text[pos:pos + 1] == "[":
            lines, line, last = [], 1, 0
            pos = ws(pos + 1)
            while pos < len(text) and text[pos] != "]":
                line += text.count("\n", last, pos)  # counted incrementally: files hold thousands of items
                last = pos
                lines.append(line)
                _, pos = dec.raw_decode(text, pos)
                pos = ws(pos)
                if text[pos:pos + 1] == ",":
                    pos = ws(pos + 1)
            return lines
        _, pos = dec.raw_decode(text, pos)
        pos = ws(pos)
        if text[pos:pos + 1] == ",":
            pos = ws(pos + 1)
    return []


def _milebench_question(pred: dict, context: Any, images: list[str]) -> list[dict]:
    """The prompt as content: pred.json's question with its <ImageHere> marks replaced by its images
    (in order) when the counts agree; else the text followed by the images."""
    text = pred.get("question")
    pics = pred.get("image")
    if not isinstance(text, str):
        text, pics = (context if isinstance(context, str) else ""), images
    pics = [p for p in (pics if isinstance(pics, list) else []) if isinstance(p, str) and p]
    parts = text.split(_MILEBENCH_IMAGE)
    if len(parts) == len(pics) + 1 and pics:
        out: list[dict] = []
        for i, part in enumerate(parts):
            if part:
                out.append({"type": "text", "text": part})
            if i < len(pics):
                out.append({"type": "image", "image": pics[i]})
        return out
    return [{"type": "text", "text": text}] + [{"type": "image", "image": p} for p in pics]


def read_milebench(
    pred_path: str | Path, dataset_file: str | Path | None = None, *, _cache: dict | None = None
) -> tuple[list[PredictionRecord], list[RecordError]]:
    """Records of one MileBench ``pred.json`` joined with its dataset file (found as in
    :func:`load_benchmark_predictions`), and the errors met.

    Each record: ``id`` ``"<dataset>/<sample_id>"``, ``task`` the dataset name (the dataset
    file's stem, or ``meta_data.dataset`` when the file was renamed), ``model`` ``gen_model_id``
    (else the folder above the dataset folder), ``answer``/``reference`` ``gt_response``,
    ``response`` ``pred_response``, ``choices`` ``task_instance.choice_list``, and ``meta``:
    ``dataset, question_type, sample_id, n_images`` (len of ``images_path``, which the official
    evaluator bins image-quantity levels by), ``dataset_file``, and ``response_missing`` when
    ``pred_response`` is null. A sample_id absent from the dataset
    file is an error at its pred.json line.
    """
    pred_path = Path(pred_path)
    cache = _cache if _cache is not None else {}
    try:
        rows = list(iter_json_records(pred_path))
    except RecordError as e:
        return [], [e]
    ds_path, tried = _find_dataset_file(pred_path, dataset_file)
    if ds_path is None:
        return [], [RecordError(
            f"no MileBench dataset file for this pred.json; looked for {', '.join(str(t) for t in tried)}; "
            "pass dataset_file (the <ds>.json, or the folder holding <ds>/<ds>.json)", file=pred_path)]
    key = ds_path.resolve()
    if key not in cache:
        try:
            cache[key] = _read_dataset_file(ds_path)
        except RecordError as e:
            cache[key] = e
    ds = cache[key]
    if isinstance(ds, RecordError):
        return [], [ds]
    records, errors = [], []
    for line, obj in rows:
        if isinstance(obj, RecordError):
            errors.append(obj)
            continue
        rec, errs = _milebench_record(obj, pred_path, line, ds)
        errors += errs
        if rec is not None:
            records.append(rec)
    return records, errors


def _milebench_record(obj: Any, path: Path, line: int, ds: _DatasetFile):
    def err(msg: str, fld: str | None, rid: str | None = None, file: Path = path, at: int = line):
        return None, [RecordError(msg, file=file, line=at, field=fld, record_id=rid)]

    if not isinstance(obj, dict):
        return err(f"expected a JSON object, got {type(obj).__name__}", None)
    if _missing(obj.get("sample_id")):
        return err("required field is missing", "sample_id")
    sid = _sample_key(obj["sample_id"])
    rid = f"{ds.name}/{sid}"
    for fld in ("gt_response", "pred_response"):
        if fld not in obj:
            return err("required field is missing", fld, rid)
    if _missing(obj["gt_response"]):
        return err("the ground truth is null", "gt_response", rid)
    pred = obj["pred_response"]
    if not (pred is None or isinstance(pred, (str, int, float))):
        return err(f"expected text, got {type(pred).__name__}", "pred_response", rid)
    if sid not in ds.items:
        return err(f"sample_id {obj['sample_id']!r} is not in the dataset file {ds.path} "
                   f"({len(ds.items)} samples of {ds.name!r})", "sample_id", rid)
    index, item_line, item = ds.items[sid]
    ti = item.get("task_instance")
    images = ti.get("images_path") if isinstance(ti, dict) else None
    if not isinstance(images, list):
        return err("required field is missing or not a list", f"data[{index}].task_instance.images_path", rid,
                   ds.path, item_line)
    choices = ti.get("choice_list")
    if choices is not None and not isinstance(choices, list):
        return err("expected a list", f"data[{index}].task_instance.choice_list", rid, ds.path, item_line)
    if ds.question_type == "multi-choice" and not choices:
        return err("a multi-choice dataset needs a choice_list", f"data[{index}].task_instance.choice_list", rid,
                   ds.path, item_line)
    model = obj.get("gen_model_id")
    if not isinstance(model, str) or not model.strip():
        model = path.parent.parent.name or "unknown"
    gold = str(obj["gt_response"])
    meta = {
        "dataset": ds.name, "question_type": ds.question_type, "sample_id": obj["sample_id"],
        "n_images": len(images), "dataset_file": str(ds.path),
    }
    if pred is None:
        meta["response_missing"] = True
    rec = {
        "id": rid, "benchmark": "milebench", "task": ds.name, "model": model,
        "question": _milebench_question(obj, ti.get("context"), images),
        "response": "" if pred is None else str(pred), "answer": gold, "reference": gold,
        "choices": [str(c) for c in choices] if choices else None, "meta": meta,
    }
    return _build(rec, path, line, rid)


# ----------------------------------------------------------------------------- MMRA


def _iter_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, row) of a JSON Lines/JSON/CSV/parquet file; CSV lines are where a row starts,
    parquet "lines" are 1-based row numbers; an empty CSV cell is a missing value."""
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
                    yield start, RecordError(f"expected {len(header)} columns, got {len(cells)}", file=path,
                                             line=start)
                    continue
                yield start, {h: (c if c != "" else None) for h, c in zip(header, cells, strict=True)}
    elif suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        yield from enumerate(pq.read_table(path).to_pylist(), start=1)
    else:
        yield from iter_json_records(path)


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
    :data:`MMRA_RESPONSE_COLUMNS` present. A null response marks the row
    ``meta["response_missing"]`` (the official evaluation skips it). ``model``: the row's
    ``model`` column, else the file's stem; ``id``: the ``id`` column, else ``mmra-<row index>``
    (0-based). ``meta``: ``qa_type, row, option_keys, response_column``.
    """
    path = Path(path)
    records, errors = [], []
    try:
        rows = list(_iter_rows(path))
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
    if _missing(value) or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return None
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError) as e:
            raise ValueError(f"not a dict written as a string ({e.__class__.__name__}): {value[:80]!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a dict of letter -> option text, got {type(value).__name__}")
    return value


def _mmra_record(obj: Any, path: Path, line: int, index: int):
    if not isinstance(obj, dict):
        return None, [RecordError(f"expected a JSON object, got {type(obj).__name__}", file=path, line=line)]
    rid = str(obj["id"]) if not _missing(obj.get("id")) else f"mmra-{index}"

    def err(msg: str, fld: str | None):
        return RecordError(msg, file=path, line=line, field=fld, record_id=rid)

    errs = [err("required field is missing", f) for f in _MMRA_REQUIRED if _missing(obj.get(f))]
    qa_type = obj.get("QA_type")
    if not _missing(qa_type) and qa_type not in MMRA_QA_TYPES:
        errs.append(err(f"unknown QA_type {qa_type!r}; the official evaluation knows "
                        f"{', '.join(repr(t) for t in MMRA_QA_TYPES)}", "QA_type"))
    try:
        options = _parse_options(obj.get("options"))
    except ValueError as e:
        options = None
        errs.append(err(str(e), "options"))
    else:
        if options is None and qa_type in ("Choice QA", "Chooice QA"):
            errs.append(err(f"a {qa_type} row needs its options", "options"))
    column = next((c for c in MMRA_RESPONSE_COLUMNS if c in obj), None)
    if column is None:
        errs.append(err(f"no response column; expected one of {', '.join(MMRA_RESPONSE_COLUMNS)}",
                        MMRA_RESPONSE_COLUMNS[0]))
    if errs:
        return None, errs
    response = obj[column]
    model = obj.get("model")
    if _missing(model) or not str(model).strip():
        model = path.stem
    images = [ref for ref in (_image_ref(obj.get("image1")), _image_ref(obj.get("image2"))) if ref]
    meta: dict[str, Any] = {"qa_type": qa_type, "row": index, "response_column": column}
    if options:
        meta["option_keys"] = [str(k) for k in options]
    if _missing(response):
        meta["response_missing"] = True
    rec = {
        "id": rid, "benchmark": "mmra", "task": str(obj["Task"]), "model": str(model),
        "question": [{"type": "text", "text": str(obj["question"])}] + [{"type": "image", "image": p} for p in images],
        "response": "" if _missing(response) else str(response), "answer": str(obj["answer"]),
        "choices": [str(v) for v in options.values()] if options else None, "meta": meta,
    }
    return _build(rec, path, line, rid)


__all__ = [
    "FORMATS", "MMRA_QA_TYPES", "MMRA_RESPONSE_COLUMNS", "detect_format", "load_benchmark_predictions",
    "read_milebench", "read_mmra",
]
