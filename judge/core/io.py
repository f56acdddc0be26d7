"""Loaders for annotation and prediction files, with errors that name file, line and field.

Every loader reads the whole input and collects every problem it finds, so a user
fixes a file in one pass instead of one error per run. With ``skip_invalid`` the
bad records are skipped and listed; otherwise :class:`InvalidRecordsError` is
raised with all of them.

Formats: JSON Lines (one record per line) and JSON (an array of records, or one
record). Records are in one of the forms of :data:`RECORD_FORMATS`: canonical
(:mod:`judge.core.schema`) or MMIE's native form (``question``/``answer`` lists of
``{text, image}``, ``gt_answer``), detected per record.

Image references are checked in one place, :func:`_resolve_images`, on the canonical record after
its form was read: every image segment of every content field (:func:`~judge.core.schema.content_fields`)
goes through one :data:`ImageResolver`, whatever form or field carried it. The file loaders resolve
inside the file's folder (or ``root``); ``judge-serve`` passes its own resolver (data URLs, paths under
``--image-root`` only, size limits).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from judge.core.atomic import atomic_write
from judge.core.errors import ImageError, JudgeError, Location, RecordError
from judge.core.images import DEFAULT_LIMITS, ImageLimits, check_image_file, resolve_image
from judge.core.jsonfile import (  # re-exported for the loaders' callers
    file_sha256,
    hash_file,
    iter_json_records,
)
from judge.core.rubric import Rubric
from judge.core.schema import AnnotationRecord, ImageSegment, PredictionRecord, content_fields

RecordFormat = Literal["auto", "canonical", "mmie"]
_MMIE_FAMILY_RE = re.compile(r"(?<![A-Za-z])(SA|PBL|MSR)(?![A-Za-z])")


class InvalidRecordsError(JudgeError, ValueError):
    """One or more bad records; ``errors`` lists every one of them."""

    def __init__(
        self, errors: list[RecordError], what: str = "records", *, can_skip: bool = True, fix: str = ""
    ):
        """``can_skip``: the reader has a ``skip_invalid`` setting to advise (a command names it by its flag);
        ``fix``: the advice of a reader that has none."""
        self.errors = errors
        if len(errors) == 1:  # one line: the file (and line and field) and what is wrong
            tail = f" (fix it, or pass `skip_invalid` to skip and list invalid {what})" if can_skip else ""
            super().__init__(f"{errors[0]}{tail}{f' ({fix})' if fix and not can_skip else ''}")
            return
        shown = "\n".join(f"  {e}" for e in errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        hint = "\nFix them, or pass `skip_invalid` to skip and list them." if can_skip else ""
        if fix and not can_skip:
            hint = f"\n{fix[0].upper()}{fix[1:]}."
        super().__init__(f"{len(errors)} invalid {what}:\n{shown}{more}{hint}")


@dataclass
class ImageInfo:
    path: str
    width: int
    height: int


@dataclass
class LoadResult:
    """Records that passed every check, the errors of those that did not, and image facts."""

    records: list[Any] = field(default_factory=list)
    errors: list[RecordError] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    images: dict[str, ImageInfo] = field(default_factory=dict)


# ----------------------------------------------------------------------------- conversion


def is_mmie_native(obj: dict) -> bool:
    return isinstance(obj, dict) and "answer" in obj and "question" in obj and "response" not in obj


def mmie_family(record_id: str) -> str | None:
    """MMIE ids carry their category (SA, PBL or MSR) as a token, e.g. ``"PBL_12_3"``."""
    m = _MMIE_FAMILY_RE.search(record_id)
    return m.group(1) if m else None


def from_mmie(obj: dict, kind: Literal["annotation", "prediction"]) -> dict:
    """Map an MMIE native record onto the canonical dict (not yet validated)."""
    out = {k: v for k, v in obj.items() if k not in ("answer", "gt_answer")}
    out["response"] = obj.get("answer")
    if obj.get("gt_answer") not in (None, "", []):
        out["reference"] = obj["gt_answer"]
    rid = str(obj.get("id", ""))
    if "task" not in out:
        fam = mmie_family(rid)
        if fam is not None:
            out["task"] = fam
    if kind == "prediction":
        out.setdefault("benchmark", "mmie")
    # MMIE files carry fields of their own (category, field, ...): keep them under meta.
    model = AnnotationRecord if kind == "annotation" else PredictionRecord
    meta = out.get("meta") or {}
    if isinstance(meta, dict):  # else the record's error names `meta` (and the extra fields)
        extra = {k: out.pop(k) for k in list(out) if k not in model.model_fields}
        if extra:
            out["meta"] = {**meta, **extra}
    return out


#: Maps a record's image reference to the local file the judge may open, or raises
#: :class:`~judge.core.errors.ImageError` (the record's error names the field that held it).
ImageResolver = Callable[[str], str]


def root_resolver(
    base_dir: str | Path, root: str | Path | None = None, allow_urls: bool = False
) -> ImageResolver:
    """The file loaders' resolver: relative paths from ``root`` (else ``base_dir``), never outside it
    (:func:`~judge.core.images.resolve_image`)."""
    return lambda ref: resolve_image(ref, base_dir, root=root, allow_urls=allow_urls)


@dataclass(frozen=True)
class RecordFormatSpec:
    """A form of record the readers take and turn into the canonical record before any check.

    ``image_fields``: the record's own fields that may carry images, and ``renamed`` the canonical
    field each becomes where the name changes (errors name both). ``example(field, ref)``: a minimal
    prediction record of this form with the image ``ref`` in ``field``; the path-containment tests are
    generated from it, so a form registered later is covered without a new test.
    """

    name: str
    to_canonical: Callable[[dict, Literal["annotation", "prediction"]], dict]
    image_fields: tuple[str, ...]
    example: Callable[[str, str], dict]
    detect: Callable[[Any], bool] | None = None  #: None: the fallback form (canonical)
    renamed: Mapping[str, str] = field(default_factory=dict)  #: canonical field -> this form's field


def _canonical_example(fld: str, ref: str) -> dict:
    rec: dict[str, Any] = {"id": "x1", "benchmark": "mmie", "task": "SA", "question": "Q?", "response": "R."}
    rec[fld] = [{"type": "text", "text": "see"}, {"type": "image", "image": ref}]
    return rec


def _mmie_example(fld: str, ref: str) -> dict:
    rec: dict[str, Any] = {"id": "SA_1", "question": [{"text": "Q?", "image": None}], "answer": "R."}
    rec[fld] = [{"text": "see", "image": ref}]
    return rec


#: The record forms every reader of records takes, by name; ``auto`` tries each ``detect`` in order,
#: canonical last.
RECORD_FORMATS: dict[str, RecordFormatSpec] = {
    "mmie": RecordFormatSpec(
        "mmie",
        to_canonical=lambda obj, kind: from_mmie(obj, kind),
        image_fields=("question", "answer", "gt_answer"),
        example=_mmie_example,
        detect=lambda obj: is_mmie_native(obj),
        renamed={"response": "answer", "reference": "gt_answer"},
    ),
    "canonical": RecordFormatSpec(
        "canonical",
        to_canonical=lambda obj, kind: obj,
        image_fields=content_fields(PredictionRecord),
        example=_canonical_example,
    ),
}


def record_format(obj: Any, format: str = "auto") -> RecordFormatSpec:
    """The form ``obj`` is read in: ``format`` itself, or (``auto``) the first whose ``detect`` takes it."""
    if format != "auto":
        return RECORD_FORMATS[format]
    return next(
        (f for f in RECORD_FORMATS.values() if f.detect is not None and f.detect(obj)),
        RECORD_FORMATS["canonical"],
    )


def pydantic_errors(e: ValidationError, loc: Location) -> list[RecordError]:
    out = []
    for err in e.errors():
        # An empty key is a field too: named as '' rather than left unnamed.
        fld = ".".join(str(x) or "''" for x in err["loc"]) or None
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "extra_forbidden":
            msg = f"unknown field (value {err.get('input')!r:.60}); put extra data under 'meta'"
        elif "input" in err:
            msg = f"{msg} (got {err['input']!r:.80})"
        out.append(RecordError(msg, file=loc.file, line=loc.line, field=fld, record_id=loc.record_id))
    return out


# ----------------------------------------------------------------------------- loaders


def load_annotations(
    paths: str | Path | Iterable[str | Path],
    *,
    rubric: Rubric | None = None,
    root: str | Path | None = None,
    allow_urls: bool = False,
    check_images: bool = True,
    image_limits: ImageLimits = DEFAULT_LIMITS,
    skip_invalid: bool = False,
    collect: bool = False,
    format: RecordFormat = "auto",
) -> LoadResult:
    """Read, validate and resolve annotation records from one or more files.

    Checks the schema, duplicate ids of one model across all files, (with a rubric) the task
    family, criteria and scale, and every image (resolved inside ``root`` or the
    file's folder; opened and fully decoded when ``check_images``). Image
    references in the returned records are absolute paths.

    Raises :class:`InvalidRecordsError` listing every bad record, unless
    ``skip_invalid`` (skip them) or ``collect`` (return them in ``errors``).
    """
    return _load(
        paths,
        AnnotationRecord,
        "annotation",
        rubric=rubric,
        root=root,
        allow_urls=allow_urls,
        check_images=check_images,
        image_limits=image_limits,
        skip_invalid=skip_invalid,
        collect=collect,
        format=format,
    )


def load_predictions(
    paths: str | Path | Iterable[str | Path],
    *,
    root: str | Path | None = None,
    allow_urls: bool = False,
    check_images: bool = False,
    image_limits: ImageLimits = DEFAULT_LIMITS,
    skip_invalid: bool = False,
    collect: bool = False,
    format: RecordFormat = "auto",
) -> LoadResult:
    """Read and validate prediction records (input of ``judge-score``); see :func:`load_annotations`.

    Images are resolved (and refused outside their root) but, by default, opened
    only when scored, where a bad one makes that item unscorable, not the run fail.
    """
    return _load(
        paths,
        PredictionRecord,
        "prediction",
        rubric=None,
        root=root,
        allow_urls=allow_urls,
        check_images=check_images,
        image_limits=image_limits,
        skip_invalid=skip_invalid,
        collect=collect,
        format=format,
    )


def _load(
    paths, model, kind, *, rubric, root, allow_urls, check_images, image_limits, skip_invalid, collect, format
) -> LoadResult:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    result = LoadResult()
    seen: dict[str, Location] = {}
    for path in paths:
        path = Path(path)
        result.files.append(str(path))
        resolve = root_resolver(path.parent, root, allow_urls)
        try:
            for line, obj in iter_json_records(path):
                if isinstance(obj, RecordError):
                    result.errors.append(obj)
                    continue
                _add_record(
                    result, obj, model, kind, path, line, format, seen, rubric, resolve, check_images,
                    image_limits,
                )  # fmt: skip
        except RecordError as e:  # a whole-file problem (broken JSON array)
            result.errors.append(e)
    if result.errors and not (skip_invalid or collect):
        raise InvalidRecordsError(result.errors, f"{kind} records")
    return result


def parse_records(
    objs: Sequence[Any],
    kind: Literal["annotation", "prediction", "auto"] = "auto",
    *,
    root: str | Path | None = None,
    source: str = "items",
    defaults: Mapping[str, Any] | None = None,
    positions: Sequence[int] | None = None,
    resolve: ImageResolver | None = None,
) -> list[AnnotationRecord | PredictionRecord]:
    """Validate in-memory records (dicts in any form of :data:`RECORD_FORMATS`) as the file loaders do.

    ``kind="auto"``: a dict with human ``scores`` is an annotation, any other a prediction;
    ``defaults`` fill a prediction's missing fields. Relative image paths resolve from ``root``
    (default: the working directory) and may not leave it; ``resolve`` replaces that rule for every
    image of every record (a server's own). Errors name ``source``, the item's 1-based position
    (``positions[i]`` when given), the field and the record id; all of them are collected and raised
    together as :class:`InvalidRecordsError`.
    """
    result = LoadResult()
    seen: dict = {}
    if resolve is None:
        resolve = root_resolver(Path(root) if root is not None else Path.cwd(), root)
    for n, obj in enumerate(objs):
        line = positions[n] if positions is not None else n + 1
        is_ann = kind == "annotation" or (kind == "auto" and isinstance(obj, Mapping) and "scores" in obj)
        if not is_ann and isinstance(obj, Mapping) and defaults:
            obj = {**defaults, **obj}
        model, what = (AnnotationRecord, "annotation") if is_ann else (PredictionRecord, "prediction")
        _add_record(
            result, obj, model, what, source, line, "auto", seen, None, resolve, False, DEFAULT_LIMITS
        )
    if result.errors:
        raise InvalidRecordsError(result.errors, "records", can_skip=False)
    return result.records


def _add_record(
    result,
    obj,
    model,
    kind,
    path,
    line,
    format,
    seen,
    rubric,
    resolve: ImageResolver,
    check_images,
    limits,
) -> None:
    """Validate one record (schema, duplicate id, rubric, images) into ``result``: the record, or its errors.
    The one path of the file loaders and of :func:`parse_records`."""
    rec, spec, errs = _validate_one(obj, model, kind, path, line, format)
    if rec is not None:
        errs += _check_duplicate(rec, seen, path, line)
        if rubric is not None and kind == "annotation":
            errs += check_against_rubric(rec, rubric)
        errs += _resolve_images(rec, spec, resolve, check_images, limits, result)
    if errs:
        result.errors.extend(errs)
    else:
        result.records.append(rec)


def _validate_one(obj, model, kind, path, line, format):
    rid = str(obj["id"]) if isinstance(obj, dict) and obj.get("id") is not None else None
    loc = Location(str(path), line, rid)
    spec = record_format(obj, format)
    if not isinstance(obj, dict):
        error = RecordError(f"expected a JSON object, got {type(obj).__name__}", file=path, line=line)
        return None, spec, [error]
    obj = spec.to_canonical(obj, kind)
    try:
        rec = model.model_validate(obj)
    except ValidationError as e:
        return None, spec, pydantic_errors(e, loc)
    rec._source = loc
    return rec, spec, []


def _check_duplicate(rec, seen: dict, path, line) -> list[RecordError]:
    # Predictions of several models share the benchmark's item ids, and so do labels written in their style
    # (judge.core.identity): the key is (model, id), an id once per model.
    key = (rec.model, rec.id)
    first = seen.get(key)
    if first is not None:
        whose = f" for model {rec.model!r}"
        return [
            RecordError(
                f"duplicate id {rec.id!r}{whose}; first seen at {first.file}:{first.line}",
                file=path,
                line=line,
                field="id",
                record_id=rec.id,
            )
        ]
    seen[key] = Location(str(path), line, rec.id)
    return []


def check_against_rubric(rec: AnnotationRecord, rubric: Rubric) -> list[RecordError]:
    """Family known, every scored criterion known to the family, every score on the scale."""
    loc = rec._source or Location(record_id=rec.id)

    def err(msg: str, fld: str) -> RecordError:
        return RecordError(msg, file=loc.file, line=loc.line, field=fld, record_id=rec.id)

    if rec.task not in rubric.families:
        return [
            err(
                f"unknown task family {rec.task!r}; rubric {rubric.name!r} has {sorted(rubric.families)}",
                "task",
            )
        ]
    family = rubric.families[rec.task]
    allowed = family.criterion_ids
    lo, hi = rubric.scale.min, rubric.scale.max
    errs = []
    for annotator, crit_scores in rec.scores.items():
        for crit, value in crit_scores.items():
            fld = f"scores.{annotator}.{crit}"
            if crit not in allowed:
                errs.append(
                    err(
                        f"unknown criterion {crit!r} for family {rec.task}; allowed: {', '.join(allowed)}",
                        fld,
                    )
                )
            elif not lo <= value <= hi:
                errs.append(err(f"score {value} is off the scale {lo}..{hi}", fld))
    if family.uses_reference and not rec.reference:
        errs.append(
            err(
                f"family {rec.task} shows the reference answer to the judge, but the record has none",
                "reference",
            )
        )
    return errs


def _resolve_images(
    rec, spec: RecordFormatSpec, resolve: ImageResolver, check_images, limits, result: LoadResult
) -> list[RecordError]:
    """The one image check: every image segment of every content field of the canonical record through
    ``resolve`` (and, with ``check_images``, decoded), whatever form and field carried it. A refusal is
    the record's error naming the field (in the form's own name too, where it differs)."""
    loc = rec._source
    errs = []
    for name in content_fields(type(rec)):
        for i, seg in enumerate(getattr(rec, name) or ()):
            if not isinstance(seg, ImageSegment):
                continue
            fld = f"{name}[{i}].image"
            if name in spec.renamed:
                fld = f"{spec.renamed[name]} (read as {fld})"
            try:
                resolved = resolve(seg.image)
                if check_images and resolved not in result.images:
                    w, h = check_image_file(resolved, limits)
                    result.images[resolved] = ImageInfo(resolved, w, h)
            except ImageError as e:
                errs.append(
                    RecordError(
                        str(e), file=loc.file, line=loc.line, field=fld, record_id=rec.id, code=e.code
                    )
                )
                continue
            seg.image = resolved
    return errs


# ----------------------------------------------------------------------------- views


def write_jsonl(path: str | Path, rows: Iterable[dict | BaseModel]) -> None:
    """Write rows as JSON Lines atomically (a temporary file renamed into place)."""
    with atomic_write(path) as f:
        for row in rows:
            if isinstance(row, BaseModel):
                row = row.model_dump(mode="json", exclude_none=False)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


__all__ = [
    "InvalidRecordsError",
    "LoadResult",
    "ImageInfo",
    "file_sha256",
    "hash_file",
    "iter_json_records",
    "load_annotations",
    "load_predictions",
    "check_against_rubric",
    "write_jsonl",
    "from_mmie",
    "is_mmie_native",
    "ImageResolver",
    "RECORD_FORMATS",
    "RecordFormatSpec",
    "parse_records",
    "record_format",
    "root_resolver",
    "mmie_family",
]
