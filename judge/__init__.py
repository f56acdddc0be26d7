"""judge: train, validate and serve learned judges for multimodal benchmarks.

The public API (see :mod:`judge.api`)::

    from judge import Judge, score_files, train_judge, report, audit_judge, calibrate_judge, bench_judge

Names are imported on first use, so ``import judge`` stays cheap (no torch until a judge loads).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

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
    "bench_judge": "judge.api",
    "BenchConfig": "judge.scoring.bench",
    "BenchResult": "judge.scoring.bench",
    "Preference": "judge.models.preference",
    "AuditConfig": "judge.audit.config",
    "AuditResult": "judge.audit.run",
    "JudgeClient": "judge.scoring.remote",
    "reward_function": "judge.integrations.trl",
    "judge_chat_messages": "judge.serve.judge_prompt",
    "score_from_logprobs": "judge.serve.judge_prompt",
    "ServeConfig": "judge.serve.config",
    "ScoreConfig": "judge.scoring.config",
    "ScoreResult": "judge.scoring.run",
    "ReportConfig": "judge.eval.config",
    "ReportResult": "judge.eval.report",
    "RunConfig": "judge.train.config",
    "TrainResult": "judge.train.trainer",
    "ScoreRecord": "judge.core.schema",
    "ItemScores": "judge.core.schema",
    "PredictionRecord": "judge.core.schema",
    "AnnotationRecord": "judge.core.schema",
    "load_annotations": "judge.core.io",
    "load_predictions": "judge.core.io",
    "Rubric": "judge.core.rubric",
    "load_rubric": "judge.core.rubric",
    "JudgeError": "judge.core.errors",
    "ConfigError": "judge.core.errors",
}

if TYPE_CHECKING:  # what type checkers see; at run time the names load on first use (above)
    from judge.api import Judge, audit_judge, bench_judge, calibrate_judge, report, score_files, train_judge
    from judge.audit.config import AuditConfig
    from judge.audit.run import AuditResult
    from judge.core.errors import ConfigError, JudgeError
    from judge.core.io import load_annotations, load_predictions
    from judge.core.rubric import Rubric, load_rubric
    from judge.core.schema import AnnotationRecord, ItemScores, PredictionRecord, ScoreRecord
    from judge.eval.config import CalibrateConfig, ReportConfig
    from judge.eval.report import ReportResult
    from judge.integrations.trl import reward_function
    from judge.models.preference import Preference
    from judge.scoring.bench import BenchConfig, BenchResult
    from judge.scoring.calibrate import CalibrateResult
    from judge.scoring.config import ScoreConfig
    from judge.scoring.remote import JudgeClient
    from judge.scoring.run import ScoreResult
    from judge.serve.config import ServeConfig
    from judge.serve.judge_prompt import judge_chat_messages, score_from_logprobs
    from judge.train.config import RunConfig
    from judge.train.trainer import TrainResult

# Written out so tools read it; tests/test_api.py checks it is __version__ and every name of _EXPORTS.
__all__ = [
    "__version__",
    "AnnotationRecord",
    "AuditConfig",
    "AuditResult",
    "BenchConfig",
    "BenchResult",
    "CalibrateConfig",
    "CalibrateResult",
    "ConfigError",
    "ItemScores",
    "Judge",
    "JudgeClient",
    "JudgeError",
    "PredictionRecord",
    "Preference",
    "ReportConfig",
    "ReportResult",
    "Rubric",
    "RunConfig",
    "ScoreConfig",
    "ScoreRecord",
    "ScoreResult",
    "ServeConfig",
    "TrainResult",
    "audit_judge",
    "bench_judge",
    "calibrate_judge",
    "judge_chat_messages",
    "load_annotations",
    "load_predictions",
    "load_rubric",
    "report",
    "reward_function",
    "score_files",
    "score_from_logprobs",
    "train_judge",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'judge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
