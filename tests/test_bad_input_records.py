"""Bad records are refused with an error naming their file, 1-based line and field (docs/design.md, reliability
rules): missing and unknown fields, scores off the scale or not integers, unknown criteria and task families,
duplicate ids; every error of a file in one go, or the good records kept and the bad ones listed
(``skip_invalid``, ``collect``); the forms accepted (the single-annotator shorthand, MMIE's native records);
``judge-data validate``.

Every test builds a small real annotation file under ``tmp_path`` (:mod:`bad_input_files`), puts the bad record
after a good one, and checks that the :class:`InvalidRecordsError` names the right file, line and field, both in
its attributes and in the text a user reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input_files import check_error, draw_png, only_error, record, write_lines

from judge.core.errors import JudgeError
from judge.core.io import InvalidRecordsError, load_annotations, load_predictions
from judge.core.rubric import load_rubric

SA_CRITERIA = [
    "text_quality",
    "image_quality",
    "text_image_coherence",
    "context_consistency",
    "innovation",
    "stylistic_consistency",
    "overall",
]


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


# ----------------------------------------------------------------------------- bad fields, scores and ids


def test_good_file_loads(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2")])
    res = load_annotations(path, rubric=mmie)
    assert [r.id for r in res.records] == ["r1", "r2"]
    assert res.errors == []
    img = str((data / "images" / "ok.png").resolve())
    assert res.records[0].response[1].image == img  # image references come back absolute
    assert (res.images[img].width, res.images[img].height) == (16, 12)


def test_missing_required_field(data, mmie):
    bad = record("r2")
    del bad["question"]
    path = write_lines(data / "a.jsonl", [record("r1"), bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    err = only_error(exc, path, 2, "question", "required field is missing")
    assert err.record_id == "r2"


def test_unknown_top_level_field(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", score=5)])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "score", "unknown field", "meta")


def test_score_off_the_scale(data, mmie):
    bad = record("r3")
    bad["scores"]["ann1"]["overall"] = 9
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2"), bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    err = only_error(exc, path, 3, "scores.ann1.overall", "9", "0..6")
    assert err.record_id == "r3"


def test_negative_score_off_the_scale(data, mmie):
    bad = record("r2")
    bad["scores"]["ann2"]["text_quality"] = -1
    path = write_lines(data / "a.jsonl", [record("r1"), bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "scores.ann2.text_quality", "-1", "0..6")


@pytest.mark.parametrize("value", ["5", 4.5, True, None])
def test_score_not_an_integer(data, mmie, value):
    bad = record("r2")
    bad["scores"]["ann1"]["overall"] = value
    path = write_lines(data / "a.jsonl", [record("r1"), bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "scores.ann1.overall", "integer")


def test_unknown_criterion(data, mmie):
    bad = record("r2")
    bad["scores"]["ann1"]["charm"] = 3
    path = write_lines(data / "a.jsonl", [record("r1"), bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    err = only_error(exc, path, 2, "scores.ann1.charm", "charm", "allowed")
    for crit in SA_CRITERIA:  # the message lists every allowed criterion of the family
        assert crit in err.message
    assert "method_quality" not in err.message  # a PBL criterion is not allowed for SA


def test_criterion_of_another_family(data, mmie):
    bad = record("r2")
    bad["scores"]["ann1"]["method_quality"] = 3  # a PBL criterion on an SA record
    path = write_lines(data / "a.jsonl", [record("r1"), bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "scores.ann1.method_quality", "SA", "innovation")


def test_unknown_task_family(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", task="XYZ")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "task", "XYZ", "SA", "PBL", "MSR")


def test_msr_needs_reference(data, mmie):
    bad = record("r2", task="MSR", scores={"ann1": {"final_answer_accuracy": 6, "overall": 5}})
    path = write_lines(data / "a.jsonl", [record("r1"), bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "reference", "MSR", "reference")
    good = dict(bad, reference="The answer is 12.")
    path2 = write_lines(data / "b.jsonl", [record("r1"), good])
    assert [r.task for r in load_annotations(path2, rubric=mmie).records] == ["SA", "MSR"]


def test_duplicate_id(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r1")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    err = only_error(exc, path, 2, "id", "duplicate", "'r1'", "first seen at")
    assert f"{path}:1" in err.message  # where it was first seen


def test_duplicate_id_across_files(data, mmie):
    first = write_lines(data / "a.jsonl", [record("r1"), record("r2")])
    second = write_lines(data / "b.jsonl", [record("r3"), record("r2")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations([first, second], rubric=mmie)
    err = only_error(exc, second, 2, "id", "duplicate", "'r2'")
    assert f"{first}:2" in err.message


def test_prediction_ids_are_unique_per_model(data):
    from judge.core.io import load_predictions

    rows = [{"id": "PBL_3_1", "question": "q", "answer": "a", "model": m} for m in ("anole", "gill", "anole")]
    path = data / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = load_predictions(path, collect=True)
    assert [r.model for r in res.records] == ["anole", "gill"]
    (err,) = res.errors
    assert (
        (err.line, err.field) == (3, "id") and "model 'anole'" in err.message and f"{path}:1" in err.message
    )


# ----------------------------------------------------------------------------- skipping and collecting


def _mixed_file(data: Path) -> Path:
    bad_score = record("bad-score")
    bad_score["scores"]["ann1"]["overall"] = 7
    return write_lines(
        data / "mixed.jsonl",
        [
            record("g1"),
            bad_score,  # line 2
            record("g2"),
            record("bad-img", image="images/nope.png"),  # line 4
            "{oops",  # line 5
            record("g3"),
        ],
    )


MIXED_ERRORS = [(2, "scores.ann1.overall", "bad-score"), (4, "response[1].image", "bad-img"), (5, None, None)]


def test_all_errors_of_a_file_in_one_go(data, mmie):
    path = _mixed_file(data)
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    assert [(e.line, e.field, e.record_id) for e in exc.value.errors] == MIXED_ERRORS
    text = str(exc.value)
    assert text.startswith("3 invalid annotation records")
    for line, field, _ in MIXED_ERRORS:
        assert f"{path}:{line}" in text
        if field:
            assert f"field '{field}'" in text
    assert "pass `skip_invalid`" in text  # the setting; judge-data shows it as --skip-invalid


def test_two_bad_lines_two_errors(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", task="NOPE"), "not json at all"])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    assert len(exc.value.errors) == 2
    check_error(exc.value.errors[0], path, 2, "task", "NOPE")
    check_error(exc.value.errors[1], path, 3, None, "not valid JSON")


def test_several_errors_of_one_record(data, mmie):
    bad = record("r2", image="images/missing.png")
    bad["scores"]["ann1"]["overall"] = 10
    bad["scores"]["ann2"]["sparkle"] = 1
    path = write_lines(data / "a.jsonl", [record("r1"), bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    fields = sorted(e.field for e in exc.value.errors)
    assert fields == ["response[1].image", "scores.ann1.overall", "scores.ann2.sparkle"]
    assert all(e.line == 2 and e.file == str(path) and e.record_id == "r2" for e in exc.value.errors)


def test_errors_across_two_files_in_one_go(data, mmie):
    a = write_lines(data / "a.jsonl", [record("a1"), record("a2", task="XX")])
    b = write_lines(data / "b.jsonl", [record("b1"), record("b2"), "]"])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations([a, b], rubric=mmie)
    assert [(e.file, e.line) for e in exc.value.errors] == [(str(a), 2), (str(b), 3)]


@pytest.mark.parametrize("mode", ["skip_invalid", "collect"])
def test_skip_or_collect_keeps_every_good_record(data, mmie, mode):
    path = _mixed_file(data)
    res = load_annotations(path, rubric=mmie, **{mode: True})
    assert [r.id for r in res.records] == ["g1", "g2", "g3"]  # nothing good lost
    assert [(e.line, e.field, e.record_id) for e in res.errors] == MIXED_ERRORS  # every bad one listed
    assert all(e.file == str(path) for e in res.errors)
    assert res.files == [str(path)]


def test_skip_invalid_on_predictions(data):
    good = {"id": "p1", "benchmark": "mmie", "task": "SA", "question": "Tell.", "response": "Told."}
    no_bench = {k: v for k, v in good.items() if k != "benchmark"} | {"id": "p2"}
    path = write_lines(data / "p.jsonl", [good, no_bench, "{", dict(good, id="p3")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_predictions(path)
    assert [(e.line, e.field) for e in exc.value.errors] == [(2, "benchmark"), (3, None)]
    check_error(exc.value.errors[0], path, 2, "benchmark", "required field is missing")
    res = load_predictions(path, skip_invalid=True)
    assert [r.id for r in res.records] == ["p1", "p3"]
    assert len(res.errors) == 2


def test_missing_file_is_a_clear_error(data, mmie):
    missing = data / "nope.jsonl"
    with pytest.raises(JudgeError, match="file not found"):
        load_annotations(missing, rubric=mmie)


# ----------------------------------------------------------------------------- accepted forms


def test_single_annotator_shorthand(data, mmie):
    short = record("r2", scores={"overall": 4, "text_quality": 5, "innovation": 2})
    path = write_lines(data / "a.jsonl", [record("r1"), short])
    res = load_annotations(path, rubric=mmie)
    rec = res.records[1]
    assert len(rec.scores) == 1
    ((annotator, scores),) = rec.scores.items()
    assert scores == {"overall": 4, "text_quality": 5, "innovation": 2}


def test_single_annotator_shorthand_off_scale(data, mmie):
    short = record("r2", scores={"overall": 7})
    path = write_lines(data / "a.jsonl", [record("r1"), short])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    err = exc.value.errors[0]
    assert len(exc.value.errors) == 1 and err.line == 2 and err.file == str(path)
    assert err.field.startswith("scores.") and err.field.endswith(".overall")
    assert "0..6" in err.message and f"field '{err.field}'" in str(err)


def test_mmie_native_record(data, mmie):
    draw_png(data / "img.png", color="blue")
    native = {
        "id": "PBL_3_1",
        "question": [{"text": "How do I fold a paper crane?", "image": None}],
        "answer": [{"text": "Fold the square in half.", "image": "img.png"}],
        "model": "m",
        "scores": {"ann1": {"method_quality": 5, "overall": 4}},
    }
    path = write_lines(data / "mmie.jsonl", [record("r1"), native])
    res = load_annotations(path, rubric=mmie)
    rec = res.records[1]
    assert rec.id == "PBL_3_1" and rec.task == "PBL" and rec.model == "m"
    assert [s.type for s in rec.question] == ["text"]
    assert [s.type for s in rec.response] == ["text", "image"]
    assert rec.response[1].image == str((data / "img.png").resolve())
    assert rec.images == [str((data / "img.png").resolve())]


def test_mmie_native_record_with_missing_image(data, mmie):
    native = {
        "id": "SA_7_2",
        "question": [{"text": "Continue.", "image": None}],
        "answer": [{"text": "The kite rose.", "image": "gone.png"}],
        "model": "m",
        "scores": {"overall": 3},
    }
    path = write_lines(data / "mmie.jsonl", [record("r1"), native])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    err = only_error(exc, path, 2, "answer (read as response[1].image)", "gone.png", "does not exist")
    assert err.record_id == "SA_7_2"


def test_mmie_native_id_without_family(data, mmie):
    native = {
        "id": "item_42",
        "question": [{"text": "Q?", "image": None}],
        "answer": [{"text": "A.", "image": None}],
        "scores": {"overall": 3},
    }
    path = write_lines(data / "mmie.jsonl", [record("r1"), native])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "task", "required field is missing")


# ----------------------------------------------------------------------------- judge-data validate


def test_cli_validate_bad_file(data, capsys):
    from judge.cli import data_main

    bad = record("r2")
    bad["scores"]["ann1"]["overall"] = 9
    path = write_lines(data / "a.jsonl", [record("r1"), bad])
    assert data_main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:2" in out
    assert "field 'scores.ann1.overall'" in out
    assert "0..6" in out


def test_cli_validate_lists_every_problem(data, capsys):
    from judge.cli import data_main

    path = _mixed_file(data)
    assert data_main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "Valid records: 3" in out and "problems: 3" in out
    for line, field, _ in MIXED_ERRORS:
        assert f"{path}:{line}" in out
        if field:
            assert f"field '{field}'" in out


def test_cli_validate_max_pixels(data, capsys):
    from judge.cli import data_main

    draw_png(data / "images" / "big.png", size=(40, 40))
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image="images/big.png")])
    assert data_main(["validate", str(path), "--max-pixels", "1000"]) == 1
    out = capsys.readouterr().out
    assert f"{path}:2" in out and "field 'response[1].image'" in out and "pixels" in out


def test_cli_validate_good_file(data, capsys):
    from judge.cli import data_main

    path = write_lines(data / "a.jsonl", [record("r1"), record("r2")])
    assert data_main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Valid records: 2" in out
    assert "No problems found." in out


def test_cli_validate_missing_file(data, capsys):
    from judge.cli import data_main

    assert data_main(["validate", str(data / "nope.jsonl")]) != 0
    assert "nope.jsonl" in capsys.readouterr().err
