"""A ``POST /v1/chat/completions`` body, validated as OpenAI validates it (every refusal a 4xx naming the
field), into a :class:`ChatRequest`: the conversation in chat-template form, its images as local files
(through the service's image gate: data URLs, or paths under ``--image-root``; nothing is fetched) and
the generation settings. The route that answers it is :mod:`judge.serve.chat`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from judge.core.errors import ImageError, ImageTooLarge, UnsupportedImage
from judge.serve.service import JudgeService, RequestError, RequestImages

#: Most ``top_logprobs`` a request may ask for (OpenAI's limit).
MAX_TOP_LOGPROBS = 20
#: Most ``stop`` sequences (OpenAI's limit).
MAX_STOP = 4
#: A ``temperature`` at or below this is greedy decoding (ragas sends 0.01): it multiplies every logit gap
#: by 100 or more, so a sample is the argmax but for near-ties; such a request, and ``top_p`` with it or with
#: temperature 0, is accepted and decoded greedily, and the reply says so (``X-Judge-Sampling``).
GREEDY_TEMPERATURE = 0.01
# "developer" is what newer OpenAI clients send instead of "system".
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_DETAILS = (None, "auto", "low", "high")


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
    sampling_greedy: str | None = None  #: sampling settings that are greedy decoding (GREEDY_TEMPERATURE)

    @property
    def sampling_header(self) -> str | None:
        """The ``X-Judge-Sampling`` header: how the request's sampling settings were decoded, if any."""
        if self.sampling_ignored:
            return f"greedy ({self.sampling_ignored} decoded greedily)"
        if self.sampling_greedy:
            return f"greedy ({self.sampling_greedy}: greedy decoding, temperature at most {GREEDY_TEMPERATURE:g})"
        return None


def parse_request(
    service: JudgeService, body: Mapping[str, Any], images: RequestImages, *, sampled_scores: bool = False
) -> ChatRequest:
    """Validate ``body`` as OpenAI does (errors name the field) and make its images local files in
    ``images``' folder (data URLs) or under ``--image-root`` (paths); nothing is fetched. ``sampled_scores``:
    sampling settings are not refused here but recorded (a scored reply is read, not sampled), and
    generation refuses them (:func:`_refuse_sampling`)."""
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
    ignored, greedy = _check_sampling(body, "greedy" if sampled_scores else service.cfg.sampling)
    legacy = optional_int(body, "max_tokens", lo=1)
    asked = optional_int(body, "max_completion_tokens", lo=1)  # the newer name wins when both are sent
    asked = asked if asked is not None else legacy
    max_new = min(asked, service.cfg.max_new_tokens) if asked is not None else service.cfg.max_new_tokens
    logprobs = optional_bool(body, "logprobs") or False
    top = optional_int(body, "top_logprobs", lo=0, hi=MAX_TOP_LOGPROBS) or 0
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
            status, code = (
                (413, "image_too_large") if isinstance(e, ImageTooLarge)
                else (415, "unsupported_image") if isinstance(e, UnsupportedImage)
                else (422, "invalid_image")
            )  # fmt: skip
            raise RequestError(f"{where}: {e}", status=status, param=where, code=code) from None
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
        sampling_greedy=greedy,
    )


def _check_sampling(body: Mapping[str, Any], policy: str) -> tuple[str | None, str | None]:
    """Refuse what cannot be honoured; under ``policy == "greedy"`` a request to sample is accepted, and
    what it asked for is returned first (to be said in a header) since decoding stays greedy. Second:
    settings that are greedy decoding already (a temperature at most :data:`GREEDY_TEMPERATURE`, and
    ``top_p`` with it), accepted under any policy."""
    temperature = optional_number(body, "temperature")
    if temperature is not None and temperature < 0:
        raise RequestError(f"`temperature` {temperature:g} must be 0 or more", param="temperature")
    top_p = optional_number(body, "top_p")
    if top_p is not None and not 0 <= top_p <= 1:
        raise RequestError(f"`top_p` {top_p:g} must be between 0 and 1", param="top_p")
    asked: list[str] = []
    greedy: list[str] = []
    cold = temperature is not None and temperature <= GREEDY_TEMPERATURE
    if temperature is not None and temperature != 0:
        (greedy if cold else asked).append(f"temperature {temperature:g}")
    if top_p is not None and top_p < 1:
        (greedy if cold else asked).append(f"top_p {top_p:g}")  # nucleus of a greedy pick: the pick
    refuse_sampling(", ".join(asked) or None, policy)
    n = optional_int(body, "n", lo=1)
    if n is not None and n != 1:
        raise RequestError(
            f"`n` {n}: only 1 choice per request is supported (greedy decoding gives one)", param="n"
        )
    optional_bool(body, "stream")  # true: answered as server-sent events (judge.serve.streaming)
    optional_int(body, "seed")
    return ", ".join(asked) or None, ", ".join(greedy) or None


def refuse_sampling(asked: str | None, policy: str) -> None:
    """Generation asked to sample (``asked``: what it asked for) is refused unless ``policy`` is greedy."""
    if asked and policy != "greedy":
        name, value = asked.split(",")[0].split()
        raise RequestError(
            f"`{name}` {value}: this server decodes greedily (the judge's scores are read, not sampled); send "
            "temperature 0 or leave it out, or start the server with --sampling greedy to accept sampling "
            "settings and decode greedily anyway",
            param=name,
            code="sampling_not_supported",
        )


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


def optional_number(body: Mapping[str, Any], name: str) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    try:  # an integer past a float's range raises OverflowError
        x = float(v) if not isinstance(v, bool) and isinstance(v, (int, float)) else math.nan
    except OverflowError:
        x = math.nan
    if not math.isfinite(x):
        raise RequestError(f"`{name}` must be a finite number (got {str(v)[:40]!r})", param=name)
    return x


def optional_int(
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


def optional_bool(body: Mapping[str, Any], name: str) -> bool | None:
    v = body.get(name)
    if v is not None and not isinstance(v, bool):
        raise RequestError(f"`{name}` must be true or false (got {v!r})")
    return v


__all__ = [
    "GREEDY_TEMPERATURE",
    "MAX_STOP",
    "MAX_TOP_LOGPROBS",
    "ChatRequest",
    "optional_bool",
    "optional_int",
    "optional_number",
    "parse_request",
    "refuse_sampling",
]
