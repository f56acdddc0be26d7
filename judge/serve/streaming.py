"""``stream: true`` on ``/v1/chat/completions``: the reply as OpenAI's server-sent events.

Each event is ``data: {chat.completion.chunk}``; the stream ends with ``data: [DONE]``. The first chunk
carries ``delta.role``; generated text then comes token by token as the model produces it (held back only
while it could still be the start of a ``stop`` sequence, or ends inside a multi-byte character); a
scored reply (the judge's own prompt, or a tool's grading prompt) comes as one content chunk, since it is
read in one forward pass; a forced tool call (:mod:`judge.serve.tool_calls`) comes as OpenAI streams one (the
call's id and name, then its arguments, then ``finish_reason: tool_calls``). With ``logprobs`` one chunk carries them all after the text; the last chunk has
``finish_reason`` and the reply's ``judge`` field; with ``stream_options: {"include_usage": true}`` a
final chunk with empty ``choices`` carries ``usage``, as OpenAI sends it.

The request is checked before the first byte is sent: a refusal is the same JSON error, with its status,
as without streaming. An error after the stream has begun (the deadline passing mid-generation) is sent as
``data: {"error": {...}}`` and the stream closes without ``[DONE]`` (the openai client raises it). A
client that goes away stops the generation at its next token, which frees the model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from judge.serve.service import JudgeService, RequestError

logger = logging.getLogger(__name__)


class _Gone(Exception):
    """Raised into the generation when the client has gone away."""


class Streamer:
    """transformers' streamer interface (``put``, ``end``), fed by ``model.generate``: the new text of each
    token goes to the event loop as it is decoded. ``begin(req)`` is called by the chat route just before it
    generates."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue, tokenizer):
        self.loop, self.queue, self.tok = loop, queue, tokenizer
        self.stops: list[str] = []  #: the request's validated ``stop`` sequences, set by :meth:`begin`
        self.ids: list[int] = []
        self.sent = ""
        self.prompt_seen = False
        self.gone = False
        self.stopped = False

    def _emit(self, kind: str, value: Any) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (kind, value))

    def begin(self, req: Any) -> None:
        self.stops = list(req.stop)
        self._emit("begin", req)

    def put(self, value) -> None:
        if self.gone:
            raise _Gone()
        if not self.prompt_seen:  # generate() hands the prompt over first
            self.prompt_seen = True
            return
        self.ids.extend(int(t) for t in value.reshape(-1).tolist())
        if self.stopped:
            return
        text = self.tok.decode(self.ids, skip_special_tokens=True)
        cuts = [i for i in (text.find(s) for s in self.stops) if i >= 0]
        if cuts:
            text, self.stopped = text[: min(cuts)], True
        else:
            text = text.rstrip("\ufffd")  # a character still incomplete
            # Hold back what could be the start of a stop sequence.
            hold = max((k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
            text = text[: len(text) - hold]
        if text.startswith(self.sent) and len(text) > len(self.sent):
            self._emit("text", text[len(self.sent) :])
            self.sent = text

    def end(self) -> None:
        pass


def _chunk(base: Mapping[str, Any], delta: dict, **extra: Any) -> str:
    choice = {"index": 0, "delta": delta, "logprobs": extra.pop("logprobs", None),
              "finish_reason": extra.pop("finish_reason", None)}  # fmt: skip
    return _event({**base, "choices": [choice], **extra})


def _event(data: Any) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _error_event(e: Exception) -> str:
    if isinstance(e, RequestError):
        status, message, code = e.status, str(e), e.code or "error"
    else:
        status, message, code = (
            500,
            "internal error; the server logged it and keeps serving",
            "internal_error",
        )
    kind = "invalid_request_error" if status < 500 else "server_error"
    return _event(
        {"error": {"message": message, "type": kind, "param": None, "code": code, "status": status}}
    )


async def stream(
    service: JudgeService,
    body: Mapping[str, Any],
    timeout: float | None,
    request,
    *,
    since: float | None = None,
    release: Callable[[], None] = lambda: None,
) -> Any:
    """The streamed answer to a chat body with ``stream: true`` (see the module doc). ``since``: when the
    request arrived; ``release``: called once the completion is over (its chat slot, see
    :mod:`judge.serve.admission`), answered, refused or abandoned."""
    from judge.serve.chat import complete
    from judge.serve.request_fields import stream_options

    # Nothing of the body is read here before ``complete`` has validated all of it, as it does without
    # ``stream``: a refusal is then the same status and message either way.
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    streamer = Streamer(loop, queue, service.engine.scorer.tokenizer)
    try:
        task = asyncio.ensure_future(run_in_threadpool(complete, service, body, timeout, streamer, since))
    except BaseException:
        release()
        raise

    def finished(t: asyncio.Future) -> None:
        release()
        queue.put_nowait(("done", t))

    task.add_done_callback(finished)
    kind, value = await queue.get()
    if kind == "done":  # answered (or refused) without generating: a scored reply, or an error
        reply, headers = value.result()  # a refusal raises here: the usual JSON error
        include_usage = stream_options(body)
        return StreamingResponse(
            _scored(reply, include_usage), media_type="text/event-stream", headers=_headers(headers)
        )
    req = value
    include_usage = stream_options(body)
    headers = {"X-Judge-Scored": "false"}
    if req.sampling_header:
        headers["X-Judge-Sampling"] = req.sampling_header
    base = _base(service, req.model)
    return StreamingResponse(
        _generated(base, queue, task, streamer, include_usage), media_type="text/event-stream",
        headers=_headers(headers),
    )  # fmt: skip


def _headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _base(service: JudgeService, model: str) -> dict[str, Any]:
    fp = service.spec.fingerprint
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": f"fp_{fp[:16]}" if fp else None,
    }


def _closing(base: Mapping[str, Any], reply: Mapping[str, Any], include_usage: bool) -> list[str]:
    """The chunks after the text: the logprobs, the finish reason (with ``judge``), the usage, [DONE]."""
    choice = reply["choices"][0]
    out = []
    if choice.get("logprobs") is not None:
        out.append(_chunk(base, {}, logprobs=choice["logprobs"]))
    out.append(_chunk(base, {}, finish_reason=choice["finish_reason"], judge=reply.get("judge")))
    if include_usage:
        out.append(_event({**base, "choices": [], "usage": reply["usage"]}))
    out.append("data: [DONE]\n\n")
    return out


async def _scored(reply: Mapping[str, Any], include_usage: bool) -> AsyncIterator[str]:
    base = {k: reply[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    message = reply["choices"][0]["message"]
    if message.get("tool_calls"):  # a forced tool call (judge.serve.tool_calls): as OpenAI streams one
        call = message["tool_calls"][0]
        head = {**call, "index": 0, "function": {"name": call["function"]["name"], "arguments": ""}}
        yield _chunk(base, {"role": "assistant", "content": None, "tool_calls": [head]})
        args = {"index": 0, "function": {"arguments": call["function"]["arguments"]}}
        yield _chunk(base, {"tool_calls": [args]})
        for chunk in _closing(base, reply, include_usage):
            yield chunk
        return
    yield _chunk(base, {"role": "assistant", "content": ""})
    content = message["content"]
    if content:
        yield _chunk(base, {"content": content})
    for chunk in _closing(base, reply, include_usage):
        yield chunk


async def _generated(
    base: dict[str, Any], queue: asyncio.Queue, task: asyncio.Future, streamer: Streamer, include_usage: bool
) -> AsyncIterator[str]:
    sent = ""
    try:
        yield _chunk(base, {"role": "assistant", "content": ""})
        while True:
            kind, value = await queue.get()
            if kind == "text":
                sent += value
                yield _chunk(base, {"content": value})
                continue
            try:
                reply, _ = value.result()
            except Exception as e:  # past the deadline mid-generation, or a fault
                if not isinstance(e, RequestError):
                    logger.error(f"streamed chat completion failed: {type(e).__name__}: {e}")
                yield _error_event(e)
                return
            content = reply["choices"][0]["message"]["content"] or ""
            if content.startswith(sent) and len(content) > len(sent):  # what the stop cut left unsent
                yield _chunk(base, {"content": content[len(sent) :]})
            for chunk in _closing(base, reply, include_usage):
                yield chunk
            return
    finally:
        if not task.done():  # the client went away: stop generating at the next token
            streamer.gone = True
            task.add_done_callback(lambda t: t.cancelled() or t.exception())


__all__ = ["Streamer", "stream"]
