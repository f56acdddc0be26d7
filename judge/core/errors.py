"""Errors that point at the exact place of a bad input: file, line, field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel


class JudgeError(Exception):
    """Base class of every error this toolkit raises on purpose (bad input, bad config)."""


@dataclass
class Location:
    """Where a record came from: its file and 1-based line (or JSON array index)."""

    file: str | None = None
    line: int | None = None
    record_id: str | None = None

    def describe(self) -> str:
        parts = []
        if self.file:
            parts.append(f"{self.file}:{self.line}" if self.line is not None else str(self.file))
        elif self.line is not None:
            parts.append(f"line {self.line}")
        if self.record_id:
            parts.append(f"record {self.record_id!r}")
        return ", ".join(parts)


class RecordError(JudgeError, ValueError):
    """A bad record: names the file, the line, the field and what was expected."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        record_id: str | None = None,
        code: str | None = None,
    ):
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        self.record_id = record_id
        #: what kind of problem, when a caller acts on it (``"too_large"``: an image over a size limit)
        self.code = code
        super().__init__(str(self))

    @property
    def location(self) -> Location:
        return Location(self.file, self.line, self.record_id)

    def __str__(self) -> str:
        where = self.location.describe()
        field = f"field '{self.field}': " if self.field else ""
        return f"{where}: {field}{self.message}" if where else f"{field}{self.message}"

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "field": self.field,
            "record_id": self.record_id,
            "message": self.message,
        }


class ImageError(JudgeError, ValueError):
    """An image that cannot be used: missing, corrupt, too large, outside its root, or a URL."""

    #: the kind of problem, carried onto the :class:`RecordError` of the field that holds the image
    code: str = "image"


class ImageTooLarge(ImageError):
    """An image over a byte or pixel limit (a service answers it with 413, not 422)."""

    code = "too_large"


class UnsupportedImage(ImageError):
    """A file that is not one of the image formats a judge reads (a service answers it with 415)."""

    code = "unsupported_image"


class PathRefused(ImageError):
    """An image reference that cannot be followed beneath its root: it leaves it, loops, or cannot be looked
    up. One kind for all of these, so a refusal says nothing of what lies outside the root."""

    code = "outside_root"


class ConfigError(JudgeError, ValueError):
    """A bad configuration value: names the key, the value and what is allowed."""


def _allowed_keys(model: type[BaseModel] | None, loc: tuple) -> list[str] | None:
    """The field names allowed at ``loc`` (a pydantic error location) inside ``model``."""
    import typing

    def models_in(tp) -> list[type[BaseModel]]:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return [tp]
        return [m for arg in typing.get_args(tp) for m in models_in(arg)]

    current = [model] if model is not None else []
    for part in loc[:-1]:
        nxt: list[type[BaseModel]] = []
        for m in current:
            if isinstance(part, str) and part in m.model_fields:
                nxt += models_in(m.model_fields[part].annotation)
            elif not isinstance(part, str) or part not in m.model_fields:
                # a dict key or list index: stay at the value model of the container
                nxt.append(m)
        current = nxt
    for m in current:
        return list(m.model_fields)
    return None


def invalid(what: str, e, model: type[BaseModel] | None = None) -> ConfigError:
    """A ConfigError for a pydantic ``ValidationError`` of ``what`` (e.g. ``"path: invalid config"``): one
    line when there is one problem, else one line per problem under a heading."""
    body = format_validation_error(e, model)
    if "\n" not in body:
        return ConfigError(f"{what}: {body.strip()}")
    return ConfigError(f"{what}:\n{body}")


def format_validation_error(e, model: type[BaseModel] | None = None) -> str:
    """One line per problem of a pydantic ``ValidationError``: dotted location, message, value.

    For an unknown key, lists the keys allowed there when ``model`` is given.
    """
    lines = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(model, tuple(err["loc"]))
            msg = "unknown key" + (f"; allowed here: {', '.join(allowed)}" if allowed else "")
            lines.append(f"  {loc}: {msg}")
            continue
        if err["type"] == "value_error" and isinstance(err.get("input"), dict):
            # A check across keys: its message names them; the whole section is no help as "got".
            lines.append(f"  {loc}: {msg.removeprefix('Value error, ')}")
            continue
        if err["type"] == "missing":
            # The input here is the mapping the key is missing from: naming the key is the whole message.
            lines.append(f"  {loc}: required, missing")
            continue
        lines.append(f"  {loc}: {msg} (got {_shape(err.get('input'))})"[:500])
    return "\n".join(lines)


def _shape(value: Any) -> str:
    """What a bad value was, without dumping it: a short value as it is, a mapping by its keys, a list by
    its length."""
    if isinstance(value, dict):
        keys = ", ".join(map(str, list(value)[:8])) + (", ..." if len(value) > 8 else "")
        return f"a mapping with keys {keys}" if value else "an empty mapping"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
