"""The files the bad-input tests write (``tests/test_bad_input_*.py``; not a fixture module: import it): real PNG
images drawn with PIL, a valid canonical SA annotation record to spoil, files written line by line, and the
checks that an error names its file, 1-based line and field, both in its attributes and in its text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from judge.core.errors import RecordError


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
