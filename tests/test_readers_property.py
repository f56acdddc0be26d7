"""Property tests of the record readers: any JSON value, in any record form, gives a record or a clear
error naming the line and the field, never a traceback, through the in-memory reader (what judge-serve and
the API use) and the file loaders."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge.core.errors import RecordError
from judge.core.io import (
    RECORD_FORMATS,
    InvalidRecordsError,
    load_annotations,
    load_predictions,
    parse_records,
)
from judge.core.rubric import load_rubric
from judge.core.schema import AnnotationRecord, PredictionRecord

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=False), st.text(max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
#: Keys the readers know (canonical, annotation, MMIE, segments), so generated objects reach deep checks.
KEYS = sorted(
    set(PredictionRecord.model_fields)
    | set(AnnotationRecord.model_fields)
    | {f for spec in RECORD_FORMATS.values() for f in spec.image_fields}
    | {"type", "text", "image", "gt_answer", "answer"}
)
SEGMENT = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "video"]), "text": JSON, "image": JSON}),
    st.fixed_dictionaries({"text": st.one_of(st.none(), st.text(max_size=8))}, optional={"image": JSON}),
    st.text(max_size=8),
)
CONTENT = st.one_of(st.text(max_size=8), st.lists(SEGMENT, max_size=3), JSON)
RECORDISH = st.dictionaries(
    st.sampled_from(KEYS),
    st.one_of(CONTENT, st.dictionaries(st.text(max_size=6), st.integers(-2, 9) | JSON, max_size=3)),
    max_size=9,
)
VALUES = st.one_of(JSON, RECORDISH)
RUBRIC = load_rubric("mmie")


def check(errors: list[RecordError]) -> None:
    assert errors
    for e in errors:
        assert isinstance(e, RecordError)
        assert e.line is not None and e.message and "Traceback" not in str(e)
        text = str(e)
        assert text.startswith(e.location.describe()) or not e.location.describe()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES)
def test_in_memory_reader_answers_any_json_value(value):
    try:
        (rec,) = parse_records([value], "auto", root=tempfile.gettempdir(), defaults={"benchmark": "b"})
    except InvalidRecordsError as e:
        check(e.errors)
        if isinstance(value, dict):  # an object's problems are in its fields (or the object as a whole)
            assert all(err.field or "rationale" in err.message or "id" in err.message for err in e.errors), [
                str(err) for err in e.errors
            ]
        return
    assert isinstance(rec, (PredictionRecord, AnnotationRecord))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(VALUES, min_size=1, max_size=4), st.sampled_from(["auto", *RECORD_FORMATS]))
def test_file_loaders_answer_any_json_lines(values, fmt):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "records.jsonl"
        path.write_text("".join(json.dumps(v) + "\n" for v in values))
        for load, kw in ((load_predictions, {}), (load_annotations, {"rubric": RUBRIC})):
            try:
                res = load(path, format=fmt, **kw)  # type: ignore[operator]
            except InvalidRecordsError as e:
                check(e.errors)
                assert all(err.file == str(path) for err in e.errors)
                continue
            assert len(res.records) == len(values)
