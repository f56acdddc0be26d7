"""Files that are not well-formed JSON Lines or JSON are refused with an error naming their file and 1-based line
(docs/design.md, reliability rules): a broken line or one that is not an object (line numbers kept past blank
lines); .json files: the line where a bad record of an array starts, a broken or unclosed array, strict array
framing, a single object; text that is not UTF-8. Accepted: Unicode line separators inside strings, a UTF-8
byte-order mark.

Every test builds a small real annotation file under ``tmp_path`` (:mod:`bad_input_files`), puts the bad record
after a good one, and checks that the :class:`InvalidRecordsError` names the right file, line and field, both in
its attributes and in the text a user reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input_files import draw_png, only_error, record, write_lines

from judge.core.io import InvalidRecordsError, load_annotations, write_jsonl
from judge.core.rubric import load_rubric

# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def mmie():
    return load_rubric("mmie")


@pytest.fixture
def data(tmp_path) -> Path:
    """An annotation folder with one good image, images/ok.png."""
    folder = tmp_path / "data"
    draw_png(folder / "images" / "ok.png")
    return folder


# ----------------------------------------------------------------------------- JSON Lines


def test_broken_json_line(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), '{"id": "r2", "task": "SA", "question": '])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    err = only_error(exc, path, 2, None, "not valid JSON")
    assert "field" not in str(err)


def test_broken_json_after_blank_line_keeps_line_numbers(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), "", "{not json}"])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 3, None, "not valid JSON")


def test_line_that_is_not_an_object(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), "[1, 2, 3]"])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, None, "expected a JSON object", "list")


# ----------------------------------------------------------------------------- .json array files


def _json_array(records: list[dict]) -> tuple[str, list[int]]:
    """Pretty-printed JSON array text and the 1-based line where each record starts."""
    parts, starts, line = ["[\n"], [], 2
    for i, rec in enumerate(records):
        body = json.dumps(rec, indent=2)
        starts.append(line)
        parts.append(body + (",\n" if i < len(records) - 1 else "\n"))
        line += body.count("\n") + 1
    parts.append("]\n")
    return "".join(parts), starts


def test_json_array_reports_line_where_bad_record_starts(data, mmie):
    bad = record("r3")
    bad["scores"]["ann2"]["overall"] = 12
    text, starts = _json_array([record("r1"), record("r2"), bad])
    path = data / "a.json"
    path.write_text(text, encoding="utf-8")
    assert starts[2] > 3  # a pretty-printed record spans many lines
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, starts[2], "scores.ann2.overall", "12", "0..6")
    res = load_annotations(path, rubric=mmie, collect=True)
    assert [r.id for r in res.records] == ["r1", "r2"]


def test_json_array_broken_json_reports_its_line(data, mmie):
    text, starts = _json_array([record("r1"), record("r2")])
    broken_at = starts[1] + 2
    lines = text.split("\n")
    lines[broken_at - 1] = lines[broken_at - 1].replace('"', "", 1)  # an unquoted key
    path = data / "a.json"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, broken_at, None, "not valid JSON")
    res = load_annotations(path, rubric=mmie, skip_invalid=True)
    assert [r.id for r in res.records] == ["r1"]  # the record before the break is kept


def test_json_array_never_closed(data, mmie):
    text, _ = _json_array([record("r1")])
    path = data / "a.json"
    path.write_text(text.rstrip().rstrip("]"), encoding="utf-8")
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    assert len(exc.value.errors) == 1
    assert "never closed" in exc.value.errors[0].message and exc.value.errors[0].file == str(path)


def test_json_single_object_file(data, mmie):
    path = data / "one.json"
    path.write_text("\n" + json.dumps(record("r1", task="BAD"), indent=2), encoding="utf-8")
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "task", "BAD")


# ----------------------------------------------------------------------------- encodings and JSON framing


def test_round_trip_of_text_with_unicode_line_separators(data, mmie):
    rec = record("r1", image=None, response="First line\u2028second line\u2029third\x85end.")
    path = data / "a.jsonl"
    write_jsonl(path, [rec, record("r2")])
    res = load_annotations(path, rubric=mmie)
    assert [r.id for r in res.records] == ["r1", "r2"]
    assert res.records[0].response[0].text == "First line\u2028second line\u2029third\x85end."


def test_file_that_is_not_utf8(data, mmie):
    path = data / "a.jsonl"
    path.write_bytes(json.dumps(record("r1")).encode() + b"\n" + b'{"id": "r2", "task": "S\xe9A"}\n')
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    assert exc.value.errors[0].file == str(path)
    assert exc.value.errors[0].line == 2


def test_json_file_with_content_after_the_first_object(data, mmie):
    path = data / "lines.json"
    path.write_text(json.dumps(record("r1")) + "\n" + json.dumps(record("r2")) + "\n", encoding="utf-8")
    res = load_annotations(path, rubric=mmie, collect=True)
    # nothing may be lost silently: either both records load, or line 2 is reported
    assert len(res.records) == 2 or any(e.line == 2 and e.file == str(path) for e in res.errors)


@pytest.mark.parametrize(
    "body, line, words",
    [
        ('[\n{"id": "a"}\n{"id": "b"}\n]', 3, "expected ',' or ']'"),
        ('[\n{"id": "a"},\n]', 3, "trailing comma"),
        ('[\n{"id": "a"}\n]\n{"id": "b"}', 4, "after the closing"),
        ("  \n", 2, "empty"),
    ],
)
def test_json_array_framing_is_strict(data, mmie, body, line, words):
    path = data / "bad.json"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    err = exc.value.errors[-1]
    assert (err.file, err.line) == (str(path), line) and words in err.message


def test_utf8_byte_order_mark_is_accepted(data, mmie):
    path = data / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(record("r1")).encode() + b"\n")
    assert [r.id for r in load_annotations(path, rubric=mmie).records] == ["r1"]
