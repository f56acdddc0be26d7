"""A tool's grading prompt answered: recognised by a registered protocol, scored by the learned judge with
the engine the chat route uses for the judge's own prompt (``JudgeEngine.prepare`` and ``score_prepared``,
under the model lock and the request's deadline), mapped to the tool's scale and rendered as its parser
expects.

What the judge scores is its own criterion, not the tool's rubric text: the task family and criterion
come from the server (``--protocol-task``, default ``--reward-task`` or the rubric's only family;
``--protocol-criterion``, default ``overall``), except that a rubric item of lmms-eval's
``evaluate_with_rubric`` named like one of the family's criteria is scored on that criterion. The reply
says so: its ``judge`` field names the protocol, the family and criterion scored, the tool's own criterion
text, the calibrated expected score, and the value on the tool's scale; the ``X-Judge-Protocol`` header
names the protocol. A pair is compared as ``Judge.compare`` compares it
(:func:`~judge.models.preference.record_preference`).
"""

from __future__ import annotations

from typing import Any

from judge.core.schema import PredictionRecord, ScoreRecord
from judge.models.preference import record_preference
from judge.serve.chat_answer import Answer, holding_model, safe_log
from judge.serve.chat_request import ChatRequest
from judge.serve.protocols.base import (
    Content,
    Outcome,
    Prompt,
    Protocol,
    ProtocolError,
    Reading,
    Task,
    find_protocol,
    protocol_target,
)
from judge.serve.protocols.scales import integer_distribution, integer_scale
from judge.serve.service import JudgeService, RequestError

#: Most characters of the tool's criterion text echoed in the reply's ``judge`` field.
SHOWN = 300


def respond(service: JudgeService, req: ChatRequest) -> Answer | None:
    """The answer to a tool's grading prompt, or None when no protocol recognises the request. Raises
    :class:`RequestError` for a recognised prompt that cannot be answered (a 422 naming why)."""
    prompt = Prompt.of(req.messages, req.images)
    proto = find_protocol(prompt) if prompt is not None else None
    if prompt is None or proto is None:
        return None
    try:
        task = proto.extract(prompt, service.rubric)
    except ProtocolError as e:  # the scale's bounds too (stated.ScaleError): a 422 naming what was read
        raise RequestError(
            f"`messages`: read as {proto.tool}'s grading prompt ({proto.name}), but {e}",
            param="messages",
            code="invalid_tool_prompt",
        ) from None
    info: dict[str, Any] = {"protocol": proto.name, "tool": proto.tool, "answer": proto.answer}
    if task.criterion_text:
        info["tool_criterion"] = task.criterion_text[:SHOWN]
    if task.mode == "none":
        content = proto.render(task, Outcome(), "")
        info.update(scored=False, note="nothing was scored: " + proto.answer)
        return Answer(content, "stop", 0, _tokens(service, content), judge=info)
    family, criterion = _target(service, proto)
    outcome, records = _score(service, req, task, family, criterion)
    scored = sorted({r.criterion or criterion for r in records})
    note = _note(service, proto, task, family, scored, outcome)
    content = proto.render(task, outcome, note)
    info.update(
        scored=True,
        family=family,
        criterion=criterion if len(scored) == 1 else scored,
        scale=list(service.rubric.scale.values),
        expected=[r.score for r in records] if len(records) > 1 else records[0].score,
        note=note,
    )
    value = proto.value(task, outcome)
    if value is not None:
        info["value"] = value  # the answer's number on the tool's scale
    if outcome.preference is not None:
        info["preference"] = outcome.preference.to_dict()
    answer = Answer(
        content,
        "stop",
        sum(int((r.details or {}).get("num_tokens", 0)) for r in records),
        _tokens(service, content),
        judge=info,
    )
    if req.logprobs:
        answer.logprobs = _logprobs(service, proto, task, outcome, records, content, req.top_logprobs)
    return answer


def _target(service: JudgeService, proto: Protocol) -> tuple[str, str]:
    target = protocol_target(service.cfg, service.rubric)
    if isinstance(target, str):
        raise RequestError(
            f"`messages`: read as {proto.tool}'s grading prompt ({proto.name}), but {target}",
            param="messages",
            code="no_protocol_task",
        )
    return target


def _record(service: JudgeService, family: str, task: Task, response: Content, key: int) -> PredictionRecord:
    try:
        return PredictionRecord(
            id=f"chat-{key}", benchmark=service.rubric.name, task=family, question=task.question,
            response=response, reference=task.reference or None,
        )  # fmt: skip
    except ValueError as e:  # an empty question or response: nothing the judge can score
        raise RequestError(
            f"`messages`: the tool's prompt gives nothing the judge can score: {e}".splitlines()[0],
            param="messages",
            code="invalid_tool_prompt",
        ) from None


def _score(
    service: JudgeService, req: ChatRequest, task: Task, family: str, criterion: str
) -> tuple[Outcome, list[ScoreRecord]]:
    """Score the task's responses (per criterion for ``criteria``), as the chat route scores the judge's
    own prompt, and read them."""
    engine = service.engine
    fam = service.rubric.families[family]
    if task.mode == "criteria":
        wanted = {key: (c if c in fam.criterion_ids else criterion) for key, c in task.criteria.items()}
        units = [(_record(service, family, task, task.responses[0], 0), list(dict.fromkeys(wanted.values())))]
    else:
        units = [(_record(service, family, task, r, k), [criterion]) for k, r in enumerate(task.responses)]
    prepared = [engine.prepare(rec, crits, key=k) for k, (rec, crits) in enumerate(units)]
    if any(p.encoded is not None for p in prepared):
        with holding_model(service, req):
            for _ in engine.score_prepared(prepared):
                pass
    records = [r for p in prepared for r in (p.records or [])]
    for rec in records:
        if rec.score is None or rec.distribution is None:
            code = (rec.details or {}).get("reason_code")
            raise RequestError(
                f"`messages`: the tool's prompt was read ({rec.id}), but the judge cannot score it: {rec.reason}",
                status=500 if code == "non_finite" else 422,
            )
    values = service.rubric.scale.values
    lo, hi = values[0], values[-1]
    outcome = Outcome(readings=[Reading(float(r.score or 0.0), lo, hi) for r in records])
    if task.mode == "criteria":
        by_crit = {r.criterion: Reading(float(r.score or 0.0), lo, hi) for r in records}
        outcome.by_key = {key: by_crit[c] for key, c in wanted.items()}
    if task.mode == "pair":
        outcome.preference = record_preference(records[0], records[1], values)
    return outcome, records


def _note(
    service: JudgeService, proto: Protocol, task: Task, family: str, criteria: list[str], outcome: Outcome
) -> str:
    """The free-text part of an answer: what was scored and how, in words the tools' parsers pass over
    (no brackets, no grade words)."""
    scale = service.rubric.scale
    named = ", ".join(repr(c) for c in criteria)
    head = (
        f"Scored by a learned judge on its own criterion {named} of task family {family!r} of rubric "
        f"{service.rubric.name!r} (expected score on {scale.min}-{scale.max}"
    )
    if task.mode == "pair":
        a, b = outcome.readings
        pref = outcome.preference.p_first_better
        body = f": {a.expected:.3f} for the first response, {b.expected:.3f} for the second; preference for the first {pref:.3f})"
    elif task.mode == "criteria":
        body = "; " + ", ".join(f"{k}: {r.expected:.3f}" for k, r in outcome.by_key.items()) + ")"
    else:
        body = f": {outcome.readings[0].expected:.3f})"
    tail = ", not on the tool's rubric text." if task.criterion_text else "."
    return head + body + tail


def _tokens(service: JudgeService, text: str) -> int:
    return len(service.engine.scorer.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0


def _logprobs(
    service: JudgeService,
    proto: Protocol,
    task: Task,
    outcome: Outcome,
    records: list[ScoreRecord],
    content: str,
    top: int,
) -> list[dict] | None:
    """``logprobs.content`` of a scored answer whose value is an integer on the tool's scale: one entry, the
    value's token, whose ``top_logprobs`` are the tool's integer values with the probabilities of the
    calibrated distribution carried onto its scale (:func:`integer_distribution`), so weighting them (as
    G-Eval does) gives the mapped score. None for answers of another kind (a grade, a verdict, a token)."""
    rng = task.options.get("range")
    if task.mode != "point" or rng is None or task.options.get("strict") or task.options.get("choices"):
        return None
    lo, hi = rng
    probs = integer_distribution(outcome.readings[0], records[0].distribution, lo, hi)
    value = integer_scale(outcome.readings[0], lo, hi)  # what every integer answer renders
    ranked = sorted(probs, key=lambda k: -probs[k])[: max(top, 0)]

    def entry(k: int) -> dict[str, Any]:
        return {"token": str(k), "logprob": safe_log(probs.get(k, 0.0)), "bytes": list(str(k).encode())}

    return [{**entry(value), "top_logprobs": [entry(k) for k in ranked]}]


__all__ = ["respond"]
