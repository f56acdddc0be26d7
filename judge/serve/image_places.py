"""Where each route reads an image, so that the string bound's ``data:`` exemption holds there only.

:class:`judge.serve.body.StringRuns` spares, as the body arrives, a long string that starts with ``data:``
and follows an image-like key (``url``, ``image``, ``image_url``) or sits in an ``images`` array, wherever
that is in the body: from the bytes it cannot tell a chat part's ``image_url.url`` from a top-level ``url``
the route ignores, nor an image part from a text part with an extra key (whose ``type`` may come after the
value). So when it spared one, the parsed body goes through :func:`misplaced_long_string` before any
validation or work: a string over the bound anywhere but at a place listed below is a 413.

* ``/v1/chat/completions``: ``messages[i].content[j].image_url.url``, or ``...content[j].image_url`` as a
  string, of a part whose ``type`` is ``image_url``;
* ``/v1/responses``: ``input[i].content[j].image_url`` of a part whose ``type`` is ``input_image``;
* ``/v1/score``: ``items[i].F.image`` and ``items[i].F[j].image`` of an image segment (``type: image``, or
  MMIE's ``{"text": ..., "image": ...}`` without a type), ``F`` a content field (``question``,
  ``response``, ``reference``; MMIE's ``answer``, ``gt_answer``);
* the reward routes: ``images[i][j]``.
"""

from __future__ import annotations

from typing import Any

#: The routes with image places, by the kind :func:`misplaced_long_string` takes.
CHAT, RESPONSES, SCORE, REWARD = "chat", "responses", "score", "reward"
#: Fields of a /v1/score item that hold content (PredictionRecord's and MmieItem's).
SCORE_CONTENT_FIELDS = ("question", "response", "reference", "answer", "gt_answer")


def _chat_images(body: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for msg in _list(body.get("messages")):
        if not isinstance(msg, dict):
            continue
        for part in _list(msg.get("content")):
            if isinstance(part, dict) and part.get("type") == "image_url":
                spec = part.get("image_url")
                out.append(spec.get("url") if isinstance(spec, dict) else spec)
    return out


def _responses_images(body: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for msg in _list(body.get("input")):
        if isinstance(msg, dict):
            out += [
                p.get("image_url")
                for p in _list(msg.get("content"))
                if isinstance(p, dict) and p.get("type") == "input_image"
            ]
    return out


def _score_images(body: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for item in _list(body.get("items")):
        if not isinstance(item, dict):
            continue
        for field in SCORE_CONTENT_FIELDS:
            content = item.get(field)
            for seg in [content] if isinstance(content, dict) else _list(content):
                if isinstance(seg, dict) and (
                    seg.get("type") == "image" or ("type" not in seg and set(seg) <= {"text", "image"})
                ):
                    out.append(seg.get("image"))
    return out


def _reward_images(body: dict[str, Any]) -> list[Any]:
    return [ref for refs in _list(body.get("images")) for ref in _list(refs)]


_PLACES = {CHAT: _chat_images, RESPONSES: _responses_images, SCORE: _score_images, REWARD: _reward_images}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def misplaced_long_string(body: dict[str, Any], kind: str | None, limit: int) -> str | None:
    """The field (``url``, ``messages[0].content[0].image_url``) of the first string in ``body`` longer
    than ``limit`` bytes (its UTF-8 once parsed) that the route (``kind``: :data:`CHAT`, :data:`RESPONSES`, :data:`SCORE`,
    :data:`REWARD`, or None for none) does not read as an image; None when there is none. Iterative, so
    any depth is safe; linear in the body's values."""
    images = {id(s) for s in _PLACES[kind](body) if isinstance(s, str)} if kind in _PLACES else set()
    stack: list[tuple[Any, str]] = [(body, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            # A long string from json.loads is its own object: its id names its place.
            if len(node) > limit // 4 and id(node) not in images and _utf8_length(node) > limit:
                return path or "body"
        elif isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((node[i], f"{path}[{i}]") for i in reversed(range(len(node))))
    return None


def _utf8_length(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def misplaced_message(field: str, limit: int) -> str:
    return (
        f"`{field}` is a string of more than {limit:,} bytes (--max-string-bytes) where no image is read: "
        "only a data URL in an image field (a chat image_url part's url, a responses input_image's image_url, "
        "a /v1/score image segment's image, the reward routes' images) may be longer"
    )


__all__ = ["CHAT", "RESPONSES", "REWARD", "SCORE", "misplaced_long_string", "misplaced_message"]
