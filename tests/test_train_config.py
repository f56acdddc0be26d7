"""judge-train's run config: strict keys, overrides, and failures before any model is loaded."""

from __future__ import annotations

import json
import shutil

import pytest

from judge.cli.train import main as train_main
from judge.core.errors import ConfigError
from judge.data.config import parse_overrides
from judge.train.config import load_run_config, override_run_config


def test_shipped_configs_are_valid():
    path, cfg = load_run_config("rubric6.yaml")
    assert path.name == "rubric6.yaml"
    # The real recipe: an HF-native InternVL base, LoRA on the language model, vision tower and projector frozen, bf16.
    assert cfg.model.path == "OpenGVLab/InternVL3-2B-hf" and cfg.model.dtype == "bfloat16"
    assert (
        cfg.train.finetune == "lora" and cfg.lora.target_modules == "language" and cfg.quantization == "none"
    )
    assert not cfg.lora.train_vision and not cfg.lora.train_projector and cfg.train.gradient_checkpointing
    assert cfg.eval.best_metric == "overall_spearman" and cfg.eval.greater and cfg.rubric == "mmie"
    # The demo recipe: the tiny local model, trained fully.
    path, demo = load_run_config("demo")
    assert path.name == "demo.yaml" and demo.model.path == "tiny" and demo.train.finetune == "full"


def test_the_qwen25vl_recipe_is_rubric6_on_its_base_and_its_bounds_reach_the_processor(tiny, tiny_qwen):
    """rubric6-qwen2.5vl-3b: the same sections and keys as rubric6, validated by the run config's own loader,
    the Qwen2.5-VL-3B hub id (nothing downloaded), LoRA on the language model, pixel bounds that the tiny
    Qwen2.5-VL's processor takes (and InternVL's refuses), a batch of 16 examples per step."""
    import copy

    import yaml

    from judge.models import families
    from judge.rubrics import __file__ as rubrics_init

    path, cfg = load_run_config("rubric6-qwen2.5vl-3b")
    assert path.name == "rubric6-qwen2.5vl-3b.yaml"
    raw = yaml.safe_load(path.read_text())
    base = yaml.safe_load((path.parent / "rubric6.yaml").read_text())
    assert raw.keys() == base.keys() and all(
        raw[k].keys() == base[k].keys() for k in base if isinstance(base[k], dict) and k != "model"
    )
    assert raw["model"].keys() == base["model"].keys() | {"min_pixels", "max_pixels"}
    assert cfg.model.path == "Qwen/Qwen2.5-VL-3B-Instruct" and cfg.model.dtype == "bfloat16"
    assert (
        cfg.train.finetune == "lora" and cfg.lora.target_modules == "language" and cfg.quantization == "none"
    )
    assert not cfg.lora.train_vision and not cfg.lora.train_projector
    assert cfg.model.min_pixels == 256 * 28 * 28 and cfg.model.max_pixels == 1024 * 28 * 28
    assert cfg.train.per_device_train_batch_size * cfg.train.gradient_accumulation_steps == 16
    assert cfg.eval.best_metric == "overall_spearman" and cfg.rubric == "mmie"
    assert str(path).startswith(str(__import__("pathlib").Path(rubrics_init).parent))
    # The bounds as the processor takes them: the size it resizes within.
    processor = copy.deepcopy(tiny_qwen[1])
    families.set_pixel_bounds(processor, cfg.model.min_pixels, cfg.model.max_pixels)
    assert processor.image_processor.size["shortest_edge"] == 200704
    assert processor.image_processor.size["longest_edge"] == 802816
    with pytest.raises(ConfigError, match="no pixel bounds"):
        families.set_pixel_bounds(copy.deepcopy(tiny[1]), 1, 2)
    with pytest.raises(ConfigError, match="over model.max_pixels"):
        families.set_pixel_bounds(processor, 10, 2)


def test_the_qwen3vl_recipe_is_the_qwen25vl_recipe_on_its_base_with_its_patch_size(tiny_qwen3):
    """rubric6-qwen3vl-4b: the keys of rubric6-qwen2.5vl-3b (validated by the run config's loader), the
    Qwen3-VL-4B hub id (nothing downloaded), LoRA on the language model, 256..1,024 image tokens of 32 x 32
    pixels that the tiny Qwen3-VL's processor takes, 16 examples per step."""
    import copy

    import yaml

    from judge.models import families

    path, cfg = load_run_config("rubric6-qwen3vl-4b")
    assert path.name == "rubric6-qwen3vl-4b.yaml"
    raw = yaml.safe_load(path.read_text())
    qwen25 = yaml.safe_load((path.parent / "rubric6-qwen2.5vl-3b.yaml").read_text())
    assert raw.keys() == qwen25.keys() and all(
        raw[k].keys() == qwen25[k].keys() for k in qwen25 if isinstance(qwen25[k], dict)
    )
    assert cfg.model.path == "Qwen/Qwen3-VL-4B-Instruct" and cfg.model.dtype == "bfloat16"
    assert (
        cfg.train.finetune == "lora" and cfg.lora.target_modules == "language" and cfg.quantization == "none"
    )
    assert not cfg.lora.train_vision and not cfg.lora.train_projector
    assert cfg.model.min_pixels == 256 * 32 * 32 and cfg.model.max_pixels == 1024 * 32 * 32
    assert cfg.train.per_device_train_batch_size * cfg.train.gradient_accumulation_steps == 16
    assert cfg.output_dir.endswith("rubric6-qwen3vl-4b") and cfg.rubric == "mmie"
    processor = copy.deepcopy(tiny_qwen3[1])
    families.set_pixel_bounds(processor, cfg.model.min_pixels, cfg.model.max_pixels)
    assert processor.image_processor.size["shortest_edge"] == 262144
    assert processor.image_processor.size["longest_edge"] == 1048576


def test_override_and_unknown_key_errors():
    _, cfg = load_run_config("rubric6.yaml", {"train.learning_rate": 1e-4, "lora.r": 4})
    assert cfg.train.learning_rate == 1e-4 and cfg.lora.r == 4
    with pytest.raises(ConfigError, match=r"train\.learnig_rate: unknown key; allowed here: .*learning_rate"):
        load_run_config("rubric6.yaml", {"train.learnig_rate": 1e-4})
    with pytest.raises(ConfigError, match=r"quantization.*got '3bit'"):
        load_run_config("rubric6.yaml", {"quantization": "3bit"})
    with pytest.raises(ConfigError, match=r"best_metric.*must end in"):
        load_run_config("rubric6.yaml", {"eval.best_metric": "overall_accuracy"})
    with pytest.raises(ConfigError, match="quantization needs train.finetune: lora"):
        load_run_config("rubric6.yaml", {"quantization": "4bit", "train.finetune": "full"})
    with pytest.raises(ConfigError, match="unknown section"):
        load_run_config("rubric6.yaml", {"trian.x": 1})
    with pytest.raises(ConfigError, match=r"override lora\.r\.x: lora\.r is a value \(16\), not a section"):
        load_run_config("rubric6.yaml", {"lora.r.x": 1})


def test_overrides_of_a_config_object_are_validated_again():
    _, cfg = load_run_config("demo")
    changed = override_run_config(cfg, {"train.max_steps": 7, "output_dir": "runs/x"})
    assert changed.train.max_steps == 7 and changed.out.name == "x"
    assert cfg.train.max_steps != 7  # the given config is left as it was
    with pytest.raises(ConfigError, match=r"train\.max_steps: Input should be greater than or equal to -1"):
        override_run_config(cfg, {"train.max_steps": -5})
    with pytest.raises(ConfigError, match=r"unknown section.*'trian'"):
        override_run_config(cfg, {"trian.max_steps": 1})


def test_the_earlier_name_of_the_token_budget_still_works():
    # eval.max_batch_tokens is what configs (and judge cards) said before it became eval.batch_tokens.
    _, cfg = load_run_config("demo", {"eval.max_batch_tokens": 128})
    assert cfg.eval.batch_tokens == 128
    assert override_run_config(cfg, {"eval.max_batch_tokens": 256}).eval.batch_tokens == 256


def test_set_strings_become_typed_overrides():
    got = parse_overrides(["train.max_steps=3", "data.annotations=[a.jsonl, b.jsonl]", "eval.at_start=false"])
    assert got == {"train.max_steps": 3, "data.annotations": ["a.jsonl", "b.jsonl"], "eval.at_start": False}
    with pytest.raises(ConfigError, match="must look like section.key=value"):
        parse_overrides(["train.max_steps"])


def _cli(capsys, *args) -> tuple[int, str]:
    code = train_main(["--config", "demo", *args])
    return code, capsys.readouterr().err


def test_missing_model_folder_fails_first(tmp_path, capsys):
    code, err = _cli(capsys, "--set", f"model.path={tmp_path / 'nope'}", "--set", f"output_dir={tmp_path}")
    assert code == 2 and "does not exist" in err
    assert not (tmp_path / "data").exists()  # nothing was built


def test_prebuilt_data_with_another_rubric_hash_is_refused(tmp_path, capsys, small_demo):
    from judge.cli.data import data_main

    out = tmp_path / "data"
    assert (
        data_main(
            [
                "build",
                "--config",
                "demo",
                "--set",
                f"data.annotations=[{small_demo}]",
                "--no-tokens",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["rubric"]["hash"] = "0" * 64
    (out / "manifest.json").write_text(json.dumps(manifest))
    code, err = _cli(capsys, "--data", str(out), "--set", f"output_dir={tmp_path}")
    assert code == 2 and "rubric" in err and "hash 000000000000" in err and "rebuild" in err


def test_empty_validation_split_fails_before_the_model(tmp_path, capsys, small_demo):
    code, err = _cli(
        capsys,
        "--set",
        f"data.annotations=[{small_demo}]",
        "--set",
        "data.split.validation=0",
        "--set",
        f"output_dir={tmp_path}",
    )
    assert code == 2 and "validation split" in err and "empty" in err
    assert not (tmp_path / "checkpoints").exists()


def test_resume_without_checkpoint_is_an_error(tmp_path, capsys, small_demo):
    shutil.rmtree(tmp_path / "checkpoints", ignore_errors=True)
    code, err = _cli(
        capsys, "--resume", "--set", f"data.annotations=[{small_demo}]", "--set", f"output_dir={tmp_path}"
    )
    assert code == 2 and "no checkpoint" in err


@pytest.mark.parametrize(
    "metric", ["wit_pairs_accuracy", "text_quality_pairs_accuracy", "pairs_accuracy_mae"]
)
def test_best_metric_the_run_never_reports_is_refused_first(tmp_path, capsys, metric):
    # An unknown criterion, one data.criteria (overall) does not select, a pairs metric with a correlation
    # suffix: refused before the data build, naming the option and what is
    # available (Trainer would fail with a KeyError at the first evaluation).
    code, err = _cli(
        capsys,
        "--config",
        "demo-pairs",
        "--set",
        f"eval.best_metric={metric}",
        "--set",
        f"output_dir={tmp_path}",
    )
    assert code == 2 and "eval.best_metric" in err and "available: pairs_accuracy" in err, err
    assert "Traceback" not in err and not (tmp_path / "data").exists()


def test_available_metrics_follow_criteria_and_direction():
    from judge.core.rubric import load_rubric
    from judge.train.config import available_metrics, check_best_metric

    _, cfg = load_run_config("demo-pairs", {"data.criteria": "all"})
    avail = available_metrics(cfg, load_rubric(cfg.rubric))
    assert "text_quality_pairs_accuracy" in avail and "overall_pairs_accuracy" in avail
    assert not any(m.endswith(("_mae", "_spearman")) for m in avail)  # pairs only: no correlations
    _, cfg = load_run_config("demo", {"eval.best_metric": "SA/overall_mae"})
    check_best_metric(cfg, load_rubric(cfg.rubric))
    assert not cfg.eval.greater  # lower is better for an error
    _, cfg = load_run_config("demo-pairs", {"eval.best_metric": "overall_pairs_accuracy"})
    assert cfg.eval.greater


@pytest.mark.parametrize("option", ["beta", "tie_strength", "weight"])
@pytest.mark.parametrize("value", ["inf", "1e400", "-inf"])
def test_pair_loss_options_must_be_finite(option, value):
    with pytest.raises(ConfigError, match=rf"train\.pairs\.{option}: Input should be a finite number"):
        load_run_config("demo-pairs", parse_overrides([f"train.pairs.{option}={value}"]))
