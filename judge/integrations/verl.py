"""A verl custom reward function over a running ``judge-serve``: :func:`compute_score`.

verl loads it by file and name (``reward.custom_reward_function.path`` = this file, ``.name`` =
``compute_score``; ``python -c "import judge.integrations.verl as m; print(m.__file__)"`` prints the path)
and calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` for each response. It is
configured by environment variables, since verl passes it none of its own:

* ``JUDGE_SERVER_URL`` (required): the server, e.g. ``http://127.0.0.1:8000``;
* ``JUDGE_API_KEY``: the server's key, if it has one;
* ``JUDGE_TASK``: the task family (default: the rubric's only family); ``JUDGE_CRITERION`` (default
  ``overall``);
* ``JUDGE_REWARD_SCALE``: ``raw`` (the rubric's scale, default) or ``unit`` ([0, 1]);
* ``JUDGE_REWARD_FALLBACK``: the reward of a response that cannot be scored (default 0).

The question is ``extra_info["question"]`` (or ``extra_info["prompt"]``: text or a conversation), the
response ``solution_str`` up to its first end-of-turn token, and a string ``ground_truth`` the reference
answer (shown to task families that use one).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from judge.core.chat_markup import response_of
from judge.core.errors import ConfigError
from judge.integrations.rewards import RewardScorer, question_segments

_SCORERS: dict[tuple[str | None, ...], RewardScorer] = {}
_LOCK = threading.Lock()
_WARNED: set[str] = set()
logger = logging.getLogger(__name__)


def _warn_once(message: str) -> None:
    """Log ``message`` as a warning the first time it comes up in this process (verl calls per response)."""
    with _LOCK:
        if message in _WARNED:
            return
        _WARNED.add(message)
    logger.warning(message)


def scorer_from_environment() -> RewardScorer:
    """The :class:`RewardScorer` the environment describes (one per distinct setting, reused)."""
    env = os.environ
    key = tuple(env.get(k) for k in ("JUDGE_SERVER_URL", "JUDGE_API_KEY", "JUDGE_TASK", "JUDGE_CRITERION",
                                     "JUDGE_REWARD_SCALE", "JUDGE_REWARD_FALLBACK"))  # fmt: skip
    with _LOCK:
        if key not in _SCORERS:
            url, api_key, task, criterion, scale, fallback = key
            if not url:
                raise ConfigError("set JUDGE_SERVER_URL to the judge-serve URL verl's rewards come from")
            try:
                default = float(fallback) if fallback else 0.0
            except ValueError:
                raise ConfigError(f"JUDGE_REWARD_FALLBACK {fallback!r} is not a number") from None
            try:
                _SCORERS[key] = RewardScorer(
                    server=url, api_key=api_key, task=task or None, criterion=criterion or "overall",
                    scale=(scale or "raw"), fallback=default,  # type: ignore[arg-type]
                )  # fmt: skip
            except ConfigError as e:  # a verl user sets environment variables, not arguments: name them
                message = str(e).replace("`task`", "JUDGE_TASK").replace("`criterion`", "JUDGE_CRITERION")
                raise ConfigError(
                    message.replace("say which family", "set JUDGE_TASK to the family")
                ) from None
        return _SCORERS[key]


def compute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: dict | None = None
) -> float:
    """The judge's reward of one response (see the module doc); the fallback when it cannot be scored."""
    scorer = scorer_from_environment()
    info = extra_info or {}
    prompt = info.get("question", info.get("prompt"))
    if prompt is None or (isinstance(prompt, str) and not prompt.strip()):
        _warn_once(
            "verl's extra_info has no 'question' (or 'prompt'): the judge scores the response against an empty "
            "question, which is not what it was trained on. Put the question in extra_info['question'] in "
            "the dataset's preprocessing (keys given: " + (", ".join(sorted(map(str, info))) or "none") + ")"
        )
        prompt = ""
    reference = ground_truth if isinstance(ground_truth, str) else None
    (reward,), _ = scorer.rewards([question_segments(prompt)], [response_of(solution_str, "")], [reference])
    assert reward is not None  # the fallback is a number here
    return float(reward)


__all__ = ["compute_score", "scorer_from_environment"]
