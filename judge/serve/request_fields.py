"""Chat request fields the server cannot honour are refused, not ignored; ``response_format`` and
``stream_options`` are read here.

* ``tools``, ``tool_choice``, ``functions``, ``function_call``, ``parallel_tool_calls``: the judge calls no
  tools (a client asking for a tool call, as langchain's ``with_structured_output(method="function_calling")``
  does, would otherwise get plain text and read nothing);
* ``logit_bias`` (non-empty), ``frequency_penalty`` and ``presence_penalty`` (non-zero): the decoding is plain
  greedy argmax and the scores are read, not decoded;
* ``response_format``: ``text``; ``json_object`` for a reply that is JSON (the judge's own prompt, answered
  ``{"score": x}``, or a tool's prompt whose answer is JSON); ``json_schema`` whose schema has exactly one
  number (or integer) property and otherwise only string properties, for a scored reply: the number is the
  score (on the tool's scale for a tool's prompt with one, else the judge's calibrated expected score), the
  strings the judge's note on what it scored. Generated text cannot be held to a format: refused (422).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from judge.serve.service import RequestError

_TOOL_FIELDS = ("tools", "tool_choice", "functions", "function_call", "parallel_tool_calls")


def refuse_unhonoured(body: Mapping[str, Any]) -> None:
    """A 422 naming the first field in ``body`` the server would otherwise have to ignore."""
    for name in _TOOL_FIELDS:
        if body.get(name) is not None:
            raise RequestError(
                f"`{name}`: this server calls no tools and returns no tool calls (a judge answers with its "
                "score); leave it out. For structured output send response_format json_schema with one "
                "number property",
                param=name,
                code="tools_not_supported",
            )
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
                f"`{name}` {value:g} is not supported: decoding is plain greedy argmax; send 0 or leave it out",
                param=name,
            )
    stream_options(body)  # checked here too: a non-streamed request may not carry it


@dataclass(frozen=True)
class ResponseFormat:
    """A request's ``response_format``: ``kind`` text, json_object or json_schema; for a schema, its
    properties' types and the required ones."""

    kind: str = "text"
    types: tuple[tuple[str, Any], ...] = ()  #: (property, its JSON type)
    required: tuple[str, ...] = ()


def response_format(body: Mapping[str, Any]) -> ResponseFormat:
    """The request's ``response_format``, checked for shape (a 422 naming the field); whether the reply can
    be held to it is :func:`formatted`'s to say."""
    fmt = body.get("response_format")
    if fmt is None:
        return ResponseFormat()
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind in ("text", "json_object"):
        return ResponseFormat(kind)
    if kind != "json_schema":
        raise RequestError(
            f"`response_format.type` {kind!r} is not supported: send text, json_object or json_schema",
            param="response_format",
        )
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping) or not props:
        raise RequestError(
            "`response_format.json_schema.schema` must be an object schema with `properties`",
            param="response_format",
        )
    required = schema.get("required") if isinstance(schema, Mapping) else None
    types = tuple((str(k), v.get("type") if isinstance(v, Mapping) else None) for k, v in props.items())
    return ResponseFormat("json_schema", types, tuple(required) if isinstance(required, list) else ())


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
        if scored and judge is not None and "protocol" not in judge:
            return json.dumps({"score": judge["expected"]})
        why = "only the judge's own prompt or a tool's prompt answered in JSON can be given as a JSON object"
    else:
        if json_reply and set(fmt.required or [k for k, _ in fmt.types]) <= set(json.loads(content)):
            return content  # the tool's JSON answer has the schema's properties already
        numbers = [k for k, t in fmt.types if t in ("number", "integer")]
        others = [k for k, t in fmt.types if k not in numbers and t != "string"]
        value = judge.get("value", judge.get("expected")) if scored and judge is not None else None
        if len(numbers) == 1 and not others and isinstance(value, (int, float)):
            integer = dict(fmt.types)[numbers[0]] == "integer"
            note = (judge or {}).get(
                "note"
            ) or f"the judge's expected score on {(judge or {}).get('criterion')!r}"
            strings = [k for k, t in fmt.types if t == "string"]
            return json.dumps(
                {numbers[0]: round(value) if integer else value, **dict.fromkeys(strings, note)}
            )
        why = (
            "this server fills a schema with exactly one number property (the score) and otherwise strings, "
            f"for a scored reply with one score; this schema has {len(numbers)} number properties"
            + (f" and properties of other types ({', '.join(others)})" if others else "")
            + ("" if scored else ", and the reply is generated text")
        )
    raise RequestError(
        f"`response_format` {fmt.kind}: {why}. Generated text is not held to a format: send response_format "
        "text, the judge's own prompt (judge.judge_chat_messages), or a tool's grading prompt it recognises",
        param="response_format",
        code="format_not_supported",
    )


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


__all__ = ["ResponseFormat", "formatted", "refuse_unhonoured", "response_format", "stream_options"]
