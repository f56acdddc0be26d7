"""The demo set's preference pairs (judge.testing.demo.pairs) and the shipped demo-pairs config."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from judge.data.pairs import load_pairs
from judge.testing.demo.pairs import MIN_DIFFERENCE, demo_pairs, write_demo_pairs

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "annotations" / "demo"


def _overall(rec: dict) -> float:
    return statistics.fmean(s["overall"] for s in rec["scores"].values())


def test_the_shipped_pairs_are_the_shipped_scores_pairs(tmp_path):
    """annotations/demo/pairs.jsonl is what the generator writes from annotations.jsonl, byte for byte."""
    out = write_demo_pairs(SHIPPED / "annotations.jsonl", tmp_path / "pairs.jsonl")
    assert (SHIPPED / "pairs.jsonl").read_bytes() == out.read_bytes()


def test_pairs_have_a_clear_human_difference_and_alternate_sides(rubric):
    records = [json.loads(x) for x in (SHIPPED / "annotations.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r for r in records}
    pairs = demo_pairs(records)
    assert len(pairs) > 300
    for i, p in enumerate(pairs):
        a, b = (by_id[x] for x in p["id"].split("~"))
        assert a["question_id"] == b["question_id"] == p["question_id"]
        diff = _overall(a) - _overall(b)
        assert abs(diff) >= MIN_DIFFERENCE and p["preferred"] == ("a" if diff > 0 else "b")
        assert p["preferred"] == ("a" if i % 2 == 0 else "b")  # no position to learn
    # Every pair reads as a valid pair record against the rubric, images found.
    loaded = load_pairs(SHIPPED / "pairs.jsonl", rubric=rubric)
    assert len(loaded.records) == len(pairs) and any(r.criteria for r in loaded.records)


def test_generate_demo_writes_the_pairs(small_demo):
    records = [json.loads(x) for x in small_demo.read_text().splitlines()]
    written = [json.loads(x) for x in (small_demo.parent / "pairs.jsonl").read_text().splitlines()]
    assert written == demo_pairs(records)
    assert "## Preference pairs" in (small_demo.parent / "README.md").read_text()


def test_the_demo_pairs_config():
    from judge.train.config import load_run_config

    path, cfg = load_run_config("demo-pairs")
    assert path.name == "demo-pairs.yaml"
    assert cfg.data.annotations == [] and cfg.data.pairs == ["annotations/demo/pairs.jsonl"]
    assert cfg.eval.best_metric == "pairs_accuracy" and cfg.train.pairs.tie_strength == 1.0
    _, demo = load_run_config("demo")
    assert cfg.data.split == demo.data.split  # the demo's split by question
