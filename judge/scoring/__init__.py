"""Scoring at scale: the engine behind ``judge-score``.

* :mod:`.config`: :class:`ScoreConfig`, every setting of a run (the command's options are made from it);
* :mod:`.engine`: score with a judge that :func:`judge.models.load` loaded (card or plain model + rubric):
  build the prompts with the training template, score with :class:`judge.models.readout.ExpectedScorer`,
  unscorable items;
* :mod:`.inputs`: prediction files of every supported format, and annotation files;
* :mod:`.output`: ``scores.jsonl`` appended per batch with fsync, resume, shard parts and merge;
* :mod:`.summary`: judge means per benchmark/task/model, the metrics' rows, ``summary.{md,csv,json}``;
* :mod:`.leaderboard`: models ranked per benchmark and task (bootstrap intervals, win rates) for the summary;
* :mod:`.labelled`: human labels in the leaderboard: human-only and prediction-powered means;
* :mod:`.calibrate`: ``judge-calibrate`` (score human-labelled items, fit, write ``calibration.json``);
* :mod:`.run`: one run end to end (:func:`score_files`), sharded under ``accelerate launch``;
* :mod:`.remote`: :class:`JudgeClient`, scoring through a running ``judge-serve`` (``--server``).

Names are imported on first use: the command builds its options from :mod:`.config` without loading
torch (the engine's modules do).
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "JudgeEngine": "engine",
    "JudgeSpec": "engine",
    "load_judge_model": "engine",
    "resolve_judge": "engine",
    "ScoreConfig": "config",
    "ScoreResult": "run",
    "score_files": "run",
    "ScoreStore": "output",
    "record_key": "output",
    "JudgeClient": "remote",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
