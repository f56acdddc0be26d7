"""One ``judge-score`` run, from input files to ``scores.jsonl`` and the summary: :func:`score_files`.

Steps (every process of a sharded run does them all, except where marked *main*):

1. settle the judge and its rubric (:func:`~judge.serve.engine.resolve_judge`; refused on a rubric
   hash mismatch unless forced) before anything heavy loads;
2. read the inputs (:func:`~judge.serve.inputs.load_inputs`); ``limit`` keeps the first N records;
3. *main*: start afresh (``overwrite``) or repair torn tails and check that the out folder was
   made by the same judge, rubric and prompt format (:func:`~judge.serve.output.check_resume`);
   write ``run.json``; then every process reads the keys already done;
4. *main*: rule-based metrics (:func:`judge.metrics.score_predictions`, all records in input
   order, since MMRA's official scoring depends on it) and the optional CLIPScore baseline;
5. the judge: every record :func:`judge.metrics.needs_judge` sends to it; process ``rank`` of
   ``world`` takes every ``world``-th of them (input order), appending each batch to its file;
6. *main*, after every process finished: merge into a sorted ``scores.jsonl``, write the summary.

Sharding uses accelerate's process state only when launched with several processes
(``WORLD_SIZE > 1``); a plain ``judge-score`` never needs ``accelerate launch``.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..data.errors import ConfigError, JudgeError
from ..data.rubric import load_rubric
from ..metrics import needs_judge, score_predictions
from .engine import JudgeEngine, JudgeSpec, load_judge_model, pending_criteria, resolve_device, resolve_judge
from .inputs import Inputs, load_inputs
from .output import ScoreStore, check_resume, has_scores, item_key, record_key, warn, write_run
from .summary import build_summary, render_markdown, write_summary


@dataclass
class ScoreConfig:
    """Every option of ``judge-score`` (the CLI fills it; library users may too)."""

    inputs: list[str]
    judge: str | None = None
    rubric: str | None = None
    force: bool = False
    out: str = "runs/score"
    overwrite: bool = False
    skip_invalid: bool = False
    format: str = "auto"
    dataset_file: str | None = None
    root: str | None = None
    metric_mode: str = "both"
    no_judge: bool = False
    rationale: bool = False
    max_new_tokens: int = 256
    device: str = "auto"
    dtype: str = "auto"
    quantization: str = "card"  #: card (as the judge was trained) | none | 4bit | 8bit
    batch_tokens: int = 16384
    batch_size: int = 16
    share_prefix: bool = True
    max_tokens: int | None = None
    limit: int | None = None
    baseline: str | None = None
    clip_model: str | None = None
    chunk_size: int = 256
    progress: bool = True


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


def _progress(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="item", desc=desc, disable=not enabled, dynamic_ncols=True, file=sys.stderr)


def score_files(cfg: ScoreConfig) -> ScoreResult:
    """Run ``judge-score``; see the module doc. Raises :class:`JudgeError` on bad input or options."""
    t0 = time.perf_counter()
    from ..models.loading import check_device

    check_device(cfg.device)  # before anything is read or written
    for name in ("batch_tokens", "batch_size", "max_new_tokens", "chunk_size", "max_tokens", "limit"):
        value = getattr(cfg, name)
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}")
    if cfg.no_judge and cfg.judge:
        raise ConfigError("--no-judge and --judge exclude each other")
    if cfg.baseline not in (None, "clipscore"):
        raise ConfigError(f"unknown baseline {cfg.baseline!r}; the one baseline is clipscore")
    if cfg.baseline == "clipscore" and not cfg.clip_model:
        raise ConfigError("--baseline clipscore needs --clip-model PATH (or tiny)")
    if cfg.metric_mode not in ("official", "strict", "both"):
        raise ConfigError(f"unknown metric mode {cfg.metric_mode!r}; use official, strict or both")
    dist = _Dist(cfg.device)
    out_dir = Path(cfg.out)

    # 1. The judge and its rubric (cheap: no weights yet).
    spec: JudgeSpec | None = None
    if cfg.judge and not cfg.no_judge:
        spec = resolve_judge(
            cfg.judge, cfg.rubric, force=cfg.force, rationale=cfg.rationale, quantization=cfg.quantization
        )
        rubric = spec.rubric
    else:
        rubric = load_rubric(cfg.rubric or "mmie")

    # 2. Inputs, and who scores what.
    inputs: Inputs = load_inputs(
        cfg.inputs,
        format=cfg.format,
        dataset_file=cfg.dataset_file,
        skip_invalid=cfg.skip_invalid,
        annotation_benchmark=rubric.name,
        root=cfg.root,
    )
    records = inputs.records[: cfg.limit] if cfg.limit is not None else inputs.records
    if not records:
        raise JudgeError(f"no valid records to score in {', '.join(map(str, cfg.inputs))} "
                         f"({len(inputs.errors)} invalid ones skipped)")
    to_judge = [r for r in records if needs_judge(r)]
    if to_judge and spec is None and not cfg.no_judge:
        raise ConfigError(
            f"{len(to_judge)} of {len(records)} records need the learned judge (open-ended items, or "
            "benchmarks without a rule-based metric): pass --judge DIR|MODEL|tiny, or --no-judge to "
            "compute the rule-based metrics only"
        )

    identity = (
        spec.identity()
        if spec
        else {"judge": None, "rubric": rubric.name, "rubric_hash": rubric.hash, "target_format": None}
    )
    run_info = {
        "identity": identity,
        "judge_card": _card_summary(spec),
        "rubric_forced": bool(spec and spec.rubric_forced),
        "inputs": inputs.describe(),
        "options": {k: v for k, v in asdict(cfg).items() if k not in ("inputs", "progress")},
        "world_size": dist.world,
    }

    # 3. The out folder: start afresh or resume, refusing another judge's folder.
    store = ScoreStore(out_dir, dist.rank, dist.world)
    # Every process checks (read-only), so a refusal stops them all instead of leaving some at a barrier.
    prev = None if cfg.overwrite else check_resume(out_dir, identity, run_info["inputs"])
    if prev is None and not cfg.overwrite and has_scores(out_dir):
        raise JudgeError(
            f"{out_dir} holds scores but no run.json telling what made them; pass --overwrite to "
            "start afresh, or choose another --out"
        )
    if dist.is_main:
        store.prepare(overwrite=cfg.overwrite)
        history = list((prev or {}).get("history") or [])
        history.append(
            {
                "started": _now(),
                "host": platform.node(),
                "argv": sys.argv,
                "world_size": dist.world,
                "inputs": [f["path"] for f in run_info["inputs"]],
            }
        )
        if prev and prev.get("identity", {}).get("judge") and not identity.get("judge"):
            run_info["identity"] = prev["identity"]  # a metrics-only rerun keeps the judge it resumed from
        run_info.update(history=history, status="running")
        write_run(out_dir, run_info)
    dist.barrier()
    done = store.load_done()
    resumed = len(done)
    dist.barrier()

    written = 0
    items_scored = 0
    not_scored: dict[str, Any] = {}
    with store:
        # 4. Rule-based metrics and the baseline (main process: cheap, and order-dependent for MMRA).
        if dist.is_main:
            written += store.append(score_predictions(list(records), mode=cfg.metric_mode))
        if dist.is_main and cfg.baseline == "clipscore":
            written += _clipscore(store, records, cfg, done)
        if cfg.no_judge and to_judge:
            not_scored["needs_judge"] = len(to_judge)
            if dist.is_main:
                warn(f"{len(to_judge)} records need the learned judge and are not scored (--no-judge)")

        # 5. The judge, on this process's share.
        if spec is not None:
            mine = to_judge[dist.rank :: dist.world]
            # Load the model only when something is left to score.
            pending = [r for r in mine if pending_criteria(spec.rubric, r, done)]
            if pending:
                device = resolve_device(cfg.device, dist.local_rank)
                model, processor = load_judge_model(spec, device=device, dtype=cfg.dtype)
                engine = JudgeEngine(
                    model,
                    processor,
                    spec,
                    share_prefix=cfg.share_prefix,
                    batch_tokens=cfg.batch_tokens,
                    batch_size=cfg.batch_size,
                    max_tokens=cfg.max_tokens,
                    rationale=cfg.rationale,
                    max_new_tokens=cfg.max_new_tokens,
                    chunk_size=cfg.chunk_size,
                )
                desc = "judge" if dist.world == 1 else f"judge [{dist.rank}/{dist.world}]"
                with _progress(len(pending), cfg.progress and dist.is_main, desc) as bar:
                    t_judge, n_scores = time.perf_counter(), 0
                    for batch in engine.iter_batches(pending, done):
                        written += store.append(batch.records)
                        items_scored += batch.items
                        n_scores += batch.scored
                        bar.update(batch.items)
                        bar.set_postfix(
                            scores_per_s=f"{n_scores / max(time.perf_counter() - t_judge, 1e-9):.1f}",
                            refresh=False,
                        )

    # 6. Merge and summarise.
    dist.barrier()
    written = _sum_over_processes(dist, written)
    files: dict[str, str] = {}
    summary: dict[str, Any] = {}
    if dist.is_main:
        rows = store.merge()
        # The summary is of this run's items only (scores.jsonl may hold more, e.g. from a run without --limit).
        mine = {item_key(r.benchmark, r.model, r.id) for r in records}
        rows = [r for r in rows if item_key(r["benchmark"], r["model"], r["id"]) in mine]
        files["scores"] = str(store.scores_path)
        run_info.update(status="finished", finished=_now(), records=len(rows), items=len(records))
        run_info["history"][-1].update(finished=run_info["finished"], written=written, resumed_from=resumed)
        write_run(out_dir, run_info)
        files["run"] = str(out_dir / "run.json")
        skipped = [e.to_dict() for e in inputs.errors]
        criteria = {fam_id: fam.criterion_ids for fam_id, fam in rubric.families.items()}
        summary = build_summary(
            rows,
            scale=(rubric.scale.min, rubric.scale.max),
            run=run_info,
            criteria=criteria,
            skipped_invalid=skipped,
            not_scored=not_scored,
        )
        files.update(write_summary(out_dir, summary))
    dist.barrier()
    return ScoreResult(
        str(out_dir),
        files,
        summary,
        written,
        time.perf_counter() - t0,
        items_scored,
        {"resumed_keys": resumed, "records_in": len(records), "to_judge": len(to_judge)},
    )


def _clipscore(store: ScoreStore, records, cfg: ScoreConfig, done: set) -> int:
    from ..eval.clipscore import clipscore_records

    todo = [r for r in records if (r.benchmark, r.model, r.id, "clipscore", "", "") not in done]
    if not todo:
        return 0
    device = resolve_device(cfg.device)
    recs = clipscore_records(todo, cfg.clip_model, device=device)
    return store.append(recs)


def _sum_over_processes(dist: _Dist, n: int) -> int:
    if dist.world == 1:
        return n
    from accelerate.utils import gather_object

    return int(sum(gather_object([n])))


def _card_summary(spec: JudgeSpec | None) -> dict[str, Any] | None:
    if spec is None or spec.card is None:
        return None
    keep = ("base_model", "rubric", "scale", "target_format", "finetune", "data", "created", "git_commit")
    return {k: spec.card[k] for k in keep if k in spec.card}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def print_result(result: ScoreResult) -> None:
    """The summary table and where the files went (what the CLI prints at the end)."""
    if result.summary:
        print(render_markdown(result.summary, compact=True))
    print(f"wrote {result.written} new score records in {result.seconds:.1f} s")
    for name, path in result.files.items():
        print(f"  {name:8s} {path}")


__all__ = ["ScoreConfig", "ScoreResult", "print_result", "record_key", "score_files"]
