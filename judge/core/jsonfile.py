"""Reading records from .jsonl and .json files, each with the line it starts on, and hashing files.

A line that is not JSON (or not UTF-8, or nested too deeply for the parser) is an error naming file and
line that the caller collects while it reads on; a .json array's records are each reported at the line
where they start. The loaders of :mod:`judge.core.io` and the pair reader build on this.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judge.core.errors import JudgeError, RecordError


def hash_file(h, path: str | Path) -> None:
    """Feed a file's bytes to the hash object ``h`` in blocks (files may be model weights of many GB)."""
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)


def file_sha256(path: str | Path) -> str:
    """SHA-256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    hash_file(h, path)
    return h.hexdigest()


def iter_json_records(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, object)`` for each record of a .jsonl or .json file.

    A line that is not valid JSON yields ``(line, RecordError)`` so the caller can
    go on reading. A .json file holds an array of records (each reported at the
    line where it starts) or a single record. A file with no record at all (empty,
    blank lines only, or ``[]``) raises :class:`RecordError`: it is almost always the
    wrong file, and "no problems found" would hide that.
    """
    n = 0
    for n, item in enumerate(_iter_json_records(Path(path)), start=1):  # noqa: B007 - n counts
        yield item
    if n == 0:
        raise RecordError(
            "the file holds no records (it is empty, has only blank lines, or is an empty array)", file=path
        )


def _iter_json_records(path: Path) -> Iterator[tuple[int, Any]]:
    if not path.exists():
        raise JudgeError(f"{path}: file not found")
    if not path.is_file():
        raise JudgeError(f"{path}: is a folder, not a file of records")
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark, as some editors write
        data = data[3:]
    if path.suffix.lower() == ".json":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordError(
                f"not UTF-8 text ({e.reason} at byte {e.start})",
                file=path,
                line=data.count(b"\n", 0, e.start) + 1,
            ) from None
        yield from _iter_json_array(path, text)
        return
    # Split on "\n" only: str.splitlines() would also split on U+2028/U+2029/U+0085, which JSON
    # writers leave unescaped inside strings.
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield (
                lineno,
                RecordError(f"not UTF-8 text ({e.reason} at column {e.start + 1})", file=path, line=lineno),
            )
            continue
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as e:
            yield (
                lineno,
                RecordError(
                    f"not valid JSON ({e.msg} at column {e.colno}); each line must be one JSON object",
                    file=path,
                    line=lineno,
                ),
            )
        except RecursionError:
            # The parser recurses per bracket: a hostile line would end in a traceback, not an error here.
            yield lineno, RecordError(_TOO_DEEP, file=path, line=lineno)


_TOO_DEEP = "not readable JSON: arrays or objects nested too deeply for the parser"


def _iter_json_array(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    """Records of a .json file, each with the line it starts on; the syntax between them is checked strictly."""
    decoder = json.JSONDecoder()

    def line_at(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def fail(msg: str, pos: int):
        raise RecordError(f"not valid JSON ({msg})", file=path, line=line_at(pos))

    def decode(pos: int) -> tuple[Any, int]:
        try:
            return decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            # Inside one document we cannot resynchronise reliably: report and stop.
            raise RecordError(
                f"not valid JSON ({e.msg} at column {e.colno})", file=path, line=e.lineno
            ) from None
        except RecursionError:
            raise RecordError(_TOO_DEEP, file=path, line=line_at(pos)) from None

    pos = _skip_ws(text, 0)
    if pos == len(text):
        fail("the file is empty; expected an array of records or one record", pos)
    if text[pos] != "[":
        obj, after = decode(pos)
        rest = _skip_ws(text, after)
        if rest < len(text):
            fail(
                "extra data after the first record; use .jsonl for one record per line, or a [...] array",
                rest,
            )
        yield line_at(pos), obj
        return
    pos = _skip_ws(text, pos + 1)
    end = pos + 1 if text[pos : pos + 1] == "]" else None  # an empty array
    while end is None:
        if pos >= len(text):
            fail("the array is never closed with ']'", pos)
        start = pos
        obj, pos = decode(start)
        yield line_at(start), obj
        pos = _skip_ws(text, pos)
        sep = text[pos : pos + 1]  # "" at the end of the text
        if sep == "]":
            end = pos + 1
        elif sep != ",":
            fail("expected ',' or ']' between records" if sep else "the array is never closed with ']'", pos)
        else:
            pos = _skip_ws(text, pos + 1)
            if text[pos : pos + 1] == "]":
                fail("trailing comma before ']'", pos)
    if _skip_ws(text, end) < len(text):
        fail("extra data after the closing ']'", _skip_ws(text, end))


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos
