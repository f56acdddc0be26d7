"""Pydantic v2 schemas of every record `judge` reads or writes.

Content is a list of segments in reading order, as the Hugging Face chat format has
them: ``{"type": "text", "text": ...}`` or ``{"type": "image", "image": "images/x.png"}``.
MMIE's native forms are accepted and normalised on the way in:

* a bare string                          -> one text segment
* ``[{"text": str|None, "image": str|None}, ...]`` -> text then image per item
* ``None`` (for optional fields)         -> no content
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    StrictInt,
    field_validator,
    model_serializer,
    model_validator,
)

from judge.core.errors import Location


class StrictModel(BaseModel):
    """A pydantic model that refuses unknown keys (a misspelt field is an error naming it, not ignored):
    the base of every record, rubric and config model."""

    model_config = ConfigDict(extra="forbid")


class TextSegment(StrictModel):
    type: Literal["text"] = "text"
    text: str


class ImageSegment(StrictModel):
    type: Literal["image"] = "image"
    image: str = Field(
        min_length=1, description="Path relative to the record file's folder (or --root), or a URL."
    )


Segment = Annotated[TextSegment | ImageSegment, Field(discriminator="type")]


def normalize_content(value: Any) -> Any:
    """Turn any accepted content form into the canonical list of segment dicts.

    Unknown shapes are passed through unchanged so that pydantic reports them
    with their exact location.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return value
    out: list[Any] = []
    for item in value:
        if isinstance(item, str):
            out.append({"type": "text", "text": item})
        elif isinstance(item, dict) and "type" not in item and set(item) <= {"text", "image"} and item:
            # MMIE native item: {"text": str|None, "image": str|None}; text reads before its image.
            if item.get("text") not in (None, ""):
                out.append({"type": "text", "text": item["text"]})
            if item.get("image") not in (None, ""):
                out.append({"type": "image", "image": item["image"]})
        else:
            out.append(item)
    return out


Content = list[Segment]


def content_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The fields of a record model that hold content, hence may hold image segments, in declaration
    order: every field whose type mentions :class:`ImageSegment` (``question``, ``response``,
    ``reference``). Read from the schema, so a content field added later is found without a list to keep."""

    def mentions(tp: Any) -> bool:
        return tp is ImageSegment or any(mentions(arg) for arg in get_args(tp))

    return tuple(name for name, f in model.model_fields.items() if mentions(f.annotation))


def content_images(content: list[TextSegment | ImageSegment] | None) -> list[str]:
    """Image references of a content list, in reading order."""
    return [s.image for s in content or [] if isinstance(s, ImageSegment)]


def record_texts(rec: BaseModel) -> list[str]:
    """The text segments of every content field of a record, in field and reading order."""
    return [
        s.text
        for name in content_fields(type(rec))
        for s in getattr(rec, name) or []
        if isinstance(s, TextSegment)
    ]


def content_text(content: list[TextSegment | ImageSegment] | None, image_marker: str = "<image>") -> str:
    """Plain-text rendering of content, images shown as ``image_marker``."""
    return "".join(s.text if isinstance(s, TextSegment) else image_marker for s in content or [])


DEFAULT_ANNOTATOR = "annotator"


class AnnotationRecord(StrictModel):
    """One human-scored response (one line of ``annotations/*.jsonl``)."""

    id: str = Field(min_length=1)
    task: str = Field(min_length=1, description="Task family of the rubric (MMIE: SA, PBL, MSR).")
    question: Content = Field(min_length=1)
    response: Content
    reference: Content | None = None
    model: str = Field(default="unknown", description="Who wrote the response.")
    question_id: str | None = Field(
        default=None,
        description="Groups responses to the same question (splits keep them together). "
        "Defaults to a hash of the question content.",
    )
    scores: dict[str, dict[str, StrictInt]] = Field(
        description="{annotator: {criterion: int, ..., 'overall': int}}; a single-annotator "
        "shorthand {criterion: int} is accepted."
    )
    rationale: dict[str, str] | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    #: Where the record was read from (set by the loaders; not serialised).
    _source: Location | None = PrivateAttr(default=None)
    #: Whether ``question_id`` is the default (the question's hash), not given (not serialised).
    _question_id_default: bool = PrivateAttr(default=False)

    _norm_q = field_validator("question", "response", "reference", mode="before")(normalize_content)

    @field_validator("scores", mode="before")
    @classmethod
    def _single_annotator_shorthand(cls, v: Any) -> Any:
        if isinstance(v, dict) and v and all(not isinstance(x, dict) for x in v.values()):
            return {DEFAULT_ANNOTATOR: v}
        return v

    @field_validator("scores")
    @classmethod
    def _non_empty_scores(cls, v: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        if not v:
            raise ValueError("needs at least one annotator with scores")
        for annotator, crit in v.items():
            if not crit:
                raise ValueError(f"annotator {annotator!r} gives no scores")
        return v

    @model_validator(mode="before")
    @classmethod
    def _drop_prediction_benchmark(cls, v: Any) -> Any:
        # A label is a prediction line (as `judge-data sample` writes it) with `scores` added: its
        # `benchmark` is accepted and dropped, not refused as an unknown field.
        if isinstance(v, dict) and "benchmark" in v and isinstance(v["benchmark"], str):
            return {k: x for k, x in v.items() if k != "benchmark"}
        return v

    @field_validator("rationale", mode="before")
    @classmethod
    def _rationale_shorthand(cls, v: Any) -> Any:
        if isinstance(v, str):
            return {DEFAULT_ANNOTATOR: v}
        return v

    @model_validator(mode="after")
    def _fill_question_id(self) -> AnnotationRecord:
        if self.question_id is None:
            self.question_id = "q-" + content_hash(self.question)[:16]
            self._question_id_default = True
        if self.rationale:
            unknown = set(self.rationale) - set(self.scores)
            if unknown:
                raise ValueError(
                    f"rationale given for annotator(s) {sorted(unknown)} who gave no scores "
                    f"(annotators with scores: {sorted(self.scores)})"
                )
        return self

    @property
    def annotators(self) -> list[str]:
        return list(self.scores)

    @property
    def images(self) -> list[str]:
        """Every image the judge sees for this record, in prompt order (question, reference, response)."""
        return content_images(self.question) + content_images(self.reference) + content_images(self.response)


class PredictionRecord(StrictModel):
    """One candidate model output to score (input of ``judge-score``)."""

    id: str = Field(min_length=1)
    benchmark: str = Field(min_length=1)
    task: str = Field(min_length=1)
    question: Content = Field(min_length=1)
    response: Content
    model: str = "unknown"
    choices: list[str] | None = None
    answer: str | None = None
    reference: Content | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    _source: Location | None = PrivateAttr(default=None)

    _norm = field_validator("question", "response", "reference", mode="before")(normalize_content)

    @field_validator("response", mode="before")
    @classmethod
    def _none_response_is_empty(cls, v: Any) -> Any:
        # A model that produced nothing still gets a record (an empty response), scored as such.
        return [] if v is None else v


class ScoreRecord(StrictModel):
    """One score of one response (output of ``judge-score``).

    ``score`` is a number, or ``None`` with a ``status`` other than ``ok`` and a
    ``reason``: an unscorable item is never a silent 0 or a dropped row.
    """

    id: str = Field(min_length=1)
    benchmark: str
    task: str
    model: str = "unknown"
    metric: str = Field(min_length=1, description="'judge', or the rule-based metric's name.")
    criterion: str | None = Field(
        default=None, description="Rubric criterion id, 'overall', or None for a metric."
    )
    score: float | None
    status: Literal["ok", "unscorable", "error"] = "ok"
    reason: str | None = None
    criteria: dict[str, float | None] | None = None
    distribution: list[float] | None = Field(
        default=None,
        description="Probability of each scale value, lowest first (judge scores); a calibrated judge's "
        "calibrated distribution, whose mean is `score`.",
    )
    argmax: int | None = Field(
        default=None, description="The most probable scale value of `distribution` (judge scores)."
    )
    raw_score: float | None = Field(
        default=None,
        description="A calibrated judge score's uncalibrated value (the read-out's expected score); "
        "producer.calibration names the calibration.",
    )
    raw_distribution: list[float] | None = Field(
        default=None, description="A calibrated judge score's uncalibrated distribution (the read-out's)."
    )
    raw_argmax: int | None = Field(
        default=None, description="The most probable scale value of `raw_distribution`."
    )
    interval: list[float] | None = Field(
        default=None,
        description="[low, high]: the calibrated judge's conformal interval for the human score, at the "
        "level producer.calibration states.",
    )
    trusted: bool | None = Field(
        default=None,
        description="Selective evaluation (a judge with judge-calibrate --selective): true when the judge "
        "keeps this score, false when it escalates it to a human; producer.selective names the thresholds "
        "and the agreement they guarantee.",
    )
    trained: bool | None = Field(
        default=None,
        description="false: the judge's card says it was not trained on this criterion (asked for by name), so "
        "the score is the untrained model's reading; absent otherwise.",
    )
    producer: dict[str, Any] = Field(
        default_factory=dict,
        description="What produced the score: judge checkpoint id and rubric hash, or metric name and version.",
    )
    details: dict[str, Any] | None = Field(
        default=None,
        description="How the score came about, e.g. a metric's extracted answer and gold answer, or a rationale.",
    )

    @model_validator(mode="after")
    def _null_needs_reason(self) -> ScoreRecord:
        if self.score is None and (self.status == "ok" or not self.reason):
            raise ValueError("a null score needs a status other than 'ok' and a reason")
        if self.score is not None and self.status != "ok":
            raise ValueError(f"status {self.status!r} but a score is given")
        for name in ("distribution", "raw_distribution"):
            dist = getattr(self, name)
            if dist is not None and abs(sum(dist) - 1.0) > 1e-3:
                raise ValueError(f"{name} sums to {sum(dist):.4f}, not 1")
        if self.interval is not None:
            if self.score is None or len(self.interval) != 2 or not self.interval[0] <= self.interval[1]:
                raise ValueError(
                    f"interval {self.interval} must be [low, high] with low <= high, beside a score"
                )
        return self

    @model_serializer(mode="wrap")
    def _calibration_fields_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Only a calibrated judge's records carry the raw_ fields and interval, only a selective judge's
        # `trusted`, only an untrained criterion's `trained`; the others keep their shape.
        out = handler(self)
        for key in ("raw_score", "raw_distribution", "raw_argmax", "interval", "trusted", "trained"):
            if out.get(key, 0) is None:
                del out[key]
        return out


class ItemScores(BaseModel):
    """One item's scores, as :meth:`judge.Judge.score` returns them: the record of each criterion scored,
    in the rubric's order (``overall`` last). ``item["text_quality"]`` is a criterion's
    :class:`ScoreRecord`; :attr:`score` the ``overall`` expected score; :attr:`records` the flat list."""

    id: str
    task: str
    model: str = "unknown"
    benchmark: str
    criteria: dict[str, ScoreRecord] = Field(default_factory=dict)

    def __getitem__(self, criterion: str) -> ScoreRecord:
        return self.criteria[criterion]

    @property
    def records(self) -> list[ScoreRecord]:
        return list(self.criteria.values())

    @property
    def score(self) -> float | None:
        """The expected ``overall`` score (calibrated where the judge carries a calibration), or None."""
        rec = self.criteria.get("overall")
        return rec.score if rec is not None else None

    @property
    def scores(self) -> dict[str, float | None]:
        """Each criterion's score."""
        return {c: r.score for c, r in self.criteria.items()}

    @property
    def ok(self) -> bool:
        """Every criterion asked for was scored."""
        return all(r.status == "ok" for r in self.criteria.values())


def in_item_order(items: Sequence[Any], records: Sequence[ScoreRecord]) -> list[ScoreRecord]:
    """``records`` in the order of the items they score (prediction records: ``benchmark``, ``model``,
    ``id``), each item's records in their own order."""
    order = {(i.benchmark, i.model, i.id): k for k, i in enumerate(items)}
    return sorted(records, key=lambda r: order.get((r.benchmark, r.model, r.id), len(order)))


def item_scores(items: Sequence[Any], records: Sequence[ScoreRecord]) -> list[ItemScores]:
    """The records regrouped per item, in ``items``' order (prediction records: ``benchmark``, ``model``,
    ``id``, ``task``); each item's criteria in the order of ``records``."""
    out = [ItemScores(id=i.id, task=i.task, model=i.model, benchmark=i.benchmark) for i in items]
    where = {(i.benchmark, i.model, i.id): k for k, i in enumerate(items)}
    for r in records:
        k = where.get((r.benchmark, r.model, r.id))
        if k is not None and r.criterion is not None:
            out[k].criteria[r.criterion] = r
    return out


def content_hash(content: Any) -> str:
    """Stable hash of content (or any JSON-able value built from models)."""
    if isinstance(content, list):
        content = [c.model_dump() if isinstance(c, BaseModel) else c for c in content]
    blob = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
