"""Chat request fields the server cannot honour are refused, not ignored; ``response_format`` and
``stream_options`` are read here.

* ``logit_bias`` (non-empty), ``frequency_penalty`` and ``presence_penalty`` (non-zero): the decoding is plain
  greedy argmax and the scores are read, not decoded;
* ``response_format``: ``text``; ``json_object`` for a reply that is JSON (the judge's own prompt, answered
  ``{"score": x}``, or a tool's prompt whose answer is JSON; a system message that quotes a JSON schema or
  lists the keys, :func:`~judge.serve.structured.prompt_schema`, has it filled as ``json_schema``'s); ``json_schema`` (strict or not) for a scored
  reply: the client's schema filled from the judge's reading (:mod:`judge.serve.structured`: the score
  under whatever name and in whatever form the schema gives it, the strings a statement of the reading).
  Generated text cannot be held to a format: refused (422).

``tools``/``tool_choice`` (a forced call is answered, anything else refused) are :mod:`judge.serve.tool_calls`'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from judge.serve import schema_valid
from judge.serve.service import RequestError
from judge.serve.structured import check_schema, dumps, fill, prompt_schema


def refuse_unhonoured(body: Mapping[str, Any]) -> None:
    """A 422 naming the first field in ``body`` the server would otherwise have to ignore (the tool fields
    are :mod:`judge.serve.tool_calls`' to check)."""
    bias = body.get("logit_bias")
    if bias is not None and (not isinstance(bias, Mapping) or bias):
        raise RequestError(
            "`logit_bias` is not supported: decoding is plain greedy argmax and scores are read from the "
            "model's own distribution; leave it out",
            param="logit_bias",
        )
    for name in ("frequency_penalty", "presence_penalty"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RequestError(f"`{name}` must be a number (got {value!r})", param=name)
        if value != 0:
            raise RequestError(
                f"`{name}` {str(value)[:40]} is not supported: decoding is plain greedy argmax; send 0 or leave it out",
                param=name,
            )
    stream_options(body)  # checked here too: a non-streamed request may not carry it


@dataclass(frozen=True)
class ResponseFormat:
    """A request's ``response_format``: ``kind`` text, json_object or json_schema; for a schema, the
    client's schema (checked for shape and size by :func:`~judge.serve.structured.check_schema`)."""

    kind: str = "text"
    schema: Mapping[str, Any] | None = None
    where: str = "response_format.json_schema.schema"  #: where the schema came from (named in refusals)


#: Where the client's schema sits in a request (named in refusals).
SCHEMA_FIELD = "response_format.json_schema.schema"


def response_format(body: Mapping[str, Any]) -> ResponseFormat:
    """The request's ``response_format``, checked for shape (a 422 naming the field) before anything is
    scored; whether the reply can be held to it is :func:`formatted`'s to say."""
    fmt = body.get("response_format")
    if fmt is None:
        return ResponseFormat()
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind == "json_object":  # a schema or a field list a system message gives is filled as json_schema's
        for k, text in _system_texts(body.get("messages")):
            quoted = prompt_schema(text)
            if quoted is not None:
                where = f"messages[{k}].content"
                check_schema(quoted, where)
                return ResponseFormat(kind, quoted, where)
    if kind in ("text", "json_object"):
        return ResponseFormat(kind)
    if kind != "json_schema":
        raise RequestError(
            f"`response_format.type` {kind!r} is not supported: send text, json_object or json_schema",
            param="response_format",
        )
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    check_schema(schema, SCHEMA_FIELD)
    return ResponseFormat("json_schema", schema)


def formatted(fmt: ResponseFormat, content: str, judge: Mapping[str, Any] | None, json_reply: bool) -> str:
    """The reply's content under ``fmt`` (see the module doc); a 422 for a reply that cannot be held to it.
    ``judge``: the reply's ``judge`` field (None for generated text); ``json_reply``: the content is a tool's
    JSON answer already."""
    if fmt.kind == "text":
        return content
    scored = judge is not None and judge.get("scored", True)
    if fmt.kind == "json_object":
        if json_reply:
            return content
        if scored and fmt.schema is not None:
            return dumps(fill(fmt.schema, judge, fmt.where), fmt.where)
        if scored and judge is not None and "protocol" not in judge:
            return json.dumps({"score": judge["expected"]})
        why = "only the judge's own prompt or a tool's prompt answered in JSON can be given as a JSON object"
    else:
        assert fmt.schema is not None
        if json_reply and _valid(json.loads(content), fmt.schema):
            return content  # the tool's JSON answer is valid against the schema already
        if judge is not None:  # a tool's prompt that scored nothing is refused by fill, saying so
            return dumps(fill(fmt.schema, judge, fmt.where), fmt.where)
        why = "the reply is generated text, which is not held to a schema"
    raise RequestError(
        f"`response_format` {fmt.kind}: {why}. Generated text is not held to a format: send response_format "
        "text, the judge's own prompt (judge.judge_chat_messages), or a tool's grading prompt it recognises",
        param="response_format",
        code="format_not_supported",
    )


def _valid(answer: Any, schema: Mapping[str, Any]) -> bool:
    """Whether a tool's JSON answer is valid against the client's schema; when not, the schema is filled
    from the judge's reading instead (a rubric answer of 6 against `integer 0..1` is off the client's scale)."""
    try:
        schema_valid.validate(answer, schema, SCHEMA_FIELD)
    except RequestError:
        return False
    return True


def _system_texts(messages: Any) -> list[tuple[int, str]]:
    """``(index, text)`` of each system (or developer) message of a raw ``messages`` list."""
    out = []
    for k, m in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(m, Mapping) or m.get("role") not in ("system", "developer"):
            continue
        content = m.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        text = "".join(
            str(p["text"]) for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
        out.append((k, text))
    return out


def stream_options(body: Mapping[str, Any]) -> bool:
    """Whether a streamed reply ends with a usage chunk (``stream_options.include_usage``)."""
    opts = body.get("stream_options")
    if opts is None:
        return False
    if not isinstance(opts, Mapping) or not isinstance(opts.get("include_usage", False), bool):
        raise RequestError("`stream_options` must be {'include_usage': true|false}", param="stream_options")
    if not body.get("stream"):
        raise RequestError("`stream_options` needs `stream: true`", param="stream_options")
    return bool(opts.get("include_usage", False))


__all__ = [
    "SCHEMA_FIELD",
    "ResponseFormat",
    "formatted",
    "refuse_unhonoured",
    "response_format",
    "stream_options",
]
