"""Learning is real: the shipped demo recipe raises the judge's agreement with the annotators, and the judge
it trains looks at the pictures (the demo set's blank pictures fail a response; nothing in its text says so)."""

from __future__ import annotations

import json
import statistics

import pytest
from PIL import Image

from judge import Judge
from judge.train import train_judge


@pytest.mark.slow
def test_the_demo_recipe_learns_the_scores_and_to_look_at_the_pictures(tmp_path):
    # The shipped demo recipe on the shipped demo set, as scripts/demo.sh runs it (its evaluations aside).
    result = train_judge(
        "demo", overrides={"output_dir": str(tmp_path), "eval.strategy": "no", "train.logging_steps": 100}
    )
    before, after = result.baseline, result.final
    assert before["overall_n"] == after["overall_n"] == 75
    assert after["overall_spearman"] > before["overall_spearman"] + 0.2, (before, after)

    # The validation stories and how-tos (the families whose pictures can be blank), each scored as it is
    # and with its pictures replaced by white ones: the trained judge's overall score falls, as the
    # annotators' does.
    split = tmp_path / "data" / "splits" / "validation.jsonl"
    items = [json.loads(line) for line in split.read_text().splitlines()]
    items = [it for it in items if it["task"] in ("SA", "PBL")]
    Image.new("RGB", (128, 96), (255, 255, 255)).save(split.parent / "white.png")
    blanked = [
        {
            **it,
            "response": [
                {"type": "image", "image": "white.png"} if s["type"] == "image" else s for s in it["response"]
            ],
        }
        for it in items
    ]
    judge = Judge.load(result.judge_dir, calibration=False)
    keep = ("id", "task", "question", "response", "reference", "model")
    as_is = judge.score([{k: it[k] for k in keep} for it in items], criteria="overall", root=split.parent)
    white = judge.score([{k: it[k] for k in keep} for it in blanked], criteria="overall", root=split.parent)
    change = statistics.fmean(w.score - a.score for w, a in zip(white, as_is, strict=True))
    assert change < -0.3, change
