"""Scoring at scale: the engine behind ``judge-score``.

* :mod:`.engine`: load a judge (card or plain model + rubric), build the prompts with the
  training template, score with :class:`judge.models.scoring.ExpectedScorer`, unscorable items;
* :mod:`.inputs`: prediction files of every supported format, and annotation files;
* :mod:`.output`: ``scores.jsonl`` appended per batch with fsync, resume, shard parts and merge;
* :mod:`.summary`: judge means per benchmark/task/model, the metrics' rows, ``summary.{md,csv,json}``;
* :mod:`.run`: one run end to end (:func:`score_files`), sharded under ``accelerate launch``.
"""

from .engine import JudgeEngine, JudgeSpec, load_judge_model, resolve_judge
from .output import ScoreStore, record_key
from .run import ScoreConfig, ScoreResult, print_result, score_files

__all__ = [
    "JudgeEngine",
    "JudgeSpec",
    "ScoreConfig",
    "ScoreResult",
    "ScoreStore",
    "load_judge_model",
    "print_result",
    "record_key",
    "resolve_judge",
    "score_files",
]
