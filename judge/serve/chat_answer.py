"""A chat's turn at the model: the answer before it takes OpenAI's shape, holding the model no longer than the
request's deadline, and log-probabilities as JSON can carry them.

Used by the chat route (:mod:`judge.serve.chat`) and by the protocols' replies
(:mod:`judge.serve.protocols.reply`), which answer through the same route: both import it, neither the other.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from judge.serve.chat_request import ChatRequest
from judge.serve.service import JudgeService, RequestError

#: What a token of zero probability reports as its log-probability (JSON has no -inf; OpenAI uses it too).
MIN_LOGPROB = -9999.0


@dataclass
class Answer:
    """A reply before it is put in OpenAI's shape: its text, why it ended, its token counts, its logprobs
    and the judge's reading (None for generated text)."""

    content: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    logprobs: list[dict] | None = None
    judge: dict[str, Any] | None = None


@contextmanager
def holding_model(service: JudgeService, req: ChatRequest) -> Iterator[None]:
    """``service.model_lock`` for a chat, behind any scoring round waiting for it, waited for no longer than
    the request's deadline (then a 504)."""
    lock = service.model_lock
    if not lock.acquire_for_generation(timeout=time_left(req)):
        raise past_deadline("waiting for the model")
    try:
        yield
    finally:
        if lock.held_here():  # not when a handover to scoring ran past the deadline (yielding_to_scoring)
            lock.release()


def yielding_to_scoring(service: JudgeService, req: ChatRequest) -> Any:
    """A stopping criterion that, between two generated tokens, lets a waiting scoring round use the model
    (:meth:`~judge.serve.admission.ModelLock.yield_to_scoring`), and stops the generation when the model
    cannot be had back before the deadline."""
    import torch
    from transformers import StoppingCriteria

    class YieldToScoring(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            left = max(0.0, req.deadline - time.monotonic())
            done = not service.model_lock.yield_to_scoring(left)
            return torch.full((input_ids.shape[0],), done, device=input_ids.device, dtype=torch.bool)

    return YieldToScoring()


def time_left(req: ChatRequest) -> float:
    left = req.deadline - time.monotonic()
    if left <= 0:
        raise past_deadline("waiting")
    return left


def past_deadline(doing: str) -> RequestError:
    return RequestError(
        f"the request passed its deadline while {doing} (raise `timeout` or X-Request-Timeout up to the "
        "server's --timeout-s, or ask for fewer `max_tokens`)",
        status=504,
        code="timeout",
    )


def safe_log(p: float) -> float:
    """``log(p)``, and :data:`MIN_LOGPROB` for 0 (JSON has no -inf)."""
    return math.log(p) if p > 0 else MIN_LOGPROB
