"""``POST /v1/responses``: OpenAI's Responses API (what inspect-ai's ``openai/`` provider and
``client.responses.create`` send), answered by the chat route's own code.

One concept in one place: a Responses request is converted to the chat form (:func:`to_chat`), answered by
:func:`judge.serve.chat.complete` (or :mod:`judge.serve.streaming` with ``stream: true``) exactly as a chat
completion is (the judge's own prompt, a tool's grading prompt, ``--chat generate``'s generation, the
structured outputs and forced tool calls, the sampling policy), and the answer converted back
(:meth:`Mapped.response`, :meth:`Mapped.events`). Nothing is scored here.

The request, field by field:

* ``input``: a string (one user message), or a list of messages (``{"role", "content"}``, with or without
  ``"type": "message"``) whose content is a string or parts: ``input_text`` / ``output_text`` (text) and
  ``input_image`` (``image_url``: a data URL, or a path under ``--image-root``; ``detail`` accepted);
  ``instructions``: a system message before them;
* ``max_output_tokens``, ``temperature``, ``top_p``: as chat's ``max_completion_tokens``, ``temperature``,
  ``top_p`` (the same greedy policy);
* ``text.format``: ``text``, ``json_object`` or ``json_schema`` (``{"type", "name", "schema", "strict"}``),
  as chat's ``response_format`` (:mod:`judge.serve.structured`);
* ``tools`` (function tools, ``{"type": "function", "name", "parameters"}``) with ``tool_choice``
  forcing one (``{"type": "function", "name": N}``, or ``"required"`` with one tool), as chat's
  (:mod:`judge.serve.tool_calls`): the answer is a ``function_call`` output item;
* ``include: ["message.output_text.logprobs"]`` and ``top_logprobs``: the output text's ``logprobs``;
* ``stream``: the reply as the Responses API's server-sent events (``response.created``, ...,
  ``response.output_text.delta``, ..., ``response.completed``);
* accepted and without effect on the answer: ``store: false``, ``background: false``, ``metadata``,
  ``user``, ``safety_identifier``, ``prompt_cache_key``, ``prompt_cache_retention``, ``service_tier``,
  ``truncation: "disabled"``, ``parallel_tool_calls``, ``max_tool_calls``, ``reasoning`` without an effort
  (or ``"none"``), ``text.verbosity`` ``medium``, ``stream_options``; ``timeout`` (seconds, as chat's).

Refused with a 4xx naming the field, never ignored: what needs a stored response or conversation
(``previous_response_id``, ``conversation``, ``store: true``, ``background: true``, ``prompt``), input items
other than messages (tool outputs, reasoning, item references), file ids and files, tools other than
functions, reasoning efforts, ``truncation: "auto"``, and any field this route does not know. Refusals
of the chat code name the field in this API's terms (``input[0].content[1].image_url``, ``text.format.schema``).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from judge.serve.service import RequestError

LOGPROBS = "message.output_text.logprobs"
#: What ``include`` may name: the output text's logprobs (given), and outputs this server never produces.
INCLUDABLE = {
    LOGPROBS, "reasoning.encrypted_content", "file_search_call.results", "web_search_call.results",
    "web_search_call.action.sources", "message.input_image.image_url", "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
}  # fmt: skip
#: Fields read and mapped, or accepted without effect on the answer (module doc).
KNOWN = {
    "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "text", "tools",
    "tool_choice", "parallel_tool_calls", "stream", "stream_options", "include", "top_logprobs", "store",
    "background", "metadata", "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention",
    "service_tier", "truncation", "reasoning", "max_tool_calls", "timeout",
}  # fmt: skip
_STATELESS = "this server keeps no responses or conversations (each request is answered on its own)"
#: Fields refused whatever their value (unless null), and why.
REFUSED = {
    "previous_response_id": f"{_STATELESS}: send the whole conversation in `input`",
    "conversation": f"{_STATELESS}: send the whole conversation in `input`",
    "prompt": "stored prompt templates are not kept here: send the prompt in `input` and `instructions`",
    "context_management": f"{_STATELESS}: there is no context to manage",
}
_PARTS = ("input_text", "output_text", "input_image")
_MAX_TOKENS = 2**31 - 1
_ROLES = ("user", "assistant", "system", "developer")


def _refuse(name: str, message: str, code: str = "unsupported_field") -> RequestError:
    """A 422 naming ``name``: "`name` is ...", "`name` 'x' is ...", or "`name`: why"."""
    joined = message.split(" ", 1)[0] in ("is", "must", "needs", "true", "type") or message[:1] in "'\""
    return RequestError(f"`{name}`{' ' if joined else ': '}{message}", param=name, code=code)


@dataclass
class Mapped:
    """A Responses request in the chat form (``chat``, for :func:`~judge.serve.chat.complete`), where each
    chat message came from (``places``: ``instructions``, ``input`` or ``input[j]``) and what the reply
    echoes of the request."""

    chat: dict[str, Any]
    places: list[str] = field(default_factory=list)
    echo: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: f"resp_{uuid.uuid4().hex}")

    # ------------------------------------------------------------------------- refusals in this API's terms

    def error(self, e: RequestError) -> RequestError:
        """``e`` (a refusal of the chat code) with its fields named as this request names them."""
        param = "input" if e.param == "messages" else e.param and self.rename(e.param)
        return RequestError(self.rename(str(e)), e.status, param=param, code=e.code)

    def rename(self, text: str) -> str:
        def message(m: re.Match) -> str:
            k = int(m.group(1))
            place = self.places[k] if k < len(self.places) else "input"
            rest = m.group(2) or ""
            if place in ("instructions", "input") and rest.startswith(".content"):
                rest = rest[len(".content") :]  # a string input is its message's content
            return place + rest

        text = re.sub(r"messages\[(\d+)\]((?:\.content)?(?:\[\d+\])?)", message, text)
        for chat, ours in _RENAMES:
            text = text.replace(chat, ours)
        return text

    # ------------------------------------------------------------------------- the answer

    def response(self, reply: Mapping[str, Any]) -> dict[str, Any]:
        """The ``response`` object of a ``chat.completion`` reply."""
        choice = reply["choices"][0]
        message, finish = choice["message"], choice["finish_reason"]
        logprobs = (choice.get("logprobs") or {}).get("content")
        calls = message.get("tool_calls") or []
        if calls:
            item = _call_item(calls[0], "completed")
        else:
            item = _message_item(
                message.get("content") or "", logprobs, "completed" if finish != "length" else "incomplete"
            )
        return self._object(reply["created"], [item], finish, reply.get("usage"), reply.get("judge"))

    def _object(
        self, created: float, output: list, finish: str | None, usage: Any, judge: Any
    ) -> dict[str, Any]:
        done = finish is not None
        status = "in_progress" if not done else "incomplete" if finish == "length" else "completed"
        return {
            "id": self.id,
            "object": "response",
            "created_at": created,
            "status": status,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "output": output,
            "usage": _usage(usage) if usage is not None else None,
            **self.echo,
            # The judge's reading of its own prompt or a tool's, or null: without it the text is generated.
            "judge": judge,
        }

    async def events(self, chunks: AsyncIterator[Any]) -> AsyncIterator[str]:
        """The Responses API's server-sent events of a streamed chat completion's chunks (see
        :mod:`judge.serve.streaming`): created, in progress, the output item with its text deltas or the
        call's argument deltas, their done events, then completed (incomplete at ``max_output_tokens``).
        The chunks' iterator is closed when this one is (a client gone away stops the generation)."""
        try:
            async for event in self._events(chunks):
                yield event
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()

    async def _events(self, chunks: AsyncIterator[Any]) -> AsyncIterator[str]:
        seq = 0

        def event(kind: str, **data: Any) -> str:
            nonlocal seq
            seq += 1
            payload = {"type": kind, **data, "sequence_number": seq - 1}
            return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"

        created = int(time.time())
        yield event("response.created", response=self._object(created, [], None, None, None))
        yield event("response.in_progress", response=self._object(created, [], None, None, None))
        item: dict[str, Any] | None = None
        text, arguments, logprobs = "", "", None
        finish, usage, judge = None, None, None
        where = {"item_id": "", "output_index": 0}
        async for raw in chunks:
            data = (raw.decode() if isinstance(raw, bytes) else raw).removeprefix("data: ").strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:  # past the deadline mid-generation: OpenAI's error event ends the stream
                err = {**chunk["error"], "message": self.rename(chunk["error"].get("message", ""))}
                yield event("error", code=err.get("code"), message=err["message"], param=None, error=err)
                return
            if not chunk.get("choices"):  # the usage chunk
                usage = chunk.get("usage")
                continue
            choice = chunk["choices"][0]
            delta = choice.get("delta") or {}
            if item is None:  # the first chunk: the role, and a call's id and name
                calls = delta.get("tool_calls")
                item = (
                    _call_item(calls[0], "in_progress") if calls else _message_item(None, None, "in_progress")
                )
                where["item_id"] = item["id"]
                yield event("response.output_item.added", output_index=0, item=item)
                if item["type"] == "message":
                    part = _text_part("", None)
                    yield event("response.content_part.added", **where, content_index=0, part=part)
                continue
            if delta.get("content"):
                text += delta["content"]
                piece = delta["content"]
                yield event("response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[])
            for call in delta.get("tool_calls") or []:
                piece = (call.get("function") or {}).get("arguments") or ""
                arguments += piece
                yield event("response.function_call_arguments.delta", **where, delta=piece)
            if choice.get("logprobs"):
                logprobs = choice["logprobs"].get("content")
            if choice.get("finish_reason"):
                finish, judge = choice["finish_reason"], chunk.get("judge")
        if item is None:  # the stream ended before its first chunk (cannot happen; never a 500 mid-stream)
            return
        status = "incomplete" if finish == "length" else "completed"
        if item["type"] == "message":
            part = _text_part(text, logprobs)
            done = {"content_index": 0, "text": text, "logprobs": part["logprobs"]}
            yield event("response.output_text.done", **where, **done)
            yield event("response.content_part.done", **where, content_index=0, part=part)
            item = {**item, "status": status, "content": [part]}
        else:
            yield event(
                "response.function_call_arguments.done", **where, name=item["name"], arguments=arguments
            )
            item = {**item, "status": "completed", "arguments": arguments}
        yield event("response.output_item.done", output_index=0, item=item)
        final = self._object(created, [item], finish, usage, judge)
        yield event(f"response.{final['status']}", response=final)


_RENAMES = (
    ("response_format.json_schema.schema", "text.format.schema"),
    ("`response_format`", "`text.format`"),
    ("response_format", "text.format"),
    ("max_completion_tokens", "max_output_tokens"),
    (".function.parameters", ".parameters"),
    ("{'type': 'function', 'function': {'name': ...}}", "{'type': 'function', 'name': ...}"),
    ("`messages`", "`input`"),
)


def _message_item(text: str | None, logprobs: list | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [_text_part(text, logprobs)]
    return {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant", "status": status,
            "content": content}  # fmt: skip


def _text_part(text: str, logprobs: list | None) -> dict[str, Any]:
    # Chat's logprobs entries ({token, logprob, bytes, top_logprobs}) are this API's already.
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def _call_item(call: Mapping[str, Any], status: str) -> dict[str, Any]:
    fn = call["function"]
    return {"id": f"fc_{uuid.uuid4().hex}", "type": "function_call", "status": status, "call_id": call["id"],
            "name": fn["name"], "arguments": fn.get("arguments") or ""}  # fmt: skip


def _usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "input_tokens": usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage["total_tokens"],
    }


# ----------------------------------------------------------------------------- the request


def to_chat(body: Mapping[str, Any]) -> Mapped:
    """``body`` (a Responses request) in the chat form, or a 4xx naming the first field it cannot honour
    (see the module doc). The chat code checks the rest (``model``, the sampling, the schema, the tools'
    parameters, the images) when it answers."""
    for name in body:
        if name in REFUSED and body[name] is not None:
            raise _refuse(name, f"is not supported: {REFUSED[name]}")
        if name not in KNOWN and name not in REFUSED:
            raise _refuse(name, "is not a field this server's /v1/responses reads; leave it out (what is "
                          "read: docs/serving.md, POST /v1/responses)")  # fmt: skip
    _settings(body)
    chat: dict[str, Any] = {"model": body.get("model")}
    messages, places = [], []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _refuse("instructions", f"must be a string (got {type(instructions).__name__})")
        messages.append({"role": "system", "content": instructions})
        places.append("instructions")
    raw = body.get("input")
    if raw is None:
        raise _refuse("input", "is required: a string, or a list of messages", code="invalid_request")
    if isinstance(raw, str):
        messages.append({"role": "user", "content": raw})
        places.append("input")
    elif isinstance(raw, list) and raw:
        for j, entry in enumerate(raw):
            messages.append(_message(entry, f"input[{j}]"))
            places.append(f"input[{j}]")
    else:
        raise _refuse("input", f"must be a string or a non-empty list of messages (got {_kind(raw)})",
                      code="invalid_request")  # fmt: skip
    chat["messages"] = messages
    asked = body.get("max_output_tokens")
    if isinstance(asked, int) and asked > _MAX_TOKENS:  # echoed in the reply: bounded, as OpenAI's int32
        raise _refuse(
            "max_output_tokens", f"must be at most {_MAX_TOKENS} (got an integer of {len(str(asked))} digits)"
        )
    for ours, theirs in (("max_output_tokens", "max_completion_tokens"), ("temperature", "temperature"),
                         ("top_p", "top_p"), ("timeout", "timeout"), ("parallel_tool_calls", "parallel_tool_calls")):  # fmt: skip
        if body.get(ours) is not None:
            chat[theirs] = body[ours]
    fmt = _text_format(body.get("text"))
    if fmt is not None:
        chat["response_format"] = fmt
    if body.get("tools") is not None:
        chat["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    include = body.get("include") or []
    if not isinstance(include, list) or not all(isinstance(x, str) and x in INCLUDABLE for x in include):
        raise _refuse("include", f"must be a list of {sorted(INCLUDABLE)}")
    top = body.get("top_logprobs")
    if LOGPROBS in include or top:  # logprobs asked for: the output text carries them
        chat["logprobs"] = True
        if top is not None:
            chat["top_logprobs"] = top
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _refuse("stream", f"must be true or false (got {stream!r})")
    if stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}  # usage is part of response.completed
    elif body.get("stream_options") is not None:
        raise _refuse("stream_options", "needs `stream: true`")
    echo = {
        "model": body.get("model"),
        "instructions": instructions,
        "max_output_tokens": body.get("max_output_tokens"),
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "text": {"format": (body.get("text") or {}).get("format") or {"type": "text"}, "verbosity": "medium"},
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto",
        "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
        "top_logprobs": top,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "background": False,
        "truncation": "disabled",
        "service_tier": "default",
        "metadata": body.get("metadata") or {},
        "user": body.get("user"),
    }
    return Mapped(chat, places, echo)


def _settings(body: Mapping[str, Any]) -> None:
    """The fields accepted without effect on the answer: a 4xx for a value that would need one."""
    if body.get("store") is True:
        raise _refuse("store", f"true is not supported: {_STATELESS}, so a stored response could never be "
                      "retrieved; send store false or leave it out")  # fmt: skip
    if body.get("background") is True:
        raise _refuse("background", "true is not supported: responses are answered while the client waits "
                      "(nothing is kept to poll); leave it out")  # fmt: skip
    for name in ("store", "background"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise _refuse(name, f"must be true or false (got {body[name]!r})")
    if body.get("truncation") not in (None, "disabled"):
        raise _refuse("truncation", f"{body['truncation']!r} is not supported: a conversation past the "
                      "context budget is refused, never cut; send 'disabled' or leave it out")  # fmt: skip
    reasoning = body.get("reasoning")
    if reasoning is not None:
        effort = reasoning.get("effort") if isinstance(reasoning, Mapping) else "?"
        summary = reasoning.get("summary") if isinstance(reasoning, Mapping) else None
        if effort not in (None, "none") or summary not in (None, "none"):
            raise _refuse("reasoning", "the judge does not reason before it answers (its score is read in one "
                          "forward pass): leave `reasoning` out or send effort 'none'")  # fmt: skip
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise _refuse("metadata", "must be an object of strings")
    for name in ("user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise _refuse(name, f"must be a string (got {_kind(body[name])})")
    cap = body.get("max_tool_calls")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise _refuse("max_tool_calls", f"must be a positive integer (got {cap!r})")
    opts = body.get("stream_options")
    if opts is not None and (not isinstance(opts, Mapping) or set(opts) - {"include_obfuscation"}):
        raise _refuse("stream_options", "must be {'include_obfuscation': true|false}")


def _message(entry: Any, where: str) -> dict[str, Any]:
    """One input item, a message, in the chat form (parts renamed, one chat part per input part)."""
    kind = entry.get("type", "message") if isinstance(entry, Mapping) else None
    if kind != "message":
        what = f"type {kind!r}" if isinstance(entry, Mapping) else f"a {_kind(entry)}"
        raise _refuse(f"{where}.type" if isinstance(entry, Mapping) else where,
                      f"{what} is not supported: only messages ({{'role', 'content'}}) are read; "
                      f"{_STATELESS} and calls no tools of its own")  # fmt: skip
    role = entry.get("role")
    if role not in _ROLES:
        raise _refuse(f"{where}.role", f"{role!r} is not one of {', '.join(_ROLES)}")
    content = entry.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise _refuse(f"{where}.content", f"must be a string or a list of input_text and input_image parts "
                      f"(got {_kind(content)})")  # fmt: skip
    return {"role": role, "content": [_part(p, f"{where}.content[{k}]") for k, p in enumerate(content)]}


def _part(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind not in _PARTS:
        raise _refuse(f"{where}.type" if isinstance(part, Mapping) else where,
                      f"{kind!r} is not supported; use input_text or input_image (an image as a data URL or a "
                      "path under the server's --image-root; no file ids or files)")  # fmt: skip
    assert isinstance(part, Mapping)
    if kind != "input_image":
        if not isinstance(part.get("text"), str):
            raise _refuse(f"{where}.text", f"must be a string (got {_kind(part.get('text'))})")
        return {"type": "text", "text": part.get("text")}
    if part.get("file_id") is not None:
        raise _refuse(
            f"{where}.file_id", "files are not kept here: send the image as a data URL in `image_url`"
        )
    url = part.get("image_url")
    if not isinstance(url, str) or not url:
        raise _refuse(f"{where}.image_url", "must be a URL string (a base64 data URL, or a path under the "
                      "server's --image-root; nothing is fetched)")  # fmt: skip
    detail = part.get("detail")
    # The judge tiles images its own way: a detail is accepted and has no effect ("original" included).
    spec = {"url": url, **({"detail": detail} if detail in ("auto", "low", "high") else {})}
    if detail is not None and detail not in ("auto", "low", "high", "original"):
        raise _refuse(f"{where}.detail", f"{detail!r} is not one of auto, low, high, original")
    return {"type": "image_url", "image_url": spec}


def _text_format(text: Any) -> dict[str, Any] | None:
    if text is None:
        return None
    if not isinstance(text, Mapping) or set(text) - {"format", "verbosity"}:
        raise _refuse("text", "must be {'format': {...}, 'verbosity': ...}")
    if text.get("verbosity") not in (None, "medium"):
        raise _refuse("text.verbosity", f"{text['verbosity']!r} is not supported: the judge's answer is its "
                      "reading, of one length; send 'medium' or leave it out")  # fmt: skip
    fmt = text.get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind != "json_schema":
        raise _refuse("text.format", f"type {kind!r} is not supported: send text, json_object or json_schema")
    assert isinstance(fmt, Mapping)
    spec = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
    return {"type": "json_schema", "json_schema": spec}


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise _refuse("tools", f"must be a list of function tools (got {_kind(tools)})")
    out = []
    for k, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind != "function":
            raise _refuse(f"tools[{k}].type", f"{kind!r} is not supported: the judge calls no hosted tools; a "
                          "function tool ({'type': 'function', 'name', 'parameters'}) forced by tool_choice is "
                          "answered with the judge's reading in its arguments")  # fmt: skip
        assert isinstance(tool, Mapping)
        fn = {k2: tool[k2] for k2 in ("name", "description", "parameters", "strict") if k2 in tool}
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind == "function" and isinstance(choice, Mapping):
        return {"type": "function", "function": {"name": choice.get("name")}}
    raise _refuse("tool_choice", "must be 'required' (with one tool) or {'type': 'function', 'name': ...}: the "
                  f"judge calls no hosted tools (got {str(choice)[:80]})", code="tools_not_supported")  # fmt: skip


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


__all__ = ["INCLUDABLE", "KNOWN", "REFUSED", "Mapped", "to_chat"]
