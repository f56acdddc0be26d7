"""The HTTP face of ``judge-serve``: a FastAPI app over a :class:`~judge.serve.service.JudgeService`.

Routes: ``POST /v1/score``, ``POST /v1/chat/completions``, ``POST /v1/responses``, ``GET /v1/models``, ``GET /v1/judge``,
``GET /health`` (alive), ``GET /ready`` (503 until loaded and warmed up, and again while draining),
``GET /metrics`` (Prometheus). With an API key every route but ``/health`` needs ``Authorization:
Bearer KEY``. Every error, an unknown route or method included, is OpenAI's shape, ``{"error": {"message",
"type", "param", "code"}}`` with ``code`` a string, and a 4xx status naming the field; a body that is not
JSON is a 400 and one over the size limit a 413 on every route, chunked or not; an unexpected fault is a
500 whose body carries no traceback.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
import time
import traceback
from collections.abc import Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from judge.core.hosts import HostGuard, HostPolicy
from judge.serve.admission import ChatGate, GateFull, GateTimeout, arrived
from judge.serve.batcher import Batcher, Dropped, QueueFull, Stopped, Ticket, UnitResult
from judge.serve.body import (
    NOT_JSON,
    BodyError,
    StringRuns,
    StructureCount,
    find_lone_surrogate,
    lone_surrogate_message,
    may_hold_surrogates,
    parse_json,
    structure_budget,
)
from judge.serve.image_places import CHAT, RESPONSES, REWARD, SCORE, misplaced_long_string, misplaced_message
from judge.serve.metrics import CONTENT_TYPE
from judge.serve.openapi import ScoreRequest, components, request_body
from judge.serve.reward import PER_QUERY, RewardRequest
from judge.serve.reward import answer as reward_answer
from judge.serve.reward import prepare as prepare_rewards
from judge.serve.service import JudgeService, RequestError, RequestImages, result_of

logger = logging.getLogger(__name__)
B = TypeVar("B", bound=BaseModel)

PUBLIC_ROUTES = {"/health"}
#: OpenRLHF's remote reward model path, and the same under /v1/.
REWARD_ROUTES = ("/get_reward", "/v1/reward")
#: The routes that read images, by their kind of image places (:mod:`judge.serve.image_places`).
IMAGE_ROUTES = {"/v1/chat/completions": CHAT, "/v1/responses": RESPONSES, "/v1/score": SCORE}
#: Set in the scope by the Guard when the byte guard spared a long ``data:`` string: the string bound.
SPARED_DATA_URLS = "judge.spared_data_urls"
TIMEOUT_HEADER = "x-request-timeout"
#: What the request counter records for a client that hung up before it was answered (nginx's code).
CLIENT_CLOSED = 499


#: ``error.type`` and the default ``error.code`` of each status.
_KINDS = {
    400: ("invalid_request_error", "invalid_json"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "forbidden_origin"),
    404: ("not_found_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    415: ("invalid_request_error", "unsupported_media_type"),
    421: ("invalid_request_error", "misdirected_request"),
    422: ("invalid_request_error", "invalid_request"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "timeout"),
}


def error(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    """An error in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``, ``code`` a string."""
    kind, default_code = _KINDS.get(status, ("server_error", "internal_error"))
    body = {"message": message, "type": kind, "param": param, "code": code or default_code}
    return JSONResponse({"error": body}, status, headers=headers)


def create_app(service: JudgeService, *, load: bool = True) -> FastAPI:
    """The app. ``load``: load the weights in a background thread when the app starts (``/ready`` says
    when it is done); off when the caller has loaded them already."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if load and service.batcher is None:
            threading.Thread(target=_load, args=(service,), name="judge-load", daemon=True).start()
        yield
        await run_in_threadpool(service.close)

    app = FastAPI(title="judge-serve", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    metrics = service.metrics
    # Chat completions in progress and waiting, bounded apart from scoring (judge.serve.admission).
    chats = ChatGate(service.cfg.max_chat_concurrency, service.cfg.max_chat_queue)

    app.add_middleware(Guard, service=service)
    # Outermost (added last): a foreign Host or Origin, or a body that is not JSON, is refused first.
    policy = HostPolicy(service.cfg.host, service.cfg.allowed_host)
    # Refused before Guard runs, so counted by HostGuard: /metrics shows foreign-Host and -Origin probes too.
    app.add_middleware(
        HostGuard,
        policy=policy,
        respond=lambda r: error(r.status, r.message, param=r.header, code=r.code),
        counted=lambda path, status: count_request(service, path, status),
    )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return invalid_body(exc.errors())

    @app.exception_handler(RequestError)
    async def _refused(request: Request, exc: RequestError):
        return error(exc.status, str(exc), param=exc.param, code=exc.code)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        # Unknown routes and methods, in the same shape as every other error.
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        return error(exc.status_code, message, dict(exc.headers or {}) or None)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/ready")
    async def ready():
        if service.ready:
            return {"ready": True}
        why = (
            "draining"
            if service.draining
            else f"failed: {service.load_error}"
            if service.load_error
            else "loading"
        )
        return JSONResponse({"ready": False, "status": why}, 503, headers={"Retry-After": "1"})

    @app.get("/metrics")
    async def prometheus():
        if service.batcher is not None:
            metrics.queue_depth.set(service.batcher.depth)
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [_model_entry(service, name) for name in service.served_names]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str):
        if model_id not in service.served_names:
            served = ", ".join(repr(n) for n in service.served_names)
            raise RequestError(
                f"model {model_id!r} is not served here; this server serves {served}",
                status=404,
                param="model",
                code="model_not_found",
            )
        return _model_entry(service, model_id)

    @app.get("/v1/judge")
    async def judge_info():
        return {
            "rubric": service.describe_rubric(),
            "limits": service.limits(),
            "provenance": service.provenance(),
            "ready": service.ready,
        }

    async def scored(units, timeout: float | None, request: Request) -> list[UnitResult] | Response:
        """The units' results through the batcher, or the error to answer (429, 503, 504, a gone client)."""
        batcher = _batcher(service)
        ticket = Ticket(service.deadline(timeout, arrived(request.scope)))
        try:
            futures = batcher.submit(units, ticket)
        except QueueFull as e:
            return error(429, f"busy: {e}; retry later", {"Retry-After": "1"})
        except Stopped as e:
            return error(503, str(e), {"Retry-After": "1"})
        return await _wait(asyncio.gather(*futures), ticket, request, batcher)

    @app.post("/v1/score", openapi_extra=request_body("/v1/score"))
    async def score(request: Request):
        body = await _body(request, ScoreRequest)
        if isinstance(body, Response):
            return body
        _batcher(service)
        timeout = body.timeout if body.timeout is not None else _header_timeout(request)
        images = RequestImages()
        try:
            units = await run_in_threadpool(service.records, body.items, body.criteria, images)
            answered = await scored(units, timeout, request)
        finally:
            images.cleanup()
        if isinstance(answered, Response):
            return answered
        results = [result_of(rec, res.records, images) for (rec, _), res in zip(units, answered, strict=True)]
        metrics.items.inc(len(results))
        return {
            "results": results,
            "provenance": service.provenance(),
            "usage": {
                "items": len(results),
                "forward_passes": sum(r.forward_passes for r in answered),
                "prompt_tokens": sum(r.prompt_tokens for r in answered),
            },
        }

    async def reward(request: Request):
        """OpenRLHF's remote reward model protocol (see :mod:`judge.serve.reward`)."""
        body = await _body(request, RewardRequest, per_query=PER_QUERY)
        if isinstance(body, Response):
            return body
        _batcher(service)
        timeout = body.timeout if body.timeout is not None else _header_timeout(request)
        files = RequestImages()
        try:
            criterion, units = await run_in_threadpool(prepare_rewards, service, body, service.intake(files))
            todo = [u for u in units if not isinstance(u, str)]
            answered = await scored(todo, timeout, request) if todo else []
        finally:
            files.cleanup()
        if isinstance(answered, Response):
            return answered
        results = iter(answered)
        settled = [u if isinstance(u, str) else next(results).records[0] for u in units]
        metrics.items.inc(len(todo))
        return reward_answer(service, body, criterion, settled, files)

    for path in REWARD_ROUTES:
        app.add_api_route(path, reward, methods=["POST"], openapi_extra=request_body(path))

    @app.post("/v1/chat/completions", openapi_extra=request_body("/v1/chat/completions"))
    async def chat_completions(request: Request):
        _batcher(service)
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        return await chatting(request, body)

    @app.post("/v1/responses", openapi_extra=request_body("/v1/responses"))
    async def responses(request: Request):
        """OpenAI's Responses API, as a chat completion (judge.serve.responses): converted, answered, back."""
        from judge.serve.responses import to_chat

        _batcher(service)
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        mapped = await run_in_threadpool(to_chat, body)
        return await chatting(request, mapped.chat, mapped)

    async def chatting(request: Request, chat: dict[str, Any], mapped: Any = None) -> Response:
        """A chat completion of ``chat``, under the chat gate (judge.serve.admission); ``mapped``: the
        Responses request ``chat`` was converted from, which converts the answer and the refusals back."""
        from judge.serve.chat import complete, request_deadline

        since, timeout = arrived(request.scope), _header_timeout(request)
        try:  # a place among the chats in progress, waited for on the event loop (judge.serve.admission)
            release = await chats.enter(request_deadline(service, chat, timeout, since))
        except GateFull as e:
            return error(429, f"busy: {e}; retry later", {"Retry-After": "1"}, code="chat_queue_full")
        except GateTimeout as e:
            return error(504, f"{e} (raise `timeout`, or retry when fewer chats are in progress)")
        try:
            if (
                chat.get("stream") is True
            ):  # server-sent events (judge.serve.streaming), which give the slot back
                from judge.serve.streaming import stream

                streamed = await stream(service, chat, timeout, request, since=since, release=release)
                if mapped is None:
                    return streamed
                kept = {
                    k: v for k, v in streamed.headers.items() if k.lower().startswith(("x-", "cache-control"))
                }
                events = mapped.events(streamed.body_iterator)
                return StreamingResponse(events, media_type="text/event-stream", headers=kept)
            try:
                reply, headers = await run_in_threadpool(complete, service, chat, timeout, None, since)
            finally:
                release()
        except RequestError as e:
            raise e if mapped is None else mapped.error(e) from None
        return JSONResponse(reply if mapped is None else mapped.response(reply), headers=headers)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            described = components(service.model_name, list(service.rubric.families))
            schema.setdefault("components", {}).setdefault("schemas", {}).update(described)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    return app


class Guard:
    """ASGI middleware in front of every route: the API key, the body size limit (by Content-Length, and
    by counting a chunked body as it arrives, on every route), refusing ``/v1/`` work while draining, the
    request counter, and a JSON 500 without a traceback for an unexpected fault. Plain ASGI rather than
    Starlette's ``BaseHTTPMiddleware``, which hides a client's disconnect from the route."""

    def __init__(self, app, service: JudgeService):
        self.app = app
        self.service = service
        self.api_key = service.cfg.key()
        self.max_body = int(service.cfg.max_body_mb * 1024 * 1024)
        self.max_values = structure_budget(service.cfg.max_items)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived(scope)  # the request's deadline counts from now
        route = scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        state = {"status": 500, "started": False}

        async def sending(message) -> None:
            if message["type"] == "http.response.start":
                state["status"], state["started"] = message["status"], True
            await send(message)

        too_large = (
            f"the request body is over the limit of {self.max_body:,} bytes (--max-body-mb); send fewer or "
            "smaller items"
        )
        try:
            refusal = self._refusal(route, headers, too_large)
            if refusal is not None:
                await refusal(scope, receive, sending)
                return
            # The whole body is read here, counted as it arrives: a chunked body over the limit, or one
            # holding more JSON values than the most items a request may carry can need, is a 413 before
            # any route parses it (a route's parser would turn the interruption into its own 400).
            chunks, received, more = [], 0, True
            values = StructureCount(self.max_values)
            string_limit = self.service.string_limit()
            cfg = self.service.cfg
            strings = StringRuns(string_limit, cfg.max_items * cfg.max_images) if string_limit else None
            while more:
                message = await receive()
                if message["type"] != "http.request":  # the client went away mid-body: nobody to answer
                    state["status"] = CLIENT_CLOSED
                    return
                chunks.append(message.get("body", b""))
                received += len(chunks[-1])
                if received > self.max_body:
                    await error(413, too_large)(scope, receive, sending)
                    return
                if not values.add(chunks[-1]):
                    message = values.refusal(self.service.cfg.max_items)
                    await error(413, message, code="too_many_values")(scope, receive, sending)
                    return
                if strings is not None and not strings.add(chunks[-1]):
                    await error(413, strings.refusal(), code="string_too_long")(scope, receive, sending)
                    return
                more = message.get("more_body", False)
            if strings is not None and strings.spared:  # the route checks where those strings are
                scope[SPARED_DATA_URLS] = string_limit
            body: bytes | None = b"".join(chunks)

            async def replay():
                # The body once, then the real channel, so a client's disconnect still reaches the route.
                nonlocal body
                if body is not None:
                    message, body = {"type": "http.request", "body": body, "more_body": False}, None
                    return message
                return await receive()

            await self.app(scope, replay, sending)
        except Exception as e:
            # The type and the traceback in the log line itself: the commands' console shows messages only.
            logger.error(
                f"{scope.get('method')} {route} failed: {type(e).__name__}: {e}\n{traceback.format_exc()}"
            )
            if not state["started"]:
                await error(500, "internal error; the server logged it and keeps serving")(
                    scope, receive, sending
                )
        finally:
            count_request(self.service, route, state["status"])

    def _refusal(self, route: str, headers: dict[str, str], too_large: str) -> Response | None:
        if self.api_key and route not in PUBLIC_ROUTES and not _authorized(headers, self.api_key):
            return error(
                401,
                "missing or wrong API key: send `Authorization: Bearer KEY`",
                {"WWW-Authenticate": "Bearer"},
            )
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            return error(400, "the Content-Length header is not a number", code="invalid_header")
        if length > self.max_body:
            return error(
                413, too_large.replace("the request body is", f"the request body is {length:,} bytes,")
            )
        if self.service.draining and route.startswith("/v1/"):
            return error(503, "the server is shutting down", {"Retry-After": "1"})
        return None


def count_request(service: JudgeService, route: str, status: int) -> None:
    """``judge_requests`` by route and status; a path no route serves counts as ``other`` so that a
    scanner cannot grow the metric's label set."""
    known = route if route in _ROUTES else "/v1/models/{id}" if route.startswith("/v1/models/") else "other"
    service.metrics.requests.labels(route=known, status=str(status)).inc()


_ROUTES = {"/health", "/ready", "/metrics", "/v1/models", "/v1/judge", "/v1/score", "/v1/chat/completions",
           "/v1/responses", *REWARD_ROUTES}  # fmt: skip
# GET /v1/models/<id> is counted under one label, "/v1/models/{id}": ids are the client's to choose.


def invalid_body(errors: Sequence[Any]) -> JSONResponse:
    """A 422 for a body whose fields pydantic refused, each problem named by its field; a 400 for one that
    is not JSON at all (an empty body included)."""
    if any(
        e.get("type") == "json_invalid"
        or (e.get("type") == "missing" and tuple(e.get("loc", ())) == ("body",))
        for e in errors
    ):
        return error(400, NOT_JSON)
    problems, params = [], []
    for e in errors[:10]:
        where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        msg = str(e.get("msg", "")).removeprefix("Value error, ")
        problems.append(f"`{where}`: {msg}" if where else msg)
        params.append(where)
    return error(422, "; ".join(problems) or "invalid request body", param=next(filter(None, params), None))


async def _body(request: Request, model: type[B], per_query: Sequence[str] = ()) -> B | Response:
    """The request's body validated by ``model``, or the error to answer (400, 422 naming the field).
    ``per_query``: top-level fields whose entries the route checks one by one (see :func:`_json_body`)."""
    raw = await _json_body(request, per_query)
    if isinstance(raw, Response):
        return raw
    try:
        return await run_in_threadpool(model.model_validate, raw)
    except ValidationError as e:
        return invalid_body(e.errors())


async def _json_body(request: Request, per_query: Sequence[str] = ()) -> dict[str, Any] | Response:
    """The request's JSON object, or the error to answer: 400 if it is not JSON or nested past what can be
    parsed, 422 if not an object or if a string in it holds a lone surrogate (naming the field), except in
    the fields of ``per_query``, which the route checks entry by entry. Parsed in a worker thread: a large
    body does not hold up the event loop, and so the other clients."""
    raw = await request.body()
    try:
        body = await run_in_threadpool(parse_json, raw)
    except BodyError as e:
        return error(e.status, str(e), param=e.param, code=e.code)
    if not isinstance(body, dict):
        return error(422, f"the request body must be a JSON object (got {type(body).__name__})")
    limit = request.scope.get(SPARED_DATA_URLS)
    if limit is not None:  # a long data: string got past the byte guard: only an image place may hold it
        path = request.scope["path"]
        kind = IMAGE_ROUTES.get(path, REWARD if path in REWARD_ROUTES else None)
        field = await run_in_threadpool(misplaced_long_string, body, kind, limit)
        if field is not None:
            return error(413, misplaced_message(field, limit), param=field, code="string_too_long")
    if may_hold_surrogates(raw):
        checked = {k: v for k, v in body.items() if k not in per_query}
        bad = await run_in_threadpool(find_lone_surrogate, checked)
        if bad is not None:
            return error(422, lone_surrogate_message(bad), param=bad, code="invalid_text")
    return body


def _load(service: JudgeService) -> None:
    try:
        service.load()
    except Exception as e:  # /ready reports it; the process stays up so the failure can be read
        service.load_error = f"{type(e).__name__}: {e}"
        logger.error(f"loading the judge failed: {service.load_error}")


def _authorized(headers: dict[str, str], key: str) -> bool:
    """``Authorization: Bearer KEY``, the key compared exactly and in constant time (the spaces between the
    scheme and the key are HTTP's separator; a configured key never starts with one, see
    :meth:`ServeConfig.key`). The header's bytes as sent (decoded as latin-1 here) against the key's UTF-8."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    given = token.lstrip(" ").encode("latin-1")
    return scheme.lower() == "bearer" and hmac.compare_digest(given, key.encode("utf-8"))


def _header_timeout(request: Request) -> float | None:
    raw = request.headers.get(TIMEOUT_HEADER)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise RequestError(f"header X-Request-Timeout {raw!r} is not a number of seconds") from None
    if not value > 0:
        raise RequestError(f"header X-Request-Timeout {raw!r} must be positive")
    return value


def _batcher(service: JudgeService):
    if service.batcher is None or service.draining:
        why = "is shutting down" if service.draining else "is still loading the judge"
        raise RequestError(f"the server {why}; see GET /ready", status=503)
    return service.batcher


async def _wait(gathered: asyncio.Future, ticket: Ticket, request: Request, batcher: Batcher) -> Any:
    """The units' results, or an error response: 504 past the deadline, nothing for a client gone away
    (both drop the request's units still queued)."""
    while True:
        done, _ = await asyncio.wait({gathered}, timeout=0.2)
        if done:
            break
        if time.monotonic() > ticket.deadline:
            _abandon(gathered)
            batcher.withdraw(ticket)
            return error(504, "the request passed its deadline before all its items were scored; its "
                         "remaining items were dropped (raise `timeout` or send fewer items)")  # fmt: skip
        if await request.is_disconnected():
            _abandon(gathered)
            batcher.withdraw(ticket)
            return Response(status_code=CLIENT_CLOSED)
    try:
        return gathered.result()
    except Dropped as e:
        batcher.withdraw(ticket)
        return error(504, str(e))
    except BaseException:
        # One unit failed: the request is answered with the error now, so its other units are withdrawn
        # rather than scored for nobody (after the request's images are gone).
        batcher.withdraw(ticket)
        raise


def _abandon(gathered: asyncio.Future) -> None:
    """Stop waiting for a request's units; their outcomes are read and discarded (asyncio would otherwise
    log each unread exception)."""
    gathered.cancel()
    gathered.add_done_callback(lambda f: f.cancelled() or f.exception())


def _model_entry(service: JudgeService, name: str) -> dict[str, Any]:
    card = service.spec.card
    return {
        "id": name,
        "object": "model",
        "created": int(service.loaded_at or time.time()),
        "owned_by": "judge",
        "judge": {
            **service.provenance(),
            "card": card.model_dump(mode="json") if card is not None else None,
        },
    }
