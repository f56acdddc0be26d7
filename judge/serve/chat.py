"""``POST /v1/chat/completions``: the judge behind the OpenAI chat API (what the ``openai`` client,
lmms-eval and VLMEvalKit send).

One route, two answers:

* **The judge's own rubric prompt** (what :func:`judge_chat_messages` builds, or any prompt identical to
  it): ``content`` is the score, the argmax of the scale distribution as text, and a top-level ``judge``
  field carries ``expected``, ``argmax``, ``distribution``, ``scale`` and ``scale_mass``, read by the
  engine ``judge-score`` and ``/v1/score`` use (``JudgeEngine.prepare`` / ``score_prepared``: the same
  encoding, tile fitting and :class:`~judge.models.readout.ExpectedScorer`), so ``judge.expected`` is
  ``/v1/score``'s score for that item and criterion. With ``logprobs`` the one token is the score, its
  ``top_logprobs`` the scale values, at their full-vocabulary log-probabilities
  (``log(distribution * scale_mass)``). A calibrated judge answers with its calibrated view throughout
  (content, ``expected``, ``argmax``, ``distribution``, logprobs: what ``/v1/score`` gives), its read-out
  in ``judge.raw_expected``, ``raw_argmax``, ``raw_distribution``, with the ``interval``; a judge with
  selective evaluation adds ``judge.trusted``.
* **Any other conversation**: greedy generation with the judge model, its prompt rendered with the
  processor's chat template and images expanded exactly as the scorer does
  (:func:`~judge.models.readout.encode_prompts`). It is never taken for a score: the reply's ``judge``
  is null and its ``X-Judge-Scored`` header ``false`` (``true`` on a scored reply). Under
  ``--chat judge-only`` such a conversation is refused with a 422 that says how to build the judge's prompt.

How a rubric prompt is recognised (:func:`match_judge_prompt`). Leading system messages are set aside;
what remains must be one user message.
Its parts are flattened to one string (texts joined, each image a marker character), since clients may
merge or split text parts. :func:`~judge.core.template.build_judge_prompt` is run once per (family,
criterion) of the served rubric on sentinel contents, which yields the template's fixed text around the
question, reference and response, never copied here. A request that starts and ends with one
family/criterion's fixed text is split at the fixed separators into question, reference and response;
the prompt is then rebuilt from those parts with the served target format and must equal the request
exactly, images included. Anything else is a plain conversation.

Parameters: ``model`` (one of the served names, echoed in the reply; else 404), ``messages``,
``max_tokens`` / ``max_completion_tokens`` (capped by ``--max-new-tokens`` and the context budget),
``temperature`` and ``top_p`` (0 or absent, and 1 or absent: decoding is greedy; anything else is a 422,
or under ``--sampling greedy`` accepted, decoded greedily all the same and said in the
``X-Judge-Sampling`` header), ``n`` (1), ``logprobs``, ``top_logprobs`` (0..20), ``response_format``
(text), ``stream`` (false), ``seed`` (accepted: greedy decoding is deterministic), ``stop`` (a string or
up to 4), ``timeout`` (seconds, shortening ``--timeout-s``). Other fields are ignored. An image part's ``detail`` is
accepted and ignored: images get the judge's own tiling, as when it scores. Every refusal is a 4xx naming
the field (``messages[1].content[0].image_url``).
"""

from __future__ import annotations

import base64
import io
import math
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judge.core.errors import ConfigError, ImageError, ImageTooLarge, JudgeError
from judge.core.images import ImageLimits, open_image, resolve_image
from judge.core.io import parse_records
from judge.core.rubric import Rubric, load_rubric
from judge.core.schema import AnnotationRecord, PredictionRecord, ScoreRecord
from judge.core.template import TargetFormat, build_judge_prompt
from judge.scoring.inputs import annotation_as_prediction
from judge.serve.service import JudgeService, RequestError, RequestImages

#: Most ``top_logprobs`` a request may ask for (OpenAI's limit).
MAX_TOP_LOGPROBS = 20
#: Most ``stop`` sequences (OpenAI's limit).
MAX_STOP = 4
#: What a token of zero probability reports as its log-probability (JSON has no -inf; OpenAI uses it too).
MIN_LOGPROB = -9999.0

# "developer" is what newer OpenAI clients send instead of "system".
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_DETAILS = (None, "auto", "low", "high")
#: Stands for an image in a flattened prompt (a request's text holding it simply matches no rubric prompt).
_IMAGE = "\x00"


@dataclass
class ChatRequest:
    """A validated request: the conversation in chat-template form and the generation settings."""

    messages: list[dict]  #: ``[{"role", "content": [{"type": "text", "text"} | {"type": "image"}]}]``
    images: list[str] = field(default_factory=list)  #: local image files, in placeholder order
    image_parts: list[str] = field(default_factory=list)  #: where each image is in the request
    max_new_tokens: int = 1
    logprobs: bool = False
    top_logprobs: int = 0
    stop: list[str] = field(default_factory=list)
    deadline: float = math.inf  #: time.monotonic() past which the request is answered 504
    model: str = ""  #: the served name the request asked for (echoed in the reply)
    sampling_ignored: str | None = None  #: what sampling the request asked for, decoded greedily


@dataclass
class JudgeMatch:
    """A request recognised as the judge's rubric prompt: the item and criterion it asks about."""

    family: str
    criterion: str
    record: PredictionRecord


@dataclass
class _Answer:
    content: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    logprobs: list[dict] | None = None
    judge: dict[str, Any] | None = None


# ----------------------------------------------------------------------------- the route


def complete(
    service: JudgeService, body: Mapping[str, Any], timeout: float | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Answer one ``POST /v1/chat/completions`` body: an OpenAI ``chat.completion`` object (see the module
    doc) and the reply's headers: ``X-Judge-Scored`` (``true`` when the reply is the judge's score of its
    own prompt, with a ``judge`` field; ``false``, with ``"judge": null``, for anything else), and
    ``X-Judge-Sampling`` when sampling that was asked for was decoded greedily (``--sampling greedy``).

    Raises :class:`RequestError` for what it refuses (a 4xx naming the field; under ``--chat judge-only``
    a 422 for any conversation that is not the judge's prompt; a 500 for a judge whose score distribution
    is not finite; a 504 past the request's deadline: the server's ``--timeout-s``, shortened by the body's
    ``timeout`` or else by ``timeout``, the X-Request-Timeout header's seconds). The model runs under
    ``service.model_lock``, never past the deadline: waiting for the lock and generating both stop there.
    The request's decoded images are removed before it returns."""
    own = _optional_number(body, "timeout")
    if own is not None and not own > 0:
        raise RequestError(f"`timeout` {own:g} must be a positive number of seconds", param="timeout")
    deadline = service.deadline(own if own is not None else timeout)
    images = RequestImages()
    opened: list = []
    try:
        req = parse_request(service, body, images)
        req.deadline = deadline
        match = match_judge_prompt(service.rubric, req.messages, req.images, service.spec.target_format)
        if match is None and service.cfg.chat == "judge-only":
            raise RequestError(
                "`messages`: this server answers only its judge's own rubric prompt (--chat judge-only), and "
                "this conversation is not one. Build it with judge.judge_chat_messages(rubric, item, "
                "criterion) (GET /v1/judge names the rubric, its families and criteria), or POST the item "
                "to /v1/score",
                param="messages",
                code="not_a_judge_prompt",
            )
        for path, where in zip(req.images, req.image_parts, strict=True):
            try:
                opened.append(open_image(path, service.image_limits))
            except ImageError as e:
                raise RequestError(f"{where}: {e}", param=where, code="invalid_image") from None
        if match is not None:
            answer = _score(service, req, match)  # the engine opens the images itself, as /v1/score does
        else:
            answer = _generate(service, req, opened)
    finally:
        for im in opened:
            im.close()
        images.cleanup()
    headers = {"X-Judge-Scored": "true" if answer.judge is not None else "false"}
    if req.sampling_ignored:
        headers["X-Judge-Sampling"] = f"greedy ({req.sampling_ignored} decoded greedily)"
    return _completion(service, req, answer), headers


def parse_request(service: JudgeService, body: Mapping[str, Any], images: RequestImages) -> ChatRequest:
    """Validate ``body`` as OpenAI does (errors name the field) and make its images local files in
    ``images``' folder (data URLs) or under ``--image-root`` (paths); nothing is fetched."""
    model = body.get("model")
    served = ", ".join(repr(n) for n in service.served_names)
    if not isinstance(model, str) or not model:
        raise RequestError(
            f"`model` is required: this server serves {served} (GET /v1/models)", param="model"
        )
    if model not in service.served_names:
        raise RequestError(
            f"`model` {model!r} is not served here; this server serves {served} (GET /v1/models; "
            "judge-serve --served-name NAME answers to another name)",
            status=404,
            param="model",
            code="model_not_found",
        )
    ignored = _check_sampling(body, service.cfg.sampling)
    legacy = _optional_int(body, "max_tokens", lo=1)
    asked = _optional_int(body, "max_completion_tokens", lo=1)  # the newer name wins when both are sent
    asked = asked if asked is not None else legacy
    max_new = min(asked, service.cfg.max_new_tokens) if asked is not None else service.cfg.max_new_tokens
    logprobs = _optional_bool(body, "logprobs") or False
    top = _optional_int(body, "top_logprobs", lo=0, hi=MAX_TOP_LOGPROBS) or 0
    if top and not logprobs:
        raise RequestError("`top_logprobs` needs `logprobs: true`")
    messages, refs = _messages(body.get("messages"))
    if len(refs) > service.cfg.max_images:
        raise RequestError(
            f"`messages` carry {len(refs)} images, over the limit of {service.cfg.max_images} (--max-images)",
            status=413,
        )
    intake = service.intake(images)
    paths = []
    for where, url in refs:
        try:
            paths.append(intake(url))
        except ImageError as e:
            too_large = isinstance(e, ImageTooLarge)
            raise RequestError(
                f"{where}: {e}", status=413 if too_large else 422, param=where,
                code="image_too_large" if too_large else "invalid_image",
            ) from None  # fmt: skip
    return ChatRequest(
        messages=messages,
        images=paths,
        image_parts=[where for where, _ in refs],
        max_new_tokens=max_new,
        logprobs=logprobs,
        top_logprobs=top,
        stop=_stop(body.get("stop")),
        model=model,
        sampling_ignored=ignored,
    )


def _check_sampling(body: Mapping[str, Any], policy: str) -> str | None:
    """Refuse what cannot be honoured; under ``policy == "greedy"`` a request to sample is accepted, and
    what it asked for is returned (to be said in a header) since decoding stays greedy."""
    temperature = _optional_number(body, "temperature")
    if temperature is not None and temperature < 0:
        raise RequestError(f"`temperature` {temperature:g} must be 0 or more", param="temperature")
    top_p = _optional_number(body, "top_p")
    if top_p is not None and not 0 <= top_p <= 1:
        raise RequestError(f"`top_p` {top_p:g} must be between 0 and 1", param="top_p")
    asked = []
    if temperature is not None and temperature != 0:
        asked.append(f"temperature {temperature:g}")
    if top_p is not None and top_p < 1:
        asked.append(f"top_p {top_p:g}")
    if asked and policy != "greedy":
        raise RequestError(
            f"`{asked[0].split()[0]}` {asked[0].split()[1]}: this server decodes greedily (the judge's scores "
            "are read, not sampled); send temperature 0 or leave it out, or start the server with "
            "--sampling greedy to accept sampling settings and decode greedily anyway",
            param=asked[0].split()[0],
            code="sampling_not_supported",
        )
    n = _optional_int(body, "n", lo=1)
    if n is not None and n != 1:
        raise RequestError(
            f"`n` {n}: only 1 choice per request is supported (greedy decoding gives one)", param="n"
        )
    if _optional_bool(body, "stream"):
        raise RequestError(
            "`stream`: streaming is not supported; send `stream: false` or leave it out", param="stream"
        )
    _optional_int(body, "seed")
    fmt = body.get("response_format")
    if fmt is not None:
        kind = fmt.get("type") if isinstance(fmt, Mapping) else None
        if kind != "text":
            raise RequestError(
                f"`response_format.type` {kind!r} is not supported: this server does not constrain its "
                "output; send {'type': 'text'} or leave `response_format` out",
                param="response_format",
            )
    return ", ".join(asked) or None


def _messages(raw: Any) -> tuple[list[dict], list[tuple[str, str]]]:
    """The messages in chat-template form, and ``(where, url)`` of each image part in order."""
    if not isinstance(raw, list) or not raw:
        raise RequestError("`messages` must be a non-empty list of {role, content} objects")
    out: list[dict] = []
    refs: list[tuple[str, str]] = []
    for i, msg in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(msg, Mapping):
            raise RequestError(f"`{where}` must be an object with `role` and `content`")
        raw_role = msg.get("role")
        role = _ROLES.get(raw_role) if isinstance(raw_role, str) else None
        if role is None:
            raise RequestError(
                f"`{where}.role` {msg.get('role')!r} is not supported; use system, user or assistant"
            )
        content = msg.get("content")
        if isinstance(content, str):
            parts = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            parts = [_part(p, f"{where}.content[{j}]", role, refs) for j, p in enumerate(content)]
        else:
            raise RequestError(
                f"`{where}.content` must be a string or a list of text and image_url parts "
                f"(got {type(content).__name__})"
            )
        out.append({"role": role, "content": parts})
    return out, refs


def _part(part: Any, where: str, role: str, refs: list[tuple[str, str]]) -> dict:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise RequestError(f"`{where}.text` must be a string")
        return {"type": "text", "text": text}
    if kind == "image_url":
        if role != "user":
            raise RequestError(f"`{where}`: images are read from user messages only, not {role} ones")
        spec = part.get("image_url")
        url = spec.get("url") if isinstance(spec, Mapping) else spec
        if not isinstance(url, str) or not url:
            raise RequestError(
                f"`{where}.image_url` must be a URL string or {{'url': ...}} (a base64 data URL, or a path "
                "under the server's --image-root)"
            )
        detail = spec.get("detail") if isinstance(spec, Mapping) else None
        if detail not in _DETAILS:
            raise RequestError(f"`{where}.image_url.detail` {detail!r} is not one of auto, low, high")
        refs.append((f"{where}.image_url", url))
        return {"type": "image"}
    if not isinstance(part, Mapping):
        raise RequestError(f"`{where}` must be a {{'type': 'text' | 'image_url', ...}} object")
    raise RequestError(f"`{where}.type` {kind!r} is not supported; use text or image_url")


def _stop(raw: Any) -> list[str]:
    stops = [raw] if isinstance(raw, str) else raw
    if stops is None:
        return []
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise RequestError("`stop` must be a string or a list of strings")
    if len(stops) > MAX_STOP:
        raise RequestError(f"`stop` has {len(stops)} sequences; at most {MAX_STOP}")
    for k, s in enumerate(stops):
        if not s:
            raise RequestError(f"`stop[{k}]` is empty" if isinstance(raw, list) else "`stop` is empty")
    return stops


def _optional_number(body: Mapping[str, Any], name: str) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RequestError(f"`{name}` must be a number (got {v!r})")
    return float(v)


def _optional_int(
    body: Mapping[str, Any], name: str, lo: int | None = None, hi: int | None = None
) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise RequestError(f"`{name}` must be an integer (got {v!r})")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        bounds = f"from {lo} to {hi}" if hi is not None else f"at least {lo}"
        raise RequestError(f"`{name}` {v} must be {bounds}")
    return v


def _optional_bool(body: Mapping[str, Any], name: str) -> bool | None:
    v = body.get(name)
    if v is not None and not isinstance(v, bool):
        raise RequestError(f"`{name}` must be true or false (got {v!r})")
    return v


# ----------------------------------------------------------------------------- the rubric prompt


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
                flat = _flatten(build_judge_prompt(rubric, fam_id, crit, q, r, f, target_format).messages)
                order = [s for s in _SENTINELS if s in flat]  # the reference only where the family shows it
                head, rest = flat.split(order[0], 1)
                seps = []
                for s in order[1:]:
                    sep, rest = rest.split(s, 1)
                    seps.append(sep)
                probes.append(_Probe(fam_id, crit, head, tuple(seps), rest))
        _PROBES[key] = probes
    return _PROBES[key]


def _flatten(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of single-message chat parts, each image as :data:`_IMAGE` (text part boundaries dropped)."""
    return "".join(p["text"] if p["type"] == "text" else _IMAGE for m in messages for p in m["content"])


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
    flat = _flatten(messages)
    if flat.count(_IMAGE) != len(images):
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
            if _flatten(rebuilt.messages) == flat and rebuilt.images == list(images):
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
        for k, piece in enumerate(text.split(_IMAGE)):
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


def _score(service: JudgeService, req: ChatRequest, match: JudgeMatch) -> _Answer:
    """The rubric prompt's score, read as /v1/score reads it (the engine's prepare and score_prepared)."""
    engine = service.engine
    prepared = engine.prepare(match.record, [match.criterion], key=0)
    if prepared.encoded is not None:
        with _model(service, req):
            for _ in engine.score_prepared([prepared]):
                pass
    rec: ScoreRecord = prepared.records[0]
    details = rec.details or {}
    if rec.score is None or rec.distribution is None or rec.argmax is None:
        code = details.get("reason_code")
        raise RequestError(
            f"`messages`: the judge's rubric prompt cannot be scored: {rec.reason}",
            status=500 if code == "non_finite" else 422,
        )
    values = list(service.rubric.scale.values)
    dist = list(rec.distribution)
    mass = float(details["scale_mass"])
    logprobs = None
    if req.logprobs:
        tok = engine.scorer.tokenizer
        entries = [
            _token_logprob(tok, tid, _log(p * mass))
            for tid, p in zip(engine.scorer.score_ids, dist, strict=True)
        ]
        best = entries[values.index(rec.argmax)]
        top = sorted(entries, key=lambda e: -e["logprob"])[: req.top_logprobs]
        logprobs = [{**best, "top_logprobs": top}]
    return _Answer(
        content=str(rec.argmax),
        finish_reason="stop",
        prompt_tokens=int(details["num_tokens"]),
        completion_tokens=1,
        logprobs=logprobs,
        judge={
            "criterion": match.criterion,
            "family": match.family,
            "expected": rec.score,
            "argmax": rec.argmax,
            "distribution": dist,
            "scale": values,
            "scale_mass": mass,
            **(
                {
                    "interval": rec.interval,
                    "raw_expected": rec.raw_score,
                    "raw_argmax": rec.raw_argmax,
                    "raw_distribution": rec.raw_distribution,
                }
                if rec.interval is not None
                else {}
            ),
            **({"trusted": rec.trusted} if rec.trusted is not None else {}),
        },
    )


# ----------------------------------------------------------------------------- generation


def _generate(service: JudgeService, req: ChatRequest, images: list) -> _Answer:
    """Greedy generation with the judge model, under the model lock."""
    import torch
    from transformers import GenerationConfig

    from judge.models.readout import _float_dtype

    engine = service.engine
    model, tok = engine.scorer.model, engine.scorer.tokenizer
    ids, pixel_values = _encode(engine.processor, req.messages, images, engine.max_tokens)
    max_new = min(req.max_new_tokens, engine.max_tokens - len(ids))
    gen = model.generation_config
    eos = gen.eos_token_id if gen.eos_token_id is not None else tok.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    pad = gen.pad_token_id if gen.pad_token_id is not None else tok.pad_token_id
    device = engine.scorer.device
    input_ids = torch.tensor([ids], device=device)
    # No pixel_values key at all without images: transformers runs the vision encoder on any it is given.
    extra = {"pixel_values": pixel_values.to(device, _float_dtype(model))} if pixel_values is not None else {}
    with _model(service, req), torch.inference_mode():
        # A fresh config: plain argmax decoding, whatever sampling defaults the model's own config carries;
        # max_time stops it at the request's deadline, so it never holds the model past it.
        config = GenerationConfig(
            max_new_tokens=max_new, do_sample=False, num_beams=1, eos_token_id=eos,
            pad_token_id=pad if pad is not None else next(iter(eos_ids), 0),
            stop_strings=req.stop or None, return_dict_in_generate=True, output_logits=req.logprobs,
            max_time=_remaining(req),
        )  # fmt: skip
        out = model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            generation_config=config,
            tokenizer=tok,  # for stop_strings
            **extra,
        )
    if time.monotonic() > req.deadline:
        raise _past_deadline("generating")
    new = out.sequences[0, len(ids) :].tolist()
    text = tok.decode(new, skip_special_tokens=True)
    cuts = [i for i in (text.find(s) for s in req.stop) if i >= 0]
    if cuts:
        text, finish = text[: min(cuts)], "stop"
    elif (new and new[-1] in eos_ids) or len(new) < max_new:
        finish = "stop"
    else:
        finish = "length"
    logprobs = None
    if req.logprobs:
        logprobs = _generated_logprobs(
            tok, new, out.logits, req.top_logprobs, eos_ids, len(text) if cuts else None
        )
    return _Answer(text, finish, len(ids), len(new), logprobs)


@contextmanager
def _model(service: JudgeService, req: ChatRequest) -> Iterator[None]:
    """``service.model_lock``, waited for no longer than the request's deadline (then a 504)."""
    if not service.model_lock.acquire(timeout=_remaining(req)):
        raise _past_deadline("waiting for the model")
    try:
        yield
    finally:
        service.model_lock.release()


def _remaining(req: ChatRequest) -> float:
    left = req.deadline - time.monotonic()
    if left <= 0:
        raise _past_deadline("waiting")
    return left


def _past_deadline(doing: str) -> RequestError:
    return RequestError(
        f"the request passed its deadline while {doing} (raise `timeout` or X-Request-Timeout up to the "
        "server's --timeout-s, or ask for fewer `max_tokens`)",
        status=504,
        code="timeout",
    )


def _encode(processor, messages: list[dict], images: list, budget: int):
    """Token ids and pixel values of the conversation, as the scorer encodes its prompts; over the context
    budget, fewer tiles per image first (as the engine does), then a 422 naming the lengths."""
    from jinja2 import TemplateError

    from judge.models.readout import encode_prompts

    base = getattr(getattr(processor, "image_processor", None), "max_patches", None)
    try:
        ids, pv = encode_prompts(processor, [messages], images)
        if len(ids[0]) >= budget and images and base:
            for tiles in range(int(base) - 1, 0, -1):
                ids, pv = encode_prompts(processor, [messages], images, tiles)
                if len(ids[0]) < budget:
                    break
    except (JudgeError, ValueError, TemplateError) as e:
        raise RequestError(f"`messages`: the chat template cannot render this conversation: {e}") from None
    n = len(ids[0])
    if n >= budget:
        one_tile = " with one tile per image" if images and base else ""
        raise RequestError(
            f"`messages`: the prompt is {n} tokens{one_tile}; the context budget is {budget} tokens "
            "(--max-tokens), prompt and at least one generated token together: shorten the conversation or "
            "send fewer images"
        )
    return ids[0], pv


def _generated_logprobs(tok, new: list[int], logits, top: int, eos_ids: set, cut: int | None) -> list[dict]:
    """OpenAI ``logprobs.content`` of generated tokens: end-of-sequence tokens left out, and with a stop
    sequence cut, only the tokens that start before the cut."""
    import torch

    out = []
    for k, (tid, step) in enumerate(zip(new, logits, strict=True)):
        if tid in eos_ids:
            break
        if cut is not None and len(tok.decode(new[:k], skip_special_tokens=True)) >= cut:
            break
        lp = torch.log_softmax(step[0].float(), dim=-1)
        entry = _token_logprob(tok, tid, float(lp[tid]))
        if top:
            values, idx = lp.topk(top)
            entry["top_logprobs"] = [
                _token_logprob(tok, int(i), float(v))
                for v, i in zip(values.tolist(), idx.tolist(), strict=True)
            ]
        else:
            entry["top_logprobs"] = []
        out.append(entry)
    return out


def _token_logprob(tok, tid: int, logprob: float) -> dict[str, Any]:
    text = tok.decode([tid])
    data = text.encode("utf-8")
    if (
        "\ufffd" in text
    ):  # part of a multi-byte character: the token's own bytes, from the byte-level alphabet
        raw = _byte_level_bytes(tok.convert_ids_to_tokens(tid))
        data = raw if raw is not None else data
    lp = logprob if math.isfinite(logprob) else MIN_LOGPROB
    return {"token": text, "logprob": max(lp, MIN_LOGPROB), "bytes": list(data)}


_BYTE_DECODER: dict[str, int] | None = None


def _byte_level_bytes(token: str) -> bytes | None:
    """A byte-level BPE token's bytes (GPT-2's printable alphabet), or None for a token of another kind."""
    global _BYTE_DECODER
    if _BYTE_DECODER is None:
        keep = [
            *range(ord("!"), ord("~") + 1),
            *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1),
        ]
        chars = list(keep)
        n = 0
        for b in range(256):
            if b not in keep:
                keep.append(b)
                chars.append(256 + n)
                n += 1
        _BYTE_DECODER = {chr(c): b for b, c in zip(keep, chars, strict=True)}
    if not token or any(ch not in _BYTE_DECODER for ch in token):
        return None
    return bytes(_BYTE_DECODER[ch] for ch in token)


def _log(p: float) -> float:
    return math.log(p) if p > 0 else MIN_LOGPROB


def _completion(service: JudgeService, req: ChatRequest, answer: _Answer) -> dict[str, Any]:
    logprobs = {"content": answer.logprobs, "refusal": None} if answer.logprobs is not None else None
    out: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.model,
        "system_fingerprint": f"fp_{service.spec.fingerprint[:16]}" if service.spec.fingerprint else None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer.content, "refusal": None},
                "finish_reason": answer.finish_reason,
                "logprobs": logprobs,
            }
        ],
        "usage": {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        },
        # The judge's reading of its own prompt, or null: a reply without it is generated text, not a score.
        "judge": answer.judge,
    }
    return out


# ----------------------------------------------------------------------------- building the rubric prompt


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
    inspect-ai types) or such dicts. ``None`` when no scale value is among them; ask for ``top_logprobs``
    of at least the scale's size (7 for 0-6) to get all of them."""
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
    img = open_image(path, limits or ImageLimits())  # checks it exists, is within limits and decodes
    try:
        from PIL import Image

        with Image.open(path) as raw:
            fmt = raw.format
        if fmt in ("JPEG", "PNG"):
            data, mime = Path(path).read_bytes(), f"image/{fmt.lower()}"
        else:  # lossless, so the judge sees the same pixels as when it reads the file itself
            buf = io.BytesIO()
            img.save(buf, "PNG")
            data, mime = buf.getvalue(), "image/png"
    finally:
        img.close()
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


__all__ = [
    "ChatRequest",
    "JudgeMatch",
    "complete",
    "judge_chat_messages",
    "match_judge_prompt",
    "parse_request",
    "score_from_logprobs",
]
