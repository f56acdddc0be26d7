"""The data layer: record schemas, loaders, images, rubrics, annotator aggregation, splits, SFT data.

Imports nothing else of ``judge``; heavy libraries (``datasets``) are imported only where used.
"""

from .errors import ConfigError, ImageError, JudgeError, RecordError
from .io import InvalidRecordsError, load_annotations, load_predictions
from .rubric import OVERALL, Rubric, load_rubric
from .schema import AnnotationRecord, PredictionRecord, ScoreRecord
from .template import build_judge_prompt

__all__ = [
    "OVERALL", "AnnotationRecord", "ConfigError", "ImageError", "InvalidRecordsError", "JudgeError",
    "PredictionRecord", "RecordError", "Rubric", "ScoreRecord", "build_judge_prompt", "load_annotations",
    "load_predictions", "load_rubric",
]
