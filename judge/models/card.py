"""The judge card (``judge_card.json``) and loading a judge checkpoint folder.

A judge folder, as ``judge-train`` writes it::

    judge/
      judge_card.json   what the judge is: base, rubric name and hash, data hash, config, metrics
      adapter/          a plain PEFT adapter (LoRA runs)      -> PeftModel.from_pretrained(base, adapter)
      merged/           full weights + processor (full runs, or LoRA with merging asked for)
      processor/        the processor the judge was trained with
      calibration.json  (after judge-calibrate) calibrated scores and intervals, named in the card

:func:`load_judge` loads it for scoring: ``merged/`` when present, else the base plus
``adapter/``.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judge.core.atomic import write_json
from judge.core.errors import ConfigError, invalid
from judge.core.io import hash_file
from judge.core.template import TargetFormat
from judge.models.families import by_tiny_name

if TYPE_CHECKING:
    from judge.models.calibration import Calibration
    from judge.models.selective import Selective

CARD_NAME = "judge_card.json"
#: ``quantization`` argument of :func:`load_judge` meaning "as the card says" (how the judge was trained).
FROM_CARD = "card"

#: Validation metrics by name (``overall_spearman``, ``all_mae``, ``SA/overall_n``, ...); None: undefined.
#: ``int`` is listed so that counts (``*_n``) stay whole numbers (a ``float`` value would write 9 as 9.0).
Metrics = dict[str, int | float | None]


class _CardPart(BaseModel):
    # Keys this version does not know (an older or newer judge-train wrote them) are kept, not refused.
    model_config = ConfigDict(extra="allow")


class CardRubric(_CardPart):
    """The rubric the judge was trained on; its hash is what scoring checks the rubric against."""

    name: str
    version: str | None = None
    hash: str = Field(min_length=1)


class CardPairs(_CardPart):
    """The preference pairs a judge was trained on (the manifest's ``pairs`` entry)."""

    hash: str  #: SHA-256 over the pairs (judge.data.pair_examples.pairs_hash)
    files: list[str]
    examples: dict[str, int]  #: pair examples (pair, criterion) per split
    records: dict[str, int]  #: pairs per split
    ties: dict[str, int]  #: tie examples per split


class CardData(_CardPart):
    """The SFT dataset the judge was trained on (from its ``manifest.json``)."""

    hash: str | None  #: the annotations' hash; None for a run on pairs alone (no annotations to hash)
    examples: dict[str, int]  #: examples per split
    records: dict[str, int]  #: annotation records per split
    annotation_files: list[str]
    dataset: str  #: the dataset folder
    pairs: CardPairs | None = None  #: with data.pairs


class Distribution(_CardPart):
    """How the training run was distributed, read off the live model."""

    type: Literal["none", "ddp", "fsdp", "deepspeed"]
    processes: int
    device: str
    fsdp_version: int | None = None  #: FSDP runs only
    zero_stage: int | None = None  #: DeepSpeed runs only
    parameters_sharded: bool


class CardTraining(_CardPart):
    steps: int
    epochs: float | None
    seconds: float
    best_metric: str
    best_value: float | None
    best_checkpoint: str | None
    distributed: Distribution
    #: one entry per evaluation: ``step``, ``seconds`` and the validation metrics
    evaluations: list[Metrics]


class CardValidation(_CardPart):
    """Validation metrics before training (None: not scored) and of the judge written."""

    untrained: Metrics | None
    final: Metrics | None


class CardCalibration(_CardPart):
    """The calibration in the judge folder (``judge-calibrate``): scoring applies it when the file's
    fingerprint is this one."""

    file: str  #: ``calibration.json``, beside the card
    fingerprint: str  #: SHA-256 of the calibration (:meth:`judge.models.calibration.Calibration.fingerprint`)
    method: str
    level: float
    data_fingerprint: str  #: SHA-256 of the labelled items it was fitted on
    human_files: list[str]
    n_items: int
    created: str | None = None


class CardSelective(_CardPart):
    """The selective-evaluation thresholds in the judge folder (``judge-calibrate --selective``): scoring
    marks each score trusted or escalated when the file's fingerprint is this one and its calibration the
    card's."""

    file: str  #: ``selective.json``, beside the card
    fingerprint: str  #: SHA-256 of the thresholds (:meth:`judge.models.selective.Selective.fingerprint`)
    calibration_fingerprint: str  #: the calibration whose calibrated view they threshold
    agreement: float
    delta: float
    created: str | None = None


class JudgeCard(_CardPart):
    """``judge_card.json``: what a judge is and how it was made.

    Scoring needs ``base_model``, ``rubric`` (its hash), ``target_format`` and ``quantization``; the
    rest records the training run (``judge-train`` writes every field). Fields a card leaves out stay
    out when it is written again (:func:`write_card` writes the fields that were set).
    """

    judge_card_version: int = 1
    base_model: str  #: hub id, folder or ``tiny:seed=N`` the adapter (or the full training) started from
    #: the base's family (:mod:`judge.models.families`: ``internvl``, ``qwen2.5-vl``); None on older cards
    family: str | None = None
    finetune: Literal["lora", "full"] | None = None
    quantization: Literal["none", "4bit", "8bit"] | None = None
    rubric: CardRubric
    scale: list[int] | None = None
    target_format: TargetFormat = "score"
    data: CardData | None = None
    config_file: str | None = None  #: the run config file (None: a RunConfig given in Python)
    config: dict[str, Any] | None = None  #: the whole resolved run config
    seed: int | None = None
    git_commit: str | None = None
    libraries: dict[str, str] | None = None
    training: CardTraining | None = None
    validation: CardValidation | None = None
    created: str | None = None
    outputs: list[str] | None = None  #: the folders and files of the judge folder
    calibration: CardCalibration | None = None  #: set by judge-calibrate (None: scores are the read-out)
    selective: CardSelective | None = None  #: set by judge-calibrate --selective (None: no trusted mark)


def library_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("judge", "torch", "transformers", "peft", "trl", "accelerate", "datasets", "bitsandbytes"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The checkout's commit, with ``-dirty`` when tracked files differ from it; None outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def read_card(judge_dir: str | Path) -> JudgeCard:
    """The card of a judge folder; a missing, unreadable or invalid card is a ConfigError naming the file
    and the field."""
    path = Path(judge_dir) / CARD_NAME
    if not path.is_file():
        raise ConfigError(
            f"{judge_dir!s} is not a judge folder: it has no {CARD_NAME} (judge-train writes one; "
            "for a plain model folder pass `rubric`)"
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from None
    try:
        return JudgeCard.model_validate(raw)
    except ValidationError as e:
        raise invalid(f"{path}: invalid judge card", e) from None


def write_card(judge_dir: str | Path, card: JudgeCard) -> None:
    """Write ``judge_card.json`` into ``judge_dir`` (atomically): the fields that were set, in field order."""
    write_json(Path(judge_dir) / CARD_NAME, card.model_dump(mode="json", exclude_unset=True))


def card_calibration(judge_dir: str | Path, card: JudgeCard) -> Calibration | None:
    """The calibration a judge folder's card names (None: it names none). The file must be there and be the
    one the card names (same fingerprint); otherwise scoring would silently differ from what was fitted."""
    from judge.models.calibration import read_calibration

    if card.calibration is None:
        return None
    path = Path(judge_dir) / card.calibration.file
    if not path.is_file():
        raise ConfigError(
            f"{path}: the judge card names this calibration, but the file is missing; run judge-calibrate "
            "again, or score without calibration (`calibration` off)"
        )
    cal = read_calibration(path)
    if cal.fingerprint() != card.calibration.fingerprint:
        raise ConfigError(
            f"{path} is not the calibration the judge card names (fingerprint {cal.fingerprint()[:12]}, "
            f"card: {card.calibration.fingerprint[:12]}): it was edited or replaced; run judge-calibrate "
            "again, or score without calibration (`calibration` off)"
        )
    return cal


def card_selective(
    judge_dir: str | Path, card: JudgeCard, calibration: Calibration | None
) -> Selective | None:
    """The selective-evaluation thresholds a judge folder's card names (None: it names none, or the scores
    are not calibrated: the thresholds apply to the calibrated view only). The file must be the one the card
    names, fitted on this calibration."""
    from judge.models.selective import read_selective

    if card.selective is None or calibration is None:
        return None
    path = Path(judge_dir) / card.selective.file
    if not path.is_file():
        raise ConfigError(
            f"{path}: the judge card names these selective-evaluation thresholds, but the file is missing; run "
            "judge-calibrate --selective again, or score without calibration (`calibration` off)"
        )
    sel = read_selective(path)
    if sel.fingerprint() != card.selective.fingerprint:
        raise ConfigError(
            f"{path} is not the selective-evaluation file the judge card names (fingerprint "
            f"{sel.fingerprint()[:12]}, card: {card.selective.fingerprint[:12]}): it was edited or replaced; run "
            "judge-calibrate --selective again"
        )
    if sel.calibration != calibration.fingerprint():
        raise ConfigError(
            f"{path} was fitted on another calibration than the judge's (calibration fingerprint "
            f"{sel.calibration[:12]}, the judge's: {calibration.fingerprint()[:12]}); run judge-calibrate "
            "--selective again"
        )
    return sel


def card_quantization(card: JudgeCard) -> str | None:
    """The quantization the judge was trained (and validated) with: None, ``"4bit"`` or ``"8bit"``."""
    return None if card.quantization in (None, "none") else card.quantization


def load_judge(
    judge_dir: str | Path,
    *,
    device: str = "cpu",
    dtype: str = "auto",
    quantization: str | None = FROM_CARD,
    trust_remote_code: bool = False,
):
    """Return ``(model, processor, card)`` of a judge folder written by ``judge-train`` (card: a :class:`JudgeCard`).

    ``quantization``: ``"card"`` (default) loads the base as the judge was trained, so a QLoRA
    judge is scored on its 4-bit base, as its card's validation numbers were; None, ``"4bit"``
    or ``"8bit"`` override it. A quantized judge loads ``adapter/`` on the quantized base even
    when ``merged/`` exists (merged weights are full precision, not what was validated).
    """
    from judge.models.loading import load_processor, load_scorer

    judge_dir = Path(judge_dir)
    card = read_card(judge_dir)
    if quantization == FROM_CARD:
        quantization = card_quantization(card)
    merged, adapter = judge_dir / "merged", judge_dir / "adapter"
    if merged.is_dir() and not (quantization is not None and adapter.is_dir()):
        model, processor = load_scorer(
            str(merged),
            dtype=dtype,
            device=device,
            quantization=quantization,
            trust_remote_code=trust_remote_code,
        )
    elif adapter.is_dir():
        model, processor = load_scorer(
            card.base_model,
            adapter=str(adapter),
            dtype=dtype,
            device=device,
            quantization=quantization,
            trust_remote_code=trust_remote_code,
        )
    else:
        raise ConfigError(f"judge folder {str(judge_dir)!r} has neither merged/ nor adapter/")
    if (judge_dir / "processor").is_dir():
        processor = load_processor(str(judge_dir / "processor"), trust_remote_code)
    return model, processor, card


def _hash_files(h, root: Path, files: list[Path]) -> None:
    for f in files:
        h.update(f"{f.relative_to(root).as_posix()}\0{f.stat().st_size}\0".encode())
        hash_file(h, f)


def _model_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))


#: Card entries a fingerprint leaves out: judge-calibrate rewrites them, and the raw scores they were fitted
#: on stay this judge's (each has its own fingerprint in every score's producer and a run's identity).
_FITTED_LATER = ("calibration", "selective")


def _card_identity(path: Path) -> bytes:
    """The card's bytes as a fingerprint reads them: its JSON without :data:`_FITTED_LATER` (a card that is
    not JSON is hashed as it is; reading it refuses it elsewhere)."""
    raw = path.read_bytes()
    try:
        card = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw
    if not isinstance(card, dict):
        return raw
    kept = {k: v for k, v in card.items() if k not in _FITTED_LATER}
    return f"{CARD_NAME}\0".encode() + json.dumps(kept, sort_keys=True).encode()


def judge_fingerprint(source: str | Path) -> str:
    """SHA-256 of what a judge's scores depend on: for a judge folder its card (but for the calibration and
    thresholds it names, which judge-calibrate rewrites) and every file of ``adapter/`` and ``merged/`` (so
    retraining into the same folder changes it); for a plain model
    folder every file in it; for ``tiny[:seed=N]`` the built model's weights and tokenizer; for a
    hub id the files of its cached snapshot (else the id itself, which cannot be loaded anyway)."""
    h = hashlib.sha256()
    p = Path(source)
    if (p / CARD_NAME).is_file():
        h.update(_card_identity(p / CARD_NAME))
        files = [f for sub in ("adapter", "merged") if (p / sub).is_dir() for f in _model_files(p / sub)]
        _hash_files(h, p, files)
    elif p.is_dir():
        _hash_files(h, p, _model_files(p))
    elif (family := by_tiny_name(str(source))) is not None:
        from judge.models.loading import build_tiny_scorer, tiny_seed

        seed = tiny_seed(str(source))
        model, processor = build_tiny_scorer(seed=seed, name=family.tiny)
        h.update(f"{family.tiny}:{seed}\0".encode())
        for name, t in sorted(model.state_dict().items()):
            h.update(name.encode())
            h.update(t.detach().contiguous().cpu().numpy().tobytes())
        h.update(processor.tokenizer.backend_tokenizer.to_str().encode())
    else:
        snapshot = _cached_snapshot(str(source))
        if snapshot is None:
            h.update(f"hub:{source}".encode())
        else:
            _hash_files(h, snapshot, _model_files(snapshot))
    return h.hexdigest()


def _cached_snapshot(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return None
    hit = try_to_load_from_cache(repo_id, "config.json")
    return Path(hit).parent if isinstance(hit, str) else None
