"""``judge-data build``: the run config's ``rubric`` and ``data`` sections -> SFT dataset on disk."""

from __future__ import annotations

import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from judge.core.errors import JudgeError
from judge.core.io import LoadResult, load_annotations
from judge.core.rubric import load_rubric
from judge.data.config import DataSections
from judge.data.pair_examples import (
    PAIRS_DIR,
    build_pair_examples,
    check_pair_tokens,
    pairs_hash,
    write_pairs,
)
from judge.data.pairs import load_pairs
from judge.data.sft import build_examples, compute_stats, count_tokens, data_hash, write_sft
from judge.data.split import SPLITS, split_questions

logger = logging.getLogger(__name__)


def build_sft_dataset(
    sections: DataSections,
    processor=None,
    *,
    out_dir: str | Path | None = None,
    config_path: str | Path | None = None,
    progress: bool = True,
) -> Path:
    """Validate annotations, split by question, build and (with a processor) tokenize examples, write them.

    Returns the output folder. Raises on any invalid record unless ``data.skip_invalid``,
    in which case skipped records are counted and listed in ``stats.json``. The statistics table and
    where the data went are logged (INFO).
    """
    t0 = time.perf_counter()
    cfg = sections.data
    rubric = load_rubric(sections.rubric)
    loaded = (
        load_annotations(
            cfg.annotations,
            rubric=rubric,
            root=cfg.image_root,
            allow_urls=cfg.allow_urls,
            skip_invalid=cfg.skip_invalid,
        )
        if cfg.annotations
        else LoadResult()
    )
    if cfg.annotations and not loaded.records:
        raise JudgeError(f"no valid annotation records in {', '.join(cfg.annotations)}")
    pairs = load_pairs(
        cfg.pairs,
        rubric=rubric,
        root=cfg.image_root,
        default_task=cfg.pairs_task,
        allow_urls=cfg.allow_urls,
        skip_invalid=cfg.skip_invalid,
    )
    if cfg.pairs and not pairs.records:
        raise JudgeError(f"no valid pair records in {', '.join(cfg.pairs)}")
    # Annotations and pairs are split together, by question (with no pairs: the annotations' own split).
    assignment = split_questions(
        [*loaded.records, *pairs.records], cfg.split.fractions, cfg.split.seed, cfg.split.stratify
    )
    build = build_examples(loaded.records, rubric, cfg, assignment=assignment)
    pair_examples, pair_records = build_pair_examples(pairs.records, rubric, cfg, assignment)
    t_build = time.perf_counter() - t0
    if processor is not None:
        n = sum(len(v) for v in build.examples.values())
        bar = _bar(n, "tokenizing", progress)
        count_tokens(
            build, processor, cfg.max_tokens, cfg.tile_fallback, progress=bar.update if bar else None
        )
        if bar:
            bar.close()
        # A pair over the budget is refused here, as an SFT example is, not when its batch comes up.
        check_pair_tokens(pair_examples, pair_records, processor, cfg.max_tokens)
    build.stats = compute_stats(build)
    build.stats["skipped_records"] = [e.to_dict() for e in loaded.errors + pairs.errors]
    out = Path(out_dir) if out_dir else sections.data_dir
    manifest: dict[str, Any] = {
        "config": str(config_path) if config_path else None,
        "rubric": {"name": rubric.name, "version": rubric.version, "hash": rubric.hash},
        "data_hash": data_hash(loaded.records),
        "annotation_files": cfg.annotations,
        "data_config": cfg.model_dump(mode="json"),
        "counts": {s: len(build.examples[s]) for s in SPLITS},
        "records": {s: len(build.records[s]) for s in SPLITS},
        "skipped_records": len(loaded.errors) + len(pairs.errors),
        "processor": getattr(processor, "name_or_path", None)
        or (type(processor).__name__ if processor else None),
    }
    if cfg.pairs:
        manifest["pairs"] = {
            "files": cfg.pairs,
            "hash": pairs_hash(pairs.records),
            **write_pairs(pair_examples, pair_records, out),
        }
        build.stats["pairs"] = manifest["pairs"]
    else:
        shutil.rmtree(out / PAIRS_DIR, ignore_errors=True)  # no pairs of an earlier build linger
    write_sft(build, out, manifest)
    logger.info(format_stats(build.stats, rubric.hash, manifest["data_hash"]))
    logger.info(f"\nwrote {out}  (build {t_build:.1f} s, total {time.perf_counter() - t0:.1f} s)")
    return out


def _bar(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="ex", file=sys.stderr, disable=None)


def format_stats(stats: dict[str, Any], rubric_hash: str, data_hash: str) -> str:
    lines = [
        f"rubric hash {rubric_hash[:12]}   data hash {data_hash[:12]}",
        "",
        f"{'split':<11}{'records':>8}{'questions':>10}{'examples':>9}  {'images/ex (min/mean/max)':<26}"
        f"{'tokens/ex (min/med/p95/max)':<30}{'tile cuts':>9}",
    ]
    for split, s in stats["splits"].items():
        im = s["images_per_example"] or {}
        tk = s["tokens_per_example"]
        toks = f"{tk['min']}/{tk['median']:g}/{tk['p95']}/{tk['max']}" if tk else "(not counted)"
        ims = f"{im.get('min', 0)}/{im.get('mean', 0)}/{im.get('max', 0)}"
        lines.append(
            f"{split:<11}{s['records']:>8}{s['questions']:>10}{s['examples']:>9}  {ims:<26}{toks:<30}"
            f"{s['tile_reductions']:>9}"
        )
    train = stats["splits"]["train"]
    lines += ["", "train examples per family and criterion:"]
    for fam, crits in train["examples_per_family_criterion"].items():
        lines.append(f"  {fam}: " + ", ".join(f"{c}={n}" for c, n in crits.items()))
    lines.append(
        "train score histogram: " + "  ".join(f"{k}:{v}" for k, v in train["score_histogram"].items())
    )
    if stats.get("pairs"):
        p = stats["pairs"]
        lines.append(
            "preference pairs (examples / pairs / ties): "
            + "  ".join(f"{s} {p['counts'][s]}/{p['records'][s]}/{p['ties'][s]}" for s in p["counts"])
        )
    if stats.get("skipped_records"):
        lines.append(f"skipped invalid records: {len(stats['skipped_records'])} (listed in stats.json)")
    return "\n".join(lines)
