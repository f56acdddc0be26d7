"""Reading MileBench's ``pred.json`` files, each joined with its dataset file (see :func:`read_milebench`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from judge.benchmarks.common import build_record, is_missing
from judge.benchmarks.milebench_tasks import BENCHMARK, MileBenchMeta
from judge.core.errors import JudgeError, RecordError
from judge.core.io import iter_json_records
from judge.core.schema import PredictionRecord

_IMAGE_MARK = "<ImageHere>"


def is_pred_json(path: Path, first: dict[str, Any]) -> bool:
    """A pred.json's first record has ``sample_id`` and ``pred_response`` or ``gt_response``; a dataset
    file (``meta_data`` + ``data``) given as predictions is refused."""
    if "meta_data" in first and "data" in first:
        raise JudgeError(
            f"{path}: this is a MileBench dataset file, not predictions; give the pred.json and "
            "pass this file as dataset_file"
        )
    return "sample_id" in first and ("pred_response" in first or "gt_response" in first)


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
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise RecordError(
            f"not UTF-8 text ({e.reason} at byte {e.start})",
            file=path,
            line=raw.count(b"\n", 0, e.start) + 1,
        ) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(f"not valid JSON ({e.msg} at column {e.colno})", file=path, line=e.lineno) from None
    if not isinstance(obj, dict):
        raise RecordError(
            f"expected an object with 'meta_data' and 'data', got {type(obj).__name__}", file=path, line=1
        )
    meta = obj.get("meta_data")
    if not isinstance(meta, dict):
        raise RecordError("required field is missing or not an object", file=path, line=1, field="meta_data")
    data = obj.get("data")
    if not isinstance(data, list):
        raise RecordError("required field is missing or not a list", file=path, line=1, field="data")
    qt = meta.get("question_type")
    if not isinstance(qt, str):
        raise RecordError(
            "required field is missing (multi-choice or open-ended)",
            file=path,
            line=1,
            field="meta_data.question_type",
        )
    lines = _array_item_lines(text, "data")
    items: dict[str, tuple[int, int, dict]] = {}
    for i, item in enumerate(data):
        line = lines[i] if i < len(lines) else 1
        if not isinstance(item, dict) or "sample_id" not in item:
            raise RecordError(
                "each data item needs a 'sample_id'", file=path, line=line, field=f"data[{i}].sample_id"
            )
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
    if text[pos : pos + 1] != "{":
        return []
    pos = ws(pos + 1)
    while pos < len(text) and text[pos] != "}":
        name, pos = dec.raw_decode(text, pos)
        pos = ws(ws(pos) + 1)  # past ':'
        if name == key and text[pos : pos + 1] == "[":
            lines, line, last = [], 1, 0
            pos = ws(pos + 1)
            while pos < len(text) and text[pos] != "]":
                line += text.count("\n", last, pos)  # counted incrementally: files hold thousands of items
                last = pos
                lines.append(line)
                _, pos = dec.raw_decode(text, pos)
                pos = ws(pos)
                if text[pos : pos + 1] == ",":
                    pos = ws(pos + 1)
            return lines
        _, pos = dec.raw_decode(text, pos)
        pos = ws(pos)
        if text[pos : pos + 1] == ",":
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
    parts = text.split(_IMAGE_MARK)
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
    pred_path: str | Path, dataset_file: str | Path | None = None, *, cache: dict | None = None
) -> tuple[list[PredictionRecord], list[RecordError]]:
    """Records of one MileBench ``pred.json`` joined with its dataset file, and the errors met.

    ``dataset_file``: the dataset file ``<ds>.json``, or a folder holding ``<ds>/<ds>.json`` or
    ``<ds>.json``; when not given, the dataset file is looked for next to the pred.json as
    ``<ds>.json`` or ``<ds>/<ds>.json``. ``<ds>`` is the name of the folder holding the
    pred.json (the official layout is ``outputs/<model>/<ds>/pred.json``). ``cache``: dataset
    files already parsed, by resolved path (shared by the pred.json files of one load).

    Each record: ``id`` ``"<dataset>/<sample_id>"``, ``task`` the dataset name (the dataset
    file's stem, or ``meta_data.dataset`` when the file was renamed), ``model`` ``gen_model_id``
    (else the folder above the dataset folder), ``answer``/``reference`` ``gt_response``,
    ``response`` ``pred_response``, ``choices`` ``task_instance.choice_list``, and ``meta``:
    ``dataset, question_type, sample_id, n_images`` (len of ``images_path``, which the official
    evaluator bins image-quantity levels by), ``dataset_file``, and ``response_missing`` when
    ``pred_response`` is null (:class:`MileBenchMeta`). A sample_id absent from the dataset
    file is an error at its pred.json line.
    """
    pred_path = Path(pred_path)
    cache = cache if cache is not None else {}
    try:
        rows = list(iter_json_records(pred_path))
    except RecordError as e:
        return [], [e]
    ds_path, tried = _find_dataset_file(pred_path, dataset_file)
    if ds_path is None:
        return [], [
            RecordError(
                f"no MileBench dataset file for this pred.json; looked for {', '.join(str(t) for t in tried)}; "
                "pass dataset_file (the <ds>.json, or the folder holding <ds>/<ds>.json)",
                file=pred_path,
            )
        ]
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


def _milebench_record(
    obj: Any, path: Path, line: int, ds: _DatasetFile
) -> tuple[PredictionRecord | None, list[RecordError]]:
    def err(
        msg: str, fld: str | None, rid: str | None = None, file: Path = path, at: int = line
    ) -> tuple[None, list[RecordError]]:
        return None, [RecordError(msg, file=file, line=at, field=fld, record_id=rid)]

    if not isinstance(obj, dict):
        return err(f"expected a JSON object, got {type(obj).__name__}", None)
    if is_missing(obj.get("sample_id")):
        return err("required field is missing", "sample_id")
    sid = _sample_key(obj["sample_id"])
    rid = f"{ds.name}/{sid}"
    for fld in ("gt_response", "pred_response"):
        if fld not in obj:
            return err("required field is missing", fld, rid)
    if is_missing(obj["gt_response"]):
        return err("the ground truth is null", "gt_response", rid)
    pred = obj["pred_response"]
    if not (pred is None or isinstance(pred, (str, int, float))):
        return err(f"expected text, got {type(pred).__name__}", "pred_response", rid)
    if sid not in ds.items:
        return err(
            f"sample_id {obj['sample_id']!r} is not in the dataset file {ds.path} "
            f"({len(ds.items)} samples of {ds.name!r})",
            "sample_id",
            rid,
        )
    index, item_line, item = ds.items[sid]
    ti = item.get("task_instance")
    ti = ti if isinstance(ti, dict) else {}
    images = ti.get("images_path")
    if not isinstance(images, list):
        return err(
            "required field is missing or not a list",
            f"data[{index}].task_instance.images_path",
            rid,
            ds.path,
            item_line,
        )
    choices = ti.get("choice_list")
    if choices is not None and not isinstance(choices, list):
        return err("expected a list", f"data[{index}].task_instance.choice_list", rid, ds.path, item_line)
    if ds.question_type == "multi-choice" and not choices:
        return err(
            "a multi-choice dataset needs a choice_list",
            f"data[{index}].task_instance.choice_list",
            rid,
            ds.path,
            item_line,
        )
    model = obj.get("gen_model_id")
    if not isinstance(model, str) or not model.strip():
        model = path.parent.parent.name or "unknown"
    gold = str(obj["gt_response"])
    meta = MileBenchMeta(
        dataset=ds.name,
        question_type=ds.question_type,
        sample_id=obj["sample_id"],
        n_images=len(images),
        dataset_file=str(ds.path),
        response_missing=pred is None,
    )
    rec = {
        "id": rid,
        "benchmark": BENCHMARK,
        "task": ds.name,
        "model": model,
        "question": _milebench_question(obj, ti.get("context"), images),
        "response": "" if pred is None else str(pred),
        "answer": gold,
        "reference": gold,
        "choices": [str(c) for c in choices] if choices else None,
        "meta": meta.to_meta(),
    }
    return build_record(rec, path, line, rid)
