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
* **Any other conversation**: by default (``--chat judge-only``) refused with a 422 that says how to build
  the judge's prompt and lists the tools' prompts recognised. Under ``--chat generate``: greedy generation
  with the judge model, its prompt rendered with the processor's chat template and images expanded exactly
  as the scorer does (:func:`~judge.models.readout.encode_prompts`). It is never taken for a score: the
  reply's ``judge`` is null and its ``X-Judge-Scored`` header ``false`` (``true`` on a scored reply).

How the judge's prompt is recognised: :mod:`judge.serve.judge_prompt`. The request's fields are checked
by :mod:`judge.serve.chat_request`. ``POST /v1/responses`` (OpenAI's Responses API) is answered by this same
code, its request converted to a chat body and the answer back (:mod:`judge.serve.responses`).

Parameters: ``model`` (one of the served names, echoed in the reply; else 404), ``messages``,
``max_tokens`` / ``max_completion_tokens`` (capped by ``--max-new-tokens`` and the context budget),
``temperature`` and ``top_p`` (0 or absent, and 1 or absent: decoding is greedy; anything else is a 422,
or under ``--sampling greedy`` accepted, decoded greedily all the same and said in the
``X-Judge-Sampling`` header; a scored reply, read rather than sampled, accepts them), ``n`` (1),
``logprobs``, ``top_logprobs`` (0..20), ``response_format`` (:mod:`judge.serve.request_fields`),
``stream`` (:mod:`judge.serve.streaming`), ``seed`` (accepted: greedy decoding is deterministic), ``stop``
(a string or up to 4), ``timeout`` (seconds, shortening ``--timeout-s``). Fields the server cannot honour
(tools, logit_bias, penalties) are refused (:func:`~judge.serve.request_fields.refuse_unhonoured`).
A tool's own grading prompt (prometheus-eval, inspect-ai, ...) is answered by :mod:`judge.serve.protocols`. An image part's ``detail`` is
accepted and ignored: images get the judge's own tiling, as when it scores. Every refusal is a 4xx naming
the field (``messages[1].content[0].image_url``).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping
from typing import Any

from judge.core.errors import ImageError, JudgeError
from judge.core.images import open_image
from judge.core.schema import ScoreRecord
from judge.models.text_budget import text_tokens_over
from judge.serve import protocols
from judge.serve.chat_answer import (
    MIN_LOGPROB,
    Answer,
    holding_model,
    past_deadline,
    safe_log,
    time_left,
    yielding_to_scoring,
)
from judge.serve.chat_request import ChatRequest, optional_number, parse_request, refuse_sampling
from judge.serve.judge_prompt import JudgeMatch, match_judge_prompt
from judge.serve.service import JudgeService, RequestError, RequestImages

# ----------------------------------------------------------------------------- the route


def request_deadline(
    service: JudgeService, body: Mapping[str, Any], timeout: float | None, since: float | None = None
) -> float:
    """A chat request's deadline: the server's ``--timeout-s``, shortened by the body's ``timeout`` or else
    by ``timeout`` (the X-Request-Timeout header's), counted from ``since`` (when the request arrived)."""
    own = optional_number(body, "timeout")
    if own is not None and not own > 0:
        raise RequestError(f"`timeout` {own:g} must be a positive number of seconds", param="timeout")
    return service.deadline(own if own is not None else timeout, since)


def complete(
    service: JudgeService,
    body: Mapping[str, Any],
    timeout: float | None = None,
    streamer: Any = None,
    since: float | None = None,
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
    The request's decoded images are removed before it returns. ``streamer``: given to generation
    (:mod:`judge.serve.streaming`), which passes it the tokens as they come. ``since``: when the request
    arrived (its deadline counts from then; default now)."""
    from judge.serve.request_fields import formatted, refuse_unhonoured, response_format
    from judge.serve.tool_calls import forced_call

    deadline = request_deadline(service, body, timeout, since)
    images = RequestImages()
    opened: list = []
    try:
        refuse_unhonoured(body)
        call = forced_call(body)  # a forced tool call: answered with the reading in its arguments
        fmt = response_format(body)
        req = parse_request(service, body, images, sampled_scores=True)
        req.deadline = deadline
        match = match_judge_prompt(service.rubric, req.messages, req.images, service.spec.target_format)
        for path, where in zip(req.images, req.image_parts, strict=True):
            try:
                opened.append(open_image(path, service.image_limits))
            except ImageError as e:
                raise RequestError(f"{where}: {e}", param=where, code="invalid_image") from None
        answer: Answer | None
        if match is not None:
            answer = _score(service, req, match)  # the engine opens the images itself, as /v1/score does
        else:  # a tool's own grading prompt (a registered protocol), else plain generation
            answer = protocols.respond(service, req)
            if answer is None and service.cfg.chat == "judge-only":
                raise RequestError(
                    "`messages`: this server answers only its judge's own rubric prompt and the tools' grading "
                    "prompts it recognises (--chat judge-only, the default), and this conversation is neither. "
                    "Build the judge's prompt with judge.judge_chat_messages(rubric, item, criterion) (GET "
                    "/v1/judge names the rubric, its families and criteria), or POST the item to /v1/score; "
                    + protocols.unrecognised_message()
                    + ". To answer other conversations with generated text (marked X-Judge-Scored: false), "
                    "start the server with --chat generate.",
                    param="messages",
                    code="not_a_judge_prompt",
                )
            if answer is None:
                if fmt.kind != "text":
                    formatted(fmt, "", None, False)  # refused before generating: text is held to no format
                if call is not None:
                    call.refuse_generated()
                refuse_sampling(req.sampling_ignored, service.cfg.sampling)
                answer = _generate(service, req, opened, streamer)
        if call is not None:
            arguments = call.arguments(answer.judge)
        else:
            answer.content = formatted(fmt, answer.content, answer.judge, protocols.json_reply(answer.judge))
    except RequestError as e:  # in the client's terms: no path of the server's disk in an answer
        raise RequestError(images.scrub(str(e)) or "", e.status, param=e.param, code=e.code) from None
    finally:
        for im in opened:
            im.close()
        images.cleanup()
    scored = answer.judge is not None and answer.judge.get("scored", True)
    headers = {"X-Judge-Scored": "true" if scored else "false"}
    if answer.judge is not None and "protocol" in answer.judge:
        headers["X-Judge-Protocol"] = answer.judge["protocol"]
    if req.sampling_header:
        headers["X-Judge-Sampling"] = req.sampling_header
    reply = _completion(service, req, answer)
    return (call.shape(reply, arguments) if call is not None else reply), headers


def _score(service: JudgeService, req: ChatRequest, match: JudgeMatch) -> Answer:
    """The rubric prompt's score, read as /v1/score reads it (the engine's prepare and score_prepared)."""
    engine = service.engine
    prepared = engine.prepare(match.record, [match.criterion], key=0)
    if prepared.encoded is not None:
        with holding_model(service, req):
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
            _token_logprob(tok, tid, safe_log(p * mass))
            for tid, p in zip(engine.scorer.score_ids, dist, strict=True)
        ]
        best = entries[values.index(rec.argmax)]
        top = sorted(entries, key=lambda e: -e["logprob"])[: req.top_logprobs]
        logprobs = [{**best, "top_logprobs": top}]
    return Answer(
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
            # false: a criterion the judge never learned, as /v1/score and the score records say it
            **({"trained": rec.trained} if rec.trained is not None else {}),
        },
    )


# ----------------------------------------------------------------------------- generation


def _generate(service: JudgeService, req: ChatRequest, images: list, streamer: Any = None) -> Answer:
    """Greedy generation with the judge model, under the model lock; ``streamer`` (transformers' streamer
    interface) is handed the tokens as they are generated."""
    import torch
    from transformers import GenerationConfig

    from judge.models.families import generation_inputs
    from judge.models.readout import _float_dtype

    engine = service.engine
    model, tok = engine.scorer.model, engine.scorer.tokenizer
    ids, vision = _encode(engine.processor, req.messages, images, engine.max_tokens)
    time_left(req)  # encoding is the step before the model: past the deadline, answer now (a 504)
    if streamer is not None:  # every refusal is behind: the stream's headers go out now, tokens follow
        streamer.begin(req)
    max_new = min(req.max_new_tokens, engine.max_tokens - len(ids))
    gen = model.generation_config
    eos = gen.eos_token_id if gen.eos_token_id is not None else tok.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    pad = gen.pad_token_id if gen.pad_token_id is not None else tok.pad_token_id
    device = engine.scorer.device
    input_ids = torch.tensor([ids], device=device)
    # The family's image inputs (Qwen: the grid and the token types its generate computes M-RoPE from); no
    # key at all without images: transformers runs the vision encoder on any pixel_values it is given.
    on_device = {
        k: v.to(device, _float_dtype(model)) if k == "pixel_values" else v.to(device)
        for k, v in vision.items()
    }
    extra = generation_inputs(engine.processor, input_ids, on_device)
    from transformers import StoppingCriteriaList

    with holding_model(service, req), torch.inference_mode():
        # A fresh config: plain argmax decoding, whatever sampling defaults the model's own config carries;
        # max_time stops it at the request's deadline, so it never holds the model past it.
        config = GenerationConfig(
            max_new_tokens=max_new, do_sample=False, num_beams=1, eos_token_id=eos,
            pad_token_id=pad if pad is not None else next(iter(eos_ids), 0),
            stop_strings=req.stop or None, return_dict_in_generate=True, output_logits=req.logprobs,
            max_time=time_left(req),
        )  # fmt: skip
        out = model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            generation_config=config,
            tokenizer=tok,  # for stop_strings
            streamer=streamer,
            stopping_criteria=StoppingCriteriaList([yielding_to_scoring(service, req)]),
            **extra,
        )
    if time.monotonic() > req.deadline:
        raise past_deadline("generating")
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
    return Answer(text, finish, len(ids), len(new), logprobs)


def _encode(processor, messages: list[dict], images: list, budget: int):
    """Token ids and image inputs (``pixel_values`` and the family's others) of the conversation, as the
    scorer encodes its prompts; over the context
    budget, fewer tiles per image first (as the engine does), then a 422 naming the lengths."""
    from jinja2 import TemplateError

    from judge.models.readout import encode_vision

    base = getattr(getattr(processor, "image_processor", None), "max_patches", None)
    texts = [p["text"] for m in messages for p in m["content"] if p["type"] == "text"]
    over = text_tokens_over(processor.tokenizer, texts, budget - 1)
    if over is not None:  # found from prefixes, before a huge text is tokenised in full
        raise RequestError(
            f"`messages`: the conversation's text alone is more than {over} tokens; the context budget is "
            f"{budget} tokens (--max-tokens), prompt and at least one generated token together: shorten it",
            status=413,
            code="context_length_exceeded",
        )
    try:
        ids, vision = encode_vision(processor, [messages], images)
        if len(ids[0]) >= budget and images and base:
            for tiles in range(int(base) - 1, 0, -1):
                ids, vision = encode_vision(processor, [messages], images, tiles)
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
    return ids[0], vision


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


def _completion(service: JudgeService, req: ChatRequest, answer: Answer) -> dict[str, Any]:
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


__all__ = ["MIN_LOGPROB", "Answer", "complete", "holding_model", "request_deadline", "safe_log"]
