"""scripts/host_speed.py, which scales CI's test budget (.ci/run) by the machine's speed: the budget follows a
slower machine's speed up to twice its base and is never under its base; bad options are refused by name; a
measurement writes its runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "host_speed.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("seconds", "budget", "factor"),
    [
        (["8"], 2100, "1.00"),  # the reference's speed: the base
        (["6"], 2100, "1.00"),  # a faster machine: the base in wall time, never less
        (["11", "13"], 3150, "1.50"),  # a day 1.5x slower (median of before and after)
        (["50"], 4200, "2.00"),  # a broken measurement cannot turn the check off
    ],
)
def test_the_budget_scales_with_a_slower_machine_between_1x_and_2x(seconds, budget, factor):
    got = run("budget", "--base", "2100", "--reference", "8", *seconds)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == [str(budget), factor]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["budget", "--base", "2100", "--reference", "0", "9"],
            "--reference: must be a positive, finite number",
        ),
        (["budget", "--base", "x", "--reference", "8", "9"], "--base: must be a positive, finite number"),
        (["budget", "--base", "inf", "--reference", "8", "9"], "--base: must be a positive, finite number"),
        (
            ["budget", "--base", "2100", "--reference", "8", "-1"],
            "seconds: must be a positive, finite number",
        ),
        (["measure", "--runs", "0"], "--runs must be at least 1, got 0"),
    ],
)
def test_bad_options_are_refused_by_name(args, words):
    got = run(*args)
    assert got.returncode == 2 and words in got.stderr and "Traceback" not in got.stderr, got.stderr


def test_a_measurement_prints_its_runs_and_writes_them(tmp_path):
    out = tmp_path / "speed.json"
    got = run("measure", "--runs", "1", "--json", str(out))
    assert got.returncode == 0, got.stderr
    d = json.loads(out.read_text())
    assert len(d["seconds"]) == 1 and d["median"] == d["seconds"][0] > 0
    assert f"| 1 | {d['seconds'][0]:.2f} |" in got.stdout and "median:" in got.stdout
    assert d["command"] == f"python3 scripts/host_speed.py measure --runs 1 --json {out}"
    alone = run("measure", "--runs", "1", "--median-only")
    assert alone.returncode == 0 and float(alone.stdout) > 0
