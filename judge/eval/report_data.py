"""The data of a report, as ``report.json`` holds it: typed models that :func:`judge.eval.report.build_report`
fills and the document, the plots and ``judge-report``'s printout read.

``report.json`` is :meth:`ReportData.to_json` (field order is the file's key order); :func:`load_report`
reads one back. Correlations are ``pearson``, ``spearman`` and ``kendall`` (``judge.eval.bootstrap.STATS``);
:meth:`ScorerStats.stat` and friends look one up by that name.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from judge.core.errors import JudgeError, format_validation_error
from judge.core.schema import StrictModel

SliceKind = Literal["criterion", "family", "model", "pooled"]


class _Data(StrictModel):
    """Every key is known: a misspelt field when building a report is an error, not a new key in the file."""


class Interval(_Data):
    """A statistic with its 95% percentile interval (None: undefined, or too few defined resamples)."""

    value: float | None
    ci: list[float] | None
    n_valid: int  #: resamples where the statistic was defined


class AnnotatorAgreement(_Data):
    """One annotator against the mean of the others."""

    n: int
    pearson: float | None
    spearman: float | None
    kendall: float | None


class LeaveOneOut(_Data):
    """Leave-one-annotator-out correlations, averaged over annotators."""

    n_annotators: int
    pearson: Interval
    spearman: Interval
    kendall: Interval
    per_annotator: dict[str, AnnotatorAgreement]

    def stat(self, name: str) -> Interval:
        return _stat(self, name, Interval)


class Ceiling(_Data):
    """What the annotators reach among themselves on a slice: the human ceiling."""

    n_items: int
    n_items_multi: int  #: items with two or more annotators
    alpha_interval: float | None  #: Krippendorff's alpha
    alpha_ordinal: float | None
    loao: LeaveOneOut


class Pairwise(_Data):
    """Pairwise ranking accuracy over pairs of responses to one question that humans scored differently."""

    accuracy: float | None
    n_pairs: int
    n_scorer_ties: int
    n_human_ties: int


class ScorerStats(_Data):
    """One scorer on one slice."""

    n: int  #: items scored
    n_expected: int  #: the slice's human items of the criteria and families the scorer scores
    n_unscorable: int
    n_missing: int
    n_questions: int
    pearson: Interval
    spearman: Interval
    kendall: Interval
    mae: float | None  #: None for a scorer off the rubric scale (also mse, qwk, within1)
    mse: float | None
    qwk: float | None
    within1: float | None
    pairwise: Pairwise
    small_n: bool  #: fewer than SMALL_N items or questions: the interval is too rough to lean on
    #: MMIE's measures with the same resamples' intervals (rubric-scale scorers; None in older reports)
    cosine: Interval | None = None  #: cosine similarity of the raw score vectors
    mse_ci: Interval | None = None  #: MSE (``value`` equals ``mse``) with its interval
    mae_ci: Interval | None = None  #: MAE (``value`` equals ``mae``) with its interval

    def stat(self, name: str) -> Interval:
        return _stat(self, name, Interval)


class SliceReport(_Data):
    """A slice of the human items (a criterion; a family or a responding model on the overall score;
    everything pooled): its human ceiling and every scorer that has an item there."""

    key: str  #: ``kind:label``
    kind: SliceKind
    label: str
    title: str
    n_items: int
    n_questions: int
    ceiling: Ceiling
    scorers: dict[str, ScorerStats]


class PairedStat(_Data):
    """Scorer A minus scorer B on one correlation, on the same items and resamples."""

    a: float | None
    b: float | None
    diff: float | None
    ci: list[float] | None
    p: float | None
    n_valid: int


class PairedComparison(_Data):
    slice: str  #: the slice's key
    a: str
    b: str
    n: int
    n_questions: int
    small_n: bool
    pearson: PairedStat
    spearman: PairedStat
    kendall: PairedStat

    def stat(self, name: str) -> PairedStat:
        return _stat(self, name, PairedStat)


class UnscorableReason(_Data):
    reason: str
    count: int


class Coverage(_Data):
    """How a score file's records met the human items (see :func:`judge.eval.matching.match_scorer`)."""

    records: int
    expected: int
    scored: int
    unscorable: int
    missing: int
    coverage: float | None
    responses_scored: int
    criteria_scored: list[str]
    criteria_not_scored: list[str]
    families_scored: list[str]
    families_not_scored: list[str]
    unknown_ids: int
    unknown_id_examples: list[str]
    unknown_criterion: int
    unknown_criterion_examples: list[str]
    #: of unknown_criterion, those naming a criterion the rubric lacks for the item's family (0 in older reports)
    criterion_not_in_rubric: int = 0
    filtered: int
    missing_examples: list[str]
    unscorable_reasons: list[UnscorableReason]
    #: labelled responses that matched a record, and examples of those that did not
    #: (:meth:`judge.core.identity.LabelMatch.describe`); absent in reports written before it
    labels: dict[str, Any] | None = None


class ScorerInfo(_Data):
    name: str
    file: str
    metric: str
    on_scale: bool
    scale_note: str  #: why the scorer is (or is not) taken to be on the rubric scale
    coverage: Coverage
    warnings: list[str]
    producer: dict[str, Any] | None  #: the producer block of its first matched record


class RubricInfo(_Data):
    name: str
    hash: str
    scale: list[int]  #: min, max


class HumanSummary(_Data):
    files: list[str]
    responses: int
    questions: int
    items: int
    annotators: list[str]
    criteria: list[str]
    families: dict[str, int]  #: responses per task family
    models: dict[str, int]  #: responses per responding model
    mean_annotators_per_item: float | None


class ClipSettings(_Data):
    model: str
    pairing: str


class ReportSettings(_Data):
    bootstrap: int
    seed: int
    interval: str
    criteria: list[str] | None
    small_n: int
    clip: ClipSettings | None = None  #: the CLIPScore run, when the report computed one


LengthMeasure = Literal["text_tokens", "images"]


class LengthBias(_Data):
    """Does a scorer's score follow a response's length beyond what the human score explains?
    (:func:`judge.eval.bias.length_bias`)"""

    measure: LengthMeasure  #: text_tokens: ``\w+`` matches over the text parts; images: image parts
    n: int
    mean: float | None  #: mean length of the items
    distinct: int  #: distinct length values among the items
    partial: Interval  #: partial Spearman of scorer score with length given the human score
    #: partial Spearman given the human score and the other length measure (images for text tokens, text
    #: tokens for images): which of two correlated measures a flag is about
    partial_other: Interval
    scorer_spearman: Interval  #: Spearman of scorer score with length
    human_spearman: Interval  #: Spearman of human score with length (context)
    flag: Literal["rewards length", "penalises length"] | None  #: the partial's interval excludes 0
    note: str | None  #: why the partial is undefined, when it is
    other_note: str | None  #: why partial_other is undefined, when it is


class ModelOffset(_Data):
    """One responding model under one scorer (:func:`judge.eval.bias.per_model`)."""

    model: str
    n: int
    n_questions: int
    small_n: bool
    human_mean: Interval  #: mean human score of the model's items the scorer scored
    scorer_mean: Interval  #: mean scorer score of the same items
    human_rank: float  #: 1 = highest mean; ties share the average rank
    scorer_rank: float
    offset: Interval | None  #: mean(scorer - human); None off the rubric scale
    relative: (
        Interval | None
    )  #: offset minus the median offset over models; None off the scale or for one model
    flag: Literal["over-scored", "under-scored"] | None  #: the relative interval excludes 0
    #: the median model the others are relative to (its relative offset 0 by construction, no interval)
    reference: bool = False


class ModelRanking(_Data):
    """The responding models ranked by mean scorer score and by mean human score; Kendall tau-b between."""

    n_models: int
    human_order: list[str]  #: best first (tied models in name order: see their ranks)
    scorer_order: list[str]
    kendall: Interval
    note: str | None


class ScorerBias(_Data):
    """One scorer's biases against the humans on the headline criterion."""

    on_scale: bool  #: off the rubric scale (CLIPScore): length and ranking only
    n: int
    n_questions: int
    small_n: bool
    length: dict[str, LengthBias]  #: by measure: text_tokens, images
    models: list[ModelOffset]
    reference_offset: Interval | None  #: median over models of their mean offset
    ranking: ModelRanking
    flags: list[str]  #: every flag, in words
    notes: list[str]


class BiasReport(_Data):
    """Bias against humans (length, per responding model, model ranking), per scorer that scored the
    headline criterion; see :mod:`judge.eval.bias`."""

    criterion: str
    n_items: int
    n_questions: int
    length_definition: str
    scorers: dict[str, ScorerBias]
    note: str | None  #: why a scorer (or everything) is left out


class CriterionCoverage(_Data):
    """A calibrated scorer's intervals and errors on one criterion's held-out items."""

    criterion: str
    n: int
    coverage: float
    mean_width: float
    mae_before: float
    mae_after: float
    coverage_ci: list[float] | None = None  #: 95% interval of the coverage (questions resampled)


class CalibrationCheck(_Data):
    """A calibrated scorer on held-out human items, all criteria pooled (:mod:`judge.eval.heldout`)."""

    scorer: str
    method: str | None  #: as ``producer.calibration`` names it
    level: float | None  #: the intervals' stated coverage level
    fingerprint: str | None
    held_out: str  #: how the items the calibration was fitted on were left out
    n: int
    n_questions: int
    n_excluded: int  #: scored items left out because the calibration was fitted on them
    mae_before: Interval  #: raw score against human
    mae_after: Interval  #: calibrated score against human
    mse_before: Interval
    mse_after: Interval
    coverage: Interval  #: share of items whose human score lies in the interval
    mean_width: Interval
    per_criterion: list[CriterionCoverage]
    #: how the scale distributions fit the annotators' ratings, raw read-out and calibrated view
    #: (judge.eval.calibration_metrics); None where the records lack the distributions (older files)
    nll_before: Interval | None = None
    nll_after: Interval | None = None
    brier_before: Interval | None = None
    brier_after: Interval | None = None
    ece_top_before: Interval | None = None
    ece_top_after: Interval | None = None
    ece_score_before: Interval | None = None
    ece_score_after: Interval | None = None


class SelectiveCriterion(_Data):
    criterion: str
    n: int
    n_trusted: int
    agreement_trusted: float | None
    agreement_all: float


class SelectivePairs(_Data):
    """Pairwise selective evaluation on held-out pairs (responses to one question the annotators order)."""

    n: int
    share_trusted: Interval
    agreement_trusted: Interval
    agreement_all: Interval
    no_threshold: bool | None = None  #: the thresholds hold no pairwise one (None: unknown)
    #: pairs the judge ties (preference exactly 1/2): counted as disagreements here (a tie is no preference,
    #: never trusted); the main table's pairwise accuracy counts a tie as half
    n_judge_ties: int = 0


def trusted_share_text(
    share: dict[str, Any] | Interval, no_threshold: bool | None, digits: int = 3, suffix: str = ""
) -> str:
    """A share of trusted scores as printed: "none trusted (no threshold)" without an interval when nothing
    is (a sampled 0 is no exact 0 on new items), else the share with its interval when it has one, and
    ``suffix``."""
    d = share.model_dump() if isinstance(share, Interval) else share
    v, ci = d.get("value"), d.get("ci")
    if v is None:
        return "undefined"
    if v == 0:
        why = (
            ""
            if no_threshold is None
            else " (no threshold)"
            if no_threshold
            else " (none reached the threshold)"
        )
        return "none trusted" + why
    return f"{v:.{digits}f}" + (f" [{ci[0]:.{digits - 1}f}, {ci[1]:.{digits - 1}f}]" if ci else "") + suffix


class SelectiveCheck(_Data):
    """A scorer with selective evaluation (records marked ``trusted``) on held-out human items."""

    scorer: str
    agreement: float | None  #: the agreement guaranteed on trusted scores (producer.selective)
    delta: float | None
    tolerance: float  #: pointwise agreement: |score - human mean| <= tolerance
    confidence: str | None
    fingerprint: str | None
    held_out: str
    n: int
    n_questions: int
    n_trusted: int
    share_trusted: Interval
    agreement_trusted: Interval  #: agreement on the trusted scores
    agreement_all: Interval  #: agreement on every score (no abstention)
    per_criterion: list[SelectiveCriterion]
    pairwise: SelectivePairs | None = None
    no_threshold: bool | None = None  #: the judge's thresholds hold no pointwise one (None: unreadable)


class PPIDraw(_Data):
    """One model's (or pair's) estimates from one label draw of the responses as they are."""

    n_labelled: int
    ppi_mean: float | None
    ppi_ci: list[float] | None
    human_mean: float | None
    human_ci: list[float] | None
    reason: str | None = None  #: why there is no estimate (fewer labels than ``min_labels``)
    bounded: list[str] = []  #: what a range bound moved in the PPI estimate (see judge.eval.ppi.within)


class PPIModel(_Data):
    model: str
    n: int  #: the model's responses with a score and a human overall score
    all_human_mean: float  #: the mean human score of all of them: what the intervals should contain
    first_draw: PPIDraw
    n_draws: int  #: draws where its intervals were defined (``min_labels`` labelled responses or more)
    ppi_coverage: float | None
    human_coverage: float | None
    ppi_mean_width: float | None
    human_mean_width: float | None


class PPIWinRate(_Data):
    """One ordered pair of models: the PPI win rate of ``model`` over ``opponent`` in the check."""

    model: str
    opponent: str
    n_shared: int  #: questions both answered (scored, with human overall scores)
    all_human_win_rate: (
        float  #: the win rate by the human scores of all of them: what the intervals should contain
    )
    first_draw: PPIDraw
    n_draws: int
    ppi_coverage: float | None
    human_coverage: float | None
    ppi_mean_width: float | None
    human_mean_width: float | None


class PPICheck(_Data):
    """The prediction-powered inference check of one scorer (:func:`judge.eval.ppi_check.ppi_checks`)."""

    scorer: str
    criterion: str
    fraction: float
    n_labelled: int  #: questions labelled per draw (every model's response to each)
    n_items: int
    draws: int
    seed: int
    level: float
    models: list[PPIModel]
    n_intervals: int  #: defined PPI intervals of the models' means over models and draws
    ppi_coverage: float | None  #: share of them containing the model's all-human mean
    human_coverage: float | None
    ppi_mean_width: float | None
    human_mean_width: float | None
    n_questions: int | None = None
    min_labels: int | None = None  #: labelled responses an estimate needs (fewer: none that draw)
    by: str = "response"  #: what a draw labels: "question" (every response to a drawn question)
    #: how a draw is made: "bootstrap" (questions resampled with replacement, then labelled at random)
    draw: str = "subsample"
    #: the Monte Carlo standard error of ``ppi_coverage`` and ``human_coverage`` (binomial, over intervals)
    ppi_coverage_se: float | None = None
    human_coverage_se: float | None = None
    win_rates: list[PPIWinRate] = []
    win_n_intervals: int = 0
    win_ppi_coverage: float | None = None
    win_human_coverage: float | None = None
    win_ppi_coverage_se: float | None = None
    n_bounded: int = 0  #: PPI estimates (means and win rates) that a range bound moved
    first_questions: list[str] = []  #: the questions the one run (``first_draw``) labelled


class ReportData(_Data):
    """Everything a report computed; ``report.json`` is :meth:`to_json`."""

    title: str
    note: str | None
    created: str
    rubric: RubricInfo
    human: HumanSummary
    settings: ReportSettings
    scorers: list[ScorerInfo]
    main: str  #: the key of the main slice (overall, else all criteria pooled)
    slices: list[SliceReport]
    paired: list[PairedComparison]
    bias: BiasReport | None = None  #: bias against humans on the overall score (None in older reports)
    calibration: list[CalibrationCheck] = []  #: calibrated scorers on held-out items
    selective: list[SelectiveCheck] = []  #: scorers with selective evaluation on held-out items
    ppi: list[PPICheck] = []  #: the prediction-powered inference check per rubric-scale scorer
    warnings: list[str]
    definitions: list[str]
    elapsed_s: float | None = None
    plots: dict[str, str] = {}  #: plot kind -> file name beside report.json

    @property
    def main_slice(self) -> SliceReport:
        return self.slice(self.main)

    def slice(self, key: str) -> SliceReport:
        """The slice with this key (``criterion:overall``, ``pooled:all criteria``, ...)."""
        for s in self.slices:
            if s.key == key:
                return s
        raise KeyError(f"no slice {key!r} in the report; slices: {', '.join(s.key for s in self.slices)}")

    def slices_of(self, kind: SliceKind) -> list[SliceReport]:
        return [s for s in self.slices if s.kind == kind]

    def to_json(self) -> dict[str, Any]:
        """The content of ``report.json``: strict JSON, a non-finite number written as null."""
        return _finite(self.model_dump(mode="json"))


def load_report(path: str | Path) -> ReportData:
    """Read a ``report.json`` back (e.g. to compare two runs); a damaged one is an error naming the field."""
    path = Path(path)
    try:
        return ReportData.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as e:
        raise JudgeError(f"{path}: not valid JSON ({e})") from None
    except ValidationError as e:
        raise JudgeError(f"{path}: not a report.json:\n{format_validation_error(e)}") from None


def _stat(model: BaseModel, name: str, kind: type[Any]) -> Any:
    value = getattr(model, name, None)
    if not isinstance(value, kind):
        raise KeyError(f"unknown or undefined statistic {name!r}; one of pearson, spearman, kendall, cosine")
    return value


def _finite(obj: Any) -> Any:
    # pydantic's JSON mode keeps NaN and inf as floats; report.json has null there.
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


__all__ = [
    "BiasReport",
    "CalibrationCheck",
    "CriterionCoverage",
    "PPICheck",
    "PPIDraw",
    "PPIModel",
    "Ceiling",
    "Coverage",
    "Interval",
    "LengthBias",
    "ModelOffset",
    "ModelRanking",
    "PairedComparison",
    "ReportData",
    "ScorerBias",
    "ScorerInfo",
    "ScorerStats",
    "SliceReport",
    "load_report",
]
