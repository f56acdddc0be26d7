"""Preference pairs: a prompt, two responses, which one humans preferred (or a tie).

The toolkit's own form, one JSON object per line (``data.pairs`` of a run config)::

    {"id": "p1", "task": "SA", "question": [...content...], "response_a": [...], "response_b": [...],
     "preferred": "a",                                  # a | b | tie: the overall preference
     "criteria": {"text_quality": "tie"},               # optional per-criterion preferences
     "reference": null, "question_id": "q1", "model_a": "m1", "model_b": "m2", "meta": {}}

Content is read as annotations read it (segments, MMIE's ``{text, image}`` items or a bare string), images
relative to the file's folder (or ``root``) and never outside it. Two public layouts are read too, told
apart per record by their fields:

* ``chosen`` / ``rejected`` (RLAIF-V, VLFeedback-style exports): the prompt under ``question``, ``prompt``
  or ``query``; its images under ``image`` (one path) or ``images`` (a list), placed before the prompt's
  text; ``chosen`` becomes response A and is preferred. ``id`` optional (``<file stem>:<line>``; when two files
  share a stem, the file's path without suffix relative to the files' common folder, ``a/train:3``).
* VL-RewardBench (:mod:`judge.benchmarks.vl_rewardbench`): ``id``, ``query``, ``response`` (two texts),
  ``human_ranking`` (``[0, 1]``: ``response[0]`` preferred; ``[1, 0]``: ``response[1]``), ``image_path``
  (or ``image``, a path; the hub's parquet with embedded image bytes is read by judge-bench, not here).

A public record has no rubric family: ``task`` in the record, else the reader's ``default_task``
(``data.pairs_task``). Checks, with the annotations' error style (file, line, field, record id): the
schema, a duplicate id (across all files), identical responses with a verdict other than a tie, the family and criteria against the rubric, a family that shows
the reference answer without one, and every image (resolved inside its root, opened and decoded).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from judge.core.errors import ImageError, Location, RecordError
from judge.core.images import DEFAULT_LIMITS, ImageLimits, check_image_file
from judge.core.io import InvalidRecordsError, iter_json_records, pydantic_errors, root_resolver
from judge.core.rubric import OVERALL, Rubric
from judge.core.schema import Content, ImageSegment, StrictModel, content_hash, normalize_content

Preferred = Literal["a", "b", "tie"]
PREFERENCES = ("a", "b", "tie")
#: The layouts a pair record may come in, by name (detected per record).
PAIR_LAYOUTS = ("pair", "chosen_rejected", "vl_rewardbench")


class PairRecord(StrictModel):
    """One human preference between two responses to one prompt."""

    id: str = Field(min_length=1)
    task: str = Field(min_length=1, description="Task family of the rubric (MMIE: SA, PBL, MSR).")
    question: Content = Field(min_length=1)
    response_a: Content = Field(min_length=1)
    response_b: Content = Field(min_length=1)
    preferred: Preferred = Field(description="Which response humans preferred overall: a, b or tie.")
    criteria: dict[str, Preferred] = Field(
        default_factory=dict, description="Optional per-criterion preferences {criterion: a|b|tie}."
    )
    reference: Content | None = None
    question_id: str | None = Field(
        default=None, description="Groups pairs of one question (splits keep them together)."
    )
    model_a: str = "unknown"
    model_b: str = "unknown"
    meta: dict[str, Any] = Field(default_factory=dict)
    _source: Location | None = PrivateAttr(default=None)
    #: A public layout's own name of a canonical field (``question[0].image`` -> ``image_path``), for errors.
    _fields: dict[str, str] = PrivateAttr(default_factory=dict)

    _norm = field_validator("question", "response_a", "response_b", "reference", mode="before")(
        normalize_content
    )

    @field_validator("criteria")
    @classmethod
    def _no_overall(cls, v: dict[str, str]) -> dict[str, str]:
        if OVERALL in v:
            raise ValueError(f"'{OVERALL}' is the pair's `preferred`, not a criterion here")
        return v

    @model_validator(mode="after")
    def _fill_question_id(self) -> PairRecord:
        if self.question_id is None:
            # As annotations fill theirs: pairs and annotations of one question share a split.
            self.question_id = "q-" + content_hash(self.question)[:16]
        return self

    def preferences(self) -> dict[str, str]:
        """Every preference of the pair: the overall one first, then the criteria's."""
        return {OVERALL: self.preferred, **self.criteria}

    @property
    def images(self) -> list[str]:
        return [
            s.image
            for c in (self.question, self.response_a, self.response_b, self.reference)
            for s in c or []
            if isinstance(s, ImageSegment)
        ]


#: The content fields of a pair, as the layouts name them (errors name the layout's field).
_CONTENT = ("question", "response_a", "response_b", "reference")


def pair_layout(obj: dict) -> str:
    """Which layout a record is in (:data:`PAIR_LAYOUTS`), from its fields."""
    if "human_ranking" in obj:
        return "vl_rewardbench"
    if "chosen" in obj or "rejected" in obj:
        return "chosen_rejected"
    return "pair"


def _two_texts(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(isinstance(x, str) for x in value)


def _ranking(value: Any) -> tuple | None:
    # type(), not isinstance: JSON true/false are Python bools, which are ints ([true, false] is not [1, 0]).
    return tuple(value) if isinstance(value, list) and all(type(x) is int for x in value) else None


def _layout_errors(obj: dict, layout: str, loc: Location) -> list[RecordError]:
    """What the schema cannot word well: VL-RewardBench's two responses and its ranking."""
    if layout != "vl_rewardbench":
        return []
    errs = []
    if not _two_texts(obj.get("response")):
        got = repr(obj.get("response"))[:120]
        errs.append(("response", f"expected a list of two response texts, got {got}"))
    if _ranking(obj.get("human_ranking")) not in ((0, 1), (1, 0)):
        errs.append(
            (
                "human_ranking",
                "expected [0, 1] (response[0] preferred) or [1, 0] (response[1] preferred), "
                f"got {obj.get('human_ranking')!r:.80}",
            )
        )
    return [RecordError(m, file=loc.file, line=loc.line, field=f, record_id=loc.record_id) for f, m in errs]


def _image_segments(obj: dict, key: str) -> list[dict] | None:
    """The image segments of a public record's ``image`` (one path) / ``images`` (a list of paths); None
    (left to the schema to refuse) when the value is neither."""
    value = obj.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "image", "image": value}]
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return [{"type": "image", "image": x} for x in value]
    return None


def to_pair(obj: dict, layout: str, where: str, default_task: str | None) -> tuple[dict, dict[str, str]]:
    """A record of ``layout`` as the canonical pair dict, and which layout field each canonical field came
    from (for the error messages). ``where`` stands in for a missing id (``file:line``)."""
    if layout == "pair":
        out = dict(obj)
        if "task" not in out and default_task is not None:
            out["task"] = default_task
        return out, {}
    known_q = ("question", "prompt", "query")
    if layout == "chosen_rejected":
        q_key = next((k for k in known_q if k in obj), "question")
        img_key = "images" if "images" in obj else "image"
        rest = {k: v for k, v in obj.items() if k not in ("chosen", "rejected", q_key, img_key, "id", "task")}
        names = {"response_a": "chosen", "response_b": "rejected", "question": q_key}
        a, b = obj.get("chosen"), obj.get("rejected")
        preferred = "a"
    else:
        q_key, img_key = "query", "image_path" if "image_path" in obj else "image"
        keep = ("id", "query", "response", "human_ranking", img_key, "task")
        rest = {k: v for k, v in obj.items() if k not in keep}
        names = {"response_a": "response[0]", "response_b": "response[1]", "question": "query"}
        responses = obj.get("response")
        # Shapes checked by _read_one (its own messages); placeholders keep the schema's errors to the rest.
        a, b = (responses[0], responses[1]) if responses is not None and _two_texts(responses) else ("?", "?")
        preferred = "b" if _ranking(obj.get("human_ranking")) == (1, 0) else "a"
    images = _image_segments(obj, img_key)
    question = normalize_content(obj.get(q_key))
    if question is None and images:
        question = []  # an image-only prompt
    if images is None:
        question_value: Any = obj.get(img_key)
        names["question"] = img_key
    elif isinstance(question, list):
        question_value = images + question
        if images:
            names["question"] = f"{img_key} + {q_key}"
            # The prompt's images come first: their errors name the layout's own field.
            single = isinstance(obj.get(img_key), str)
            for i in range(len(images)):
                names[f"question[{i}].image"] = img_key if single else f"{img_key}[{i}]"
    else:
        question_value = question
    out = {
        "id": str(obj["id"]) if obj.get("id") is not None else where,
        "question": question_value,
        "response_a": a,
        "response_b": b,
        "preferred": preferred,
        # Every other field of a public record (its source, models, ...) is kept under meta.
        "meta": rest,
    }
    if layout == "chosen_rejected":  # a missing field is reported missing, not as a null value
        for canon, key in (("response_a", "chosen"), ("response_b", "rejected"), ("question", q_key)):
            if key not in obj and not (canon == "question" and images):
                del out[canon]
    task = obj.get("task", default_task)
    if task is not None:
        out["task"] = task
    return out, names


@dataclass
class PairLoad:
    """Pairs that passed every check, and the errors of those that did not."""

    records: list[PairRecord] = field(default_factory=list)
    errors: list[RecordError] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def load_pairs(
    paths: str | Path | Iterable[str | Path],
    *,
    rubric: Rubric | None = None,
    root: str | Path | None = None,
    default_task: str | None = None,
    allow_urls: bool = False,
    check_images: bool = True,
    image_limits: ImageLimits = DEFAULT_LIMITS,
    skip_invalid: bool = False,
    collect: bool = False,
) -> PairLoad:
    """Read and check preference pairs from one or more files (JSON Lines or JSON), in any layout of the
    module doc. Image references in the returned records are absolute paths.

    Raises :class:`~judge.core.io.InvalidRecordsError` listing every bad record, unless ``skip_invalid``
    (skip them) or ``collect`` (return them in ``errors``)."""
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    names = _id_stems(files)
    result = PairLoad()
    seen: dict[str, Location] = {}
    checked: set[str] = set()
    for path in files:
        result.files.append(str(path))
        resolve = root_resolver(path.parent, root, allow_urls)
        try:
            for line, obj in iter_json_records(path):
                if isinstance(obj, RecordError):
                    result.errors.append(obj)
                    continue
                rec, errs = _read_one(obj, path, line, default_task, names[path])
                if rec is not None:
                    errs += _duplicate(rec, seen, path, line)
                    if rubric is not None:
                        errs += check_pair_against_rubric(rec, rubric)
                    errs += _images(rec, resolve, check_images, image_limits, checked)
                if errs:
                    result.errors.extend(errs)
                elif rec is not None:
                    result.records.append(rec)
        except RecordError as e:  # a whole-file problem (no records, broken JSON array)
            result.errors.append(e)
    if result.errors and not (skip_invalid or collect):
        raise InvalidRecordsError(result.errors, "pair records")
    return result


def _id_stems(paths: list[Path]) -> dict[Path, str]:
    """What stands for each file in the id of a record without one (``<this>:<line>``): the file's stem, or,
    when two files share a stem, its path without suffix relative to the files' common folder (two exports
    named ``train.jsonl`` in different folders must not collide)."""
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return {p: p.stem for p in paths}
    full = [p.resolve() for p in paths]
    common = Path(os.path.commonpath([str(p.parent) for p in full]))
    return {p: f.relative_to(common).with_suffix("").as_posix() for p, f in zip(paths, full, strict=True)}


def _read_one(
    obj: Any, path: Path, line: int, default_task: str | None, stem: str
) -> tuple[PairRecord | None, list[RecordError]]:
    if not isinstance(obj, dict):
        return None, [RecordError(f"expected a JSON object, got {type(obj).__name__}", file=path, line=line)]
    layout = pair_layout(obj)
    canonical, names = to_pair(obj, layout, f"{stem}:{line}", default_task)
    rid = str(canonical["id"]) if canonical.get("id") is not None else None
    loc = Location(str(path), line, rid)
    shape_errors = _layout_errors(obj, layout, loc)
    try:
        rec = PairRecord.model_validate(canonical)
    except ValidationError as e:
        errs = shape_errors + pydantic_errors(e, loc)
        for err in errs:
            top = (err.field or "").split(".")[0]
            if top == "task" and err.message == "required field is missing":
                err.message += (
                    " (a public pair layout has no family: set data.pairs_task, or `task` per record)"
                )
            if top in names:
                err.field = names[top] + (err.field or "")[len(top) :]
        for err in errs:
            err.args = (str(err),)
        return None, errs
    if shape_errors:
        return None, shape_errors
    if rec.response_a == rec.response_b:
        # The two prompts are then the same: no judge can prefer one, the loss is stuck at log(2 + nu) and
        # validation can only call it undecided. A tie between identical responses is fine.
        decided = [k for k, v in rec.preferences().items() if v != "tie"]
        if decided:
            fld = "preferred" if decided[0] == OVERALL else f"criteria.{decided[0]}"
            if layout != "pair":
                fld = names.get("response_b", "response_b")
            return None, [
                RecordError(
                    "the two responses are identical, so neither can be preferred: make it a tie or drop the "
                    f"pair (preferences {', '.join(f'{k}={rec.preferences()[k]}' for k in decided)})",
                    file=loc.file,
                    line=loc.line,
                    field=fld,
                    record_id=rec.id,
                )
            ]
    rec._source = loc
    rec._fields = names
    return rec, []


def _duplicate(rec: PairRecord, seen: dict[str, Location], path: Path, line: int) -> list[RecordError]:
    first = seen.get(rec.id)
    if first is not None:
        return [
            RecordError(
                f"duplicate id {rec.id!r}; first seen at {first.file}:{first.line}",
                file=path,
                line=line,
                field="id",
                record_id=rec.id,
            )
        ]
    seen[rec.id] = Location(str(path), line, rec.id)
    return []


def check_pair_against_rubric(rec: PairRecord, rubric: Rubric) -> list[RecordError]:
    """Family known, every criterion with a preference known to the family, the reference where the family
    shows one."""
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
    allowed = [c for c in family.criterion_ids if c != OVERALL]
    errs = [
        err(
            f"unknown criterion {crit!r} for family {rec.task}; allowed: {', '.join(allowed)}",
            f"criteria.{crit}",
        )
        for crit in rec.criteria
        if crit not in allowed
    ]
    if family.uses_reference and not rec.reference:
        errs.append(
            err(
                f"family {rec.task} shows the reference answer to the judge, but the pair has none",
                "reference",
            )
        )
    return errs


def _images(
    rec: PairRecord, resolve, check_images: bool, limits: ImageLimits, checked: set[str]
) -> list[RecordError]:
    """Every image segment of every content field resolved inside its root (and decoded), as annotations'."""
    loc = rec._source or Location(record_id=rec.id)
    errs = []
    for name in _CONTENT:
        for i, seg in enumerate(getattr(rec, name) or ()):
            if not isinstance(seg, ImageSegment):
                continue
            try:
                resolved = resolve(seg.image)
                if check_images and resolved not in checked:
                    check_image_file(resolved, limits)
                    checked.add(resolved)
            except ImageError as e:
                errs.append(
                    RecordError(
                        str(e),
                        file=loc.file,
                        line=loc.line,
                        field=rec._fields.get(f"{name}[{i}].image", f"{name}[{i}].image"),
                        record_id=rec.id,
                        code=e.code,
                    )
                )
                continue
            seg.image = resolved
    return errs


__all__ = ["PAIR_LAYOUTS", "PairLoad", "PairRecord", "check_pair_against_rubric", "load_pairs", "pair_layout"]
