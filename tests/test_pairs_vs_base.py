"""scripts/pairs_vs_base.py: its paired bootstrap interval (the training runs it drives are
tests/test_train_pairs.py's)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pairs_vs_base.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("pairs_vs_base", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_paired_interval(script):
    clusters = ["q1", "q1", "q2", "q3", "q3", "q4"]
    same = [1.0, 0.0, 0.5, 1.0, 0.0, 1.0]
    assert script.paired_interval(same, same, clusters, 200, 0) == (0.0, 0.0)
    assert script.paired_interval([1.0] * 6, [0.0] * 6, clusters, 200, 0) == (1.0, 1.0)
    trained, base = [1.0, 1.0, 0.5, 1.0, 0.0, 1.0], [0.0, 1.0, 0.5, 0.0, 0.0, 1.0]
    lo, hi = script.paired_interval(trained, base, clusters, 500, 1)
    assert 0.0 <= lo < 2 / 6 < hi <= 1.0  # the observed difference inside, a question with no gain possible
    assert script.paired_interval(trained, base, clusters, 500, 1) == (lo, hi)  # seeded
