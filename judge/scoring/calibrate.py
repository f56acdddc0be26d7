"""``judge-calibrate``: score human-labelled items with the judge (uncalibrated), fit its calibration
(:mod:`judge.eval.calibration`), write ``calibration.json`` into the judge folder and name it in the card
(:mod:`judge.models.calibration` applies it wherever the judge scores); with ``selective``, also the
selective-evaluation thresholds (:mod:`judge.eval.selective`, ``selective.json``: the trusted mark).

Here, above both the engine that scores and the statistics that fit, because it needs the two.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from judge.core.errors import ConfigError
from judge.core.identity import RULE
from judge.core.io import file_sha256
from judge.eval.config import CalibrateConfig
from judge.models import loader
from judge.models.calibration import CALIBRATION_FILE, Calibration, write_calibration
from judge.models.card import CardCalibration, CardSelective, JudgeCard, read_card, write_card
from judge.models.loader import JudgeSpec
from judge.models.selective import SELECTIVE_FILE, Selective, write_selective

logger = logging.getLogger(__name__)


@dataclass
class CalibrateResult:
    """What :func:`calibrate_judge` did: the calibration written (``calibration.json``), where, and the
    score file it was fitted on. ``calibration`` is None on the non-main processes of a sharded run."""

    calibration: Calibration | None
    path: Path | None
    scores: Path
    reliability: Path | None = None  #: the reliability diagram of the held-out items
    selective: Selective | None = None  #: the selective-evaluation thresholds (``selective``)
    selective_path: Path | None = None
    #: how the human labels matched the scores (:meth:`judge.core.identity.LabelMatch.describe`)
    labels: dict | None = None


def calibrate_judge(cfg: CalibrateConfig) -> CalibrateResult:
    """``judge-calibrate``. Scores the human files with the judge, uncalibrated, by the engine ``judge-score``
    uses (unless ``scores`` gives that file; written to ``out/scores.jsonl``), fits
    (:func:`judge.eval.calibration.fit_calibration`), writes ``calibration.json`` into the judge folder and
    names it, with its fingerprint and its data's, in the judge card: from then on every scoring path
    applies it. Under ``accelerate launch`` (``judge-train --calibrate`` on several processes) the main
    process does it all; the others return at once."""
    from judge.eval.calibration import fit_calibration, labelled_scores
    from judge.eval.calibration_report import RELIABILITY, write_reliability
    from judge.eval.matching import human_items, load_score_file, match_scorer, split_by_metric
    from judge.eval.report import load_human

    if cfg.plan and not cfg.selective:
        raise ConfigError(
            "`plan` (--plan) plans selective evaluation: give it with `selective` (--selective)"
        )
    spec = loader.resolve(cfg.judge, calibration=False)  # the card's rubric, its hash checked
    card = spec.card
    if card is None:
        raise ConfigError(f"`judge` {cfg.judge!r} is not a judge folder (no judge_card.json) to calibrate")
    human = [str(h) for h in cfg.human] or [_validation_split(cfg.judge, card)]
    for h in human:
        if not Path(h).is_file():
            raise ConfigError(f"`human` {h}: file not found")
    out = Path(cfg.out) if cfg.out else Path(cfg.judge) / "calibration"
    scores = Path(cfg.scores) if cfg.scores is not None else out / "scores.jsonl"
    if os.environ.get("RANK", "0") != "0":
        return CalibrateResult(None, None, scores)
    if cfg.scores is None:
        _score_raw(spec, human, scores, cfg)
    rubric = spec.rubric
    records = load_human(human, rubric)
    items = human_items(records)
    judged = [
        f for f in split_by_metric(load_score_file(scores, "judge")) if f.records[0][1].metric == "judge"
    ]
    if not judged:
        raise ConfigError(f"{scores}: no judge scores (metric judge) to calibrate on")
    if cfg.scores is not None:
        _check_own_raw_scores(judged[0].records, scores, spec)
    matched = match_scorer(judged[0], items, rubric)
    labelled = labelled_scores(matched)
    found = matched.coverage["labels"]
    if not labelled:
        raise ConfigError(
            f"no score in {scores} matches a human item of {', '.join(human)} ({RULE}, and criterion; "
            f"e.g. {', '.join(found['unmatched_examples'])} match none)"
        )
    if found["unmatched"]:
        logger.warning(
            f"{found['unmatched']} of {found['labels']} labelled responses of {', '.join(human)} match no score "
            f"in {scores} ({RULE}; e.g. {', '.join(found['unmatched_examples'])}): not fitted on"
        )
    cal = fit_calibration(
        labelled,
        rubric.scale.values,
        method=cfg.method,
        level=cfg.level,
        conformal_fraction=cfg.conformal_fraction,
        min_items=cfg.min_items,
        min_conformal=cfg.min_conformal,
        seed=cfg.seed,
        force=cfg.force_method,
        human_files=[{"path": h, "sha256": file_sha256(h)} for h in human],
        scores_file=str(scores),
    )
    sel = None
    if cfg.selective:
        from judge.eval.selective import fit_selective

        sel = fit_selective(
            labelled,
            cal,
            agreement=cfg.agreement,
            delta=cfg.delta,
            tolerance=cfg.tolerance,
            confidence=cfg.confidence,
            power=cfg.power,
        )
    if cfg.plan:  # a plan writes nothing: the judge folder keeps its calibration and thresholds
        return CalibrateResult(cal, None, scores, None, sel, None)
    reliability = write_reliability(out / RELIABILITY, cal, labelled)
    path = write_calibration(cfg.judge, cal)
    card = read_card(cfg.judge)
    card.calibration = CardCalibration(
        file=CALIBRATION_FILE,
        fingerprint=cal.fingerprint(),
        method=cal.method,
        level=cal.level,
        data_fingerprint=cal.data.fingerprint,
        human_files=human,
        n_items=cal.data.n_items,
        created=cal.created,
    )
    sel_path = Path(cfg.judge) / SELECTIVE_FILE
    if sel is not None:
        write_selective(cfg.judge, sel)
        card.selective = CardSelective(
            file=SELECTIVE_FILE,
            fingerprint=sel.fingerprint(),
            calibration_fingerprint=cal.fingerprint(),
            agreement=sel.agreement,
            delta=sel.delta,
            created=sel.created,
        )
    elif card.selective is not None:
        # Thresholds fitted on the calibration this one replaces would mark scores they were not fitted for.
        logger.warning(
            f"{sel_path}: the selective-evaluation thresholds were fitted on the previous calibration; removed "
            "(run judge-calibrate --selective to fit them on this one)"
        )
        card.selective = None
        sel_path.unlink(missing_ok=True)
    write_card(cfg.judge, card)
    return CalibrateResult(cal, path, scores, reliability, sel, sel_path if sel is not None else None, found)


def _score_raw(spec: JudgeSpec, human: list[str], path: Path, cfg: CalibrateConfig) -> None:
    """The judge's raw scores of the human files' responses, written to ``path``: every criterion the judge
    was trained on (:func:`~judge.scoring.engine.trained_criteria`; a calibration of an untrained read-out
    would only say it is noise)."""
    from tqdm.auto import tqdm

    from judge.core.io import write_jsonl
    from judge.scoring.engine import JudgeEngine, trained_criteria
    from judge.scoring.inputs import load_inputs

    records = load_inputs(list(human), annotation_benchmark=spec.rubric.name).records
    engine = JudgeEngine.for_judge(
        loader.load(spec, device=cfg.device, dtype=cfg.dtype, progress=cfg.progress)
    )
    out = []
    with tqdm(total=len(records), unit="item", desc="calibration data", disable=not cfg.progress) as bar:
        crits = trained_criteria(spec.rubric, spec.card)
        for batch in engine.iter_batches(records, criteria=None if crits is None else [crits] * len(records)):
            out.extend(batch.records)
            bar.update(batch.items)
    write_jsonl(path, out)


def _check_own_raw_scores(records: list, path: Path, spec: JudgeSpec) -> None:
    """``--scores`` must be this judge's raw scores: a calibration fitted on another judge's scores, or on
    calibrated ones, would be written into this judge's card and applied to every score it gives. Each
    record's ``producer`` says who made it (``fingerprint``: :func:`~judge.models.card.judge_fingerprint`,
    which a calibration does not change); a file made by hand, with no producer, is taken as it is."""
    own = spec.fingerprint[:16]
    for line, rec in records:
        prod = rec.producer or {}
        fp = prod.get("fingerprint")
        if fp is not None and str(fp) != own:
            raise ConfigError(
                f"`scores` {path}, line {line}: scored by another judge ({prod.get('judge', '?')}, fingerprint "
                f"{str(fp)[:16]}; this judge: {own}): a calibration is fitted on the judge's own raw scores. "
                f"Leave out --scores to score the labelled files with this judge, or give its own scores file"
            )
        if prod.get("calibration") is not None:
            raise ConfigError(
                f"`scores` {path}, line {line}: a calibrated score (producer.calibration is set): a calibration "
                "is fitted on raw scores. Leave out --scores, or give a file scored before calibrating"
            )


def _validation_split(judge_dir: str, card: JudgeCard) -> str:
    """The annotation file of the validation split of the dataset the card names (``judge-data build``)."""
    if card.data is None:
        raise ConfigError(
            f"the card of {judge_dir!r} names no dataset, so there is no validation split to fit on: give `human`"
        )
    return str(Path(card.data.dataset) / "splits" / "validation.jsonl")


__all__ = ["CalibrateResult", "calibrate_judge"]
