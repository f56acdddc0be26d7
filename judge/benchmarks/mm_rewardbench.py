"""Multimodal RewardBench (Yasunaga et al., 2025): 5,000 (prompt, chosen, rejected) triplets in six areas.

Data: ``data/all_data.json`` of facebookresearch/multimodal_rewardbench, built by its
``scripts/0_download_data.py`` (which fetches the images of the underlying datasets): a JSON list of
``ID, Text, Image, Output1, Output2, Better, Category``, ``Image`` relative to the file's folder (or
``root``), ``Better`` ``"Output1"`` or ``"Output2"``. CC-BY-NC.

Official metric: ``scripts/2_get_accuracy.py`` at the commit in :data:`OFFICIAL` (``compute_acc``,
``extract_judgment``), given this judge's verdict as the ``[[A]]`` / ``[[B]]`` it looks for, A being
``Output1``:

* ``random.seed(123)`` once, then the prediction lines in file order; a line whose output has neither
  ``[[A]]`` nor ``[[B]]`` gets **a coin flip**: A if ``random.random() < 0.5`` else B. Here an undecided
  verdict (``p_first_better`` exactly 0.5) is such a line, and the lines are the items with a verdict in
  the order the outputs list them (``--judge-outputs``: the file's order; a judge: the dataset's order,
  as the benchmark's own judge script writes them), so the flips are those the script draws;
* the label is B when ``Better`` is ``Output2``, else A; a line is correct when the verdict equals it;
* every line counts in ``all``; its group is its ``Category``, except ``safety``, split into
  ``safety/bias`` (ID starting with ``pairs``, case-insensitive) and ``safety/toxicity``, and ``reasoning``
  into ``reasoning/math`` (ID starting with ``math``) and ``reasoning/coding``;
* printed per group, in order of first appearance (``all`` first): ``acc <group>: correct / n = ratio``.
  Items without a verdict are not in the prediction file, so they count nowhere; there is no macro average.

The README's leaderboard also shows single Reasoning and Safety columns that the script does not print;
they are not computed here.

Strict: every item counts; an undecided verdict earns half (the coin's expectation, instead of one draw);
an item without a verdict counts as wrong.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from judge.benchmarks.judging import (
    FIRST,
    OFFICIAL,
    UNDECIDED,
    Evaluation,
    JudgeBenchmark,
    JudgeData,
    JudgeItem,
    JudgeOutput,
    OfficialCode,
    RowReader,
    check_first,
    finish_read,
    group_codes,
    image_segment,
    pair_verdict,
    read_objects,
    register_judge_benchmark,
    text_segment,
)

#: The categories of the release (the script accepts any).
CATEGORIES = (
    "open_generation/correctness_task",
    "open_generation/preference_task",
    "knowledge",
    "reasoning",
    "safety",
    "vqa",
)
SEED = 123


def group_of(item_id: str, category: str) -> str:
    """The group ``compute_acc`` puts an item in (safety and reasoning split by the ID's start)."""
    if category == "safety":
        return "safety/bias" if item_id.lower().startswith("pairs") else "safety/toxicity"
    if category == "reasoning":
        return "reasoning/math" if item_id.lower().startswith("math") else "reasoning/coding"
    return category


@register_judge_benchmark
class MultimodalRewardBench(JudgeBenchmark):
    name = "multimodal-rewardbench"
    aliases = ("mm-rewardbench", "multimodal_rewardbench", "mmrb")
    title = "Multimodal RewardBench"
    official = OfficialCode(
        "facebookresearch/multimodal_rewardbench",
        "b4b92cdac0df81b2a134bcb1b91411d67b55f80f",
        ("scripts/2_get_accuracy.py",),
    )
    source = "https://github.com/facebookresearch/multimodal_rewardbench (data/all_data.json, built by scripts/0_download_data.py)"
    licence = "CC-BY-NC 4.0 (non-commercial); the underlying datasets' images have their own licences"

    def read(self, path: Path, root: Path | None = None) -> JudgeData:
        rows, errors = read_objects(path)
        check_first(path, rows, ("ID", "Text", "Output1", "Output2", "Better"), self.title)
        items = []
        for line, obj in rows:
            r = RowReader(path, line, obj)
            rid = r.key("ID")
            r.record_id = rid
            text = r.text("Text")
            image = image_segment(r, "Image", path.parent, root)
            outs = [r.text("Output1", allow_empty=True), r.text("Output2", allow_empty=True)]
            better = obj.get("Better")
            if better not in ("Output1", "Output2"):
                r.error(f"expected 'Output1' or 'Output2', got {better!r}", "Better")
            category = r.text("Category")  # any text: the script groups by what it finds
            errors += r.errors
            if r.errors or rid is None or text is None or image is None or None in outs or category is None:
                continue
            items.append(
                JudgeItem(
                    id=rid,
                    kind="pair",
                    question=[image, text_segment(text)],
                    responses=[[text_segment(o)] for o in outs if o is not None],
                    cluster=rid,
                    info={"label": "B" if better == "Output2" else "A", "category": category},
                    line=line,
                )
            )
        return finish_read(self.name, path, "pair", "pair", items, errors, "ID")

    def evaluate(
        self, data: JudgeData, outputs: dict[str, JudgeOutput], order: list[str], mode: str
    ) -> Evaluation:
        return _official(data, outputs, order) if mode == OFFICIAL else _strict(data, outputs)


def _accuracy_statistic(groups: list[str], credit: np.ndarray):
    """The statistic of both modes: ``all`` and each group's mean credit (as ``correct / n``)."""
    codes, names = group_codes(groups)

    def statistic(idx: np.ndarray) -> dict[str, float | None]:
        got = np.bincount(codes[idx], weights=credit[idx], minlength=len(names))
        n = np.bincount(codes[idx], minlength=len(names))
        out: dict[str, float | None] = {"all": float(credit[idx].sum()) / len(idx) if len(idx) else None}
        out.update({g: float(got[k]) / int(n[k]) if n[k] else None for k, g in enumerate(names)})
        return out

    return statistic, codes, names


def _official(data: JudgeData, outputs: dict[str, JudgeOutput], order: list[str]) -> Evaluation:
    items = data.by_id()
    rng = random.Random(SEED)  # compute_acc's random.seed(123), drawn only by unparsed lines
    rows, flips = [], []
    for rid in order:
        out = outputs.get(rid)
        if out is None or out.p_first_better is None:
            continue
        item = items[rid]
        verdict = pair_verdict(out.p_first_better)
        if verdict == UNDECIDED:
            pred = "A" if rng.random() < 0.5 else "B"
            flips.append((rid, pred))
        else:
            pred = "A" if verdict == FIRST else "B"
        rows.append((item, int(pred == item.info["label"])))
    groups = [group_of(it.id, it.info["category"]) for it, _ in rows]
    credit = np.array([c for _, c in rows], dtype=float)
    statistic, codes, names = _accuracy_statistic(groups, credit)
    metrics: dict[str, object] = {}
    for g, members in [
        ("all", np.ones(len(rows), dtype=bool)),
        *((g, codes == k) for k, g in enumerate(names)),
    ]:
        n, correct = int(members.sum()), int(credit[members].sum())
        metrics[g] = {"correct": correct, "total": n, "accuracy": correct / n if n else None}
    n_missing = len(data.items) - len(rows)
    notes = []
    if flips:
        shown = ", ".join(f"{rid}: {p}" for rid, p in flips[:8]) + (" ..." if len(flips) > 8 else "")
        notes.append(
            f"{len(flips)} undecided verdicts got the script's coin flip (seed {SEED}, in the outputs' order): {shown}"
        )
    if n_missing:
        notes.append(f"{n_missing} items without a verdict are not in the prediction file and count nowhere")
    return Evaluation(
        metrics={**metrics, "coin_flips": dict(flips)},
        statistic=statistic,
        clusters=[it.cluster for it, _ in rows],
        counts={"used": len(rows), "coin_flips": len(flips), "not_evaluated": n_missing},
        notes=notes,
    )


def _strict(data: JudgeData, outputs: dict[str, JudgeOutput]) -> Evaluation:
    credit = np.zeros(len(data.items))
    undecided = missing = 0
    for i, it in enumerate(data.items):
        out = outputs.get(it.id)
        if out is None or out.p_first_better is None:
            missing += 1
            continue
        verdict = pair_verdict(out.p_first_better)
        if verdict == UNDECIDED:
            undecided += 1
            credit[i] = 0.5
        else:
            credit[i] = float(("A" if verdict == FIRST else "B") == it.info["label"])
    groups = [group_of(it.id, it.info["category"]) for it in data.items]
    statistic, codes, names = _accuracy_statistic(groups, credit)
    metrics: dict[str, object] = {}
    for g, members in [
        ("all", np.ones(len(groups), dtype=bool)),
        *((g, codes == k) for k, g in enumerate(names)),
    ]:
        n = int(members.sum())
        metrics[g] = {
            "credit": float(credit[members].sum()),
            "total": n,
            "accuracy": float(credit[members].sum()) / n,
        }
    return Evaluation(
        metrics=metrics,
        statistic=statistic,
        clusters=[it.cluster for it in data.items],
        counts={
            "used": len(data.items),
            "undecided_half_credit": undecided,
            "without_verdict_wrong": missing,
        },
        notes=[
            "every item counts: an undecided verdict earns 1/2 instead of a coin flip, an item without a verdict counts as wrong"
        ],
    )
