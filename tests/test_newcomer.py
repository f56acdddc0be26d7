"""What a newcomer meets first: help that fits a terminal and names what it should, errors with one prefix
that say what was expected without dumping the input, no noise from the libraries, the README's synopses,
the shipped benchmark samples. (Every ``--help`` example runs: test_help_examples.py.)"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from judge.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
MODULES = {
    "judge-data": "judge.cli",
    "judge-train": "judge.cli.train",
    "judge-score": "judge.cli.score",
    "judge-report": "judge.cli.report",
    "judge-audit": "judge.cli.audit",
    "judge-calibrate": "judge.cli.calibrate",
    "judge-bench": "judge.cli.bench",
    "judge-serve": "judge.cli.serve",
    "judge-view": "judge.cli.view",
}


@functools.cache  # one process per help text and width (the 100-column and the config-name tests share one)
def _help(module: str, *args: str, columns: int = 250) -> str:
    out = subprocess.run(
        [sys.executable, "-m", module, *args, "--help"], capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": str(columns)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("command", list(MODULES))
def test_help_fits_in_100_columns_even_on_a_wide_terminal(command):
    texts = [_help(MODULES[command])]
    if command == "judge-data":
        texts += [_help("judge.cli", sub) for sub in ("validate", "build", "sample", "demo", "tiny-model")]
    for text in texts:
        wide = [line for line in text.splitlines() if len(line) > 100]
        assert not wide, wide


def test_a_flag_is_never_cut_in_two_by_the_help():
    text = _help("judge.cli.serve", columns=80)
    assert "--allow-unauthenticated)" in text.replace("\n", " ")  # the --host help names the flag, whole
    assert "allow_unauthenticated" not in text
    assert not re.search(r"--[a-z]+-\n", text)


def test_train_help_names_the_shipped_configs_and_the_keys_set_takes():
    from judge.train.config import RunConfig, TrainConfig

    text = " ".join(_help("judge.cli.train").split())
    shipped = "demo, demo-pairs, rubric6, rubric6-llava-ov-0.5b, rubric6-qwen2.5vl-3b, rubric6-qwen3vl-4b"
    assert f"Shipped run configs (--config NAME, from any folder): {shipped}." in text
    for name in ("rubric6-qwen2.5vl-3b", "rubric6-qwen3vl-4b"):  # each described, not only listed
        assert f"{name} and" in text or f"and {name}:" in text, name
    assert "rubric6-llava-ov-0.5b on llava-hf/llava-onevision-qwen2-0.5b-ov-hf" in text
    assert "demo-pairs: the same model on the demo set's preference pairs" in text
    for key in TrainConfig.model_fields:
        assert key in text, key
    for section in ("data", "model", "lora", "train", "eval", "logging"):
        assert f"{section}.{{" in text
    assert all(k in text for k in RunConfig.model_fields)


@pytest.mark.parametrize(
    "module, argv", [("judge.cli.score", ["x.jsonl", "--limit", "0"]), ("judge.cli.view", [])]
)
def test_a_usage_error_has_the_one_error_prefix(module, argv):
    out = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, (
        out.stderr
    )
    assert "(see judge-" in out.stderr and "--help)" in out.stderr


def test_a_run_config_given_as_a_rubric_says_what_a_rubric_is_without_dumping_it():
    from judge.core.rubric import load_rubric

    with pytest.raises(ConfigError) as e:
        load_rubric("demo")
    msg = str(e.value)
    assert "is a run config (for judge-train --config), not a rubric" in msg and "`rubric` mmie" in msg
    assert len(msg) < 400 and "annotations/demo" not in msg
    out = subprocess.run(
        [sys.executable, "-m", "judge.cli.serve", "--judge", "tiny", "--rubric", "demo"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr.startswith("error: ") and "pass --rubric mmie" in out.stderr
    assert len(out.stderr) < 400, out.stderr


def test_a_missing_key_or_a_bad_section_is_named_not_dumped(tmp_path):
    from judge.core.rubric import load_rubric

    path = tmp_path / "r.yaml"
    path.write_text("name: r\nfamilies:\n  SA: {description: 1, criteria: [{id: a, levels: [1, 2, 3]}]}\n")
    with pytest.raises(ConfigError) as e:
        load_rubric(path)
    msg = str(e.value)
    assert "families.SA.name: required, missing" in msg and "{" not in msg.split("\n", 1)[1], msg


def test_training_arguments_raise_no_future_warning(tmp_path):
    """transformers 5.23+ warns on every run that `gradient_checkpointing` is deprecated (TRL sets it by
    default): judge sets the new name, so a training run prints no such warning, with checkpointing on or off."""
    import torch

    from judge.train.config import load_run_config
    from judge.train.trainer import _sft_config

    for on in (False, True):
        _, cfg = load_run_config("demo", {"train.gradient_checkpointing": on, "output_dir": str(tmp_path)})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            args = _sft_config(cfg, torch.float32, tmp_path / "ck", [])
        assert not [w for w in caught if "checkpointing" in str(w.message)], [str(w.message) for w in caught]
        assert args.activation_checkpointing is on and args.gradient_checkpointing is on


@pytest.mark.slow
def test_no_progress_silences_transformers_loading_bar(small_demo, tmp_path):
    from judge.models import save_tiny_scorer

    judge_dir = save_tiny_scorer(tmp_path / "tiny")
    base = [sys.executable, "-m", "judge.cli.score", str(small_demo), "--judge", str(judge_dir), "--rubric",
            "mmie", "--limit", "1", "--overwrite"]  # fmt: skip
    quiet = subprocess.run(
        [*base, "--out", str(tmp_path / "a"), "--no-progress"], capture_output=True, text=True
    )
    loud = subprocess.run([*base, "--out", str(tmp_path / "b")], capture_output=True, text=True)
    assert quiet.returncode == loud.returncode == 0, quiet.stderr
    assert "Loading weights" in loud.stderr  # what --no-progress must silence is there without it
    assert "Loading weights" not in quiet.stderr + quiet.stdout and "%|" not in quiet.stderr


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


#: where each command's synopsis is: judge-view's in the README, judge-score's on its own page (docs/scoring.md)
SYNOPSES = {"judge-score": "docs/scoring.md", "judge-view": "README.md"}


@pytest.mark.parametrize("command", ["judge-score", "judge-view"])
def test_the_readme_synopsis_shows_every_option(command):
    text = (ROOT / SYNOPSES[command]).read_text(encoding="utf-8")
    blocks = [
        b
        for b in re.findall(r"```text\n(.*?)```", text, re.S)
        if b.startswith(f"{command} FILE") or b.startswith(f"{command} RUN")
    ]
    assert blocks, f"{SYNOPSES[command]} has no synopsis of {command}"
    parser = importlib.import_module(MODULES[command]).build_parser()
    flags = [max(a.option_strings, key=len) for a in parser._actions if a.option_strings and a.dest != "help"]
    missing = [f for f in flags if not re.search(re.escape(f) + r"(?![\w-])", blocks[0])]
    assert not missing, missing


def test_the_chat_example_says_it_needs_openai():
    text = _readme()
    before = text[: text.index("<!-- chat-example")]
    assert "`openai`" in before[-400:] and "pip install openai" in before[-400:]


def test_the_shipped_benchmark_samples_are_the_generation(tmp_path):
    """examples/benchmarks is what judge.testing.bench_samples writes (the parquet compared as a table: its
    bytes carry the pyarrow version)."""
    import pyarrow.parquet as pq

    from judge.testing.bench_samples import write_samples

    fresh = write_samples(tmp_path / "b")
    shipped = ROOT / "examples" / "benchmarks"
    names = sorted(str(p.relative_to(fresh)) for p in fresh.rglob("*") if p.is_file())
    assert names == sorted(
        str(p.relative_to(shipped)) for p in shipped.rglob("*") if p.is_file() and p.name != "README.md"
    )
    for name in names:
        if name.endswith(".parquet"):
            assert pq.read_table(fresh / name).to_pylist() == pq.read_table(shipped / name).to_pylist()
        else:
            assert (fresh / name).read_bytes() == (shipped / name).read_bytes(), name
    rows = json.loads((shipped / "multimodal-rewardbench" / "all_data.json").read_text())
    assert {r["Category"] for r in rows} >= {"knowledge", "reasoning", "safety", "vqa"}
