"""``judge-audit``: score every response as it is and after each controlled change, with judge-score's
scorer, and say where the judge moves as a human would and where it is blind.

Out folder (``out``, default ``runs/audit``)::

    run.json      the judge, rubric and hash, the inputs (sha256), the settings, each start
    scores.jsonl  one judge-score record per item, criterion and version (original or a perturbation),
                  appended batch by batch: a killed audit resumes where it stopped
    images/       the white images of ``blank-images``
    audit.json, audit.md, audit.png   the result (:mod:`judge.audit.report`)

A perturbed copy is scored as a record whose ``id`` is the item's id with ``@<perturbation>`` appended;
its ``details.audit`` names the item and the perturbation. The copies are rebuilt from the inputs and
the seed on every start (they are deterministic), so only the scores are kept.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.audit.config import AuditConfig
from judge.audit.perturb import PERTURBATIONS, Context, Perturbation
from judge.audit.report import MIN_EFFECT_SHARE, AuditData, PerturbationInfo, change_cell, write_outputs
from judge.core.errors import JudgeError
from judge.core.rubric import OVERALL, Rubric
from judge.core.schema import PredictionRecord
from judge.eval.clipscore import WEIGHT as CLIP_WEIGHT
from judge.models import loader
from judge.models.loader import JudgeSpec
from judge.scoring.engine import JudgeEngine, default_criteria, pending_criteria, rubric_criteria
from judge.scoring.inputs import load_inputs, question_id
from judge.scoring.output import (
    RunIdentity,
    RunInfo,
    RunInput,
    ScoreStore,
    earlier_run,
    finish_run,
    item_key,
    start_run,
)
from judge.scoring.run import score_clipscore

logger = logging.getLogger(__name__)

ORIGINAL = "original"
AUDIT_FILES = ("audit.json", "audit.md", "audit.png")
#: settings that change what the copies are or who scores them: a resume must keep them
_IDENTITY_SETTINGS = ("seed", "clip_model")


@dataclass
class AuditResult:
    out_dir: str
    files: dict[str, str]
    data: AuditData
    written: int  #: score records this start wrote
    seconds: float


def question_of(rec: PredictionRecord) -> str:
    """The question a response answers (:func:`judge.scoring.inputs.question_id`), within its benchmark
    and task: responses to one question move together in the bootstrap and are never each other's
    off-topic donors."""
    return f"{rec.benchmark}/{rec.task}/{question_id(rec)}"


@dataclass
class _Version:
    item: PredictionRecord  #: the original
    name: str  #: ORIGINAL or a perturbation
    rec: PredictionRecord  #: what is scored


def build_versions(
    records: Sequence[PredictionRecord], perturbations: Sequence[Perturbation], ctx: Context
) -> tuple[list[_Version], dict[str, int]]:
    """Every original and each perturbation's copy of it; and per perturbation, the items it could not change."""
    versions = [_Version(r, ORIGINAL, r) for r in records]
    not_applicable: dict[str, int] = {}
    for p in perturbations:
        skipped = 0
        for r in records:
            copy = p.apply(r, ctx)
            if copy is None:
                skipped += 1
                continue
            copy.id = f"{r.id}@{p.name}"
            copy.meta = {**r.meta, "audit": {"item": r.id, "perturbation": p.name}}
            versions.append(_Version(r, p.name, copy))
        not_applicable[p.name] = skipped
    return versions, not_applicable


def run_audit(cfg: AuditConfig) -> AuditResult:
    """Run ``judge-audit``; see the module doc. Raises :class:`JudgeError` on bad input or options."""
    t0 = time.perf_counter()
    from judge.models.devices import check_device

    check_device(cfg.device)
    spec = loader.resolve(cfg.judge, cfg.rubric, force=cfg.force)
    rubric = spec.rubric
    criteria = audited_criteria(cfg, spec)  # a criterion the rubric lacks is refused before anything runs
    inputs = load_inputs(
        [*cfg.inputs],
        format=cfg.format,
        skip_invalid=cfg.skip_invalid,
        annotation_benchmark=rubric.name,
        root=cfg.root,
    )
    records = inputs.records[: cfg.limit] if cfg.limit is not None else inputs.records
    if not records:
        raise JudgeError(f"no valid records to audit in {', '.join(map(str, cfg.inputs))}")
    out = Path(cfg.out)
    perturbations = [PERTURBATIONS[n] for n in cfg.perturb]
    ctx = Context(records, question_of, out / "images", cfg.seed)

    run_info = RunInfo(
        identity=RunIdentity.of(spec),
        inputs=[RunInput(**f) for f in inputs.describe()],
        options=cfg.model_dump(exclude={"inputs", "progress"}),
    )
    store = _open_out(cfg, out, run_info)
    versions, not_applicable = build_versions(records, perturbations, ctx)
    done = store.load_done()
    written = 0
    with store:
        written += _score_judge(cfg, spec, store, versions, done, criteria)
        if cfg.clip_model:
            written += _score_clip(cfg, store, versions, done)
    rows = store.merge()
    data = _analyse(cfg, spec, criteria, rubric, records, versions, not_applicable, rows, inputs.describe())
    files = {"scores": str(store.scores_path), **write_outputs(out, data)}
    finish_run(out, run_info, records=len(rows), items=len(records), written=written)
    files["run"] = str(out / "run.json")
    return AuditResult(str(out), files, data, written, time.perf_counter() - t0)


def _open_out(cfg: AuditConfig, out: Path, run_info: RunInfo) -> ScoreStore:
    """Start afresh or resume (refusing another judge's, inputs' or seed's folder); returns the store."""
    prev = earlier_run(out, run_info.identity, run_info.inputs, cfg.overwrite)
    if prev is not None:
        changed = [
            f"`{k}`: {prev.options.get(k)!r} then, {getattr(cfg, k)!r} now"
            for k in _IDENTITY_SETTINGS
            if prev.options.get(k) != getattr(cfg, k)
        ]
        if changed:
            raise JudgeError(
                f"{out} holds an audit made with other settings ({'; '.join(changed)}); its scores would not "
                "match these copies: pass `overwrite` to start afresh, or choose another `out`"
            )
    store = ScoreStore(out)
    store.prepare(overwrite=cfg.overwrite, outputs=AUDIT_FILES)
    start_run(out, run_info, prev, inputs=[str(p) for p in cfg.inputs])
    return store


def audited_criteria(cfg: AuditConfig, spec: JudgeSpec) -> list[str]:
    """The criteria the audit scores and reports: overall first, then those asked for (`criteria`), else those
    the judge was trained on, else every criterion of the rubric (:func:`default_criteria`)."""
    chosen = default_criteria(spec.rubric, cfg.criteria, spec.card)
    return chosen if chosen is not None else rubric_criteria(spec.rubric)


def _score_judge(
    cfg: AuditConfig, spec, store: ScoreStore, versions: list[_Version], done: set, criteria: list[str]
) -> int:
    wanted = set(criteria)
    pending = [v.rec for v in versions if set(pending_criteria(spec.rubric, v.rec, done)) & wanted]
    if not pending:
        return 0
    judge = loader.load(spec, device=cfg.device, dtype=cfg.dtype, progress=cfg.progress)
    engine = JudgeEngine.for_judge(judge, batch_tokens=cfg.batch_tokens, max_tokens=cfg.max_tokens)
    from tqdm.auto import tqdm

    written = 0
    with tqdm(
        total=len(pending), desc="audit", unit="item", disable=not cfg.progress, dynamic_ncols=True
    ) as bar:
        for batch in engine.iter_batches(pending, done, criteria=[criteria] * len(pending)):
            written += store.append(batch.records)
            bar.update(batch.items)
    return written


def _score_clip(cfg: AuditConfig, store: ScoreStore, versions: list[_Version], done: set) -> int:
    return score_clipscore(store, [v.rec for v in versions], str(cfg.clip_model), cfg.device, done)


def _analyse(
    cfg: AuditConfig,
    spec,
    criteria: list[str],
    rubric: Rubric,
    records: list[PredictionRecord],
    versions: list[_Version],
    not_applicable: dict[str, int],
    rows: list[dict[str, Any]],
    inputs: list[dict[str, Any]],
) -> AuditData:
    """Pair each copy's scores with its original's, per scorer and criterion, and summarise them."""
    # (scorer, item key, version) -> criterion -> score; scorer "judge" or "clipscore"
    scores: dict[tuple[str, tuple, str], dict[str, float]] = defaultdict(dict)
    by_key = {item_key(v.rec.benchmark, v.rec.model, v.rec.id): v for v in versions}
    unscorable: Counter[str] = Counter()
    for r in rows:
        v = by_key.get(item_key(r["benchmark"], r["model"], r["id"]))
        if v is None:
            continue  # an item of an earlier run with other inputs or `limit`
        scorer = "clipscore" if r["metric"] == "clipscore" else "judge" if r["metric"] == "judge" else None
        if scorer is None:
            continue
        crit = r.get("criterion") or "clipscore"
        if r.get("score") is None:
            if scorer == "judge" and v.name == ORIGINAL and crit == OVERALL:
                unscorable[(r.get("details") or {}).get("reason_code") or "unscorable"] += 1
            continue
        key = item_key(v.item.benchmark, v.item.model, v.item.id)
        scores[(scorer, key, v.name)][crit] = float(r["score"])

    scorers = ["judge", *(["clipscore"] if cfg.clip_model else [])]
    # A verdict counts a change of at least this many scale points (CLIPScore's scale is 0..2.5).
    min_effect = {
        "judge": MIN_EFFECT_SHARE * (rubric.scale.max - rubric.scale.min),
        "clipscore": MIN_EFFECT_SHARE * CLIP_WEIGHT,  # CLIP-S is 2.5 x a cosine clipped at 0
    }
    applied = Counter(v.name for v in versions)
    cells = []
    infos = []
    for name in cfg.perturb:
        p = PERTURBATIONS[name]
        infos.append(
            PerturbationInfo(
                name=p.name,
                group=p.group,
                description=p.description,
                n_applied=applied[name],
                n_not_applicable=not_applicable.get(name, 0),
                expect={c: p.expect(c) for c in criteria},
            )
        )
        for scorer in scorers:
            for crit in criteria if scorer == "judge" else ["clipscore"]:
                orig, pert, qs = [], [], []
                for v in versions:
                    if v.name != name:
                        continue
                    key = item_key(v.item.benchmark, v.item.model, v.item.id)
                    a = scores.get((scorer, key, ORIGINAL), {}).get(crit)
                    b = scores.get((scorer, key, name), {}).get(crit)
                    if a is not None and b is not None:
                        orig.append(a)
                        pert.append(b)
                        qs.append(question_of(v.item))
                expect = p.overall if crit in (OVERALL, "clipscore") else p.expect(crit)
                cells.append(
                    change_cell(
                        scorer,
                        name,
                        crit,
                        expect,
                        orig,
                        pert,
                        qs,
                        n_boot=cfg.bootstrap,
                        seed=cfg.seed,
                        min_effect=min_effect[scorer],
                    )  # fmt: skip
                )
    return AuditData(
        judge={
            "source": spec.source,
            "rubric": rubric.name,
            "rubric_hash": rubric.hash,
            "fingerprint": spec.fingerprint,
        },
        inputs=[str(p) for p in cfg.inputs],
        settings={
            "bootstrap": cfg.bootstrap,
            "seed": cfg.seed,
            "perturb": cfg.perturb,
            "criteria": cfg.criteria,
            "clip_model": cfg.clip_model,
            "limit": cfg.limit,
            "files": inputs,
            "min_effect": {k: round(v, 6) for k, v in min_effect.items() if k in scorers},
        },
        n_items=len(records),
        n_questions=len({question_of(r) for r in records}),
        unscorable=dict(unscorable),
        perturbations=infos,
        scorers=scorers,
        criteria=criteria,
        criterion_families={
            c: [fam for fam, f in rubric.families.items() if c in f.criterion_ids] for c in criteria
        },
        cells=cells,
    )
