"""Bad images are refused with an error naming their file, 1-based line and field (docs/design.md, reliability
rules): a missing, truncated, empty or non-image file, a folder, an image over the pixel or byte limits (each
record using it named); paths that leave the annotation folder (relative, absolute, through a symlink) and the
``root`` that anchors them; URLs and data URLs, refused unless allowed and never fetched.

Every test builds a small real annotation file under ``tmp_path`` (:mod:`bad_input_files`), puts the bad record
after a good one, and checks that the :class:`InvalidRecordsError` names the right file, line and field, both in
its attributes and in the text a user reads.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from bad_input_files import draw_png, noisy_png, only_error, record, write_lines

from judge.core.images import ImageLimits
from judge.core.io import InvalidRecordsError, load_annotations, load_predictions
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


# ----------------------------------------------------------------------------- image files and paths


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


# ----------------------------------------------------------------------------- URLs


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


# ----------------------------------------------------------------------------- images the loader cannot use


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
