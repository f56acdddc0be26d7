"""The judge's own rubric prompt as chat messages: building it (:func:`judge_chat_messages`, what a client
sends), recognising it in a request (:func:`match_judge_prompt`, what the chat route scores), and reading
a score back from a reply's log-probabilities (:func:`score_from_logprobs`).

How a rubric prompt is recognised. Leading system messages are set aside; what remains must be one user
message. Its parts are flattened to one string (texts joined, each image :data:`IMAGE`), since clients
may merge or split text parts. :func:`~judge.core.template.build_judge_prompt` is run once per (family,
criterion) of the served rubric on sentinel contents, which yields the template's fixed text around the
question, reference and response, never copied here. A request that starts and ends with one
family/criterion's fixed text is split at the fixed separators into question, reference and response;
the prompt is then rebuilt from those parts with the served target format and must equal the request
exactly, images included. Anything else is not the judge's prompt.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judge.core.errors import ConfigError
from judge.core.image_headers import sniff_format
from judge.core.images import ImageLimits, open_image, read_image_bytes, resolve_image
from judge.core.io import parse_records
from judge.core.rubric import Rubric, load_rubric
from judge.core.schema import AnnotationRecord, PredictionRecord
from judge.core.template import TargetFormat, build_judge_prompt
from judge.scoring.inputs import annotation_as_prediction

#: Stands for an image in a flattened prompt (a request's text holding it simply matches no rubric prompt).
IMAGE = "\x00"


@dataclass
class JudgeMatch:
    """A request recognised as the judge's rubric prompt: the item and criterion it asks about."""

    family: str
    criterion: str
    record: PredictionRecord


@dataclass(frozen=True)
class _Probe:
    family: str
    criterion: str
    head: str  #: fixed text before the question
    seps: tuple[str, ...]  #: fixed text between the question, (reference,) and response
    tail: str  #: fixed text after the response: the criterion's own question


_PROBES: dict[tuple[str, str], list[_Probe]] = {}
_SENTINELS = ("\x01question\x01", "\x01reference\x01", "\x01response\x01")


def _probes(rubric: Rubric, target_format: TargetFormat) -> list[_Probe]:
    """The template's fixed text for every (family, criterion), from build_judge_prompt itself."""
    key = (rubric.hash, target_format)
    if key not in _PROBES:
        q, f, r = ([{"type": "text", "text": s}] for s in _SENTINELS)
        probes = []
        for fam_id, fam in rubric.families.items():
            for crit in fam.criterion_ids:
                flat = flatten(build_judge_prompt(rubric, fam_id, crit, q, r, f, target_format).messages)
                order = [s for s in _SENTINELS if s in flat]  # the reference only where the family shows it
                head, rest = flat.split(order[0], 1)
                seps = []
                for s in order[1:]:
                    sep, rest = rest.split(s, 1)
                    seps.append(sep)
                probes.append(_Probe(fam_id, crit, head, tuple(seps), rest))
        _PROBES[key] = probes
    return _PROBES[key]


def flatten(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of single-message chat parts, each image as :data:`IMAGE` (text part boundaries dropped)."""
    return "".join(p["text"] if p["type"] == "text" else IMAGE for m in messages for p in m["content"])


def match_judge_prompt(
    rubric: Rubric, messages: Sequence[Mapping[str, Any]], images: Sequence[str], target_format: TargetFormat
) -> JudgeMatch | None:
    """The item and criterion when ``messages`` (chat-template form, images in order as ``images``) are
    exactly the judge's prompt for them in ``target_format``; else None. See the module doc. Leading system
    messages (a harness's own preamble) are set aside: the judge's prompt has none, and they change no
    score."""
    while messages and messages[0]["role"] == "system":
        messages = messages[1:]
    if len(messages) != 1 or messages[0]["role"] != "user":
        return None
    flat = flatten(messages)
    if flat.count(IMAGE) != len(images):
        return None
    for probe in _probes(rubric, target_format):
        if len(flat) < len(probe.head) + len(probe.tail):
            continue
        if not (flat.startswith(probe.head) and flat.endswith(probe.tail)):
            continue
        middle = flat[len(probe.head) : len(flat) - len(probe.tail)]
        for pieces in _splits(middle, probe.seps):
            rec = _as_record(rubric, probe.family, pieces, images)
            if rec is None:
                continue
            rebuilt = build_judge_prompt(
                rubric,
                probe.family,
                probe.criterion,
                rec.question,
                rec.response,
                rec.reference,
                target_format,
            )
            if flatten(rebuilt.messages) == flat and rebuilt.images == list(images):
                return JudgeMatch(probe.family, probe.criterion, rec)
    return None


def _splits(text: str, seps: tuple[str, ...], limit: int = 8) -> Iterator[list[str]]:
    """Ways to cut ``text`` at ``seps`` in order (at most ``limit`` places per separator: a question that
    quotes a heading still splits right, a crafted one cannot make this slow)."""
    if not seps:
        yield [text]
        return
    start = 0
    for _ in range(limit):
        i = text.find(seps[0], start)
        if i < 0:
            return
        for rest in _splits(text[i + len(seps[0]) :], seps[1:], limit):
            yield [text[:i], *rest]
        start = i + 1


def _as_record(
    rubric: Rubric, family: str, pieces: list[str], images: Sequence[str]
) -> PredictionRecord | None:
    it = iter(images)

    def content(text: str) -> list[dict]:
        out: list[dict] = []
        for k, piece in enumerate(text.split(IMAGE)):
            if k:
                out.append({"type": "image", "image": next(it)})
            if piece:
                out.append({"type": "text", "text": piece})
        return out

    question = content(pieces[0])
    reference = content(pieces[1]) if len(pieces) == 3 else None
    response = content(pieces[-1])
    try:
        return PredictionRecord(
            id="chat", benchmark=rubric.name, task=family, question=question, response=response,
            reference=reference,
        )  # fmt: skip
    except ValidationError:  # e.g. an empty question: not a prompt the template makes
        return None


def judge_chat_messages(
    rubric: Rubric | str,
    item: Mapping[str, Any] | PredictionRecord | AnnotationRecord,
    criterion: str,
    target_format: TargetFormat = "score",
    root: str | Path | None = None,
) -> list[dict]:
    """The OpenAI chat messages asking the judge to score ``item`` on ``criterion``: exactly
    :func:`~judge.core.template.build_judge_prompt`'s prompt, one user message of text parts and
    ``image_url`` parts carrying the item's image files as base64 data URLs (JPEG and PNG as they are,
    other formats as PNG).

    ``rubric``: a :class:`Rubric` or its name / YAML path. ``item``: a prediction or annotation record, or
    a dict in any form the loaders read; relative image paths resolve from ``root`` (default: the working
    directory) and may not leave it. Sent to ``judge-serve``'s ``/v1/chat/completions`` with the served
    judge's target format, the reply's content is the score and its ``judge`` field the expected score
    ``/v1/score`` gives. Raises :class:`~judge.core.errors.JudgeError` subclasses naming what is wrong.
    """
    rub = load_rubric(rubric) if isinstance(rubric, (str, Path)) else rubric
    rec = _prediction(rub, item, root)
    fam = rub.families.get(rec.task)
    if fam is None:
        raise ConfigError(
            f"item {rec.id!r}: task {rec.task!r} is not a family of rubric {rub.name!r} "
            f"(families: {', '.join(sorted(rub.families))})"
        )
    if criterion not in fam.criterion_ids:
        raise ConfigError(
            f"criterion {criterion!r} is not a criterion of task family {rec.task!r} "
            f"(its criteria: {', '.join(fam.criterion_ids)})"
        )
    prompt = build_judge_prompt(
        rub, rec.task, criterion, rec.question, rec.response, rec.reference, target_format
    )
    base = Path(root) if root is not None else Path.cwd()
    # Absolute paths were checked against their root when the record was read; relative ones resolve here.
    urls = iter(
        _data_url(ref if Path(ref).is_absolute() else resolve_image(ref, base)) for ref in prompt.images
    )
    content = [
        {"type": "text", "text": p["text"]}
        if p["type"] == "text"
        else {"type": "image_url", "image_url": {"url": next(urls)}}
        for p in prompt.messages[0]["content"]
    ]
    return [{"role": "user", "content": content}]


def score_from_logprobs(top_logprobs: Sequence[Any], scale: Sequence[int] = tuple(range(7))) -> float | None:
    """The judge's expected score from an OpenAI-style reply's ``top_logprobs`` of its one score token: the
    scale values' probabilities, renormalised, weighting the values (what ``/v1/score`` computes from the
    same distribution). Entries are objects with ``token`` and ``logprob`` (the openai, litellm and
    inspect-ai types) or such dicts. ``None`` when no scale value is among them.

    Raises ValueError when there are fewer entries than the scale has values (ask for ``top_logprobs`` of at
    least the scale's size, 7 for 0-6): the missing values' probability would be dropped, and the score
    silently wrong."""
    if len(top_logprobs) < len(scale):
        raise ValueError(
            f"score_from_logprobs got {len(top_logprobs)} top_logprobs, but the scale has {len(scale)} values "
            f"({min(scale)}-{max(scale)}): ask for top_logprobs={len(scale)} or more, or the score leaves out "
            "the probability of the values not returned"
        )
    probs: dict[int, float] = {}
    for entry in top_logprobs:
        token = entry.get("token") if isinstance(entry, Mapping) else getattr(entry, "token", None)
        logprob = entry.get("logprob") if isinstance(entry, Mapping) else getattr(entry, "logprob", None)
        if (
            isinstance(token, str)
            and token.strip().lstrip("-").isdigit()
            and int(token) in scale
            and logprob is not None
        ):
            probs[int(token)] = probs.get(int(token), 0.0) + math.exp(float(logprob))
    mass = sum(probs.values())
    return sum(v * p for v, p in probs.items()) / mass if mass > 0 else None


def _prediction(rubric: Rubric, item: Any, root: str | Path | None) -> PredictionRecord:
    if isinstance(item, Mapping):
        (item,) = parse_records([item], "auto", root=root, source="item", defaults={"benchmark": rubric.name})
    if isinstance(item, AnnotationRecord):
        return annotation_as_prediction(item, rubric.name)
    if isinstance(item, PredictionRecord):
        return item
    raise ConfigError(
        f"item must be a dict, a PredictionRecord or an AnnotationRecord (got {type(item).__name__})"
    )


def _data_url(path: str, limits: ImageLimits | None = None) -> str:
    limits = limits or ImageLimits()
    data = read_image_bytes(path, limits)  # read once: what is checked and decoded is what is sent
    img = open_image(path, limits, data=data)  # checks the format, the limits and a full decode
    try:
        fmt = sniff_format(data)
        if fmt in ("JPEG", "PNG"):
            mime = f"image/{fmt.lower()}"
        else:  # lossless, so the judge sees the same pixels as when it reads the file itself
            buf = io.BytesIO()
            img.save(buf, "PNG")
            data, mime = buf.getvalue(), "image/png"
    finally:
        img.close()
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


__all__ = [
    "IMAGE",
    "JudgeMatch",
    "flatten",
    "judge_chat_messages",
    "match_judge_prompt",
    "score_from_logprobs",
]
