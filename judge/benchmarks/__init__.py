"""Rule-based benchmark metrics and the readers of the benchmarks' own files; one module per benchmark.

Public API (the scoring engine's)::

    score_predictions(records, mode="official")  # -> list[ScoreRecord]; mode official|strict|both
    needs_judge(record)                          # -> bool: goes to the learned judge
    summarize(score_records)                     # -> list[dict] summary rows
    load_benchmark_predictions(paths)            # any format in FORMATS; detect_format(path)

``official`` reproduces each benchmark's own scoring exactly (its bugs included, so numbers
match the leaderboards); ``strict`` uses the toolkit's extractor (:mod:`.extract`);
``summarize`` counts the items where the two disagree.

A benchmark is one module registering a :class:`Benchmark` (:mod:`.base`); the import lines
below register the built-in ones, and :func:`load_plugins` those other packages declare under
the ``judge.benchmarks`` entry point group. See "Adding a benchmark" in docs/benchmarks.md.
"""

# The built-in benchmarks: importing a module registers it (a new benchmark adds its module here).
from judge.benchmarks import milebench, mmie, mmra  # noqa: F401

# The built-in judge benchmarks (judge-bench), registered the same way.
from judge.benchmarks import mllm_judge, mm_rewardbench, vl_rewardbench  # noqa: F401  # isort: skip
from judge.benchmarks.base import (
    ENTRY_POINT_GROUP,
    REGISTRY,
    Benchmark,
    Format,
    MetricInfo,
    ReadContext,
    get_benchmark,
    load_plugins,
    metric_for,
    metric_info,
    needs_judge,
    register_benchmark,
    score_predictions,
    summarize,
    unregister_benchmark,
)
from judge.benchmarks.common import BOTH, MODES, OFFICIAL, STRICT, TOOLKIT, RecordMeta, modes_of
from judge.benchmarks.extract import Extraction, extract_choice, extract_yes_no, option_keys
from judge.benchmarks.formats import (
    FORMATS,
    detect_format,
    drop_duplicate_predictions,
    joined_files,
    load_benchmark_predictions,
)

load_plugins()

__all__ = [
    "BOTH",
    "ENTRY_POINT_GROUP",
    "FORMATS",
    "MODES",
    "OFFICIAL",
    "REGISTRY",
    "STRICT",
    "TOOLKIT",
    "Benchmark",
    "Extraction",
    "Format",
    "MetricInfo",
    "ReadContext",
    "RecordMeta",
    "detect_format",
    "drop_duplicate_predictions",
    "extract_choice",
    "extract_yes_no",
    "get_benchmark",
    "joined_files",
    "load_benchmark_predictions",
    "load_plugins",
    "metric_for",
    "metric_info",
    "modes_of",
    "needs_judge",
    "option_keys",
    "register_benchmark",
    "score_predictions",
    "summarize",
    "unregister_benchmark",
]
