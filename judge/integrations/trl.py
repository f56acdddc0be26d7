"""A reward function for TRL's trainers (``GRPOTrainer(reward_funcs=[...])``): :func:`reward_function`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from judge.api import Judge
from judge.integrations.rewards import RewardScorer, Scale, completion_text, question_segments


def reward_function(
    judge: Judge | str | Path | None = None,
    rubric: str | None = None,
    criterion: str = "overall",
    task: str | None = None,
    server: str | None = None,
    *,
    api_key: str | None = None,
    scale: Scale = "raw",
    fallback: float | None = None,
    name: str | None = None,
    **load_options: Any,
) -> Callable[..., list[float | None]]:
    """A reward function with TRL's ``reward_funcs`` signature: ``f(prompts, completions, **kwargs)`` gives
    one reward per completion, the judge's expected score on ``criterion`` of task family ``task``.

    ``judge``: a loaded :class:`~judge.api.Judge`, or what :meth:`Judge.load` takes (with ``rubric`` and
    ``load_options``); or ``server``: a ``judge-serve`` URL (with ``api_key``). Prompts and completions may
    be plain strings or conversations (lists of ``{"role", "content"}``; the question is the user turns,
    the response the assistant's text). Images the trainer passes (a dataset's ``images`` or ``image``
    column: PIL images, paths or bytes) fill the prompt's image parts in order; a dataset column
    ``reference`` (or ``answer``), when a string, is the reference answer. ``scale``: ``raw`` (the rubric's
    scale) or ``unit`` ([0, 1]); ``fallback``: the reward of a completion that cannot be scored (default
    ``None``, which TRL takes as NaN). The function's ``__name__`` (``name``, default ``judge_<criterion>``)
    is what TRL's logs call it (``rewards/judge_overall/mean``); ``.scorer`` is its :class:`RewardScorer`.
    """
    scorer = RewardScorer(
        judge, rubric=rubric, server=server, api_key=api_key, task=task, criterion=criterion, scale=scale,
        fallback=fallback, **load_options,
    )  # fmt: skip

    def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        n = len(prompts)
        images = _per_sample(kwargs.get("images"), n) or [
            [x] if x is not None else [] for x in _column(kwargs.get("image"), n)
        ]
        references = (
            _column(kwargs.get("reference"), n) if "reference" in kwargs else _column(kwargs.get("answer"), n)
        )
        questions = [question_segments(p, images[i] if images else ()) for i, p in enumerate(prompts)]
        rewards, records = scorer.rewards(questions, [completion_text(c) for c in completions], references)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and records:
            log_metric(f"{reward.__name__}/unscorable", sum(r.score is None for r in records) / len(records))
        return rewards

    reward.__name__ = reward.__qualname__ = name or f"judge_{criterion}"
    reward.scorer = scorer  # type: ignore[attr-defined]
    return reward


def _column(values: Any, n: int) -> list[Any]:
    return (
        list(values)
        if isinstance(values, Sequence) and not isinstance(values, str) and len(values) == n
        else [None] * n
    )


def _per_sample(values: Any, n: int) -> list[list[Any]]:
    """A per-sample list of image lists (TRL's ``images`` column), or [] when absent."""
    if not isinstance(values, Sequence) or len(values) != n:
        return []
    return [list(v) if isinstance(v, Sequence) and not isinstance(v, (str, bytes)) else [v] for v in values]


__all__ = ["reward_function"]
