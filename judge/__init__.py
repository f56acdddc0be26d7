"""judge: train, validate and serve learned judges for multimodal benchmarks.

The public API (see :mod:`judge.api`)::

    from judge import Judge, score_files, train_judge, report, audit_judge, calibrate_judge

Names are imported on first use, so ``import judge`` stays cheap (no torch until a judge loads).
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Judge": "judge.api",
    "score_files": "judge.api",
    # Not "train": that is the judge.train package, which would shadow it once imported.
    "train_judge": "judge.api",
    "report": "judge.api",
    # Not "audit": that is the judge.audit package (as for train_judge).
    "audit_judge": "judge.api",
    "calibrate_judge": "judge.api",
    "CalibrateConfig": "judge.eval.config",
    "CalibrateResult": "judge.scoring.calibrate",
    "AuditConfig": "judge.audit.config",
    "AuditResult": "judge.audit.run",
    "JudgeClient": "judge.scoring.remote",
    "reward_function": "judge.integrations.trl",
    "judge_chat_messages": "judge.serve.chat",
    "score_from_logprobs": "judge.serve.chat",
    "ServeConfig": "judge.serve.config",
    "ScoreConfig": "judge.scoring.config",
    "ScoreResult": "judge.scoring.run",
    "ReportConfig": "judge.eval.config",
    "ReportResult": "judge.eval.report",
    "RunConfig": "judge.train.config",
    "TrainResult": "judge.train.trainer",
    "ScoreRecord": "judge.core.schema",
    "PredictionRecord": "judge.core.schema",
    "AnnotationRecord": "judge.core.schema",
    "load_annotations": "judge.core.io",
    "load_predictions": "judge.core.io",
    "Rubric": "judge.core.rubric",
    "load_rubric": "judge.core.rubric",
    "JudgeError": "judge.core.errors",
    "ConfigError": "judge.core.errors",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'judge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
