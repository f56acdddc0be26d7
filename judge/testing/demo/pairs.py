"""Preference pairs from the demo set's human scores (``annotations/demo/pairs.jsonl``).

Two responses to one question make a pair when the annotators' mean overall scores differ by at least
``min_difference`` (a clear human difference, not annotator noise); the better one is preferred. The pair
carries a per-criterion preference where the criterion's means differ by as much. Pairs keep the
annotations' ``question_id``, so a split by question puts a question's pairs where its responses are.
Responses A and B alternate by pair (the preferred one first in every other pair), so a judge cannot win
by position. Images keep their paths (the pairs file goes beside the annotations file).

Written from the annotation file's JSON alone (nothing of :mod:`judge.data` is needed), deterministic.
"""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path
from typing import Any

from judge.core.atomic import atomic_write

#: The smallest difference of mean overall scores (scale points) that makes a pair.
MIN_DIFFERENCE = 2.0


def _means(rec: dict[str, Any]) -> dict[str, float]:
    crits = {c for s in rec["scores"].values() for c in s}
    return {c: statistics.fmean(s[c] for s in rec["scores"].values() if c in s) for c in sorted(crits)}


def demo_pairs(records: list[dict[str, Any]], min_difference: float = MIN_DIFFERENCE) -> list[dict[str, Any]]:
    """The pair records of a list of annotation records (dicts, as in the demo's file)."""
    by_question: dict[str, list[dict]] = {}
    for rec in records:
        by_question.setdefault(rec["question_id"], []).append(rec)
    pairs: list[dict[str, Any]] = []
    for qid, recs in by_question.items():
        for one, two in itertools.combinations(recs, 2):
            m1, m2 = _means(one), _means(two)
            diff = m1["overall"] - m2["overall"]
            if abs(diff) < min_difference:
                continue
            better, worse = (one, two) if diff > 0 else (two, one)
            a, b = (better, worse) if len(pairs) % 2 == 0 else (worse, better)
            ma, mb = _means(a), _means(b)
            criteria = {
                c: "a" if ma[c] > mb[c] else "b"
                for c in ma
                if c != "overall" and c in mb and abs(ma[c] - mb[c]) >= min_difference
            }
            pairs.append(
                {
                    "id": f"{a['id']}~{b['id']}",
                    "question_id": qid,
                    "task": a["task"],
                    "question": a["question"],
                    "response_a": a["response"],
                    "response_b": b["response"],
                    "reference": a.get("reference"),
                    "preferred": "a" if a is better else "b",
                    "criteria": criteria,
                    "model_a": a.get("model", "unknown"),
                    "model_b": b.get("model", "unknown"),
                    "meta": {"overall_means": [round(ma["overall"], 4), round(mb["overall"], 4)]},
                }
            )
    return pairs


def write_demo_pairs(
    annotations: str | Path, out: str | Path | None = None, min_difference: float = MIN_DIFFERENCE
) -> Path:
    """Write the pairs of an annotation file (default: ``pairs.jsonl`` beside it); returns the path."""
    annotations = Path(annotations)
    records = [json.loads(ln) for ln in annotations.read_text(encoding="utf-8").splitlines() if ln.strip()]
    path = Path(out) if out is not None else annotations.with_name("pairs.jsonl")
    with atomic_write(path) as f:
        for p in demo_pairs(records, min_difference):
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    return path
