"""judge-train on preference pairs: a real 3-step run of the tiny model on pairs alone and mixed with the SFT
examples; the pair-trained judge's folder loads and scores one response through judge-score."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge.testing.demo.pairs import write_demo_pairs
from judge.train import train_judge

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo_pairs(small_demo, tmp_path_factory) -> Path:
    return write_demo_pairs(small_demo, tmp_path_factory.mktemp("pairs") / "pairs.jsonl", min_difference=1.0)


def _overrides(small_demo, pairs, out, **extra):
    return {
        "data.annotations": [],
        "data.pairs": [str(pairs)],
        "data.image_root": str(small_demo.parent),
        "data.split": {"train": 0.5, "validation": 0.25, "test": 0.25, "seed": 0},
        "output_dir": str(out),
        "train.max_steps": 3,
        "train.per_device_train_batch_size": 4,
        "train.logging_steps": 1,
        "train.warmup_steps": 0,
        "eval.strategy": "no",
        "eval.at_start": False,
        **extra,
    }


@pytest.fixture(scope="module")
def pairs_run(small_demo, demo_pairs, tmp_path_factory):
    out = tmp_path_factory.mktemp("pairs-run")
    validated = {
        "eval.strategy": "steps",
        "eval.steps": 2,
        "eval.at_start": True,
        "eval.best_metric": "pairs_accuracy",
    }
    return out, train_judge("demo", overrides=_overrides(small_demo, demo_pairs, out, **validated))


def test_a_pairs_only_run_trains_and_writes_a_judge(pairs_run):
    out, result = pairs_run
    assert result.steps == 3
    manifest = json.loads((out / "data" / "manifest.json").read_text())
    assert manifest["counts"] == {"train": 0, "validation": 0, "test": 0}  # no annotations
    pairs = manifest["pairs"]
    assert pairs["counts"]["train"] > 0 and pairs["records"]["validation"] > 0
    state = json.loads((out / "checkpoints" / "checkpoint-3" / "trainer_state.json").read_text())
    losses = [e["loss"] for e in state["log_history"] if "loss" in e]
    assert len(losses) == 3 and all(0 < x < 10 for x in losses)
    assert (out / "judge" / "judge_card.json").is_file()


def test_validation_reports_held_out_pairwise_accuracy_and_keeps_the_best(pairs_run):
    out, result = pairs_run
    n_val = json.loads((out / "data" / "manifest.json").read_text())["pairs"]["counts"]["validation"]
    for metrics in (result.baseline, result.final):
        assert metrics["pairs_n"] == n_val
        assert 0 <= metrics["pairs_accuracy"] <= 1 and 0 <= metrics["overall_pairs_accuracy"] <= 1
        assert "overall_spearman" not in metrics  # no annotations, no correlations
    assert result.best_metric == "pairs_accuracy"
    # The best of the evaluations at steps 2 and 3 is the checkpoint kept and the one scored at the end.
    state = json.loads(next((out / "checkpoints").glob("checkpoint-3/trainer_state.json")).read_text())
    evals = {e["step"]: e["eval_pairs_accuracy"] for e in state["log_history"] if "eval_pairs_accuracy" in e}
    assert sorted(evals) == [2, 3] and result.best_value == max(evals.values())
    assert result.final["pairs_accuracy"] == pytest.approx(result.best_value)
    card = json.loads((out / "judge" / "judge_card.json").read_text())
    assert "pairs_accuracy" in json.dumps(card)


def test_the_pair_trained_judge_scores_one_response_through_judge_score(pairs_run, small_demo, tmp_path):
    out, _ = pairs_run
    first = json.loads(small_demo.read_text().splitlines()[0])
    pred = {k: first[k] for k in ("id", "task", "question", "response", "model")} | {"benchmark": "mmie"}
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps(pred) + "\n")
    cmd = [sys.executable, "-m", "judge.cli.score", str(one), "--judge", str(out / "judge"), "--root",
           str(small_demo.parent), "--out", str(tmp_path / "scores"), "--no-progress", "--device", "cpu"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "scores" / "scores.jsonl").read_text().splitlines()]
    judged = [r for r in rows if r["metric"] == "judge"]
    assert judged and all(r["id"] == first["id"] for r in judged)
    assert all(0 <= r["score"] <= 6 and abs(sum(r["distribution"]) - 1) < 1e-6 for r in judged)


def test_a_mixed_run_adds_both_losses(small_demo, demo_pairs, tmp_path):
    over = _overrides(small_demo, demo_pairs, tmp_path, **{"data.annotations": [str(small_demo)]})
    over["train.pairs"] = {"weight": 0.5, "beta": 2.0, "tie_strength": 1.0}
    over.update({"eval.strategy": "steps", "eval.steps": 3, "eval.at_start": False})
    result = train_judge("demo", overrides=over)
    assert result.steps == 3
    # Validation reports both: correlations with the human scores, and the pairs' accuracy.
    assert result.best_metric == "overall_spearman" and "overall_pearson" in result.final
    assert 0 <= result.final["pairs_accuracy"] <= 1
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert manifest["counts"]["train"] > 0 and manifest["pairs"]["counts"]["train"] > 0
    # Annotations and pairs are split together: each question in one split only.
    where: dict[str, set[str]] = {}
    for split in ("train", "validation", "test"):
        for folder in ("splits", "pairs/splits"):
            for line in (tmp_path / "data" / folder / f"{split}.jsonl").read_text().splitlines():
                where.setdefault(json.loads(line)["question_id"], set()).add(split)
    assert where and all(len(s) == 1 for s in where.values())


def test_pairs_config_refusals(small_demo, demo_pairs, tmp_path):
    from judge.core.errors import ConfigError

    with pytest.raises(ConfigError, match="needs data.target score or score_rationale"):
        train_judge(
            "demo",
            overrides=_overrides(small_demo, demo_pairs, tmp_path, **{"data.target": "rationale_score"}),
        )
    with pytest.raises(ConfigError, match="`annotations` \\(human scores\\), `pairs`"):
        train_judge("demo", overrides=_overrides(small_demo, demo_pairs, tmp_path, **{"data.pairs": []}))
    with pytest.raises(ConfigError, match="pairs only .* use pairs_accuracy"):
        train_judge(
            "demo", overrides=_overrides(small_demo, demo_pairs, tmp_path, **{"eval.strategy": "epoch"})
        )
    with pytest.raises(ConfigError, match="'pairs_accuracy' needs data.pairs"):
        over = {"data.annotations": [str(small_demo)], "data.pairs": [], "eval.strategy": "epoch"}
        train_judge(
            "demo",
            overrides=_overrides(
                small_demo, demo_pairs, tmp_path, **over, **{"eval.best_metric": "pairs_accuracy"}
            ),
        )
    with pytest.raises(ConfigError, match="data.pairs.*file not found"):
        train_judge("demo", overrides=_overrides(small_demo, tmp_path / "none.jsonl", tmp_path))


def test_pair_accuracy_counts_ties_as_the_judge_benchmarks_do(rubric):
    """Hand-made distributions: a right verdict 1, an undecided one 1/2 (on pairs humans did not tie), a human
    tie right only for an undecided verdict (the accuracy with ties)."""
    from judge.benchmarks.judging import pair_verdict as bench_verdict
    from judge.train.pair_validation import PairValidationSet, pair_verdict
    from judge.train.validation import ValidationRow

    for p in (0.0, 0.25, 0.5, 0.5000001, 1.0):
        assert pair_verdict(p) == bench_verdict(p)
    high, low = [0, 0, 0, 0, 0, 0.5, 0.5], [0.5, 0.5, 0, 0, 0, 0, 0]
    cases = [  # (humans, side A's distribution, side B's, what it earns without ties)
        ("a", high, low, 1.0), ("b", high, low, 0.0), ("a", low, low, 0.5), ("tie", low, low, None),
        ("tie", high, low, None),
    ]  # fmt: skip
    rows = [
        {"pair_id": f"p{i}", "task": "SA", "criterion": "overall", "preferred": h, "prompt_a": [], "prompt_b": [],
         "images_a": [], "images_b": [], "max_patches": None}
        for i, (h, *_) in enumerate(cases)
    ]  # fmt: skip
    pset = PairValidationSet(rows, rubric)
    scored = [
        ValidationRow(f"p{i}::{side}", "SA", "overall", 0.0, 0.0, dist)
        for i, (_, a, b, _) in enumerate(cases)
        for side, dist in (("a", a), ("b", b))
    ]
    m = pset.metrics(scored)
    assert m["pairs_accuracy"] == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert m["pairs_accuracy_with_ties"] == pytest.approx((1 + 0 + 0 + 1 + 0) / 5)
    assert m["pairs_n"] == 5 and m["pairs_ties"] == 2 and m["overall_pairs_accuracy"] == m["pairs_accuracy"]


def test_a_pair_over_the_token_budget_is_refused_by_the_build(small_demo, demo_pairs, tmp_path):
    # As an SFT example over data.max_tokens: refused by the build, naming file, line and pair, before any
    # step (the collator would only meet it when its batch came up, mid-training).
    from judge.data.sft import BudgetError

    rows = [json.loads(line) for line in demo_pairs.read_text().splitlines()]
    rows[4]["response_a"] = [{"type": "text", "text": "word " * 3000}, *rows[4]["response_a"]]
    long = tmp_path / "long.jsonl"
    long.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    with pytest.raises(
        BudgetError, match=rf"long\.jsonl:5: pair {rows[4]['id']!r} response A .* over data\.max_tokens"
    ):
        train_judge("demo", overrides=_overrides(small_demo, long, out, **{"data.max_tokens": 1024}))
    assert not (out / "checkpoints").exists()


def test_validation_pairs_all_ties_refuse_pairs_accuracy_as_best_metric(small_demo, demo_pairs, tmp_path):
    # pairs_accuracy is over the non-tie pairs: with ties only it is undefined, and the run must not keep a
    # "best" checkpoint by a placeholder (it logged -1 and kept checkpoint-1): refused before the model loads.
    from judge.core.errors import ConfigError

    rows = [json.loads(line) for line in demo_pairs.read_text().splitlines()]
    for r in rows:
        r["preferred"], r["criteria"] = "tie", {}
    ties = tmp_path / "ties.jsonl"
    ties.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    over = {"eval.strategy": "steps", "eval.steps": 1, "eval.best_metric": "pairs_accuracy"}
    with pytest.raises(
        ConfigError, match=r"eval\.best_metric 'pairs_accuracy' is undefined .* pairs_accuracy_with_ties"
    ):
        train_judge("demo", overrides=_overrides(small_demo, ties, out, **over))
    assert not (out / "checkpoints").exists()


def test_the_card_of_a_pairs_only_run_records_the_pairs(pairs_run):
    # Not the hash of empty input with 0 examples (two judges on different pair files looked alike).
    out, _ = pairs_run
    manifest = json.loads((out / "data" / "manifest.json").read_text())
    data = json.loads((out / "judge" / "judge_card.json").read_text())["data"]
    assert data["hash"] is None and data["annotation_files"] == []
    p = manifest["pairs"]
    assert data["pairs"] == {
        "hash": p["hash"],
        "files": p["files"],
        "examples": p["counts"],
        "records": p["records"],
        "ties": p["ties"],
    }
    assert len(data["pairs"]["hash"]) == 64 and data["pairs"]["records"]["train"] > 0


def test_pair_counts_are_per_pair_with_several_criteria(rubric):
    """With data.criteria beyond overall a pair carries several preferences: pairs_n / pairs_ties count pairs,
    pairs_accuracy weighs each pair once (the mean over its criteria), the per-criterion accuracies and
    pairs_comparisons count (pair, criterion) preferences."""
    from judge.train.pair_validation import PairValidationSet
    from judge.train.validation import ValidationRow

    high, low = [0, 0, 0, 0, 0, 0.5, 0.5], [0.5, 0.5, 0, 0, 0, 0, 0]
    prefs = [
        ("p1", "overall", "a"),
        ("p1", "text_quality", "b"),
        ("p1", "image_quality", "a"),
        ("p2", "overall", "tie"),
    ]
    rows = [
        {"pair_id": p, "task": "SA", "criterion": c, "preferred": h, "prompt_a": [], "prompt_b": [],
         "images_a": [], "images_b": [], "max_patches": None}
        for p, c, h in prefs
    ]  # fmt: skip
    pset = PairValidationSet(rows, rubric)
    assert len(pset) == 2
    scored = [  # the judge prefers A on every criterion of p1, is undecided on p2
        ValidationRow(f"{p}::{side}", "SA", c, 0.0, 0.0, dist)
        for p, c, _ in prefs
        for side, dist in (("a", high if p == "p1" else low), ("b", low))
    ]
    m = pset.metrics(scored)
    assert m["pairs_n"] == 2 and m["pairs_ties"] == 1 and m["pairs_comparisons"] == 4
    assert m["pairs_accuracy"] == pytest.approx(2 / 3)  # p1 only: 2 of its 3 preferences right
    assert m["pairs_accuracy_with_ties"] == pytest.approx((2 / 3 + 1) / 2)  # p2's tie matched by undecided
    assert m["text_quality_pairs_accuracy"] == 0.0 and m["overall_pairs_accuracy"] == 1.0
