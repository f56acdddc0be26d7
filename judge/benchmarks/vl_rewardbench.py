"""VL-RewardBench (Li et al., CVPR 2025): 1,250 image-question pairs of responses with a human preference.

Data: ``MMInstruction/VL-RewardBench`` on the Hugging Face hub (MIT): its parquet file
(``data/test-00000-of-00001.parquet``, the image's bytes in an ``image`` column; a judge-bench run writes
them once to its out folder's ``images/``), or JSON Lines / a JSON list with ``image_path`` (relative to the
file's folder, or ``root``) instead. Fields: ``id``, ``query``, ``response`` (two strings),
``human_ranking`` (``[0, 1]``: ``response[0]`` is preferred; ``[1, 0]``: ``response[1]``); the others
(``query_source``, ``models``, ...) are not needed.

Official metric: ``cal.py`` at the commit in :data:`OFFICIAL` (``distribution`` -> ``classify`` ->
``distribution_dataset``), given this judge's verdict as the "Answer N is better" its regex reads, with the
responses in the dataset's order (its ``random_number`` 0):

* a verdict for ``response[0]`` is "Answer 1", for ``response[1]`` "Answer 2"; the item is ``agree`` when
  that is not the rejected response (``human_ranking.index(1) + 1``), else ``reject``; an undecided verdict
  (``p_first_better`` exactly 0.5) matches no pattern: ``doesntMatch``;
* the dataset of an item is read from its id's prefix (before the first ``_`` or ``-``, case-sensitive):
  ``RLAIF`` rlaif-v, ``RLHF`` rlhf-v, ``mathverse`` / ``mmmu`` reasoning_tasks, ``wildvision``
  wildvision-battle, ``hallucination`` povid, **anything else vlfeedback**; groups: vlfeedback and
  wildvision-battle are ``general``, povid, rlaif-v and rlhf-v ``hallucination``, reasoning_tasks
  ``reasoning``;
* per group, accuracy = agree / (agree + reject): **doesntMatch items are dropped** from numerator and
  denominator, and items without a verdict never reach the code; printed x100: ``general``,
  ``hallucination``, ``reasoning`` (whose printed denominator has **1e-6 added**), ``Overall Accuracy``
  (all groups pooled) and ``Macro Average Acc`` (the unweighted mean of the three groups' accuracies,
  without the 1e-6). A group, or a dataset present, without any agree/reject item makes the code raise
  ZeroDivisionError: those numbers are null here, with a note.

``cal.py`` also shuffles its records (seed 1234) and, for k = 1, 3, 5, 7, 9, counts at most the first k
runs of an item (by ``id + query + responses``) with a majority vote; one deterministic verdict per item
makes every k give the same numbers, and the shuffle no difference.

Strict: every item counts, in the same groups; an undecided verdict earns half (a fair coin's
expectation), an item without a verdict (unscorable, or absent from the outputs) counts as wrong; the
group accuracies have no 1e-6; the macro average is over the groups that have items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    embedded_image,
    finish_read,
    image_segment,
    pair_verdict,
    read_objects,
    register_judge_benchmark,
    text_segment,
)

#: The id prefix -> dataset rules of cal.py's ``get_dataset_from_id`` (case-sensitive); else vlfeedback.
PREFIX_DATASET = {
    "RLAIF": "rlaif-v",
    "RLHF": "rlhf-v",
    "mathverse": "reasoning_tasks",
    "mmmu": "reasoning_tasks",
    "wildvision": "wildvision-battle",
    "hallucination": "povid",
}
FALLBACK_DATASET = "vlfeedback"
DATASET_GROUP = {
    "vlfeedback": "general",
    "wildvision-battle": "general",
    "povid": "hallucination",
    "rlaif-v": "hallucination",
    "rlhf-v": "hallucination",
    "reasoning_tasks": "reasoning",
}
#: The groups in the order cal.py prints them.
GROUPS = ("general", "hallucination", "reasoning")
OVERALL, MACRO = "Overall Accuracy", "Macro Average Acc"
AGREE, REJECT, NO_MATCH = "agree", "reject", "doesntMatch"


def id_prefix(item_id: str) -> str:
    """The text before the first ``_`` or ``-`` (the whole id when it has neither), as cal.py cuts it."""
    cuts = [i for i in (item_id.find("_"), item_id.find("-")) if i != -1]
    return item_id[: min(cuts)] if cuts else item_id


def dataset_of(item_id: str) -> str:
    """cal.py's dataset of an item: from its id prefix, ``vlfeedback`` when the prefix is not known."""
    return PREFIX_DATASET.get(id_prefix(item_id), FALLBACK_DATASET)


@register_judge_benchmark
class VLRewardBench(JudgeBenchmark):
    name = "vl-rewardbench"
    aliases = ("vlrewardbench", "vl_rewardbench")
    title = "VL-RewardBench"
    official = OfficialCode(
        "vl-rewardbench/VL_RewardBench", "9b10abdc91678bc5fb2bd7eea4d73d3af484db9f", ("cal.py",)
    )
    source = "https://huggingface.co/datasets/MMInstruction/VL-RewardBench"
    licence = "MIT (the dataset card on the Hugging Face hub)"

    def read(self, path: Path, root: Path | None = None) -> JudgeData:
        rows, errors = read_objects(path)
        check_first(path, rows, ("id", "query", "response", "human_ranking"), self.title)
        items = []
        for line, obj in rows:
            r = RowReader(path, line, obj)
            rid = r.key("id")
            r.record_id = rid
            query = r.text("query")
            embedded = {}
            if "image_path" in obj or isinstance(obj.get("image"), str):
                image = image_segment(r, "image_path" if "image_path" in obj else "image", path.parent, root)
            elif (got := embedded_image(r, "image")) is not None:  # the hub's parquet: the image's bytes
                image, embedded = got[0], {got[0]["image"]: got[1]}
            else:
                image = None
            responses = obj.get("response")
            if not (
                isinstance(responses, list)
                and len(responses) == 2
                and all(isinstance(x, str) for x in responses)
            ):
                r.error(f"expected a list of two response texts, got {responses!r}"[:200], "response")
            ranking = obj.get("human_ranking")
            if ranking not in ([0, 1], [1, 0]):
                r.error(
                    f"expected [0, 1] (response[0] preferred) or [1, 0] (response[1] preferred), got {ranking!r}",
                    "human_ranking",
                )
            errors += r.errors
            if r.errors or rid is None or query is None or image is None or not isinstance(responses, list):
                continue
            items.append(
                JudgeItem(
                    id=rid,
                    kind="pair",
                    question=[image, text_segment(query)],
                    responses=[[text_segment(x)] for x in responses],
                    cluster=rid,
                    info={"human_ranking": ranking, "query_source": obj.get("query_source")},
                    line=line,
                    embedded=embedded,
                )
            )
        return finish_read(self.name, path, "pair", "pair", items, errors, "id")

    def evaluate(
        self, data: JudgeData, outputs: dict[str, JudgeOutput], order: list[str], mode: str
    ) -> Evaluation:
        return _official(data, outputs) if mode == OFFICIAL else _strict(data, outputs)


def _status(item: JudgeItem, p: float) -> str:
    """cal.py's reparse of one verdict shown in the dataset's order (random_number 0)."""
    verdict = pair_verdict(p)
    if verdict == UNDECIDED:
        return NO_MATCH
    answer = 1 if verdict == FIRST else 2
    rejected = item.info["human_ranking"].index(1) + 1
    return REJECT if answer == rejected else AGREE


def _official(data: JudgeData, outputs: dict[str, JudgeOutput]) -> Evaluation:
    rows = [
        (it, _status(it, out.p_first_better))
        for it in data.items
        if (out := outputs.get(it.id)) and out.p_first_better is not None
    ]
    datasets = [dataset_of(it.id) for it, _ in rows]
    group = np.array([GROUPS.index(DATASET_GROUP[d]) for d in datasets], dtype=np.int64)
    agree = np.array([s == AGREE for _, s in rows], dtype=float)
    decided = np.array([s != NO_MATCH for _, s in rows], dtype=float)

    def statistic(idx: np.ndarray) -> dict[str, float | None]:
        correct = np.bincount(group[idx], weights=agree[idx], minlength=3)
        total = np.bincount(group[idx], weights=decided[idx], minlength=3)
        c = dict(zip(GROUPS, correct.tolist(), strict=True))
        t = dict(zip(GROUPS, total.tolist(), strict=True))
        # As cal.py computes and prints them (its operation order kept, so the numbers are bit-identical).
        out: dict[str, float | None] = {
            "general": 100.0 * c["general"] / t["general"] if t["general"] else None,
            "hallucination": 100.0 * c["hallucination"] / t["hallucination"] if t["hallucination"] else None,
            # cal.py prints 0.00 for an empty reasoning group, then raises ZeroDivisionError at the macro average.
            "reasoning": 100.0 * c["reasoning"] / (t["reasoning"] + 1e-6) if t["reasoning"] else None,
        }
        task_list = ("reasoning", "hallucination", "general")
        if all(t[k] for k in task_list):
            out[MACRO] = sum(c[k] / t[k] for k in task_list) / 3 * 100
        else:
            out[MACRO] = None
        den = sum(t[k] for k in task_list)
        out[OVERALL] = sum(c[k] for k in task_list) / den * 100 if den else None
        return {k: out[k] for k in (OVERALL, MACRO, *GROUPS)}

    counts = {AGREE: 0, REJECT: 0, NO_MATCH: 0}
    per_dataset: dict[str, dict[str, Any]] = {}
    for d, (_, s) in zip(datasets, rows, strict=True):
        counts[s] += 1
        entry = per_dataset.setdefault(d, {"agree_number": 0, "reject_number": 0, "doesntMatch_number": 0})
        entry[f"{s}_number"] += 1
    notes = []
    for d, entry in per_dataset.items():
        den = entry["agree_number"] + entry["reject_number"]
        entry["accept_rate"] = round(entry["agree_number"] / den, 4) if den else None
        if not den:
            notes.append(
                f"dataset {d} has no agree/reject item: cal.py raises ZeroDivisionError in accept_rate"
            )
    stats = statistic(np.arange(len(rows)))
    totals = np.bincount(group, weights=decided, minlength=3)
    for k, g in enumerate(GROUPS):
        if not totals[k]:
            notes.append(f"group {g} has no agree/reject item: cal.py raises ZeroDivisionError (null here)")
    n_missing = len(data.items) - len(rows)
    if counts[NO_MATCH]:
        notes.append(
            f"{counts[NO_MATCH]} undecided verdicts (p_first_better exactly 0.5) match no 'Answer N is better' "
            "pattern (doesntMatch) and are dropped from numerator and denominator"
        )
    if n_missing:
        notes.append(f"{n_missing} items without a verdict are absent from cal.py's input and not evaluated")
    unknown = sorted({it.id for it, _ in rows if id_prefix(it.id) not in (*PREFIX_DATASET, FALLBACK_DATASET)})
    if unknown:
        shown = ", ".join(unknown[:5]) + (f", ... ({len(unknown)} in all)" if len(unknown) > 5 else "")
        notes.append(f"ids whose prefix cal.py does not know are filed under vlfeedback (general): {shown}")
    notes.append(
        "reasoning is printed with 1e-6 added to its denominator (the macro average does not add it)"
    )
    metrics = {
        **stats,
        "items": {"total": len(rows), **counts},
        "datasets": per_dataset,
    }
    return Evaluation(
        metrics=metrics,
        statistic=statistic,
        clusters=[it.cluster for it, _ in rows],
        counts={
            "used": counts[AGREE] + counts[REJECT],
            "dropped_undecided": counts[NO_MATCH],
            "not_evaluated": n_missing,
        },
        notes=notes,
    )


def _strict(data: JudgeData, outputs: dict[str, JudgeOutput]) -> Evaluation:
    group = np.array([GROUPS.index(DATASET_GROUP[dataset_of(it.id)]) for it in data.items], dtype=np.int64)
    credit = np.zeros(len(data.items))
    undecided = missing = 0
    for i, it in enumerate(data.items):
        out = outputs.get(it.id)
        if out is None or out.p_first_better is None:
            missing += 1
            continue
        s = _status(it, out.p_first_better)
        undecided += s == NO_MATCH
        credit[i] = 1.0 if s == AGREE else 0.5 if s == NO_MATCH else 0.0

    def statistic(idx: np.ndarray) -> dict[str, float | None]:
        got = np.bincount(group[idx], weights=credit[idx], minlength=3)
        n = np.bincount(group[idx], minlength=3)
        accs = {g: 100.0 * float(got[k]) / int(n[k]) if n[k] else None for k, g in enumerate(GROUPS)}
        present = [a for a in accs.values() if a is not None]
        return {
            OVERALL: 100.0 * float(got.sum()) / len(idx) if len(idx) else None,
            MACRO: sum(present) / len(present) if present else None,
            **accs,
        }

    stats = statistic(np.arange(len(data.items)))
    return Evaluation(
        metrics={
            **stats,
            "items": {"total": len(data.items), "undecided": undecided, "without_verdict": missing},
        },
        statistic=statistic,
        clusters=[it.cluster for it in data.items],
        counts={
            "used": len(data.items),
            "undecided_half_credit": undecided,
            "without_verdict_wrong": missing,
        },
        notes=[
            "every item counts: an undecided verdict earns 1/2, an item without a verdict counts as wrong; "
            "no 1e-6 in any denominator"
        ],
    )
