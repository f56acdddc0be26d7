"""Sharded training on two CPU processes (gloo): FSDP2 and DeepSpeed ZeRO-2 / ZeRO-3 with the shipped configs.

Each run launches ``configs/accelerate/{fsdp,deepspeed_zero2,deepspeed_zero3}.yaml`` as documented, with
two processes and no mixed precision (what a CPU can run), and checks that the parameters really were
sharded, that validation gave every process the same forward calls, that the judge written holds the
weights training produced (reloaded in this one process, it scores the validation split as the card's
final metrics say), and that the best checkpoint and ``--resume`` load into the sharded model.
The DeepSpeed tests need ``deepspeed`` (in the dev extra).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import forkserver
import pytest

from judge.train.validation import schedule_batches

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")  # scores compared across processes: same round-off

# Metrics pooled over the whole split: those a 1e-8 round-off difference cannot move by 1e-4 (a
# per-criterion Pearson over three responses can).
POOLED = (
    "overall_mae",
    "overall_pearson",
    "overall_spearman",
    "all_mae",
    "all_pearson",
    "all_spearman",
    "all_kendall",
)


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}


def _run(launch: tuple[list[str], dict[str, str]], timeout: float) -> str:
    """Run a launcher (:func:`_launch`); a run that outlasts ``timeout`` (processes waiting on a collective
    some process never joins) is killed with all its processes and fails the test."""
    import psutil

    cmd, env = launch
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # The workers run in sessions of their own: end the launcher's whole tree, by process id (a forked
        # launcher's workers are under the command, not under the client that stands for it).
        launcher = psutil.Process(forkserver.real_pid(proc.pid))
        for p in [*launcher.children(recursive=True), launcher, psutil.Process(proc.pid)]:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        out, _ = proc.communicate()
        pytest.fail(f"no result after {timeout} s: processes waiting on each other?\n{out[-3000:]}")
    assert proc.returncode == 0, out[-4000:]
    return out


def _launch(config: str, port: int, *rest: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of ``accelerate launch`` with ``config`` on two processes, then ``rest``: the
    launcher and its workers forked by the test run's fork server (tests/forkserver.py)."""
    args = ["--config_file", f"configs/accelerate/{config}", "--num_processes", "2", "--mixed_precision", "no",
            "--main_process_port", str(port), *rest]  # fmt: skip
    return forkserver.launcher(_env(), *args, cwd=REPO, deepspeed=config.startswith("deepspeed"))


def _train(config: str, port: int, small_demo, out: Path, *extra: str, flags: tuple[str, ...] = ()) -> str:
    cmd = ["-m", "judge.cli.train", "--config", "demo", *flags]
    for o in (
        f"data.annotations=[{small_demo}]",
        f"output_dir={out}",
        "train.per_device_train_batch_size=4",
        "train.logging_steps=1",
        "train.warmup_steps=0",
        # One request per forward batch: the processes' shares of the 9 validation responses
        # make 5 and 4 batches, which only the validation's schedule keeps in step.
        "eval.batch_tokens=64",
        *extra,
    ):
        cmd += ["--set", o]
    log = _run(_launch(config, port, *cmd), timeout=240)
    assert log.count("judge written to") == 1
    return log


def _card(out: Path) -> dict:
    return json.loads((out / "judge" / "judge_card.json").read_text())


def _validation_set(out: Path, rubric):
    import datasets

    from judge.train.validation import ValidationSet

    return ValidationSet(datasets.load_from_disk(str(out / "data" / "dataset"))["validation"], rubric)


def _metrics(model, processor, out: Path, rubric) -> dict:
    from judge.train.validation import validation_metrics

    return validation_metrics(_validation_set(out, rubric).score(model, processor, batch_tokens=64))


def _assert_same(got: dict, want: dict, keys=POOLED, tol: float = 1e-4) -> None:
    for k in keys:
        assert got[k] == pytest.approx(want[k], abs=tol), k


def _assert_reloads_as_trained(out: Path, rubric) -> None:
    """The judge folder, loaded in this single process, scores the validation split as training reported."""
    from judge.models.card import load_judge

    model, processor, card = load_judge(out / "judge")
    assert card.validation is not None and card.validation.final is not None
    _assert_same(_metrics(model, processor, out, rubric), card.validation.final)


def _losses(state_file: Path) -> list[float]:
    return [e["loss"] for e in json.loads(state_file.read_text())["log_history"] if "loss" in e]


# ----------------------------------------------------------------------------- validation schedule
def test_schedule_gives_every_process_the_same_calls():
    batches = [[0, 1], [2], [3, 4, 5], [6], [7], [8, 9]]
    has_pixels = [True, True, False, True, True, False, True, False, False, True]
    for world in (1, 2, 3, 4, 7):
        plan = schedule_batches(batches, has_pixels, world)
        assert len({len(steps) for steps in plan}) == 1  # as many forward batches on every process
        for position in zip(*plan, strict=True):  # at each step, all run the vision tower or none does
            assert len({any(has_pixels[i] for i in batch) for batch, _ in position}) == 1
        real = sorted(tuple(b) for steps in plan for b, is_real in steps if is_real)
        assert real == sorted(tuple(b) for b in batches)  # each batch scored once, nothing lost
    assert schedule_batches([], [], 2) == [[], []]
    with pytest.raises(ValueError, match="world"):
        schedule_batches(batches, has_pixels, 0)


def test_planned_batches_are_the_scorers_batches(tiny, rubric, small_demo, tmp_path):
    """Distributed validation plans with plan_batches; it must form exactly the batches a single process
    forms, or the scores (and the metrics) would differ from a single-process run."""
    from judge.models.readout import ExpectedScorer, plan_batches
    from judge.train.config import load_run_config
    from judge.train.trainer import prepare_data

    model, processor = tiny
    config_path, cfg = load_run_config(
        "demo", {"data.annotations": [str(small_demo)], "output_dir": str(tmp_path)}
    )
    prepare_data(cfg, config_path, None)
    vset = _validation_set(tmp_path, rubric)
    scorer = ExpectedScorer(model, processor, rubric.scale.values)
    for share_prefix in (True, False):
        for budget in (64, 1500, 16384):
            formed = [
                [req.key for req, _ in batch]
                for batch in scorer.score(vset.requests, share_prefix=share_prefix, batch_tokens=budget)
            ]
            shapes = [scorer.encode(r).shape for r in vset.requests]
            planned = plan_batches(shapes, share_prefix=share_prefix, batch_tokens=budget)
            assert [[vset.requests[i].key for i in b] for b in planned] == formed


_SHARDED_VALIDATION = """
import json, sys
import datasets, torch
from torch.distributed.tensor import DTensor
from judge.train.launch import process_state
process_state()
from accelerate import Accelerator
from judge.core.rubric import load_rubric
from judge.models import build_tiny_scorer
from judge.train.validation import ValidationSet, run_validation, validation_metrics

acc = Accelerator()
rows = list(datasets.load_from_disk(sys.argv[1])["validation"])
# Three responses once more without their images: batches that do not run the vision tower.
for rid in sorted({r["record_id"] for r in rows})[:3]:
    rows += [{**r, "record_id": rid + "-text", "images": [],
              "prompt": [{**m, "content": [p for p in m["content"] if p["type"] != "image"]} for m in r["prompt"]]}
             for r in rows if r["record_id"] == rid]
vset = ValidationSet(rows, load_rubric("mmie"))
model, processor = build_tiny_scorer(seed=0)
model, _ = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.0))
assert acc.distributed_type == "FSDP" and all(isinstance(p, DTensor) for p in model.parameters()), "not sharded"
out = {}
for share in (True, False):
    sharded, _ = run_validation(vset, model, processor, share_prefix=share, batch_tokens=64, grad_mode="no_grad")
    if acc.is_main_process:
        reference, _ = build_tiny_scorer(seed=0)
        single = validation_metrics(vset.score(reference, processor, share_prefix=share, batch_tokens=64))
        out[str(share)] = {"sharded": sharded, "single": single, "n": len(vset)}
if acc.is_main_process:
    json.dump(out, open(sys.argv[2], "w"))
"""


@pytest.mark.slow
def test_sharded_validation_keeps_processes_in_step(small_demo, tmp_path):
    """Validation of an FSDP-sharded model: each forward is a collective. With the requests shared out,
    one process has a batch more, and with text-only responses mixed in, processes would run the vision
    tower at different calls; without the schedule this fails on a collective mismatch or hangs."""
    from judge.train.config import load_run_config
    from judge.train.trainer import prepare_data

    config_path, cfg = load_run_config(
        # Every criterion (demo.yaml trains the overall score only): 63 + 21 validation scores to share out.
        "demo",
        {"data.annotations": [str(small_demo)], "data.criteria": "all", "output_dir": str(tmp_path)},
    )
    data = prepare_data(cfg, config_path, None)
    script = tmp_path / "sharded_validation.py"
    script.write_text(_SHARDED_VALIDATION)
    result = tmp_path / "metrics.json"
    _run(_launch("fsdp.yaml", 29523, str(script), str(data / "dataset"), str(result)), timeout=180)
    for share, r in json.loads(result.read_text()).items():
        assert r["sharded"]["all_n"] == r["n"] == 63 + 21, share  # every score once, the text-only ones too
        # The same batches as one process: the same scores, every metric.
        _assert_same(
            r["sharded"], r["single"], keys=[k for k, v in r["single"].items() if v is not None], tol=1e-6
        )


# ----------------------------------------------------------------------------- FSDP2
@pytest.mark.slow
def test_fsdp_full_finetune_best_checkpoint_save_and_resume(small_demo, tmp_path, rubric):
    out = tmp_path / "fsdp"
    extra = (
        "train.finetune=full",
        "train.max_steps=6",
        "train.learning_rate=4e-3",  # the best validation is not the last step: a checkpoint is loaded back
        "eval.strategy=steps",
        "eval.steps=2",
        "eval.best_metric=overall_mae",
    )
    log = _train("fsdp.yaml", 29521, small_demo, out, *extra)
    assert "world size 2, FSDP2" in log
    card = _card(out)
    # Read off the live model at the end of training: the parameters were FSDP2 shards (DTensors).
    assert card["training"]["distributed"] == {
        "type": "fsdp",
        "processes": 2,
        "device": "cpu",
        "fsdp_version": 2,
        "parameters_sharded": True,
    }
    evals = {e["step"]: e for e in card["training"]["evaluations"]}
    assert sorted(evals) == [2, 4, 6]
    best = min(evals, key=lambda s: evals[s]["overall_mae"])
    assert best != 6  # so the best checkpoint had to be loaded back into the sharded model
    assert card["training"]["best_checkpoint"].endswith(f"checkpoint-{best}")
    final = card["validation"]["final"]
    _assert_same(final, evals[best], tol=1e-6)  # the best checkpoint's weights, not the last step's
    assert card["validation"]["untrained"]["overall_n"] == final["overall_n"]
    _assert_reloads_as_trained(out, rubric)

    # --resume from the best checkpoint (weights and optimizer into the shards; with checkpoint-6 gone it
    # is the newest left, save_total_limit keeping the best and the last) ends where the run ended.
    ckpt = out / "checkpoints"
    ref_losses = _losses(ckpt / "checkpoint-6" / "trainer_state.json")
    shutil.rmtree(ckpt / "checkpoint-6")
    shutil.rmtree(out / "judge")
    _train("fsdp.yaml", 29521, small_demo, out, *extra, flags=("--resume",))
    assert _losses(ckpt / "checkpoint-6" / "trainer_state.json") == pytest.approx(ref_losses, rel=1e-5)
    resumed = _card(out)
    assert [e["step"] for e in resumed["training"]["evaluations"]] == [s for s in (2, 4, 6) if s > best]
    _assert_same(resumed["training"]["evaluations"][-1], evals[6], tol=1e-6)
    _assert_same(resumed["validation"]["final"], final, tol=1e-6)
    _assert_reloads_as_trained(out, rubric)


@pytest.mark.slow
def test_fsdp_lora_from_a_checkpoint_folder(small_demo, tmp_path, rubric):
    """LoRA under FSDP2 on a base read from a folder (as a real checkpoint is), adapter and merged outputs;
    fsdp.yaml's memory-efficient loading hands the main process's weights to the other when it shards."""
    from judge.models.loading import load_scorer, save_tiny_scorer

    base = save_tiny_scorer(tmp_path / "base")
    out = tmp_path / "lora"
    _train(
        "fsdp.yaml",
        29522,
        small_demo,
        out,
        f"model.path={base}",
        "train.finetune=lora",
        "train.max_steps=4",
        "train.learning_rate=1e-3",
        "eval.strategy=steps",
        "eval.steps=2",
        flags=("--merge",),
    )
    card = _card(out)
    assert card["training"]["distributed"]["parameters_sharded"] is True
    assert sorted(p.name for p in (out / "judge").iterdir()) == [
        "adapter",
        "judge_card.json",
        "merged",
        "processor",
    ]
    _assert_reloads_as_trained(out, rubric)  # merged/
    adapted, processor = load_scorer(str(base), adapter=str(out / "judge" / "adapter"))
    _assert_same(_metrics(adapted, processor, out, rubric), card["validation"]["final"])
    # The untrained judge was scored on the sharded model (not the other process's unloaded copy).
    untrained, _ = load_scorer(str(base))
    _assert_same(_metrics(untrained, processor, out, rubric), card["validation"]["untrained"])


# ----------------------------------------------------------------------------- DeepSpeed
@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "finetune", "port"),
    [
        ("deepspeed_zero2.yaml", "full", 29524),
        ("deepspeed_zero3.yaml", "full", 29525),
        ("deepspeed_zero3.yaml", "lora", 29526),
    ],
)
def test_deepspeed(config, finetune, port, small_demo, tmp_path, rubric):
    out = tmp_path / "ds"
    if finetune == "full":
        extra = (
            "train.finetune=full",
            "train.max_steps=6",
            "train.learning_rate=4e-3",  # the best validation is not the last step: a checkpoint is loaded back
            "eval.best_metric=overall_mae",
        )
    else:
        extra = ("train.finetune=lora", "train.max_steps=4", "train.learning_rate=1e-3")
    stage = 3 if "zero3" in config else 2
    log = _train(
        config,
        port,
        small_demo,
        out,
        *extra,
        "eval.strategy=steps",
        "eval.steps=2",
        flags=("--merge",) if finetune == "lora" else (),
    )
    assert f"world size 2, DeepSpeed ZeRO-{stage}" in log
    card = _card(out)
    assert card["training"]["distributed"] == {
        "type": "deepspeed",
        "processes": 2,
        "device": "cpu",
        "zero_stage": stage,
        "parameters_sharded": stage == 3,
    }
    evals = {e["step"]: e for e in card["training"]["evaluations"]}
    best = int(card["training"]["best_checkpoint"].rsplit("-", 1)[1])
    if finetune == "full":
        assert best == min(evals, key=lambda s: evals[s]["overall_mae"]) != 6  # loaded back from a checkpoint
    _assert_same(card["validation"]["final"], evals[best], tol=1e-6)
    _assert_reloads_as_trained(out, rubric)
    if finetune == "lora":
        from judge.models.loading import load_scorer

        adapted, processor = load_scorer("tiny", adapter=str(out / "judge" / "adapter"))
        _assert_same(_metrics(adapted, processor, out, rubric), card["validation"]["final"])


# ----------------------------------------------------------------------------- what judge-train refuses
def test_quantization_under_sharding_fails_before_loading(small_demo, tmp_path, monkeypatch):
    from judge.core.errors import ConfigError
    from judge.train import train_judge

    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # as accelerate launch sets it for fsdp.yaml
    with pytest.raises(ConfigError, match="quantization '4bit'.*fsdp.*ddp.yaml"):
        train_judge(
            "demo",
            overrides={
                "data.annotations": [str(small_demo)],
                "output_dir": str(tmp_path),
                "quantization": "4bit",
                "train.finetune": "lora",
            },
        )
    assert not (tmp_path / "data").exists()  # refused before any work


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "option", "message", "port"),
    [
        (
            "fsdp.yaml",
            ["--fsdp_state_dict_type", "SHARDED_STATE_DICT"],
            "fsdp_config.fsdp_state_dict_type",
            29527,
        ),
        pytest.param(
            "deepspeed_zero3.yaml",
            ["--zero3_save_16bit_model", "false"],
            "deepspeed_config.zero3_save_16bit_model must be true",
            29528,
        ),
    ],
)
def test_unsupported_sharded_setups_fail_before_training(config, option, message, port, small_demo, tmp_path):
    args = [*option, "-m", "judge.cli.train", "--config", "demo"]
    for o in (f"data.annotations=[{small_demo}]", f"output_dir={tmp_path}", "train.max_steps=2"):
        args += ["--set", o]
    cmd, env = _launch(config, port, *args)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode != 0
    assert message in proc.stderr + proc.stdout
    assert not list(tmp_path.glob("checkpoints/checkpoint-*")) and not (tmp_path / "judge").exists()


def test_mixed_image_and_text_only_training_data_is_refused_when_it_would_hang():
    import datasets

    from judge.core.errors import ConfigError
    from judge.train.launch import check_images_everywhere

    def split(*n_images: int):
        return datasets.Dataset.from_dict(
            {"images": [[{"bytes": b"", "path": None}] * n for n in n_images]},
            features=datasets.Features({"images": datasets.List(datasets.Image())}),
        )

    check_images_everywhere(split(1, 2, 3), "FSDP")  # every example runs the vision tower
    check_images_everywhere(split(0, 0), "FSDP")  # none does
    with pytest.raises(ConfigError, match="1 of 3 training examples have no image"):
        check_images_everywhere(split(2, 0, 1), "FSDP")
