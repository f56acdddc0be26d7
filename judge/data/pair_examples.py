"""Preference pairs -> pairwise training examples, written beside the SFT dataset.

One example per (pair, criterion) the pair has a preference on and ``data.criteria`` selects: the judge's
prompt for that criterion about response A and about response B (:func:`judge.core.template.build_judge_prompt`,
the prompt scoring uses), their images in placeholder order, and the humans' verdict (``a``, ``b``, ``tie``).
Pairs are split by question together with the annotations (:func:`judge.data.split.split_questions` over
both), so a question's pairs never cross into the split where its responses are validated.

Written under ``<data dir>/pairs/``: ``dataset/`` (a DatasetDict, images embedded) and ``splits/{split}.jsonl``
(the pair records of each split, image paths absolute as read).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from judge.core.io import write_jsonl
from judge.core.rubric import Rubric
from judge.core.template import build_judge_prompt
from judge.data.config import DataConfig
from judge.data.pairs import PairRecord
from judge.data.sft import BudgetError, _length, selected_criteria
from judge.data.split import SPLITS, split_records

PAIRS_DIR = "pairs"


def build_pair_examples(
    pairs: Sequence[PairRecord], rubric: Rubric, cfg: DataConfig, assignment: dict[str, str]
) -> tuple[dict[str, list[dict]], dict[str, list[PairRecord]]]:
    """The pairwise examples and the pair records of each split (``assignment``: question -> split)."""
    split = split_records(pairs, assignment=assignment)
    examples: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for name, recs in split.items():
        for p in recs:
            family = rubric.family(p.task)
            prefs = p.preferences()
            for crit in selected_criteria(family.criterion_ids, cfg.criteria):
                if crit not in prefs:
                    continue
                sides = {
                    side: build_judge_prompt(rubric, p.task, crit, p.question, resp, p.reference, cfg.target)
                    for side, resp in (("a", p.response_a), ("b", p.response_b))
                }
                for side, prompt in sides.items():
                    if cfg.max_images is not None and len(prompt.images) > cfg.max_images:
                        raise BudgetError(
                            f"pair {p.id!r} response {side.upper()} has {len(prompt.images)} images, over "
                            f"data.max_images={cfg.max_images}; raise the limit (images are never dropped)"
                        )
                examples[name].append(
                    {
                        "id": f"{p.id}::{crit}",
                        "pair_id": p.id,
                        "question_id": p.question_id,
                        "task": p.task,
                        "criterion": crit,
                        "preferred": prefs[crit],
                        "prompt_a": sides["a"].messages,
                        "prompt_b": sides["b"].messages,
                        "images_a": list(sides["a"].images),
                        "images_b": list(sides["b"].images),
                        "max_patches": None,
                    }
                )
    return examples, split


def check_pair_tokens(
    examples: dict[str, list[dict]],
    records: dict[str, list[PairRecord]],
    processor,
    max_tokens: int | None,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Refuse, at the build, a pair side over ``max_tokens`` (its prompt as the scorer renders it, images
    expanded), naming the pair's file, line and id: the collator would only find it when its batch comes up,
    mid-training. A pair is read at the score position, so no tile fallback: images are never shrunk."""
    if max_tokens is None:
        return
    from judge.core.images import open_image

    source = {p.id: p._source for recs in records.values() for p in recs}
    image_token_id = getattr(processor, "image_token_id", None)
    for split in SPLITS:
        cache: dict[str, Any] = {}
        for ex in examples[split]:
            for side in ("a", "b"):
                paths = ex[f"images_{side}"]
                images = [cache.setdefault(p, open_image(p)) for p in paths if p] if paths else []
                text = processor.apply_chat_template(
                    ex[f"prompt_{side}"], add_generation_prompt=True, tokenize=False
                )
                n, _ = _length(processor, text, images, image_token_id, None)
                if n > max_tokens:
                    loc = source.get(ex["pair_id"])
                    where = f"{loc.file}:{loc.line}: " if loc is not None and loc.file else ""
                    raise BudgetError(
                        f"{where}pair {ex['pair_id']!r} response {side.upper()} ({ex['criterion']}) is {n} tokens "
                        f"(images expanded), over data.max_tokens={max_tokens}; raise the budget or shorten the "
                        "pair (images are never dropped and image tokens never truncated)"
                    )
            if progress:
                progress(1)


def pairs_hash(pairs: Sequence[PairRecord]) -> str:
    """SHA-256 over the pairs (canonical JSON, sorted by id, image paths replaced by the images' bytes)."""
    h = hashlib.sha256()
    digests: dict[str, str] = {}
    for p in sorted(pairs, key=lambda r: r.id):
        dump = p.model_dump(mode="json")
        for key in ("question", "response_a", "response_b", "reference"):
            for seg in dump.get(key) or []:
                if seg.get("type") == "image":
                    path = seg["image"]
                    if path not in digests:
                        digests[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                    seg["image"] = digests[path]
        h.update(json.dumps(dump, sort_keys=True).encode())
    return h.hexdigest()


def write_pairs(
    examples: dict[str, list[dict]], records: dict[str, list[PairRecord]], out_dir: str | Path
) -> dict[str, Any]:
    """Write ``<out_dir>/pairs/`` (see the module doc); returns the manifest's ``pairs`` entry."""
    import datasets

    folder = Path(out_dir) / PAIRS_DIR
    (folder / "splits").mkdir(parents=True, exist_ok=True)
    for name in SPLITS:
        write_jsonl(folder / "splits" / f"{name}.jsonl", records[name])
    dd = datasets.DatasetDict(
        {
            name: datasets.Dataset.from_list(examples[name], features=_features())
            for name in SPLITS
            if examples[name]
        }
    )
    tmp, final = folder / ".dataset.tmp", folder / "dataset"
    shutil.rmtree(tmp, ignore_errors=True)
    enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # as write_sft: a bar for a few MB is noise
    try:
        dd.save_to_disk(str(tmp))
    finally:
        if enabled:
            datasets.enable_progress_bars()
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return {
        "folder": PAIRS_DIR,
        "counts": {s: len(examples[s]) for s in SPLITS},
        "records": {s: len(records[s]) for s in SPLITS},
        "ties": {s: sum(ex["preferred"] == "tie" for ex in examples[s]) for s in SPLITS},
    }


def load_pair_dataset(out_dir: str | Path):
    """The pairs' ``DatasetDict`` of a build (every split present, an empty one empty), or None when the build
    has no pairs."""
    import datasets

    path = Path(out_dir) / PAIRS_DIR / "dataset"
    if not path.is_dir():
        return None
    saved = datasets.load_from_disk(str(path))
    features = _features()
    return datasets.DatasetDict(
        {
            s: saved[s]
            if s in saved
            else datasets.Dataset.from_dict({k: [] for k in features}, features=features)
            for s in SPLITS
        }
    )


def _features():
    import datasets

    part = {"type": datasets.Value("string"), "text": datasets.Value("string")}
    message = {"role": datasets.Value("string"), "content": datasets.List(part)}
    return datasets.Features(
        {
            "id": datasets.Value("string"),
            "pair_id": datasets.Value("string"),
            "question_id": datasets.Value("string"),
            "task": datasets.Value("string"),
            "criterion": datasets.Value("string"),
            "preferred": datasets.Value("string"),
            "prompt_a": datasets.List(message),
            "prompt_b": datasets.List(message),
            "images_a": datasets.List(datasets.Image()),
            "images_b": datasets.List(datasets.Image()),
            "max_patches": datasets.Value("int32"),
        }
    )
