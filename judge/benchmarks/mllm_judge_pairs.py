"""MLLM-as-a-Judge's pair and batch modes scored: the pair comparisons' accuracies with and without ties (official,
with the analysis notebook's macro scores, and strict) and the batch rankings' edit distances; the rules are in
:mod:`judge.benchmarks.mllm_judge`'s docstring. Also the ranking a judge's scores give a batch row."""

from __future__ import annotations

from typing import Any

import numpy as np

from judge.benchmarks.judging import (
    FIRST,
    SECOND,
    Evaluation,
    JudgeData,
    JudgeOutput,
    group_codes,
    letters,
    pair_verdict,
)
from judge.benchmarks.mllm_judge_datasets import ANALYSIS_RANGES, _by_dataset, analysis_dataset

TIE = "C"


# ----------------------------------------------------------------------------- pair


def _letter(p: float) -> str:
    v = pair_verdict(p)
    return "A" if v == FIRST else "B" if v == SECOND else TIE


def _accuracy_table(datasets: list[str], keep: np.ndarray, credit: np.ndarray):
    """Per dataset (first appearance among kept rows) and overall: sum of credit / rows kept."""
    codes, names = group_codes(datasets)

    def compute(idx: np.ndarray) -> dict[str, Any]:
        k = idx[keep[idx]]
        got = np.bincount(codes[k], weights=credit[k], minlength=len(names))
        n = np.bincount(codes[k], minlength=len(names))
        order = list(dict.fromkeys(codes[k].tolist()))  # datasets in the order their first kept row comes
        table: dict[str, Any] = {
            names[c]: {"accuracy": float(got[c]) / int(n[c]), "num_samples": int(n[c])} for c in order
        }
        table["overall"] = {
            "accuracy": float(credit[k].sum()) / len(k) if len(k) else None,
            "num_samples": int(len(k)),
        }
        return table

    return compute


def _pair_rows(data: JudgeData, outputs: dict[str, JudgeOutput], official: bool):
    rows = []
    for it in data.items:
        out = outputs.get(it.id)
        verdict = None if out is None or out.p_first_better is None else _letter(out.p_first_better)
        if official and verdict is None:
            continue
        rows.append((it, verdict))
    return rows


def _ties_statistic(without, with_ties):
    """Pair mode's bootstrap statistic (official and strict alike): each accuracy, overall and per dataset,
    without ties and with them, on the resampled rows ``idx``."""

    def statistic(idx: np.ndarray) -> dict[str, float | None]:
        a, b = without(idx), with_ties(idx)
        return {
            "without_ties.overall.accuracy": a["overall"]["accuracy"],
            "with_ties.overall.accuracy": b["overall"]["accuracy"],
            **{f"without_ties.{k}.accuracy": v["accuracy"] for k, v in a.items() if k != "overall"},
            **{f"with_ties.{k}.accuracy": v["accuracy"] for k, v in b.items() if k != "overall"},
        }

    return statistic


def _pair_official(data: JudgeData, outputs: dict[str, JudgeOutput], order: list[str]) -> Evaluation:
    rows = _pair_rows(data, outputs, official=True)
    datasets = [it.info["dataset"] for it, _ in rows]
    human = [it.info["human"] for it, _ in rows]
    pred = [v for _, v in rows]
    correct = np.array([h == p for h, p in zip(human, pred, strict=True)], dtype=float)
    no_tie = np.array([h != TIE and p != TIE for h, p in zip(human, pred, strict=True)], dtype=bool)
    without = _accuracy_table(datasets, no_tie, correct)
    with_ties = _accuracy_table(datasets, np.ones(len(rows), dtype=bool), correct)

    statistic = _ties_statistic(without, with_ties)
    everything = np.arange(len(rows))
    n_missing = len(data.items) - len(rows)
    unlabelled = sum(h == -1 for h in human)
    notes = []
    if n_missing:
        notes.append(f"{n_missing} rows without a verdict are skipped")
    n_dropped = int((~no_tie).sum())
    if n_dropped:
        notes.append(
            f"without ties, {n_dropped} rows are dropped because the human label or the verdict is C "
            f"({sum(p == TIE and h != TIE for h, p in zip(human, pred, strict=True))} of them for the verdict alone)"
        )
    if unlabelled:
        notes.append(f"{unlabelled} rows without a human label (-1) are kept and counted wrong")
    analysis, analysis_notes = _pair_analysis(data, outputs, order)
    return Evaluation(
        metrics={
            "without_ties": without(everything),
            "with_ties": with_ties(everything),
            "analysis": analysis,
        },
        statistic=statistic,
        clusters=[it.cluster for it, _ in rows],
        counts={
            "used": len(rows),
            "not_evaluated": n_missing,
            "dropped_without_ties": n_dropped,
            "unlabelled_counted_wrong": unlabelled,
        },
        notes=notes + analysis_notes,
    )


def macro_scores(truth: list[int], pred: list[int]) -> dict[str, float]:
    """scikit-learn's accuracy and macro recall, precision and F1 (``zero_division`` 0) over the labels
    present in either list, as ``accuracy_score`` / ``*_score(average="macro")`` compute them."""
    t, p = np.asarray(truth), np.asarray(pred)
    labels = np.unique(np.concatenate([t, p]))
    tp = np.array([np.sum((t == c) & (p == c)) for c in labels], dtype=float)
    true_sum = np.array([np.sum(t == c) for c in labels], dtype=float)
    pred_sum = np.array([np.sum(p == c) for c in labels], dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(pred_sum > 0, tp / pred_sum, 0.0)
        recall = np.where(true_sum > 0, tp / true_sum, 0.0)
        f1 = np.where(true_sum + pred_sum > 0, 2 * tp / (true_sum + pred_sum), 0.0)
    return {
        "accuracy": float(np.average(t == p)),
        "recall": float(np.average(recall)),
        "precision": float(np.average(precision)),
        "f1": float(np.average(f1)),
    }


def _pair_analysis(data: JudgeData, outputs: dict[str, JudgeOutput], order: list[str]):
    items = data.by_id()
    code = {"A": 1, "B": 2}
    per: dict[str, tuple[list[int], list[int]]] = {name: ([], []) for _, name in ANALYSIS_RANGES}
    for rid in order:
        out = outputs.get(rid)
        if out is None or out.p_first_better is None:
            continue
        item = items[rid]
        name = analysis_dataset(item.info["key"])
        if item.info["human"] == -1 or name is None:
            continue
        per[name][0].append(code.get(item.info["human"], 3))
        per[name][1].append(code.get(_letter(out.p_first_better), 3))
    table: dict[str, Any] = {}
    total = 0.0
    for name, (truth, pred) in per.items():
        if truth:
            table[name] = {**macro_scores(truth, pred), "num_samples": len(truth)}
            total += table[name]["accuracy"]
    table["mean_accuracy_over_10"] = total / 10
    return table, []


def _pair_strict(data: JudgeData, outputs: dict[str, JudgeOutput]) -> Evaluation:
    rows = [(it, v) for it, v in _pair_rows(data, outputs, official=False) if it.info["human"] != -1]
    unlabelled = len(data.items) - len(rows)
    datasets = [it.info["dataset"] for it, _ in rows]
    human = [it.info["human"] for it, _ in rows]
    pred = [v for _, v in rows]
    exact = np.array([h == p for h, p in zip(human, pred, strict=True)], dtype=float)
    half = np.array([1.0 if h == p else 0.5 if p == TIE else 0.0 for h, p in zip(human, pred, strict=True)])
    no_tie = np.array([h != TIE for h in human], dtype=bool)
    without = _accuracy_table(datasets, no_tie, half)
    with_ties = _accuracy_table(datasets, np.ones(len(rows), dtype=bool), exact)

    statistic = _ties_statistic(without, with_ties)
    everything = np.arange(len(rows))
    missing = sum(p is None for p in pred)
    return Evaluation(
        metrics={"without_ties": without(everything), "with_ties": with_ties(everything)},
        statistic=statistic,
        clusters=[it.cluster for it, _ in rows],
        counts={"used": len(rows), "without_verdict_wrong": missing, "unlabelled_left_out": unlabelled},
        notes=[
            "rows without a human label (-1) are left out; every other row counts, one without a verdict as "
            "wrong; without ties only the humans' ties are dropped, and a C verdict there earns 1/2"
        ],
    )


# ----------------------------------------------------------------------------- batch


def levenshtein(a: str, b: str) -> int:
    """Character edit distance (insert, delete, substitute, each 1): ``Levenshtein.distance``'s."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i]
        for j, cb in enumerate(b, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _batch(data: JudgeData, outputs: dict[str, JudgeOutput], official: bool) -> Evaluation:
    rows = []
    for it in data.items:
        out = outputs.get(it.id)
        human = it.info["human"]
        if out is None or out.ranking is None:
            if official:
                continue
            rows.append((it, float(len(human))))  # an empty ranking: every letter deleted
        else:
            rows.append((it, float(levenshtein(out.ranking, human))))
    rows = _by_dataset(rows)
    codes, names = group_codes([it.info["dataset"] for it, _ in rows])
    dist = np.array([d for _, d in rows], dtype=float)
    norm = np.array([d / max(1, len(it.info["human"])) for it, d in rows], dtype=float)

    def statistic(idx: np.ndarray) -> dict[str, float | None]:
        out: dict[str, float | None] = {
            "overall.average_distance": float(np.mean(dist[idx])) if len(idx) else None
        }
        if not official:
            out["overall.average_normalized_distance"] = float(np.mean(norm[idx])) if len(idx) else None
        for k, name in enumerate(names):
            sel = idx[codes[idx] == k]
            out[f"{name}.average_distance"] = float(np.mean(dist[sel])) if len(sel) else None
        return out

    everything = np.arange(len(rows))
    stats = statistic(everything)
    table: dict[str, Any] = {
        name: {"average_distance": stats[f"{name}.average_distance"], "num_samples": int((codes == k).sum())}
        for k, name in enumerate(names)
    }
    table["overall"] = {"average_distance": stats["overall.average_distance"], "num_samples": len(rows)}
    n_missing = sum(1 for it in data.items if (o := outputs.get(it.id)) is None or o.ranking is None)
    if official:
        notes = [f"{n_missing} rows without a ranking are skipped"] if n_missing else []
        counts = {"used": len(rows), "not_evaluated": n_missing}
    else:
        table["overall"]["average_normalized_distance"] = stats["overall.average_normalized_distance"]
        notes = [
            "every row counts; one without a ranking at the largest distance (the human ranking's length)"
        ]
        counts = {"used": len(rows), "without_verdict_worst": n_missing}
    notes.append("the distance is the raw character edit distance (lower is better), not normalised")
    return Evaluation(
        metrics=table,
        statistic=statistic,
        clusters=[it.cluster for it, _ in rows],
        counts=counts,
        notes=notes,
    )


def ranking_from_scores(scores: list[float]) -> str:
    """The letters of the responses from the highest score to the lowest (equal scores: letter order)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return "".join(letters(len(scores))[i] for i in order)
