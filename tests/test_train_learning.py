"""Learning is real: a short run of the shipped recipe raises the judge's agreement with the annotators."""

from __future__ import annotations

import pytest

from judge.train import train_judge


@pytest.mark.slow
def test_short_training_raises_validation_correlation(tmp_path):
    # The shipped demo recipe on the shipped demo set, cut to 150 steps (about 0.4 epoch); the
    # full recipe is what scripts/demo.sh runs.
    result = train_judge(
        "demo",
        overrides={
            "output_dir": str(tmp_path),
            "train.max_steps": 150,
            "eval.strategy": "no",
            "train.logging_steps": 50,
        },
    )
    before, after = result.baseline, result.final
    assert before["overall_n"] == after["overall_n"] == 75
    assert before["all_n"] == after["all_n"] == 525
    # Pooled over every criterion (525 scores) the gain is well clear of the noise; on the 75 overall
    # scores alone the interval is wide, so the bar there is lower.
    assert after["all_spearman"] > before["all_spearman"] + 0.15, (before, after)
    assert after["overall_spearman"] > before["overall_spearman"] + 0.1, (before, after)
    # Not the MAE: after 0.4 epoch the ranking is learned but the scale is not calibrated yet (on this
    # set the untrained model's scores sit near the middle, a fair MAE); the full recipe lowers it
    # (validation overall 1.41 -> 1.05 in scripts/demo.sh).
