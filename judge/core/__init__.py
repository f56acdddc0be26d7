"""The bottom layer: errors, atomic files, record schemas, rubrics, the prompt template, file readers.

Every other package builds on these; they import nothing else of ``judge`` and never torch, so
reading and checking files stays fast and works without a model stack.
"""

from judge.core.errors import ConfigError, ImageError, JudgeError, RecordError
from judge.core.io import InvalidRecordsError, load_annotations, load_predictions
from judge.core.rubric import OVERALL, Rubric, load_rubric
from judge.core.schema import AnnotationRecord, PredictionRecord, ScoreRecord
from judge.core.template import build_judge_prompt

__all__ = [
    "OVERALL",
    "AnnotationRecord",
    "ConfigError",
    "ImageError",
    "InvalidRecordsError",
    "JudgeError",
    "PredictionRecord",
    "RecordError",
    "Rubric",
    "ScoreRecord",
    "build_judge_prompt",
    "load_annotations",
    "load_predictions",
    "load_rubric",
]
