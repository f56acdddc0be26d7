"""Turn human annotations into the judge's SFT dataset (TRL's prompt/completion vision format).

One example per (response, criterion) and per (response, overall), each with:

* ``prompt``: ``[{"role": "user", "content": [...]}]`` from :func:`judge.core.template.build_judge_prompt`
  (``{"type": "image"}`` placeholders where the images stand);
* ``completion``: ``[{"role": "assistant", "content": [{"type": "text", "text": target}]}]``;
* ``images``: the images in placeholder order (paths in JSONL, decoded images in the ``datasets`` copy);
* ``score`` (the integer target), ``human_score`` (the aggregate), ``spread``, ids, family, criterion.

Token budget: with a processor and ``max_tokens``, an example over the budget is
first given fewer image tiles (``max_patches`` column, counted in the stats) when
``tile_fallback`` is on; if one tile per image is still too long it is an error
naming the example. Images are never dropped.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.core.atomic import write_json
from judge.core.errors import JudgeError, RecordError
from judge.core.images import open_image
from judge.core.io import write_jsonl
from judge.core.rubric import OVERALL, Rubric
from judge.core.schema import AnnotationRecord, ImageSegment
from judge.core.template import build_judge_prompt, build_target, completion_messages
from judge.data.aggregate import aggregate_record, round_half_up
from judge.data.config import DataConfig
from judge.data.split import SPLITS, split_records


class BudgetError(JudgeError, ValueError):
    """An example over the image or token budget that cannot be reduced."""


def selected_criteria(family_ids: list[str], spec: str | list[str]) -> list[str]:
    if spec == "all":
        return family_ids
    if spec == "overall":
        return [OVERALL]
    if spec == "criteria":
        return [c for c in family_ids if c != OVERALL]
    return [c for c in family_ids if c in spec]


def pick_rationale(rec: AnnotationRecord, criterion: str, target: float) -> str | None:
    """The rationale of the annotator whose score on this criterion is closest to the aggregate."""
    if not rec.rationale:
        return None
    cands = [
        (abs(s[criterion] - target), a)
        for a, s in rec.scores.items()
        if criterion in s and rec.rationale.get(a)
    ]
    return rec.rationale[min(cands)[1]] if cands else None


@dataclass
class SFTBuild:
    """The built examples per split plus the counts and statistics that describe them."""

    examples: dict[str, list[dict]]
    records: dict[str, list[AnnotationRecord]]
    stats: dict[str, Any] = field(default_factory=dict)


def build_examples(
    records: Sequence[AnnotationRecord],
    rubric: Rubric,
    cfg: DataConfig,
    *,
    assignment: dict[str, str] | None = None,
) -> SFTBuild:
    """Split by question and build every example (no tokenization yet). ``assignment``: the question ->
    split map, when it was made over more records (annotations and preference pairs split together)."""
    splits = split_records(
        records, cfg.split.fractions, cfg.split.seed, cfg.split.stratify, assignment=assignment
    )
    examples: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for split, recs in splits.items():
        for rec in recs:
            family = rubric.family(rec.task)
            agg = aggregate_record(rec, cfg.aggregation)
            for crit in selected_criteria(family.criterion_ids, cfg.criteria):
                if crit not in agg:
                    continue  # nobody scored it on this record
                a = agg[crit]
                score = int(round_half_up(a.value))
                rationale = pick_rationale(rec, crit, a.value) if cfg.target != "score" else None
                if cfg.target != "score" and not rationale:
                    loc = rec._source
                    raise RecordError(
                        f"target format {cfg.target!r} needs a rationale, and no annotator gave one",
                        file=loc.file if loc else None,
                        line=loc.line if loc else None,
                        field="rationale",
                        record_id=rec.id,
                    )
                prompt = build_judge_prompt(
                    rubric, rec.task, crit, rec.question, rec.response, rec.reference, cfg.target
                )
                if cfg.max_images is not None and len(prompt.images) > cfg.max_images:
                    raise BudgetError(
                        f"record {rec.id!r} ({_where(rec)}) has {len(prompt.images)} images, over "
                        f"data.max_images={cfg.max_images}; raise the limit (images are never dropped)"
                    )
                examples[split].append(
                    {
                        "id": f"{rec.id}::{crit}",
                        "record_id": rec.id,
                        "question_id": rec.question_id,
                        "task": rec.task,
                        "criterion": crit,
                        "model": rec.model,
                        "prompt": prompt.messages,
                        "completion": completion_messages(build_target(score, rationale, cfg.target)),
                        "images": list(prompt.images),
                        "score": score,
                        "human_score": a.value,
                        "spread": a.spread,
                        "n_annotators": a.n,
                        "max_patches": None,
                        "num_tokens": None,
                    }
                )
    return SFTBuild(examples=examples, records=splits)


def _where(rec: AnnotationRecord) -> str:
    loc = rec._source
    return f"{loc.file}:{loc.line}" if loc and loc.file else "unknown file"


def count_tokens(
    build: SFTBuild,
    processor,
    max_tokens: int | None,
    tile_fallback: bool = True,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Tokenize every example with ``processor`` (prompt + answer, images included), in place.

    Checks that each example has one image-token run per image. Over ``max_tokens``,
    retries with fewer tiles per image (``max_patches``) when allowed, else raises.
    """
    image_token_id = getattr(processor, "image_token_id", None)
    base_tiles = getattr(getattr(processor, "image_processor", None), "max_patches", None)
    cache: dict[str, Any] = {}
    for split in SPLITS:
        for ex in build.examples[split]:
            for p in ex["images"]:
                if p not in cache:
                    cache[p] = open_image(p)
            images = [cache[p] for p in ex["images"]]
            text = processor.apply_chat_template(ex["prompt"] + ex["completion"], tokenize=False)
            n, runs = _length(processor, text, images, image_token_id, None)
            if image_token_id is not None and runs != len(images):
                raise BudgetError(f"example {ex['id']}: {runs} image-token runs for {len(images)} images")
            tiles = None
            if max_tokens is not None and n > max_tokens and images and tile_fallback and base_tiles:
                for tiles in range(base_tiles - 1, 0, -1):
                    n, _ = _length(processor, text, images, image_token_id, tiles)
                    if n <= max_tokens:
                        break
            if max_tokens is not None and n > max_tokens:
                how = " even with one tile per image" if tiles == 1 else ""
                raise BudgetError(
                    f"example {ex['id']} is {n} tokens{how}, over data.max_tokens={max_tokens}; raise the budget "
                    "(images are never dropped and image tokens never truncated)"
                )
            ex["num_tokens"] = n
            ex["max_patches"] = tiles
            if progress:
                progress(1)
        # Images of one split are not needed by the next.
        cache.clear()


def _length(
    processor, text: str, images: list, image_token_id: int | None, max_patches: int | None
) -> tuple[int, int]:
    kwargs = {"max_patches": max_patches} if max_patches is not None else {}
    out = processor(text=[text], images=images or None, add_special_tokens=False, **kwargs)
    ids = list(out["input_ids"][0])
    runs = 0
    marker = getattr(processor, "global_image_token_id", None)
    if image_token_id is not None and marker is not None:
        # SmolVLM/Idefics3: an image is a run per frame (its sub-images, then the whole), the whole marked once
        runs = ids.count(marker)
    elif image_token_id is not None:
        prev = None
        for t in ids:
            if t == image_token_id and prev != image_token_id:
                runs += 1
            prev = t
    return len(ids), runs


def data_hash(records: Sequence[AnnotationRecord]) -> str:
    """SHA-256 over the records (canonical JSON, sorted by id) and the bytes of every image they use."""
    h = hashlib.sha256()
    image_digests: dict[str, str] = {}
    for rec in sorted(records, key=lambda r: r.id):
        dump = rec.model_dump(mode="json")
        for p in rec.images:
            if p not in image_digests:
                image_digests[p] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
        # Paths are machine-specific; the image bytes stand in for them.
        h.update(
            json.dumps(
                {"record": _strip_paths(dump), "images": [image_digests[p] for p in rec.images]},
                sort_keys=True,
            ).encode()
        )
    return h.hexdigest()


def _strip_paths(dump: dict) -> dict:
    for key in ("question", "response", "reference"):
        for seg in dump.get(key) or []:
            if seg.get("type") == "image":
                seg["image"] = Path(seg["image"]).name
    return dump


def compute_stats(build: SFTBuild) -> dict[str, Any]:
    """Examples per split, family and criterion; score histogram; images and tokens per example."""
    stats: dict[str, Any] = {"splits": {}}
    for split in SPLITS:
        exs = build.examples[split]
        recs = build.records[split]
        per_fc: dict[str, Counter] = defaultdict(Counter)
        for ex in exs:
            per_fc[ex["task"]][ex["criterion"]] += 1
        n_images = [len(ex["images"]) for ex in exs]
        tokens = [ex["num_tokens"] for ex in exs if ex["num_tokens"] is not None]
        stats["splits"][split] = {
            "records": len(recs),
            "questions": len({r.question_id for r in recs}),
            "examples": len(exs),
            "examples_per_family_criterion": {f: dict(c) for f, c in sorted(per_fc.items())},
            "score_histogram": dict(sorted(Counter(ex["score"] for ex in exs).items())),
            "images_per_example": _summary(n_images),
            "tokens_per_example": _summary(tokens) if tokens else None,
            "tile_reductions": sum(1 for ex in exs if ex["max_patches"] is not None),
        }
    return stats


def _summary(xs: list[int]) -> dict[str, float] | None:
    if not xs:
        return None
    s = sorted(xs)
    return {
        "min": s[0],
        "median": statistics.median(s),
        "mean": round(statistics.fmean(s), 2),
        "p95": s[min(len(s) - 1, math.ceil(0.95 * len(s)) - 1)],
        "max": s[-1],
    }


#: Where a build keeps the images of its split files: ``<out>/splits/images`` (the split files' own folder is
#: their image root, so they work from any folder and the build folder can move).
SPLIT_IMAGES = "images"


def write_sft(build: SFTBuild, out_dir: str | Path, manifest: dict[str, Any]) -> Path:
    """Write the dataset (``datasets`` on disk, images embedded), JSONL copies, split records and stats.

    Layout of ``out_dir``: ``dataset/`` (a DatasetDict: train, validation, test),
    ``{split}.jsonl`` (examples, images as paths relative to ``out_dir``), ``splits/{split}.jsonl``
    (the annotation records of each split, for judge-score and judge-report, images as paths
    relative to ``splits/``), ``splits/images/`` (those images, hard-linked or copied), ``stats.json``,
    ``manifest.json``.
    """
    import datasets

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    placed = place_images(
        [p for recs in build.records.values() for r in recs for p in r.images],
        out_dir / "splits" / SPLIT_IMAGES,
    )
    for split in SPLITS:
        write_jsonl(
            out_dir / f"{split}.jsonl",
            [
                {**ex, "images": [_rel(placed, p, "splits/") for p in ex["images"]]}
                for ex in build.examples[split]
            ],
        )
        write_jsonl(
            out_dir / "splits" / f"{split}.jsonl", [_with_images(r, placed) for r in build.records[split]]
        )
    manifest = {**manifest, "split_images": {"folder": f"splits/{SPLIT_IMAGES}", "files": len(placed)}}
    features = _features()
    # Empty splits are not saved: datasets cannot load an empty split back (load_sft_dataset makes them).
    dd = datasets.DatasetDict(
        {
            split: datasets.Dataset.from_list(build.examples[split], features=features)
            for split in SPLITS
            if build.examples[split]
        }
    )
    # Written beside, then swapped in, so a crash never leaves a half-written dataset/.
    tmp, final = out_dir / ".dataset.tmp", out_dir / "dataset"
    shutil.rmtree(tmp, ignore_errors=True)
    enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # three bars for a few MB are noise; ours covers the slow part
    try:
        dd.save_to_disk(str(tmp))
    finally:
        if enabled:
            datasets.enable_progress_bars()
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    write_json(out_dir / "stats.json", build.stats)
    write_json(out_dir / "manifest.json", {**manifest, "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    return out_dir


def load_sft_dataset(out_dir: str | Path):
    """The ``DatasetDict`` a build wrote (``<out_dir>/dataset``), every split present: an empty one (not
    saved) comes back empty, with its columns."""
    import datasets

    saved = datasets.load_from_disk(str(Path(out_dir) / "dataset"))
    features = _features()
    return datasets.DatasetDict(
        {
            split: saved[split]
            if split in saved
            else datasets.Dataset.from_dict({k: [] for k in features}, features=features)
            for split in SPLITS
        }
    )


def place_images(paths: Sequence[str], folder: Path) -> dict[str, str]:
    """Hard-link (else copy) each local image into ``folder``, keeping its path below the images' common
    folder; returns absolute source -> path relative to ``folder``'s parent. URLs are left as they are.
    The folder is rebuilt from scratch, so images of an earlier build do not linger."""
    local = sorted({p for p in paths if Path(p).is_absolute()})
    # Built beside, then swapped in: the sources may be the images of an earlier build in this very folder.
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    out = {}
    base = Path(os.path.commonpath([str(Path(p).parent) for p in local])) if local else Path()
    for src in local:
        rel = Path(src).relative_to(base)
        dst = tmp / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:  # another file system, or links not allowed: a copy
            shutil.copy2(src, dst)
        out[src] = f"{folder.name}/{rel.as_posix()}"
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return out


def _rel(placed: dict[str, str], path: str, prefix: str = "") -> str:
    return prefix + placed[path] if path in placed else path


def _with_images(rec: AnnotationRecord, placed: dict[str, str]) -> AnnotationRecord:
    rec = rec.model_copy(deep=True)
    for content in (rec.question, rec.response, rec.reference):
        for seg in content or []:
            if isinstance(seg, ImageSegment):
                seg.image = _rel(placed, seg.image)
    return rec


def _features():
    import datasets

    part = {"type": datasets.Value("string"), "text": datasets.Value("string")}
    message = {"role": datasets.Value("string"), "content": datasets.List(part)}
    return datasets.Features(
        {
            "id": datasets.Value("string"),
            "record_id": datasets.Value("string"),
            "question_id": datasets.Value("string"),
            "task": datasets.Value("string"),
            "criterion": datasets.Value("string"),
            "model": datasets.Value("string"),
            "prompt": datasets.List(message),
            "completion": datasets.List(message),
            "images": datasets.List(datasets.Image()),
            "score": datasets.Value("int32"),
            "human_score": datasets.Value("float64"),
            "spread": datasets.Value("float64"),
            "n_annotators": datasets.Value("int32"),
            "max_patches": datasets.Value("int32"),
            "num_tokens": datasets.Value("int32"),
        }
    )
