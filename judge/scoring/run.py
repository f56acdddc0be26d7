"""One ``judge-score`` run, from input files to ``scores.jsonl`` and the summary: :func:`score_files`.

Steps (every process of a sharded run does them all, except where marked *main*):

1. settle the judge and its rubric (:func:`judge.models.resolve <judge.models.loader.resolve>`; refused on a rubric
   hash mismatch unless forced) before anything heavy loads;
2. read the inputs (:func:`~judge.scoring.inputs.load_inputs`); ``limit`` keeps the first N records;
3. *main*: start afresh (``overwrite``) or repair torn tails and check that the out folder was
   made by the same judge, rubric and prompt format (:func:`~judge.scoring.output.check_resume`);
   write ``run.json``; then every process reads the keys already done;
4. *main*: rule-based metrics (:func:`judge.benchmarks.score_predictions`, all records in input
   order, since MMRA's official scoring depends on it) and the optional CLIPScore baseline;
5. the judge: every record :func:`judge.benchmarks.needs_judge` sends to it; process ``rank`` of
   ``world`` takes every ``world``-th of them (input order), appending each batch to its file. With
   ``server`` the judge is a running judge-serve (:class:`~judge.scoring.remote.JudgeClient`): its judge
   and rubric settle step 1 and make the run's identity, and each finished request is a batch;
6. *main*, after every process finished: merge into a sorted ``scores.jsonl``, add the preference of
   each pair of a pairs input (:mod:`~judge.scoring.pairs`), write the summary and its leaderboard
   (:mod:`~judge.scoring.summary`, :mod:`~judge.scoring.leaderboard`).

Sharding uses accelerate's process state only when launched with several processes
(``WORLD_SIZE > 1``); a plain ``judge-score`` never needs ``accelerate launch``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from judge.benchmarks import needs_judge, score_predictions
from judge.core.errors import ConfigError, JudgeError
from judge.core.identity import RULE
from judge.core.rubric import Rubric, load_rubric
from judge.core.schema import PredictionRecord
from judge.models import loader
from judge.models.card import JudgeCard
from judge.models.devices import resolve_device
from judge.models.loader import JudgeSpec
from judge.scoring.config import ENGINE_SETTINGS, ScoreConfig, engine_keywords
from judge.scoring.engine import (
    JudgeEngine,
    chosen_criteria,
    default_criteria,
    pending_criteria,
)
from judge.scoring.inputs import Inputs, load_inputs, question_id
from judge.scoring.labelled import Labels, load_labels
from judge.scoring.output import (
    RunIdentity,
    RunInfo,
    RunInput,
    ScoreStore,
    earlier_run,
    finish_run,
    item_key,
    record_key,
    start_run,
)
from judge.scoring.pairs import pair_of, preference_records
from judge.scoring.remote import JudgeClient
from judge.scoring.summary import build_summary, write_summary

logger = logging.getLogger(__name__)


@dataclass
class ScoreResult:
    out_dir: str
    files: dict[str, str]
    summary: dict[str, Any]
    written: int  #: records this run wrote (all processes)
    seconds: float
    items_scored: int = 0  #: items the judge scored in this process
    stats: dict[str, Any] = field(default_factory=dict)


class _Dist:
    """This process's place in a sharded run (rank 0 of 1 without accelerate)."""

    def __init__(self, device: str):
        self.world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.rank, self.local_rank, self.state = 0, None, None
        if self.world > 1:
            from accelerate import PartialState

            cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
            self.state = PartialState(cpu=cpu)
            self.rank, self.world = self.state.process_index, self.state.num_processes
            self.local_rank = self.state.local_process_index

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.state is not None and self.world > 1:
            self.state.wait_for_everyone()


@dataclass
class _Job:
    """What a run settled before writing anything: steps 1 and 2 of the module doc."""

    cfg: ScoreConfig
    dist: _Dist
    spec: JudgeSpec | None  #: None: no judge (``no_judge``, or only rule-based records)
    rubric: Rubric
    inputs: Inputs
    records: list[PredictionRecord]  #: the records of this run (``limit`` applied), input order
    to_judge: list[PredictionRecord]  #: those the learned judge scores
    client: JudgeClient | None = None  #: the judge-serve that scores (``server``), else None
    labels: Labels | None = None  #: human labels for the leaderboard's prediction-powered means (``labels``)

    @property
    def out_dir(self) -> Path:
        return Path(self.cfg.out)


def _progress(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="item", desc=desc, disable=not enabled, dynamic_ncols=True, file=sys.stderr)


def score_files(cfg: ScoreConfig) -> ScoreResult:
    """Run ``judge-score``; see the module doc. Raises :class:`JudgeError` on bad input or options
    (the settings themselves were checked when ``cfg`` was made)."""
    t0 = time.perf_counter()
    from judge.models.devices import check_device

    check_device(cfg.device)  # before anything is read or written
    job = _prepare(cfg, _Dist(cfg.device))
    run_info = _run_info(job)
    store, done = _open_out(job, run_info)
    dist, resumed = job.dist, len(done)
    not_scored: dict[str, Any] = {"needs_judge": len(job.to_judge)} if cfg.no_judge and job.to_judge else {}
    with store:
        written = _score_rule_based(job, store, done) if dist.is_main else 0
        if not_scored and dist.is_main:
            logger.warning(
                f"{len(job.to_judge)} records need the learned judge and are not scored (`no_judge`)"
            )
        judged, items_scored = _score_with_judge(job, store, done)
    dist.barrier()
    written = _sum_over_processes(dist, written + judged)
    files: dict[str, str] = {}
    summary: dict[str, Any] = {}
    if dist.is_main:
        files, summary = _finish(job, store, run_info, written, resumed, not_scored)
    dist.barrier()
    return ScoreResult(
        str(job.out_dir),
        files,
        summary,
        written,
        time.perf_counter() - t0,
        items_scored,
        {"resumed_keys": resumed, "records_in": len(job.records), "to_judge": len(job.to_judge)},
    )


def _prepare(cfg: ScoreConfig, dist: _Dist) -> _Job:
    """1. The judge and its rubric (cheap: no weights yet); 2. the inputs, and who scores what."""
    spec: JudgeSpec | None = None
    client = None
    if cfg.server:
        client = JudgeClient(cfg.server, concurrency=cfg.server_concurrency)
        spec = client.judge_spec(cfg.rubric)
        rubric = spec.rubric
        _warn_server_settings(cfg)
    elif cfg.judge and not cfg.no_judge:
        spec = loader.resolve(
            cfg.judge,
            cfg.rubric,
            force=cfg.force,
            rationale=cfg.rationale,
            quantization=cfg.quantization,
            calibration=cfg.calibration,
        )
        rubric = spec.rubric
    else:
        rubric = load_rubric(cfg.rubric or "mmie")
    chosen_criteria(rubric, cfg.criteria)  # a criterion the rubric lacks is refused before anything runs
    inputs = load_inputs(
        [*cfg.inputs],
        format=cfg.format,
        dataset_file=cfg.dataset_file,
        skip_invalid=cfg.skip_invalid,
        annotation_benchmark=rubric.name,
        root=cfg.root,
    )
    records = inputs.records[: cfg.limit] if cfg.limit is not None else inputs.records
    if not records:
        raise JudgeError(
            f"no valid records to score in {', '.join(map(str, cfg.inputs))} "
            f"({len(inputs.errors)} invalid ones skipped)"
        )
    to_judge = [r for r in records if needs_judge(r)]
    if to_judge and spec is None and not cfg.no_judge:
        raise ConfigError(
            f"{len(to_judge)} of {len(records)} records need the learned judge (open-ended items, or "
            "benchmarks without a rule-based metric): pass `judge` DIR|MODEL|tiny, or `no_judge` to "
            "compute the rule-based metrics only (or `server` URL: a running judge-serve scores)"
        )
    for path in cfg.labels:  # before anything is scored: a missing file fails at once
        if not Path(path).is_file():
            raise ConfigError(f"`labels` {path}: file not found")
    labels = load_labels(cfg.labels, rubric) if cfg.labels else None
    return _Job(cfg, dist, spec, rubric, inputs, records, to_judge, client, labels)


def _run_info(job: _Job) -> RunInfo:
    """What ``run.json`` records of this run: who scores, the inputs, the settings."""
    spec, rubric = job.spec, job.rubric
    identity = (
        RunIdentity.of(spec)
        if spec
        else RunIdentity(judge=None, rubric=rubric.name, rubric_hash=rubric.hash, target_format=None)
    )
    if job.client is not None:  # the server's calibration (it always applies the one its judge card names)
        identity.calibration = (job.client.provenance.get("calibration") or {}).get("fingerprint")
        identity.selective = (job.client.provenance.get("selective") or {}).get("fingerprint")
    return RunInfo(
        identity=identity,
        judge_card=_card_summary(spec),
        rubric_forced=bool(spec and spec.rubric_forced),
        inputs=[RunInput(**f) for f in job.inputs.describe()],
        options=job.cfg.model_dump(exclude={"inputs", "progress"}),
        world_size=job.dist.world,
    )


def _open_out(job: _Job, run_info: RunInfo) -> tuple[ScoreStore, set]:
    """3. The out folder: start afresh or resume, refusing another judge's folder; the keys already done."""
    cfg, dist, out_dir = job.cfg, job.dist, job.out_dir
    store = ScoreStore(out_dir, dist.rank, dist.world)
    # Every process checks (read-only), so a refusal stops them all instead of leaving some at a barrier.
    prev = earlier_run(out_dir, run_info.identity, run_info.inputs, cfg.overwrite)
    if dist.is_main:
        store.prepare(overwrite=cfg.overwrite)
        if prev and prev.identity.judge and not run_info.identity.judge:
            run_info.identity = prev.identity  # a metrics-only rerun keeps the judge it resumed from
        start_run(out_dir, run_info, prev, inputs=[f.path for f in run_info.inputs], world_size=dist.world)
    dist.barrier()
    done = store.load_done()
    dist.barrier()
    return store, done


def _score_rule_based(job: _Job, store: ScoreStore, done: set) -> int:
    """4. Rule-based metrics (all records, in input order: MMRA's official scoring depends on it) and the
    baseline; the main process's work. Returns the records written."""
    written = store.append(score_predictions(list(job.records), mode=job.cfg.metric_mode))
    if job.cfg.baseline == "clipscore" and job.cfg.clip_model:  # the settings require the model
        written += score_clipscore(store, job.records, job.cfg.clip_model, job.cfg.device, done)
    return written


def _score_with_judge(job: _Job, store: ScoreStore, done: set) -> tuple[int, int]:
    """5. The judge, on this process's share; the model loads only when something is left to score.
    Returns the records written and the items scored."""
    spec, cfg, dist = job.spec, job.cfg, job.dist
    if spec is None:
        return 0, 0
    mine = job.to_judge[dist.rank :: dist.world]
    wanted = default_criteria(spec.rubric, cfg.criteria, spec.card)
    pending = [r for r in mine if _wanted(pending_criteria(spec.rubric, r, done), wanted)]
    if not pending:
        return 0, 0
    engine: JudgeEngine | JudgeClient
    if job.client is not None:
        engine = job.client
    else:
        judge = loader.load(
            spec,
            device=cfg.device,
            local_rank=dist.local_rank,
            dtype=cfg.dtype,
            progress=cfg.progress and dist.is_main,
        )
        engine = JudgeEngine.for_judge(judge, **engine_keywords(cfg))
    written = items = n_scores = 0
    desc = "judge" if dist.world == 1 else f"judge [{dist.rank}/{dist.world}]"
    with _progress(len(pending), cfg.progress and dist.is_main, desc) as bar:
        t_judge = time.perf_counter()
        each = None if wanted is None else [wanted] * len(pending)
        for batch in engine.iter_batches(pending, done, criteria=each):
            written += store.append(batch.records)
            items += batch.items
            n_scores += batch.scored
            bar.update(batch.items)
            rate = n_scores / max(time.perf_counter() - t_judge, 1e-9)
            bar.set_postfix(scores_per_s=f"{rate:.1f}", refresh=False)
    return written, items


def _wanted(pending: list[str], wanted: list[str] | None) -> bool:
    """Whether some of a record's pending criteria are wanted (None: all are)."""
    return bool(pending) and (wanted is None or any(c in wanted for c in pending))


def _finish(
    job: _Job,
    store: ScoreStore,
    run_info: RunInfo,
    written: int,
    resumed: int,
    not_scored: dict[str, Any],
) -> tuple[dict[str, str], dict[str, Any]]:
    """6. Merge the processes' files into ``scores.jsonl``, close ``run.json``, write the summary (main
    process, after every process finished). Returns the files written and the summary."""
    rows = store.merge()
    # Pairs inputs: the judge's preference between the two sides, once both are scored (in any process).
    prefs = preference_records(
        rows,
        [r for r in job.records if pair_of(r)],
        job.rubric.scale.values,
        job.spec.selective if job.spec is not None else None,
    )
    if prefs:
        with store:
            store.append(prefs)
        rows = store.merge()
    # The summary is of this run's items only (scores.jsonl may hold more, e.g. from a run without `limit`).
    mine = {item_key(r.benchmark, r.model, r.id) for r in job.records}
    mine |= {  # a pair's preference record is its own item ("A vs B")
        item_key(r.benchmark, f"{r.model} vs {p['opponent']}", r.id)
        for r in job.records
        if (p := pair_of(r)) and p["side"] == "a"
    }
    rows = [r for r in rows if item_key(r["benchmark"], r["model"], r["id"]) in mine]
    files = {"scores": str(store.scores_path)}
    finish_run(
        job.out_dir,
        run_info,
        records=len(rows),
        items=len(job.records),
        written=written,
        resumed_from=resumed,
    )
    files["run"] = str(job.out_dir / "run.json")
    rubric = job.rubric
    summary = build_summary(
        rows,
        scale=(rubric.scale.min, rubric.scale.max),
        run=run_info.model_dump(mode="json", exclude_unset=True),  # as run.json has it
        criteria={fam_id: fam.criterion_ids for fam_id, fam in rubric.families.items()},
        skipped_invalid=[e.to_dict() for e in job.inputs.errors],
        not_scored=not_scored,
        leaderboard_resamples=job.cfg.leaderboard_resamples,
        leaderboard_seed=job.cfg.leaderboard_seed,
        # Annotation inputs: responses to one question have their own ids and share its question_id.
        questions={
            item_key(r.benchmark, r.model, r.id): q for r in job.records if (q := question_id(r)) != r.id
        },
        labels=job.labels,
        min_labels=job.cfg.min_labels,
    )
    lab = summary["leaderboard"].get("labels")
    if lab and lab["unmatched"]:
        logger.warning(
            f"`labels`: {lab['unmatched']} of {lab['responses']} labelled response(s) match no judge score of "
            f"this run ({RULE}; e.g. {', '.join(lab['unmatched_examples'])})"
        )
    elif lab:
        logger.info(
            f"`labels`: {lab['matched']} of {lab['responses']} labelled responses matched a judge score"
        )
    files.update(write_summary(job.out_dir, summary))
    return files, summary


#: Settings of the judge's model and engine: with ``server`` they are the server's own (``device`` still
#: places the CLIPScore baseline).
_MODEL_SETTINGS = ("force", "calibration", "dtype", "quantization", *ENGINE_SETTINGS)


def _warn_server_settings(cfg: ScoreConfig) -> None:
    fields = type(cfg).model_fields
    changed = [f"`{k}`" for k in _MODEL_SETTINGS if getattr(cfg, k) != fields[k].get_default()]
    if changed:
        logger.warning(f"{', '.join(changed)}: the server's own settings decide; ignored with `server`")


def score_clipscore(store: ScoreStore, records, clip_model: str, device: str, done: set) -> int:
    """Append the CLIPScore records of ``records`` not yet in ``done``; returns how many were written."""
    from judge.eval.clipscore import clipscore_records

    todo = [r for r in records if (r.benchmark, r.model, r.id, "clipscore", "", "") not in done]
    if not todo:
        return 0
    return store.append(clipscore_records(todo, clip_model, device=resolve_device(device)))


def _sum_over_processes(dist: _Dist, n: int) -> int:
    if dist.world == 1:
        return n
    from accelerate.utils import gather_object

    return int(sum(gather_object([n])))


def _card_summary(spec: JudgeSpec | None) -> JudgeCard | None:
    """The identifying part of a judge folder's card (the fields it has of these)."""
    if spec is None or spec.card is None:
        return None
    keep = {"base_model", "rubric", "scale", "target_format", "finetune", "data", "created", "git_commit"}
    return JudgeCard.model_validate(spec.card.model_dump(include=keep, exclude_unset=True))


__all__ = ["ScoreConfig", "ScoreResult", "record_key", "score_files"]
