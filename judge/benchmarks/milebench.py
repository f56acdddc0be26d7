"""MileBench: 29 datasets, scored as the official ``evaluate.py`` scores them, or strictly.

Official mode follows MileBench/MileBench ``evaluate.py`` and ``score.py`` at the repository's
head, commit 9583e1f (2024-07-11), which is what users run today, rule for rule:

* which metric: dataset name containing ``NeedleInAHaystack`` -> the normalized ground truth
  is one of the normalized prediction's whitespace tokens; containing ``MMCoQA`` -> substring;
  else ``open-ended`` -> ROUGE-L F of the ``rouge`` package 1.0.1 (empty prediction: 0);
  else ``multi-choice`` -> accuracy after :func:`match_choice_official`.
* :func:`normalize_answer` is the official VQA-style ``process`` with its quirks (see there).
* multiple choice: prediction, ground truth and every choice are normalized, options keyed by
  the official ``char(i)`` (:func:`official_key`: A..Z, then AA..AZ, then BA..), the gold key is
  the index of the normalized ground truth in the normalized choice list (the first one, so
  choices that normalize alike move it).
* image-quantity level of every sample, in all three evaluators: counted from the dataset
  file's ``images_path`` (Few under 6 images, Medium 6 to 31, Many over 31).
* categories: ``score.py``'s taxonomy, with its exact dataset names (CamelCase for the
  temporal datasets: ``ActionSequence``); ``score.py`` computes no category or overall
  averages, so those rows are the toolkit's.

The first commit (730e930) differed in each of these and is not followed.

Strict mode changes only multiple choice: the toolkit's extractor
(:func:`judge.benchmarks.extract.extract_choice`) on the raw prediction, keys A, B, ... (option
text only for GPR1200, whose prompt shows no letters), the gold key from the raw choice list.
Needle, MMCoQA and ROUGE-L are the same in both modes.

What a record needs: ``task`` or ``meta.dataset`` (dataset name), ``meta.question_type``
(else multi-choice when ``choices`` are given), ``choices``, ``answer`` (ground truth),
``meta.n_images`` (else the question's images are counted); :class:`MileBenchMeta` is that
metadata, and the reader here (:func:`read_milebench`: a ``pred.json`` joined with its dataset
file) sets all of it.

The module is split by what each part owns: :mod:`judge.benchmarks.milebench_tasks` (datasets, categories,
metric names, the record metadata), :mod:`judge.benchmarks.milebench_official` (the official normalization,
``match_choice`` and ROUGE-L), :mod:`judge.benchmarks.milebench_metrics` (scoring and summary rows) and
:mod:`judge.benchmarks.milebench_reader` (pred.json files); this module registers the benchmark and keeps
every name importable from here.
"""

from __future__ import annotations

from judge.benchmarks.base import Benchmark, Format, MetricInfo, register_benchmark
from judge.benchmarks.milebench_metrics import rule_of as rule_of
from judge.benchmarks.milebench_metrics import score_record as score_record
from judge.benchmarks.milebench_metrics import summary_rows as summary_rows
from judge.benchmarks.milebench_official import OFFICIAL_REF as OFFICIAL_REF
from judge.benchmarks.milebench_official import ROUGE_VERSION as ROUGE_VERSION
from judge.benchmarks.milebench_official import match_choice_official as match_choice_official
from judge.benchmarks.milebench_official import normalize_answer as normalize_answer
from judge.benchmarks.milebench_official import official_key as official_key
from judge.benchmarks.milebench_official import official_options as official_options
from judge.benchmarks.milebench_official import rouge_l_f as rouge_l_f
from judge.benchmarks.milebench_reader import is_pred_json as is_pred_json
from judge.benchmarks.milebench_reader import read_milebench as read_milebench
from judge.benchmarks.milebench_tasks import ACCURACY as ACCURACY
from judge.benchmarks.milebench_tasks import BENCHMARK as BENCHMARK
from judge.benchmarks.milebench_tasks import CATEGORIES as CATEGORIES
from judge.benchmarks.milebench_tasks import DATASETS as DATASETS
from judge.benchmarks.milebench_tasks import MMCOQA as MMCOQA
from judge.benchmarks.milebench_tasks import NEEDLE as NEEDLE
from judge.benchmarks.milebench_tasks import ROUGE_L as ROUGE_L
from judge.benchmarks.milebench_tasks import SCORE as SCORE
from judge.benchmarks.milebench_tasks import UNSUPPORTED as UNSUPPORTED
from judge.benchmarks.milebench_tasks import VERSION as VERSION
from judge.benchmarks.milebench_tasks import MileBenchMeta as MileBenchMeta
from judge.benchmarks.milebench_tasks import canonical_dataset as canonical_dataset
from judge.benchmarks.milebench_tasks import dataset_category as dataset_category
from judge.benchmarks.milebench_tasks import image_quantity_level as image_quantity_level
from judge.core.schema import PredictionRecord, ScoreRecord

# ----------------------------------------------------------------------------- the benchmark


@register_benchmark
class MileBench(Benchmark):
    """MileBench: 29 datasets, its pred.json files, official and strict metrics (see the module doc)."""

    name = BENCHMARK
    title = "MileBench"
    tasks = tuple(DATASETS)
    meta = MileBenchMeta
    formats = (
        Format(
            name="milebench",
            detect=is_pred_json,
            read=lambda path, ctx: read_milebench(path, ctx.dataset_file, cache=ctx.cache("milebench")),
            joined_file=lambda rec: MileBenchMeta.of(rec).dataset_file,
            joined_label="milebench dataset file",
        ),
    )
    metrics = (
        MetricInfo(
            name=ACCURACY,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="multiple-choice accuracy: 1 when the extracted option is the gold one "
            "(official: match_choice on normalized text; strict: the toolkit's extractor)",
        ),
        MetricInfo(
            name=ROUGE_L,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="ROUGE-L F of rouge 1.0.1 on normalized text (open-ended datasets); "
            "an empty prediction scores 0",
        ),
        MetricInfo(
            name=NEEDLE,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="1 when the normalized ground truth is one of the normalized prediction's "
            "whitespace tokens (NeedleInAHaystack datasets)",
        ),
        MetricInfo(
            name=MMCOQA,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="1 when the normalized ground truth is a substring of the normalized prediction (MMCoQA)",
        ),
        MetricInfo(
            name=UNSUPPORTED,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="never scored: an item whose question_type is neither multi-choice nor open-ended "
            "('Dataset not supported' in the official evaluate.py), kept as an unscorable record",
        ),
        MetricInfo(
            name=SCORE,
            higher_is_better=True,
            scale=(0, 100),
            description="the toolkit's averages (x100) where metrics mix: a dataset scored by several, "
            "image-quantity levels across datasets, categories and overall (means of the dataset values)",
        ),
    )

    def score(self, records: list[PredictionRecord], mode: str) -> list[ScoreRecord | None]:
        return [score_record(r, mode) for r in records]

    def metric_for(self, record: PredictionRecord) -> str | None:
        return rule_of(record)

    def summarize(self, score_records: list[ScoreRecord]) -> list[dict]:
        return summary_rows(score_records)
