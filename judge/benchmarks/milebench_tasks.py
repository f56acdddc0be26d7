"""MileBench's datasets and what a record carries: the 29 datasets and score.py's categories, the metric
names, :class:`MileBenchMeta` and the dataset-name rules (variants, image-quantity levels) that the reader,
the metrics and the summary share."""

from __future__ import annotations

import re

from judge.benchmarks.common import METRICS_VERSION, RecordMeta
from judge.benchmarks.milebench_official import OFFICIAL_REF

BENCHMARK = "milebench"
VERSION = f"{METRICS_VERSION} ({OFFICIAL_REF})"

#: score.py's taxonomy, names as it writes them (head: CamelCase temporal datasets).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "Realistic Temporal": (
        "ActionLocalization",
        "ActionPrediction",
        "ActionSequence",
        "CharacterOrder",
        "CounterfactualInference",
        "EgocentricNavigation",
        "MovingAttribute",
        "MovingDirection",
        "ObjectExistence",
        "ObjectInteraction",
        "ObjectShuffle",
        "SceneTransition",
        "StateChange",
    ),
    "Realistic Semantic": (
        "ALFRED",
        "CLEVR-Change",
        "DocVQA",
        "IEdit",
        "MMCoQA",
        "MultiModalQA",
        "nuscenes",
        "OCR-VQA",
        "SlideVQA",
        "Spot-the-Diff",
        "TQA",
        "WebQA",
        "WikiVQA",
    ),
    "Diagnostic": ("TextNeedleInAHaystack", "ImageNeedleInAHaystack", "GPR1200"),
}
#: The 29 datasets, each with its category.
DATASETS: dict[str, str] = {ds: cat for cat, names in CATEGORIES.items() for ds in names}

ACCURACY = "milebench.accuracy"
ROUGE_L = "milebench.rouge_l"
NEEDLE = "milebench.needle"
MMCOQA = "milebench.mmcoqa"
#: The record of an item whose question_type the official evaluate.py does not support (never a score).
UNSUPPORTED = "milebench.unsupported"
#: Summary rows mixing metrics (a dataset scored by several, image-quantity levels across datasets,
#: categories, overall): the toolkit's averages.
SCORE = "milebench.score"


class MileBenchMeta(RecordMeta):
    """What :func:`read_milebench` puts in ``PredictionRecord.meta`` and the metrics read.

    ``dataset``: the dataset name; ``question_type``: ``multi-choice`` or ``open-ended`` (the
    dataset file's ``meta_data``); ``sample_id`` as pred.json wrote it; ``n_images``: len of
    the item's ``images_path`` (what the official evaluator bins image-quantity levels by);
    ``dataset_file``: the file joined; ``response_missing``: ``pred_response`` was null.
    """

    dataset: str | None = None
    question_type: str | None = None
    sample_id: int | float | str | None = None
    n_images: int | None = None
    dataset_file: str | None = None
    response_missing: bool = False


# Adversarial (-adv) and combined-image (_combined_N) variants share their dataset's category.
_VARIANT_RE = re.compile(r"(?:[-_]adv|[-_]combined[-_]?\d*)+$", re.IGNORECASE)


def canonical_dataset(name: str) -> str | None:
    """The MileBench dataset a name (or an -adv / _combined variant of it) belongs to, or None.

    Names are matched exactly, as ``score.py`` collects them: the first commit's snake_case
    spellings (``action_sequence``) belong to no dataset of the head's taxonomy."""
    base = _VARIANT_RE.sub("", name)
    return base if base in DATASETS else None


def dataset_category(name: str) -> str | None:
    ds = canonical_dataset(name)
    return DATASETS[ds] if ds else None


def image_quantity_level(n_images: int) -> str:
    """Few under 6 images, Medium 6 to 31, Many over 31."""
    return "Few" if n_images < 6 else ("Medium" if n_images <= 31 else "Many")
