"""Bad input is refused with an error naming its file, 1-based line and field (docs/design.md, reliability rules).

Every test builds a small real annotation file under ``tmp_path`` (JSON Lines or JSON
text, PNG images drawn with PIL), puts the bad record after a good one, and checks
that the :class:`InvalidRecordsError` names the right file, line and field, both in
its attributes and in the text a user reads.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from judge.core.errors import JudgeError, RecordError
from judge.core.images import ImageLimits
from judge.core.io import InvalidRecordsError, load_annotations, load_predictions, write_jsonl
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


# ----------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def mmie():
    return load_rubric("mmie")


def draw_png(path: Path, size: tuple[int, int] = (16, 12), color: str = "red") -> Path:
    """A real PNG: a coloured rectangle with a diagonal line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    d.rectangle([1, 1, size[0] // 2, size[1] // 2], fill=color)
    d.line([0, 0, size[0] - 1, size[1] - 1], fill="black")
    img.save(path, format="PNG")
    return path


def noisy_png(path: Path, size: tuple[int, int] = (64, 64)) -> Path:
    """A PNG of random pixels, so that its compressed data fills most of the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3)).save(path, format="PNG")
    return path


def record(rid: str, image: str | None = "images/ok.png", task: str = "SA", **over) -> dict:
    """A valid canonical SA annotation record; its response is [text, image] so the image is response[1]."""
    response = [{"type": "text", "text": f"Once upon a time ({rid})."}]
    if image is not None:
        response.append({"type": "image", "image": image})
    rec = {
        "id": rid,
        "task": task,
        "question": [{"type": "text", "text": "Continue the story of the red kite."}],
        "response": response,
        "model": "m1",
        "scores": {
            "ann1": {"text_quality": 4, "image_quality": 5, "overall": 4},
            "ann2": {"text_quality": 3, "overall": 3},
        },
    }
    rec.update(over)
    return rec


def write_lines(path: Path, rows: list) -> Path:
    """One line per row: a dict is dumped as JSON, a str is written as is (for broken lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def data(tmp_path) -> Path:
    """An annotation folder with one good image, images/ok.png."""
    folder = tmp_path / "data"
    draw_png(folder / "images" / "ok.png")
    return folder


def only_error(
    exc: pytest.ExceptionInfo, file: Path, line: int, field: str | None, *words: str
) -> RecordError:
    """The single error of an InvalidRecordsError, checked for file, line, field and message words."""
    errors = exc.value.errors
    assert len(errors) == 1, [str(e) for e in errors]
    return check_error(errors[0], file, line, field, *words, whole=str(exc.value))


def check_error(
    err: RecordError, file: Path, line: int, field: str | None, *words: str, whole: str | None = None
) -> RecordError:
    assert isinstance(err, RecordError)
    assert err.file == str(file)
    assert err.line == line
    assert err.field == field
    for w in words:
        assert w in err.message, (w, err.message)
    text = str(err)
    assert f"{file}:{line}" in text
    if field is not None:
        assert f"field '{field}'" in text
    if whole is not None:  # what the user sees from the raised error carries the same facts
        assert f"{file}:{line}" in whole
        if field is not None:
            assert f"field '{field}'" in whole
    return err


# ----------------------------------------------------------------------------- the twelve bad inputs


def test_good_file_loads(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2")])
    res = load_annotations(path, rubric=mmie)
    assert [r.id for r in res.records] == ["r1", "r2"]
    assert res.errors == []
    img = str((data / "images" / "ok.png").resolve())
    assert res.records[0].response[1].image == img  # image references come back absolute
    assert (res.images[img].width, res.images[img].height) == (16, 12)


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


def test_missing_image_file(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image="images/missing.png")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", "missing.png", "does not exist")


def test_missing_image_in_question(data, mmie):
    bad = record("r2")
    bad["question"] = [{"type": "image", "image": "images/q-missing.png"}, {"type": "text", "text": "Go on."}]
    path = write_lines(data / "a.jsonl", [record("r1"), bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "question[0].image", "q-missing.png", "does not exist")


def test_truncated_image(data, mmie):
    img = noisy_png(data / "images" / "cut.png")
    blob = img.read_bytes()
    img.write_bytes(blob[: len(blob) // 2])
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image="images/cut.png")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", "cut.png", "truncated or corrupt")


def test_path_outside_root_relative(tmp_path, data, mmie):
    draw_png(tmp_path / "outside.png")  # exists, but outside the annotation folder
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image="../outside.png")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", "../outside.png", "leaves its root")


def test_path_outside_root_absolute(tmp_path, data, mmie):
    elsewhere = str(draw_png(tmp_path / "elsewhere" / "x.png").resolve())
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image=elsewhere)])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", elsewhere, "leaves its root")


def test_absolute_path_inside_root_is_fine(data, mmie):
    inside = str((data / "images" / "ok.png").resolve())
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image=inside)])
    assert len(load_annotations(path, rubric=mmie).records) == 2


def test_symlink_leaving_root(tmp_path, data, mmie):
    target = draw_png(tmp_path / "secret" / "x.png")
    (data / "images" / "link.png").symlink_to(target)
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image="images/link.png")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", "leaves its root")


def test_root_option_moves_the_anchor(tmp_path, data, mmie):
    shared = tmp_path / "shared"
    draw_png(shared / "s.png")
    path = write_lines(data / "a.jsonl", [record("r1", image="s.png")])
    res = load_annotations(path, rubric=mmie, root=shared)
    assert res.records[0].response[1].image == str((shared / "s.png").resolve())
    # with that root, the file's own folder is outside
    path2 = write_lines(
        data / "b.jsonl", [record("r1", image="s.png"), record("r2", image="../data/images/ok.png")]
    )
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path2, rubric=mmie, root=shared)
    only_error(exc, path2, 2, "response[1].image", "leaves its root")


def test_predictions_path_outside_root(tmp_path, data):
    draw_png(tmp_path / "outside.png")
    good = {"id": "p1", "benchmark": "mmie", "task": "SA", "question": "Tell.", "response": "Told."}
    bad = dict(good, id="p2", response=[{"type": "image", "image": "../outside.png"}])
    path = write_lines(data / "p.jsonl", [good, bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_predictions(path)
    only_error(exc, path, 2, "response[0].image", "leaves its root")


URL = "https://example.com/images/kite.png"


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the loader tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_url_refused_by_default(data, mmie, no_network):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image=URL)])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", URL, "URL", "--allow-urls")


def test_url_accepted_not_fetched_when_allowed(data, mmie, no_network):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image=URL)])
    res = load_annotations(path, rubric=mmie, allow_urls=True, check_images=False)
    assert [r.id for r in res.records] == ["r1", "r2"]
    assert res.records[1].response[1].image == URL  # kept as given, not downloaded
    assert URL not in res.images


def test_url_allowed_but_checking_images_cannot_fetch(data, mmie, no_network):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image=URL)])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie, allow_urls=True, check_images=True)
    only_error(exc, path, 2, "response[1].image", "URL")


def test_data_url_refused(data, mmie, no_network):
    ref = "data:image/png;base64,iVBORw0KGgo="
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image=ref)])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", "URL")


def test_predictions_url_refused_by_default(data, no_network):
    good = {"id": "p1", "benchmark": "mmie", "task": "SA", "question": "Tell.", "response": "Told."}
    bad = dict(good, id="p2", question=[{"type": "image", "image": URL}, {"type": "text", "text": "Tell."}])
    path = write_lines(data / "p.jsonl", [good, bad])
    with pytest.raises(InvalidRecordsError) as exc:
        load_predictions(path)
    only_error(exc, path, 2, "question[0].image", "URL")
    assert len(load_predictions(path, allow_urls=True).records) == 2


def test_oversize_image_pixels(data, mmie):
    draw_png(data / "images" / "big.png", size=(64, 64))  # 4,096 pixels
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image="images/big.png")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie, image_limits=ImageLimits(max_pixels=1000))
    only_error(exc, path, 2, "response[1].image", "64x64", "4,096 pixels", "limit of 1,000")
    # the same file is fine under the default limit
    assert len(load_annotations(path, rubric=mmie).records) == 2


def test_oversize_image_bytes(data, mmie):
    noisy_png(data / "images" / "heavy.png", size=(32, 32))
    path = write_lines(data / "a.jsonl", [record("r1", image=None), record("r2", image="images/heavy.png")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie, image_limits=ImageLimits(max_bytes=500))
    only_error(exc, path, 2, "response[1].image", "bytes", "limit of 500")


def test_non_image_file_with_png_extension(data, mmie):
    (data / "images" / "fake.png").write_text("this is a text file, not a picture\n", encoding="utf-8")
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image="images/fake.png")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", "fake.png", "cannot be read as an image")


def test_empty_image_file(data, mmie):
    (data / "images" / "empty.png").write_bytes(b"")
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image="images/empty.png")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", "empty")


def test_image_path_is_a_folder(data, mmie):
    path = write_lines(data / "a.jsonl", [record("r1"), record("r2", image="images")])
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    only_error(exc, path, 2, "response[1].image", "not a file")


def test_bad_image_reported_for_every_record_using_it(data, mmie):
    path = write_lines(
        data / "a.jsonl",
        [record("r1"), record("r2", image="images/gone.png"), record("r3", image="images/gone.png")],
    )
    with pytest.raises(InvalidRecordsError) as exc:
        load_annotations(path, rubric=mmie)
    assert [(e.line, e.field) for e in exc.value.errors] == [
        (2, "response[1].image"),
        (3, "response[1].image"),
    ]


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
