"""What ``judge-train`` writes as the judge: the card (base, rubric, data, config, training, validation), and
``<output_dir>/judge/`` swapped in whole: ``adapter/`` (or ``merged/``), ``processor/`` and
``judge_card.json``. A sharded model's weights are gathered on every process and written by the main one."""

from __future__ import annotations

import json
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from judge.core.rubric import Rubric
from judge.models.card import (
    CardData,
    CardPairs,
    CardRubric,
    CardTraining,
    CardValidation,
    Distribution,
    JudgeCard,
    Metrics,
    git_commit,
    library_versions,
    write_card,
)
from judge.models.families import of_model
from judge.train.config import RunConfig


def judge_card(
    cfg: RunConfig,
    config_path: Path | None,
    rubric: Rubric,
    data_path: Path,
    baseline: Metrics | None,
    final: Metrics | None,
    trainer,
    train_seconds: float,
    distribution: Distribution,
) -> JudgeCard:
    manifest = json.loads((data_path / "manifest.json").read_text(encoding="utf-8"))
    return JudgeCard(
        judge_card_version=1,
        base_model=cfg.model.path if cfg.model.path != "tiny" else "tiny:seed=0",
        family=family.name if (family := of_model(trainer.model)) is not None else None,
        finetune=cfg.train.finetune,
        quantization=cfg.quantization,
        rubric=CardRubric(name=rubric.name, version=rubric.version, hash=rubric.hash),
        scale=rubric.scale.values,
        target_format=cfg.data.target,
        data=CardData(
            # A run on pairs alone has no annotations: no hash of nothing that two pair sets would share.
            hash=manifest["data_hash"] if manifest["annotation_files"] else None,
            examples=manifest["counts"],
            records=manifest["records"],
            annotation_files=manifest["annotation_files"],
            dataset=str(data_path),
            pairs=_card_pairs(manifest.get("pairs")),
        ),
        config_file=str(config_path) if config_path is not None else None,
        config=cfg.model_dump(mode="json"),
        seed=cfg.train_seed,
        git_commit=git_commit(Path(__file__).resolve().parent),
        libraries=library_versions(),
        training=CardTraining(
            steps=trainer.state.global_step,
            epochs=trainer.state.epoch,
            seconds=round(train_seconds, 1),
            best_metric=cfg.eval.best_metric,
            best_value=trainer.state.best_metric,
            best_checkpoint=trainer.state.best_model_checkpoint,
            distributed=distribution,
            evaluations=getattr(trainer, "eval_history", []),
        ),
        validation=CardValidation(untrained=baseline, final=final),
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )


def save_judge(
    trainer, processor, card: JudgeCard, judge_dir: Path, cfg: RunConfig, merge: bool, dtype
) -> None:
    """Write the judge. Called on every process: a model the accelerator shards is gathered first, a
    collective (FSDP2's full state dict on the main process; ZeRO-3's 16-bit gather, ZeRO-2's replicated
    weights); only the main process writes."""
    acc = trainer.accelerator
    state_dict = None
    if trainer.sharded:
        state_dict = acc.get_state_dict(
            trainer.model_wrapped if trainer.is_deepspeed_enabled else trainer.model
        )
    if acc.is_main_process:
        write_judge(
            acc.unwrap_model(trainer.model),
            processor,
            card,
            judge_dir,
            cfg,
            merge,
            state_dict=state_dict,
            dtype=dtype,
        )
    acc.wait_for_everyone()


def write_judge(
    model,
    processor,
    card: JudgeCard,
    judge_dir: Path,
    cfg: RunConfig,
    merge: bool,
    state_dict: dict | None = None,
    dtype=None,
) -> None:
    """Write adapter/ (or merged/), processor/ and the card beside, then swap the folder in.

    ``state_dict``: the full weights gathered from a sharded ``model``, whose own tensors are shards
    (FSDP2 DTensors, ZeRO-3's empty partitions) and are then never read.
    """
    tmp = judge_dir.with_name(judge_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    is_peft = hasattr(model, "peft_config")
    if is_peft:
        model.save_pretrained(tmp / "adapter", state_dict=state_dict)
    if not is_peft or merge:
        if is_peft:
            # A sharded model cannot merge in place: merge the saved adapter into a fresh copy of the base.
            merged = merged_model(
                model, cfg, tmp / "adapter", reload_dtype=dtype if state_dict is not None else None
            )
            merged.save_pretrained(tmp / "merged", safe_serialization=True)
        else:
            model.save_pretrained(tmp / "merged", safe_serialization=True, state_dict=state_dict)
        processor.save_pretrained(tmp / "merged")
    processor.save_pretrained(tmp / "processor")
    card.outputs = sorted(p.name for p in tmp.iterdir())
    write_card(tmp, card)
    old = judge_dir.with_name(judge_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if judge_dir.exists():
        judge_dir.rename(old)
    tmp.rename(judge_dir)
    shutil.rmtree(old, ignore_errors=True)


def merged_model(model, cfg: RunConfig, adapter_dir: Path, reload_dtype=None):
    """The adapter merged into the base. ``reload_dtype``: the model is sharded; merge into a fresh copy of
    the base in that dtype (the training dtype) instead of in place."""
    if cfg.quantization == "none" and reload_dtype is None:
        return model.merge_and_unload()
    # A quantized base cannot take merged weights, nor a sharded one: reload the base unquantized, on this
    # process alone, and merge there.
    from peft import PeftModel

    from judge.models.loading import load_scorer

    with unpartitioned_loading():
        base, _ = load_scorer(
            cfg.model.path,
            dtype=reload_dtype if reload_dtype is not None else cfg.model.dtype,
            trust_remote_code=cfg.model.trust_remote_code,
        )
        return PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()


@contextmanager
def unpartitioned_loading():
    """Load models whole on this process even while a DeepSpeed ZeRO-3 run is configured: transformers
    would otherwise build them partitioned, a collective that the main process alone never completes."""
    try:
        from transformers.integrations import deepspeed as hf_deepspeed
    except ImportError:  # pragma: no cover - transformers always has it
        yield
        return
    ref = hf_deepspeed._hf_deepspeed_config_weak_ref
    hf_deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = ref


def _card_pairs(entry: dict | None) -> CardPairs | None:
    """The manifest's ``pairs`` entry as the card records it (None without data.pairs)."""
    if not entry:
        return None
    return CardPairs(
        hash=entry["hash"],
        files=list(entry["files"]),
        examples=entry["counts"],
        records=entry["records"],
        ties=entry["ties"],
    )
