"""scripts/bench_families.py with a tiny workload: every family timed, the table printed, the JSON written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import forkserver

REPO = Path(__file__).resolve().parents[1]


def test_bench_families_runs_with_a_tiny_workload(tmp_path):
    out = tmp_path / "f.json"
    cmd = [
        forkserver.python(os.environ),
        "scripts/bench_families.py",
        "--responses",
        "2",
        "--repeats",
        "1",
        "--batch",
        "1",
    ]
    r = subprocess.run([*cmd, "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert [row["family"] for row in data["rows"]] == [
        "internvl",
        "qwen2.5-vl",
        "qwen3-vl",
        "llava-onevision",
        "smolvlm",
        "gemma3",
    ]
    for row in data["rows"]:
        assert row["train_step_s"] > 0 and row["score_s"] > 0 and row["responses"] == 2
        assert row["criterion_prompts"] == 14 and 1e5 < row["parameters"] < 1e8  # 2 responses x 7 criteria
        assert f"| {row['model']} | {row['family']} |" in r.stdout


def test_bench_families_times_the_models_asked_for(tmp_path):
    out = tmp_path / "f.json"
    cmd = [
        forkserver.python(os.environ),
        "scripts/bench_families.py",
        "--responses",
        "1",
        "--repeats",
        "1",
        "--batch",
        "1",
    ]
    cmd += ["--models", "tiny-llava-onevision", "--out", str(out)]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert [row["family"] for row in json.loads(out.read_text())["rows"]] == ["llava-onevision"]
    bad = subprocess.run(
        [*cmd[:-2], "--models", "tiny-x"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
