"""``judge-bench``: a judge on a judge benchmark, with the benchmark's official metric and an honest one beside it.

:func:`run_bench` reads the benchmark's own file (:mod:`judge.benchmarks.judging`), gets one verdict per
item, and computes the official and strict metrics, each with a bootstrap interval. The verdicts come from

* a judge (``judge``): every distinct response is scored on one criterion (default ``overall``) of one
  task family of the rubric, through :class:`~judge.scoring.engine.JudgeEngine` with ``judge-score``'s
  batching, and appended batch by batch to ``scores.jsonl`` (:class:`~judge.scoring.output.ScoreStore`),
  so a killed run started again resumes; a pair item's verdict is the preference of the first response
  (:func:`judge.models.preference.preference` of the two score distributions), a score item's the
  expected score, a ranking item's the responses ordered by expected score (equal scores: letter order);
  an item with an unscorable response has no verdict (its reason is kept);
* or a file of per-item outputs (``judge_outputs``; format in :mod:`judge.benchmarks.judging`): another
  judge's verdicts, or a file this command wrote.

Out folder (``out``, default ``runs/bench``)::

    run.json             (with a judge) the judge, rubric, data file (sha256), settings, each start
    scores.jsonl         (with a judge) one judge-score record per distinct response
    judge_outputs.jsonl  the per-item verdicts, in the data file's order (``--judge-outputs`` reads it back)
    images/              (with a judge) the images a parquet data file embeds, written once
    bench.json           official and strict metrics under the benchmark's own names, intervals, counts,
                         every official branch that applied, the official code and commit followed
    bench.md             the same, to read

Bootstrap: ``bootstrap`` resamples of the benchmark's unit (items; for MLLM-as-a-Judge the image and
instruction its rows share) drawn with replacement (:class:`judge.eval.bootstrap.ClusterBootstrap`, seeded
with ``seed``, the benchmark, the file's mode and the metric mode), the headline numbers recomputed on
each, and the 2.5th and 97.5th percentiles reported, with ``n_units`` (the units resampled) beside them: null
when fewer than half the resamples define it, or when the resamples do not vary (one unit, or every unit
right: :func:`judge.eval.bootstrap.sampled_interval`), never a zero-width interval.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from judge.benchmarks.judging import (
    OFFICIAL,
    STRICT,
    Evaluation,
    JudgeBenchmark,
    JudgeData,
    JudgeOutput,
    get_judge_benchmark,
    read_judge_outputs,
    write_embedded,
)
from judge.core.atomic import atomic_write, write_json
from judge.core.errors import ConfigError, JudgeError
from judge.core.io import file_sha256, write_jsonl
from judge.core.rubric import OVERALL, Rubric
from judge.core.schema import PredictionRecord, content_hash
from judge.core.settings import PathText, Settings
from judge.models import BATCH_TOKENS
from judge.models.preference import record_preference

logger = logging.getLogger(__name__)

OUTPUTS = "judge_outputs.jsonl"
BENCH_FILES = ("bench.json", "bench.md", OUTPUTS)
LEVEL = 0.95
RESPONSE_MODEL = "judge-bench"


class BenchConfig(Settings):
    """Every setting of ``judge-bench``: ``BenchConfig(benchmark="vl-rewardbench", data="vl.jsonl",
    judge="runs/demo/judge", task="SA")``."""

    # The command takes these two as positional arguments (no flag).
    benchmark: str = Field(
        description="the judge benchmark: vl-rewardbench, multimodal-rewardbench, mllm-as-a-judge",
        json_schema_extra={"flag": None},
    )
    data: PathText = Field(
        description="its data file as published (VL-RewardBench's parquet, or JSONL with image_path; "
        "Multimodal RewardBench's all_data.json; MLLM-as-a-Judge's score.jsonl, pair.jsonl or batch.jsonl)",
        json_schema_extra={"flag": None},
    )
    judge: PathText | None = Field(
        None, description="a judge folder, or a plain model folder / hub id / 'tiny' with `rubric`"
    )
    judge_outputs: PathText | None = Field(
        None,
        description="compute the metrics from this file of per-item verdicts instead of a judge (JSONL: "
        "id and p_first_better, score_a and score_b, score, or ranking)",
        json_schema_extra={"metavar": "FILE"},
    )
    rubric: PathText | None = Field(None, description="rubric name or YAML path (default: the judge card's)")
    task: str | None = Field(
        None,
        description="the rubric's task family the judge applies to every item (needed when the rubric has several)",
        json_schema_extra={"metavar": "FAMILY"},
    )
    criterion: str = Field(OVERALL, description="the criterion whose score is compared (default overall)")
    force: bool = Field(False, description="score even when the rubric's hash differs from the judge card's")
    calibration: bool = Field(
        True,
        description="apply the calibration the judge card names: every verdict (a score, a ranking, a pair's "
        "preference) comes from the calibrated distributions and their means",
        json_schema_extra={
            "flag": "--no-calibration",
            "flag_help": "the raw read-out even when the judge card names a calibration",
        },
    )
    root: PathText | None = Field(
        None,
        description="resolve the data's image paths from this folder (default: where the benchmark's own "
        "scripts do: the file's folder; MLLM-as-a-Judge: the folder above Benchmark/)",
    )
    limit: int | None = Field(None, ge=1, description="use only the first N items of the data file")
    out: PathText = Field("runs/bench", description="output folder (default runs/bench)")
    overwrite: bool = Field(False, description="start afresh in `out` instead of resuming")
    bootstrap: int = Field(1000, ge=10, description="bootstrap resamples for the intervals (default 1000)")
    seed: int = Field(0, ge=0, description="seed of the bootstrap (default 0)")
    device: str = Field("auto", description="cpu, cuda, cuda:1, ... (default auto: CUDA when available)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights' dtype (auto: bfloat16 on GPU, float32 on CPU)"
    )
    quantization: Literal["card", "none", "4bit", "8bit"] = Field(
        "card", description="how to load the judge's base (default card: as it was trained)"
    )
    batch_tokens: int = Field(
        BATCH_TOKENS, ge=1, description=f"tokens per forward pass, padding included (default {BATCH_TOKENS})"
    )
    batch_size: int = Field(16, ge=1, description="responses per forward pass, at most (default 16)")
    max_tokens: int | None = Field(
        None, ge=1, description="context budget of one prompt (default: the model's max positions)"
    )
    progress: bool = Field(
        True,
        description="show a progress bar",
        json_schema_extra={"flag": "--no-progress", "flag_help": "no progress bar"},
    )

    @model_validator(mode="after")
    def _one_source(self) -> BenchConfig:
        if (self.judge is None) == (self.judge_outputs is None):
            raise ValueError(
                "give either `judge` (score with a judge) or `judge_outputs` FILE (precomputed verdicts)"
            )
        return self


@dataclass
class BenchResult:
    out_dir: str
    files: dict[str, str]
    data: dict[str, Any]  #: what bench.json holds
    written: int  #: score records this start wrote
    seconds: float


def run_bench(cfg: BenchConfig) -> BenchResult:
    """Run ``judge-bench``; see the module doc. Raises :class:`JudgeError` on bad input or options."""
    t0 = time.perf_counter()
    bm = get_judge_benchmark(cfg.benchmark)
    data_path = Path(cfg.data)
    if not data_path.is_file():
        raise JudgeError(
            f"{data_path}: file not found" if not data_path.exists() else f"{data_path}: is not a file"
        )
    out = Path(cfg.out)
    data = bm.read(data_path, None if cfg.root is None else Path(cfg.root))
    if cfg.limit is not None:
        data.items = data.items[: cfg.limit]
    written = 0
    source: dict[str, Any]
    if cfg.judge_outputs is not None:
        outputs, order = read_judge_outputs(cfg.judge_outputs, data)
        source = {"judge_outputs": {"path": str(cfg.judge_outputs), "sha256": file_sha256(cfg.judge_outputs)}}
        out.mkdir(parents=True, exist_ok=True)
        files: dict[str, str] = {}
    else:
        outputs, written, source, files = _judge_outputs(cfg, bm, data, out)
        order = [it.id for it in data.items]
        write_jsonl(out / OUTPUTS, [outputs[it.id].to_dict(data.kind) for it in data.items])
        files[OUTPUTS.removesuffix(".jsonl")] = str(out / OUTPUTS)
    result = evaluate(bm, data, outputs, order, resamples=cfg.bootstrap, seed=cfg.seed)
    doc = {
        "benchmark": bm.name,
        "title": bm.title,
        "data": {
            "path": str(data_path),
            "sha256": file_sha256(data_path),
            "mode": data.mode,
            "items": len(data.items),
        },
        "official_code": [c.to_dict() for c in (bm.official, *bm.also_followed)],
        **source,
        "items": _item_counts(data, outputs),
        **result,
        "bootstrap": {"resamples": cfg.bootstrap, "seed": cfg.seed, "level": LEVEL, "unit": "item clusters"},
    }
    write_json(out / "bench.json", doc)
    with atomic_write(out / "bench.md") as f:
        f.write(render_markdown(doc))
    files.update({"json": str(out / "bench.json"), "md": str(out / "bench.md")})
    return BenchResult(str(out), files, doc, written, time.perf_counter() - t0)


def _item_counts(data: JudgeData, outputs: dict[str, JudgeOutput]) -> dict[str, Any]:
    reasons: dict[str, int] = {}
    with_verdict = 0
    for it in data.items:
        out = outputs.get(it.id)
        if out is not None and out.has_verdict:
            with_verdict += 1
        else:
            why = (out.reason if out is not None and out.reason else "no output for the item").split(":")[0]
            reasons[why] = reasons.get(why, 0) + 1
    return {
        "total": len(data.items),
        "scored": with_verdict,
        "unscorable": len(data.items) - with_verdict,
        "unscorable_reasons": dict(sorted(reasons.items())),
    }


# ----------------------------------------------------------------------------- metrics and intervals


def evaluate(
    bm: JudgeBenchmark,
    data: JudgeData,
    outputs: dict[str, JudgeOutput],
    order: list[str],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = LEVEL,
) -> dict[str, Any]:
    """Both modes' metrics of ``outputs`` with bootstrap intervals of their headline numbers:
    ``{"official": {...}, "strict": {...}}``, each with ``metrics`` (the benchmark's names and shape),
    ``headline`` (flat numbers), ``intervals`` (per headline number, ``[low, high]`` or None), ``counts``
    and ``notes``."""
    result = {}
    for mode in (OFFICIAL, STRICT):
        ev = bm.evaluate(data, outputs, order, mode)
        result[mode] = {
            "metrics": ev.metrics,
            "headline": {k: _plain(v) for k, v in ev.headline.items()},
            "intervals": bootstrap_intervals(ev, resamples, seed, (bm.name, data.mode, mode), level),
            "n_units": len(set(ev.clusters)),
            "counts": ev.counts,
            "notes": ev.notes,
        }
    return result


def _plain(v: float | None) -> float | None:
    return None if v is None or not np.isfinite(v) else float(v)


def bootstrap_intervals(
    ev: Evaluation, resamples: int, seed: int, key: tuple[str, ...], level: float = LEVEL
) -> dict[str, list[float] | None]:
    """Percentile intervals of ``ev``'s headline numbers over cluster-bootstrap resamples of its rows."""
    from judge.eval.bootstrap import ClusterBootstrap, sampled_interval, seeded_rng

    n = len(ev.clusters)
    names = list(ev.headline)
    if n == 0:
        return dict.fromkeys(names)
    plan = ClusterBootstrap(ev.clusters, resamples, seeded_rng(seed, *key))
    codes = np.array([plan.index[c] for c in ev.clusters], dtype=np.int64)
    rows = np.arange(n)
    reps: dict[str, list[float]] = {k: [] for k in names}
    for b in range(plan.n_boot):
        idx = np.repeat(rows, plan.counts[b, codes].astype(np.int64))
        stats = ev.statistic(idx)
        for k in names:
            v = stats.get(k)
            reps[k].append(np.nan if v is None else float(v))
    return {k: sampled_interval(np.asarray(v), level) for k, v in reps.items()}


# ----------------------------------------------------------------------------- the judge's verdicts


def response_records(
    data: JudgeData, family: str, benchmark: str
) -> tuple[list[PredictionRecord], dict[str, list[str]]]:
    """One prediction record per distinct (question, response) of ``data`` (identical ones are scored once),
    and each item's record ids in its responses' order."""
    records: dict[str, PredictionRecord] = {}
    per_item: dict[str, list[str]] = {}
    for it in data.items:
        ids = []
        for resp in it.responses:
            rid = "r-" + content_hash({"task": family, "question": it.question, "response": resp})[:24]
            if rid not in records:
                records[rid] = PredictionRecord(
                    id=rid,
                    benchmark=benchmark,
                    task=family,
                    model=RESPONSE_MODEL,
                    question=it.question,
                    response=resp,
                )
            ids.append(rid)
        per_item[it.id] = ids
    return list(records.values()), per_item


def pick_family(rubric: Rubric, task: str | None, criterion: str) -> str:
    """The task family the judge applies (``task``, or the rubric's only one), checked with ``criterion``."""
    families = list(rubric.families)
    if task is None:
        if len(families) > 1:
            raise ConfigError(
                f"rubric {rubric.name!r} has task families {', '.join(families)}: say which one the judge applies "
                "to the benchmark's items with `task`"
            )
        task = families[0]
    if task not in rubric.families:
        raise ConfigError(
            f"`task` {task!r} is not a family of rubric {rubric.name!r} ({', '.join(families)})"
        )
    crits = rubric.families[task].criterion_ids
    if criterion not in crits:
        raise ConfigError(
            f"`criterion` {criterion!r} is not a criterion of family {task} ({', '.join(crits)})"
        )
    return task


def _check_images(data: JudgeData, root: str | None) -> None:
    """Refuse a data file none of whose images exists (its image paths start elsewhere: `root`); images the
    file embeds count as present."""
    images = [
        seg["image"]
        for it in data.items
        for seg in it.question
        if seg.get("type") == "image" and seg["image"] not in it.embedded
    ]
    if (
        images
        and len(images) == sum(seg.get("type") == "image" for it in data.items for seg in it.question)
        and not any(os.path.isfile(p) for p in images)
    ):
        where = f"`root` {root}" if root else f"the folder the {data.benchmark} file's image paths start from"
        raise ConfigError(
            f"none of the {len(images)} images of {data.path} exists (the first: {images[0]}); they resolve "
            f"from {where}: pass `root` FOLDER, the folder the image paths start from"
        )


def _judge_outputs(
    cfg: BenchConfig, bm: JudgeBenchmark, data: JudgeData, out: Path
) -> tuple[dict[str, JudgeOutput], int, dict[str, Any], dict[str, str]]:
    """Score the responses with the judge (resumable) and turn their scores into per-item verdicts."""
    from judge.models import loader
    from judge.models.devices import check_device
    from judge.scoring.engine import JudgeEngine, pending_criteria
    from judge.scoring.output import (
        RunIdentity,
        RunInfo,
        RunInput,
        ScoreStore,
        earlier_run,
        finish_run,
        start_run,
    )

    check_device(cfg.device)
    spec = loader.resolve(
        cfg.judge or "",
        cfg.rubric,
        force=cfg.force,
        quantization=cfg.quantization,
        calibration=cfg.calibration,
    )
    family = pick_family(spec.rubric, cfg.task, cfg.criterion)
    _check_images(data, cfg.root)
    run_info = RunInfo(
        identity=RunIdentity.of(spec),
        inputs=[
            RunInput(
                path=str(data.path), format=bm.name, sha256=file_sha256(data.path), n_records=len(data.items)
            )
        ],
        options=cfg.model_dump(exclude={"progress"}),
    )
    prev = earlier_run(out, run_info.identity, run_info.inputs, cfg.overwrite)
    store = ScoreStore(out)
    store.prepare(overwrite=cfg.overwrite, outputs=BENCH_FILES)
    start_run(out, run_info, prev, inputs=[str(data.path)])
    # Images embedded in the data file (VL-RewardBench's parquet) are written where the judge opens them.
    write_embedded(data.items, out / "images")
    records, per_item = response_records(data, family, bm.name)
    done = store.load_done()
    crit = [cfg.criterion]
    pending = [r for r in records if cfg.criterion in pending_criteria(spec.rubric, r, done)]
    written = 0
    if pending:
        judge = loader.load(spec, device=cfg.device, dtype=cfg.dtype, progress=cfg.progress)
        engine = JudgeEngine.for_judge(
            judge,
            batch_tokens=cfg.batch_tokens,
            batch_size=cfg.batch_size,
            max_tokens=cfg.max_tokens,
        )
        from tqdm.auto import tqdm

        with (
            store,
            tqdm(
                total=len(pending), desc=bm.name, unit="response", disable=not cfg.progress, file=sys.stderr
            ) as bar,
        ):
            for batch in engine.iter_batches(pending, done, criteria=[crit] * len(pending)):
                written += store.append(batch.records)
                bar.update(batch.items)
    rows = store.merge()
    scores = {
        r["id"]: r
        for r in rows
        if r.get("metric") == "judge"
        and (r.get("criterion") or OVERALL) == cfg.criterion
        and r.get("model") == RESPONSE_MODEL
    }
    outputs = {
        it.id: _verdict(it.id, data.kind, [scores.get(rid) for rid in per_item[it.id]], spec.rubric)
        for it in data.items
    }
    finish_run(out, run_info, records=len(rows), items=len(data.items), written=written)
    source = {
        "judge": {
            **run_info.identity.model_dump(exclude_none=True),
            "task": family,
            "criterion": cfg.criterion,
        },
    }
    files = {"scores": str(store.scores_path), "run": str(out / "run.json")}
    return outputs, written, source, files


def _verdict(item_id: str, kind: str, recs: list[dict[str, Any] | None], rubric: Rubric) -> JudgeOutput:
    """One item's verdict from its responses' score records (no verdict when one is missing or unscorable)."""
    from judge.benchmarks.mllm_judge_pairs import ranking_from_scores

    for k, r in enumerate(recs):
        if r is None or r.get("score") is None:
            why = "not scored" if r is None else str(r.get("reason") or "unscorable")
            code = (
                "not_scored"
                if r is None
                else str((r.get("details") or {}).get("reason_code") or "unscorable")
            )
            return JudgeOutput(item_id, reason=f"{code}: response {k + 1}: {why}")
    done = [r for r in recs if r is not None]
    if kind == "score":
        return JudgeOutput(item_id, score=float(done[0]["score"]))
    if kind == "rank":
        scores = [float(r["score"]) for r in done]
        return JudgeOutput(item_id, ranking=ranking_from_scores(scores), extra={"scores": scores})
    pref = record_preference(done[0], done[1], list(rubric.scale.values))
    extra = {k: v for k, v in pref.to_dict().items() if k != "p_first_better"}
    return JudgeOutput(item_id, p_first_better=pref.p_first_better, extra=extra)


# ----------------------------------------------------------------------------- the report


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def headline_rows(doc: dict[str, Any]) -> list[list[str]]:
    """One row per headline number: official value and interval, strict value and interval."""
    off, st = doc["official"], doc["strict"]
    names = list(dict.fromkeys([*off["headline"], *st["headline"]]))

    def ci(mode: dict[str, Any], k: str) -> str:
        # n beside every interval; none where the resamples did not vary (a [x, x] would claim exactness).
        iv, n = mode["intervals"].get(k), mode.get("n_units")
        at = f"n={n}" if n is not None else "n unknown"
        return f"[{iv[0]:.4f}, {iv[1]:.4f}] ({at})" if iv else f"- ({at}: no interval)"

    return [
        [k, _fmt(off["headline"].get(k)), ci(off, k), _fmt(st["headline"].get(k)), ci(st, k)] for k in names
    ]


def render_markdown(doc: dict[str, Any]) -> str:
    """``bench.md``: the headline numbers of both modes with intervals, the counts, the official branches."""
    from judge.scoring.summary import md_table

    items = doc["items"]
    code = doc["official_code"][0]
    lines = [
        f"# {doc['title']}: {doc['data']['mode']} ({doc['data']['items']} items)",
        "",
        f"Data: `{doc['data']['path']}` (sha256 {doc['data']['sha256'][:12]}).",
        "Verdicts: "
        + (
            f"judge `{doc['judge'].get('judge')}` (task {doc['judge']['task']}, criterion {doc['judge']['criterion']})."
            if doc.get("judge")
            else f"`{doc['judge_outputs']['path']}` (sha256 {doc['judge_outputs']['sha256'][:12]})."
        ),
        f"Official metric: {code['repository']} {', '.join(code['files'])} at {code['commit']}"
        + "".join(
            f"; {c['repository']} {', '.join(c['files'])} at {c['commit']}" for c in doc["official_code"][1:]
        )
        + ".",
        "",
        f"{items['total']} items: {items['scored']} with a verdict, {items['unscorable']} without"
        + (
            f" ({', '.join(f'{k}: {n}' for k, n in items['unscorable_reasons'].items())})"
            if items["unscorable_reasons"]
            else ""
        )
        + ".",
        "",
        md_table(
            [
                "metric",
                "official",
                f"{int(LEVEL * 100)}% interval",
                "strict",
                f"{int(LEVEL * 100)}% interval",
            ],
            headline_rows(doc),
        ),
        "",
        f"Intervals: {doc['bootstrap']['resamples']} bootstrap resamples (seed {doc['bootstrap']['seed']}).",
    ]
    for mode in (OFFICIAL, STRICT):
        lines += ["", f"## {mode.capitalize()}: what applied", ""]
        lines += [f"- {n}" for n in doc[mode]["notes"]] or ["- nothing dropped or randomised"]
    return "\n".join(lines) + "\n"


__all__ = ["BenchConfig", "BenchResult", "evaluate", "pick_family", "response_records", "run_bench"]
