"""``POST /get_reward`` and ``POST /v1/reward``: the judge as a reward model for RL trainers.

The body is OpenRLHF's remote reward model protocol (``openrlhf/utils/agent.py``,
``SingleTurnAgentExecutor._fetch_rewards_via_http``, OpenRLHF 0.11.2): ``{"query": [str], "prompts":
[str], "labels": [any]}``, where a query is the decoded prompt and response in the policy's chat template
and a prompt the templated prompt. The answer is ``{"rewards": [float], "scores": [float], "extra_logs":
{name: [float]}}``, one reward per query, as OpenRLHF's reference server answers; ``judge`` adds per
query the status, reason, raw expected score and criterion (OpenRLHF ignores it).

Each query becomes a judge item (:func:`judge.core.chat_markup.split_query`): the question is the
prompt's user text, the response what follows the prompt; a label that is a non-empty string is the
reference answer (shown to families that use one). Optional per-query ``images`` (data URLs, or paths
under ``--image-root``) take the prompt's image places in order. The task family and criterion come from
the request (``task``, ``criterion``) or the server (``--reward-task``, ``--reward-criterion``); the
reward is the expected score (calibrated where the judge carries a calibration), ``raw`` on the rubric's
scale or ``unit`` (scaled to [0, 1]). Items go through the batcher ``/v1/score`` uses, so a reward equals
``/v1/score``'s score of the same item. An item that cannot be scored (an image refused, a prompt over the
context budget, an empty question) gets the fallback reward and ``judge_unscorable`` 1 in ``extra_logs``;
it never fails the batch. What is wrong with the request as a whole (lengths that differ, an unknown
criterion) is a 4xx naming the field. A judge with selective evaluation adds each item's ``trusted`` mark
to ``judge.items``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from judge.core.chat_markup import split_query
from judge.core.schema import PredictionRecord, ScoreRecord
from judge.serve.body import SURROGATE, find_lone_surrogate
from judge.serve.service import ImageIntake, JudgeService, RequestError, RequestImages

#: The request's fields with an entry per query: what is wrong in one entry costs that query alone.
PER_QUERY = ("query", "prompts", "labels", "images")

logger = logging.getLogger(__name__)


class RewardRequest(BaseModel):
    """``POST /get_reward`` (and ``/v1/reward``)."""

    model_config = ConfigDict(extra="forbid")

    query: list[str] = Field(min_length=1, description="prompt and response, in the policy's chat template")
    prompts: list[str] | None = Field(None, description="the templated prompt of each query")
    labels: list[Any] | None = Field(None, description="a string label is the item's reference answer")
    images: list[list[str]] | None = Field(None, description="per query: data URLs of its prompt's images")
    task: str | None = Field(None, description="the task family (default: the server's --reward-task)")
    criterion: str | None = Field(None, description="default: the server's --reward-criterion")
    scale: Literal["raw", "unit"] | None = Field(None, description="default: the server's --reward-scale")
    timeout: float | None = Field(None, gt=0, description="seconds; shortens the server's --timeout-s")

    @model_validator(mode="after")
    def _same_lengths(self) -> RewardRequest:
        for name in ("prompts", "labels", "images"):
            value = getattr(self, name)
            if value is not None and len(value) != len(self.query):
                raise ValueError(f"`{name}` has {len(value)} entries for {len(self.query)} queries")
        return self


def settle_target(service: JudgeService, body: RewardRequest) -> tuple[str, str]:
    """The (task family, criterion) every query of ``body`` is scored on."""
    cfg, rubric = service.cfg, service.rubric
    task = body.task or cfg.reward_task
    if task is None:
        if len(rubric.families) != 1:
            _warn_once(
                f"a reward request named no `task` and the server has no --reward-task (rubric {rubric.name!r} "
                f"has {', '.join(rubric.families)}): it was refused with a 422, and so will every such request "
                "(OpenRLHF logs only '422 Unprocessable Entity' and trains on with reward None); restart with "
                "--reward-task FAMILY"
            )
            raise RequestError(
                f"`task`: say which task family of rubric {rubric.name!r} the queries are "
                f"({', '.join(rubric.families)}): in the request, or with judge-serve --reward-task",
                param="task",
            )
        task = next(iter(rubric.families))
    family = rubric.families.get(task)
    if family is None:
        raise RequestError(
            f"`task` {task!r} is not a family of rubric {rubric.name!r} ({', '.join(rubric.families)})",
            param="task",
        )
    criterion = body.criterion or cfg.reward_criterion
    if criterion not in family.criterion_ids:
        raise RequestError(
            f"`criterion` {criterion!r} is not a criterion of family {task!r} "
            f"({', '.join(family.criterion_ids)})",
            param="criterion",
        )
    return task, criterion


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning(message)


def items_of(body: RewardRequest, task: str) -> list[dict[str, Any]]:
    """The judge item of each query (see the module doc); ids are the queries' positions."""
    out = []
    for i, query in enumerate(body.query):
        ex = split_query(query, body.prompts[i] if body.prompts else None)
        images = list(body.images[i]) if body.images else []
        question: list[dict[str, Any]] = []
        for k, piece in enumerate(ex.question):
            if k and images:  # an image placeholder: the next image takes its place
                question.append({"type": "image", "image": images.pop(0)})
            if piece.strip():
                question.append({"type": "text", "text": piece})
        question += [{"type": "image", "image": ref} for ref in images]  # more images than places
        label = body.labels[i] if body.labels else None
        item: dict[str, Any] = {"id": str(i), "task": task, "question": question, "response": ex.response}
        if isinstance(label, str) and label.strip():
            item["reference"] = label
        out.append(item)
    return out


def prepare(
    service: JudgeService, body: RewardRequest, intake: ImageIntake
) -> tuple[str, list[tuple[PredictionRecord, list[str]] | str]]:
    """The criterion, and per query either its unit for the batcher or why it cannot be scored."""
    task, criterion = settle_target(service, body)
    units: list[tuple[PredictionRecord, list[str]] | str] = []
    for item in items_of(body, task):
        bad = _unusable_entry(body, int(item["id"]))
        if bad is not None:
            units.append(bad)
            continue
        try:
            (unit,) = service.records([item], [criterion], intake.files, intake=intake)
        except RequestError as e:  # this query alone: it gets the fallback reward, the batch goes on
            units.append(str(e).replace("items[0]", f"query[{item['id']}]"))
        else:
            units.append(unit)
    return criterion, units


def _unusable_entry(body: RewardRequest, i: int) -> str | None:
    """Why query ``i`` cannot be scored from what the request says of it (a string holding a lone
    surrogate, in its query, prompt, label or images), or None."""
    for name in PER_QUERY:
        entries = getattr(body, name)
        if entries is not None:
            bad = find_lone_surrogate(entries[i], f"{name}[{i}]")
            if bad is not None:
                return f"`{bad}` {SURROGATE}"
    return None


def answer(
    service: JudgeService,
    body: RewardRequest,
    criterion: str,
    settled: Sequence[ScoreRecord | str],
    images: RequestImages,
) -> dict[str, Any]:
    """OpenRLHF's reply: one reward per query, from its score record or the reason it has none (in the
    client's terms: ``images`` names its files as the client did)."""
    scale = body.scale or service.cfg.reward_scale
    lo, hi = service.rubric.scale.min, service.rubric.scale.max
    fallback = service.cfg.reward_fallback
    rewards, flags, details = [], [], []
    for outcome in settled:
        if isinstance(outcome, ScoreRecord) and outcome.score is not None:
            score = float(outcome.score)
            rewards.append(score if scale == "raw" else (score - lo) / (hi - lo))
            flags.append(0.0)
            details.append(
                {"status": "ok", "score": score, "reason": None}
                | ({"trusted": outcome.trusted} if outcome.trusted is not None else {})
            )
        else:
            reason = images.scrub(outcome if isinstance(outcome, str) else outcome.reason)
            status = "unscorable" if isinstance(outcome, str) else outcome.status
            rewards.append(fallback)
            flags.append(1.0)
            details.append({"status": status, "score": None, "reason": reason})
    return {
        "rewards": rewards,
        "scores": list(rewards),
        "extra_logs": {"judge_unscorable": flags},
        "judge": {"criterion": criterion, "scale": scale, "fallback": fallback, "items": details},
    }


__all__ = ["RewardRequest", "answer", "items_of", "prepare", "settle_target"]
