"""The public Python API, on one screen.

    from judge import Judge, score_files, train_judge, calibrate_judge, report, audit_judge, bench_judge

    scorer = Judge.load("runs/demo/judge")            # a judge folder, or Judge.load("tiny", rubric="mmie")
    results = scorer.score([item, ...])             # dicts or records in: one ItemScores per item
    records = scorer.score_records([item, ...])     # the same as flat ScoreRecords (what judge-score writes)
    result = score_files(["preds.jsonl"], judge="runs/demo/judge", out="runs/score")   # = judge-score
    run = train_judge("demo", output_dir="runs/mine", train={"epochs": 1})           # = judge-train
    cal = calibrate_judge("runs/demo/judge")           # = judge-calibrate (on its validation split)
    rep = report(human=["test.jsonl"], scores=["trained=runs/score/scores.jsonl"])   # = judge-report
    pref = scorer.compare(item_a, item_b)           # P(A better) + P(tie) / 2 from the two score distributions
    res = bench_judge("vl-rewardbench", data="vl.parquet", judge="runs/demo/judge", task="SA")   # = judge-bench
    aud = audit_judge(["test.jsonl"], judge="runs/demo/judge", out="runs/audit")    # = judge-audit
    client = JudgeClient("http://127.0.0.1:8000")     # a running judge-serve: client.score([item, ...])

One style for every job: ``job(config, /, **fields)``, where ``config`` is the command's config object
(``ScoreConfig``, ``RunConfig``, ``CalibrateConfig``, ``ReportConfig``, ``AuditConfig``, ``BenchConfig``) or what the command
takes first (input files; a config name or path; a judge folder), ``fields`` are the config's fields (for
``train_judge``, overrides of the loaded config and the run options), and the result is typed. Each call is
what the command of the same job does, with the same defaults; errors are
:class:`~judge.core.errors.JudgeError` subclasses whose messages name fields, not flags.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.core.errors import ConfigError
from judge.core.rubric import Rubric
from judge.core.schema import (
    AnnotationRecord,
    ItemScores,
    PredictionRecord,
    ScoreRecord,
    in_item_order,
    item_scores,
)
from judge.models import loader
from judge.models.loader import JudgeSpec
from judge.scoring.config import ENGINE_SETTINGS, ScoreConfig, engine_keywords
from judge.scoring.engine import JudgeEngine, select_criteria
from judge.scoring.inputs import prediction_records

if TYPE_CHECKING:
    from judge.audit import AuditConfig, AuditResult
    from judge.eval.config import CalibrateConfig, ReportConfig
    from judge.eval.report import ReportResult
    from judge.models.preference import Preference
    from judge.scoring.bench import BenchConfig, BenchResult
    from judge.scoring.calibrate import CalibrateResult
    from judge.scoring.run import ScoreResult
    from judge.train.config import RunConfig
    from judge.train.trainer import TrainResult

logger = logging.getLogger(__name__)


class Judge:
    """A loaded judge, ready to score items in memory with the engine ``judge-score`` uses.

    Scores equal what ``judge-score`` writes for the same items and options.
    """

    def __init__(self, spec: JudgeSpec, engine: JudgeEngine):
        self.spec = spec
        self.engine = engine

    @classmethod
    def load(
        cls,
        source: str | Path,
        *,
        rubric: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        quantization: str = "card",
        force: bool = False,
        rationale: bool = False,
        calibration: bool = True,
        **engine_options: Any,
    ) -> Judge:
        """Load a judge folder (written by ``judge-train``), a model folder or hub id with ``rubric``,
        or ``"tiny"`` (the seeded test model, with ``rubric``).

        ``engine_options`` are the scoring settings of :class:`~judge.scoring.config.ScoreConfig`
        (``batch_tokens``, ``batch_size``, ``share_prefix``, ``reproducible``, ``max_tokens``,
        ``max_new_tokens``, ``chunk_size``, ``workers``), validated the same way. ``calibration``: apply the calibration the judge card
        names (``judge-calibrate``): each record's ``score`` is then calibrated, with ``raw_score`` and a
        conformal ``interval`` beside it; off: the raw read-out.
        """
        unknown = sorted(set(engine_options) - set(ENGINE_SETTINGS))
        if unknown:
            raise ConfigError(
                f"unknown option(s) {', '.join(unknown)}; scoring options are {', '.join(sorted(ENGINE_SETTINGS))}"
            )
        # The same validation as judge-score's options (no input files here: items come in memory).
        cfg = ScoreConfig(
            inputs=["<memory>"],
            judge=str(source),
            rubric=rubric,
            device=device,
            dtype=dtype,
            quantization=quantization,
            force=force,
            rationale=rationale,
            calibration=calibration,
            **engine_options,
        )
        judge = loader.load(
            str(source),
            rubric,
            force=force,
            rationale=rationale,
            quantization=quantization,
            calibration=calibration,
            device=device,
            dtype=dtype,
        )
        return cls(judge.spec, JudgeEngine.for_judge(judge, **engine_keywords(cfg)))

    @property
    def rubric(self) -> Rubric:
        return self.spec.rubric

    @property
    def device(self) -> str:
        """Where the model runs (``cpu``, ``cuda:0``, ...)."""
        return str(self.engine.scorer.device)

    @property
    def dtype(self) -> str:
        """The dtype of the model's weights (``torch.float32``, ``torch.bfloat16``, ...)."""
        return str(next(self.engine.scorer.model.parameters()).dtype)

    @property
    def provenance(self) -> dict[str, Any]:
        """What produced the scores: source, weight fingerprint, rubric name and hash, prompt format."""
        return dict(self.engine.producer)

    def score(
        self,
        items: Iterable[PredictionRecord | AnnotationRecord | Mapping[str, Any]],
        *,
        criteria: str | Sequence[str] | None = None,
        root: str | Path | None = None,
    ) -> list[ItemScores]:
        """Score items: one :class:`~judge.core.schema.ItemScores` per item, in the items' order, holding
        the :class:`ScoreRecord` of each criterion scored (``overall`` last; ``criteria``: None, the criteria
        the judge was trained on (its card's ``data.criteria``; every one when it does not say); ``"all"``,
        every criterion of the item's family; or the ids to score, e.g. ``"overall"``, exactly those: unlike
        ``judge-score --criteria``, whose run always adds ``overall`` for its leaderboard; a criterion the judge
        was not trained on is scored and its record says ``trained=False``). ``result.score`` is the overall score,
        ``result["text_quality"]`` a criterion's record; :meth:`score_records` gives the flat list.

        Dicts are validated like the lines of a prediction file (canonical or MMIE form; a dict with
        human ``scores`` is an annotation; ``benchmark`` defaults to the rubric's name); relative image
        paths resolve from ``root`` (default: the working directory). Unscorable items come back as
        records with ``status="unscorable"`` and a ``reason``, never as exceptions.
        """
        records = self._records(items, root)
        return item_scores(records, self._score(records, criteria))

    def score_records(
        self,
        items: Iterable[PredictionRecord | AnnotationRecord | Mapping[str, Any]],
        *,
        criteria: str | Sequence[str] | None = None,
        root: str | Path | None = None,
    ) -> list[ScoreRecord]:
        """:meth:`score`'s records as one flat list (one per item and criterion, in the items' order), the
        records ``judge-score`` writes to ``scores.jsonl``."""
        return self._score(self._records(items, root), criteria)

    def _score(
        self, records: list[PredictionRecord], criteria: str | Sequence[str] | None
    ) -> list[ScoreRecord]:
        trained = self.engine.trained
        wanted = [select_criteria(self.rubric, r, criteria, i + 1, trained) for i, r in enumerate(records)]
        out = in_item_order(records, self.engine.score_records(records, criteria=wanted))
        unscorable = [r for r in out if r.score is None]
        if unscorable:
            # Said here too, not only on the records: a caller who prints scores sees why one is missing.
            first = unscorable[0]
            n = len({(r.benchmark, r.model, r.id) for r in unscorable})
            logger.warning(
                f"{n} of {len(records)} item(s) could not be scored (score None, status {first.status!r}; each "
                f"record's reason says why); item {first.id!r}: {first.reason}"
            )
        return out

    def compare(
        self,
        item_a: PredictionRecord | AnnotationRecord | Mapping[str, Any],
        item_b: PredictionRecord | AnnotationRecord | Mapping[str, Any],
        *,
        criterion: str = "overall",
        root: str | Path | None = None,
    ) -> Preference:
        """How much better response A is than response B on ``criterion``: a
        :class:`~judge.models.preference.Preference` whose ``p_first_better`` is P(A better) + P(tie) / 2,
        from the two responses' score distributions (:func:`judge.models.preference.preference`; swapping
        A and B gives exactly ``1 - p``), with the expected scores and their difference.

        The items are given as to :meth:`score` (usually the same question with two responses); only
        ``criterion`` is scored. Raises ConfigError when ``criterion`` is not one of an item's family, and
        JudgeError when a response is unscorable (the error gives its reason). A calibrated judge is
        compared on its calibrated view (the calibrated distributions and their means), as ``judge-score``'s
        pairs and ``judge-bench`` compare; a judge with selective evaluation says in ``trusted`` whether it
        keeps the preference (its pairwise threshold) or escalates it."""
        from dataclasses import replace

        from judge.models.preference import record_preference

        # Each parsed on its own: the two may share an id (two responses to one item, or one item twice).
        a, b = self._records([item_a], root)[0], self._records([item_b], root)[0]
        if (a.benchmark, a.model, a.id) == (b.benchmark, b.model, b.id):
            b = b.model_copy(update={"id": f"{b.id}#b"})  # one item twice: keep both scores apart
        sa, sb = self._score([a, b], criterion)  # one record each, in the items' order
        pref = record_preference(sa, sb, self.rubric.scale.values)
        sel = self.engine.spec.selective
        return replace(
            pref, trusted=sel.trusted_pair(criterion, pref.p_first_better) if sel is not None else None
        )

    def _records(self, items, root) -> list[PredictionRecord]:
        return prediction_records(items, self.rubric.name, root)


def score_files(config: ScoreConfig | None = None, /, **fields: Any) -> ScoreResult:
    """Score files as ``judge-score`` does: a :class:`ScoreConfig`, or its fields as keywords
    (``score_files(["preds.jsonl"], judge="runs/demo/judge")``: a first positional list is ``inputs``)."""
    from judge.scoring.run import score_files as _score_files

    if isinstance(config, (list, tuple, str, Path)):
        fields["inputs"] = [config] if isinstance(config, (str, Path)) else list(config)
        config = None
    cfg = config if config is not None else ScoreConfig(**fields)
    return _score_files(cfg)


def train_judge(
    config: RunConfig | str | Path,
    /,
    *,
    resume: bool = False,
    merge: bool = False,
    data_dir: str | Path | None = None,
    calibrate: bool = False,
    **overrides: Any,
) -> TrainResult:
    """Train a judge as ``judge-train`` does, from a :class:`~judge.train.config.RunConfig` or a
    config name/path, with overrides as keywords: ``output_dir="runs/x"``, a section as a dict
    (``train={"epochs": 1}``) or a dotted key (``**{"train.epochs": 1}``). ``calibrate``: then calibrate
    it on its validation split as :func:`calibrate_judge` does with its defaults."""
    from judge.train import trainer

    result = trainer.train_judge(
        config, overrides=_flatten(overrides), resume=resume, merge=merge, data_dir=data_dir
    )
    if calibrate:
        calibrate_judge(str(result.judge_dir), progress=False)
    return result


def calibrate_judge(config: CalibrateConfig | str | Path | None = None, /, **fields: Any) -> CalibrateResult:
    """Calibrate a judge as ``judge-calibrate`` does: a :class:`~judge.eval.config.CalibrateConfig`, or its
    fields as keywords (``calibrate_judge("runs/demo/judge")``: a first positional is ``judge``); see
    :func:`judge.scoring.calibrate.calibrate_judge`."""
    from judge.eval.config import CalibrateConfig
    from judge.scoring.calibrate import calibrate_judge as _calibrate

    if isinstance(config, (str, Path)):
        fields["judge"] = str(config)
        config = None
    return _calibrate(config if config is not None else CalibrateConfig(**fields))


def report(config: ReportConfig | None = None, /, **fields: Any) -> ReportResult:
    """Build a report as ``judge-report`` does: a :class:`~judge.eval.config.ReportConfig`, or its
    fields as keywords; returns the typed result (the data of report.json, and the files written)."""
    from judge.eval.config import ReportConfig
    from judge.eval.report import run_report

    cfg = config if config is not None else ReportConfig(**fields)
    return run_report(cfg)


def audit_judge(config: AuditConfig | list | str | Path | None = None, /, **fields: Any) -> AuditResult:
    """Audit a judge as ``judge-audit`` does: an :class:`~judge.audit.config.AuditConfig`, or its fields as
    keywords (``audit_judge(["test.jsonl"], judge="runs/demo/judge")``: a first positional list is ``inputs``);
    returns the typed result (the data of audit.json, and the files written)."""
    from judge.audit import AuditConfig, run_audit

    if isinstance(config, (list, tuple, str, Path)):
        fields["inputs"] = [config] if isinstance(config, (str, Path)) else list(config)
        config = None
    cfg = config if config is not None else AuditConfig(**fields)
    return run_audit(cfg)


def bench_judge(config: BenchConfig | str | None = None, /, **fields: Any) -> BenchResult:
    """Measure a judge on a judge benchmark as ``judge-bench`` does: a :class:`~judge.scoring.bench.BenchConfig`,
    or its fields as keywords (``bench_judge("vl-rewardbench", data="vl.parquet", judge="runs/demo/judge",
    task="SA")``: a first positional is ``benchmark``; ``judge_outputs=FILE`` instead of ``judge``); returns the
    typed result (the data of bench.json, and the files written)."""
    from judge.scoring.bench import BenchConfig, run_bench

    if isinstance(config, str):
        fields["benchmark"] = config
        config = None
    return run_bench(config if config is not None else BenchConfig(**fields))


def _flatten(overrides: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in overrides.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


__all__ = [
    "CalibrateResult",
    "Judge",
    "audit_judge",
    "bench_judge",
    "calibrate_judge",
    "report",
    "score_files",
    "train_judge",
]
