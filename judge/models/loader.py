"""One way to load a judge: :func:`load` takes a source and gives a :class:`LoadedJudge`.

A source is a judge folder written by ``judge-train`` (it has ``judge_card.json``), a local model folder or
a hub id together with a rubric, or a tiny test model name (``tiny``, ``tiny:seed=N``) with a rubric. Every
path that scores with a judge (``judge-score``, ``judge-serve``, the Python API and the integrations built
on it, ``judge-bench``, ``judge-audit``, ``judge-calibrate``) loads it here, and code above
:mod:`judge.models` never imports :mod:`judge.models.loading` itself (an import-linter contract says so).

Loading runs in two halves, so that a command can refuse bad options before it reads or writes anything
and load the weights only when there is work for them: :func:`resolve` (the card, the rubric and its hash
check, the prompt format, the quantization, the calibration, the fingerprint; no weights) gives a
:class:`JudgeSpec`, and :func:`load` takes a source or that spec and loads the weights.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.core.errors import ConfigError
from judge.core.rubric import Rubric, load_rubric
from judge.core.template import TargetFormat
from judge.models.calibration import Calibration
from judge.models.card import (
    CARD_NAME,
    FROM_CARD,
    JudgeCard,
    card_calibration,
    card_quantization,
    card_selective,
    judge_fingerprint,
    load_judge,
    read_card,
)
from judge.models.devices import resolve_device
from judge.models.loading import load_scorer, progress_bars
from judge.models.score_tokens import score_token_ids
from judge.models.selective import Selective
from judge.models.sources import check_model_source

logger = logging.getLogger(__name__)


@dataclass
class JudgeSpec:
    """A judge resolved before its weights load: what it is, its rubric and prompt format."""

    source: str  #: the judge folder (absolute) or the model id / folder / ``tiny`` as given
    rubric: Rubric
    target_format: TargetFormat
    card: JudgeCard | None = None
    rubric_forced: bool = False
    #: None, "4bit" or "8bit": how the base is loaded (a judge folder: as its card says, unless overridden)
    quantization: str | None = None
    #: :func:`judge.models.card.judge_fingerprint` of the weights (what a resume must match)
    fingerprint: str = ""
    #: the calibration the card names, applied to every score (None: none, or turned off)
    calibration: Calibration | None = None
    #: the selective-evaluation thresholds the card names (the trusted mark; None: none, or turned off)
    selective: Selective | None = None

    @property
    def is_card(self) -> bool:
        return self.card is not None


def resolve(
    judge: str,
    rubric: str | None = None,
    *,
    force: bool = False,
    rationale: bool = False,
    quantization: str | None = "card",
    calibration: bool = True,
) -> JudgeSpec:
    """The first half of :func:`load`, no weights loaded: read the judge's card (if ``judge`` is a judge folder)
    and settle the rubric, the prompt format, the quantization, the calibration and the weights' fingerprint.
    What a command checks before it reads or writes anything; :func:`load` takes what it returns.

    A judge folder's rubric is ``rubric`` if given, else the rubric the card names; its hash must
    equal the card's unless ``force``. A plain model needs ``rubric``. ``quantization``: ``"card"``
    (default) loads a judge folder's base as it was trained (QLoRA: 4-bit) and a plain model
    unquantized; ``"none"``, ``"4bit"`` or ``"8bit"`` override, with a warning when that differs
    from the card. ``calibration``: apply the calibration the card names, if any (off: the raw read-out).

    Raises :class:`~judge.core.errors.ConfigError` for a rubric whose hash differs from the card's (without
    ``force``), a plain model without ``rubric``, an unknown ``quantization``, a missing or unusable model
    folder or hub id (:func:`~judge.models.sources.check_model_source`), and a calibration or selective file
    that is not the one the card names.
    """
    if quantization not in (FROM_CARD, None, "none", "4bit", "8bit"):
        raise ConfigError(f"quantization {quantization!r} is not one of card, none, 4bit, 8bit")
    wanted = None if quantization in (None, "none") else quantization
    folder = Path(judge)
    if (folder / CARD_NAME).is_file():
        card = read_card(folder)
        trained = card.rubric
        rub = load_rubric(rubric or trained.name)
        forced = False
        if rub.hash != trained.hash:
            msg = (
                f"rubric {rub.name!r} (hash {rub.hash[:12]}) differs from the rubric judge {str(folder)!r} "
                f"was trained on ({trained.name!r}, hash {trained.hash[:12]})"
            )
            if not force:
                raise ConfigError(
                    msg + "; its scores would not mean what the rubric says. Pass the rubric it was "
                    "trained on, or `force` to score anyway"
                )
            logger.warning(msg + "; scoring anyway (`force`)")
            forced = True
        fmt: TargetFormat = card.target_format
        if rationale:
            if fmt == "score":
                logger.warning(
                    "this judge was trained on score-only targets: it never learned to write a rationale, "
                    "so what it writes before the score (`rationale`) is off its training and may move "
                    "its scores"
                )
            fmt = "rationale_score"
        elif fmt == "rationale_score":
            logger.warning(
                "this judge was trained to write a rationale before its score; reading the score at once "
                "is off its training. Pass `rationale` to let it write the rationale first"
            )
        trained_q = card_quantization(card)
        q = trained_q if quantization == FROM_CARD else wanted
        if q != trained_q:
            logger.warning(
                f"judge {str(folder)!r} was trained and validated with quantization {trained_q or 'none'}; "
                f"scoring with {q or 'none'} instead, so its scores will differ from the card's numbers"
            )
        source = str(folder.resolve())
        cal = card_calibration(folder, card) if calibration else None
        sel = card_selective(folder, card, cal) if cal is not None else None
        return JudgeSpec(source, rub, fmt, card, forced, q, judge_fingerprint(source), cal, sel)
    check_model_source(judge)
    if rubric is None:
        raise ConfigError(
            f"{judge!r} is a plain model (no judge_card.json): say which rubric to ask with `rubric` "
            "(e.g. `rubric` mmie)"
        )
    source = str(folder.resolve()) if folder.exists() else judge
    fmt = "rationale_score" if rationale else "score"
    q = None if quantization == FROM_CARD else wanted
    return JudgeSpec(source, load_rubric(rubric), fmt, None, False, q, judge_fingerprint(source))


@dataclass
class LoadedJudge:
    """A judge ready to score: its resolved :class:`JudgeSpec` and its weights.

    What :func:`load` returns, and what the scoring engine (:class:`judge.scoring.engine.JudgeEngine`), the
    server and the Python API are given.
    """

    spec: JudgeSpec
    model: Any  #: the image-text-to-text model in eval mode (PEFT-wrapped for an adapter judge)
    processor: Any  #: its processor (tokenizer and image processor)
    device: str  #: where the model is (``cpu``, ``cuda``, ``cuda:0``, ...), as resolved from ``auto``
    family: str  #: the model's family (its config's ``model_type``: ``internvl``, ``qwen2_5_vl``, ...)
    #: token id of each value of the rubric's scale, lowest first (checked: each value is one token)
    score_tokens: list[int]

    @property
    def source(self) -> str:
        return self.spec.source

    @property
    def rubric(self) -> Rubric:
        return self.spec.rubric

    @property
    def card(self) -> JudgeCard | None:
        return self.spec.card

    @property
    def calibration(self) -> Calibration | None:
        return self.spec.calibration

    @property
    def selective(self) -> Selective | None:
        return self.spec.selective

    @property
    def target_format(self) -> TargetFormat:
        return self.spec.target_format

    @property
    def tokenizer(self) -> Any:
        return getattr(self.processor, "tokenizer", self.processor)


def load(
    source: str | Path | JudgeSpec,
    rubric: str | None = None,
    *,
    force: bool = False,
    rationale: bool = False,
    quantization: str | None = FROM_CARD,
    calibration: bool = True,
    device: str = "auto",
    local_rank: int | None = None,
    dtype: str = "auto",
    progress: bool = True,
) -> LoadedJudge:
    """Load a judge: the one call every scoring path uses.

    ``source``: a judge folder written by ``judge-train`` (``judge_card.json`` with ``merged/`` or
    ``adapter/``: the rubric is the card's unless ``rubric`` names another of the same hash); a local model
    folder or a hub id (``OpenGVLab/InternVL3-1B-hf``), with ``rubric``; ``tiny`` / ``tiny:seed=N``, the
    seeded tiny test model, with ``rubric``; or a :class:`JudgeSpec` that :func:`resolve` made (the options
    of :func:`resolve` are then ignored: they were applied). ``rubric``, ``force``, ``rationale``,
    ``quantization``, ``calibration``: as :func:`resolve` takes them.

    ``device``: ``auto`` (a CUDA GPU when there is one, ``cuda:<local_rank>`` in a sharded run; else the
    CPU), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``. ``dtype``: ``auto`` (bfloat16 on a GPU, float32 on the
    CPU), ``float32``, ``bfloat16`` or ``float16``. ``progress``: transformers' own progress bars while the
    weights load.

    Returns a :class:`LoadedJudge`: the spec (card, rubric, prompt format, quantization, calibration,
    selective thresholds, fingerprint), the model in eval mode on ``device``, its processor, the model's
    family and the token ids of the rubric's scale.

    Raises :class:`~judge.core.errors.ConfigError` for what :func:`resolve` refuses, a judge folder with
    neither ``merged/`` nor ``adapter/``, an adapter folder without safetensors weights and an unknown dtype;
    :class:`~judge.models.score_tokens.ScoreTokenError` when a scale value is not one token of the judge's
    tokenizer.
    """
    spec = (
        source
        if isinstance(source, JudgeSpec)
        else resolve(
            str(source),
            rubric,
            force=force,
            rationale=rationale,
            quantization=quantization,
            calibration=calibration,
        )
    )
    where = resolve_device(device, local_rank)
    with progress_bars(progress):
        if spec.is_card:
            model, processor, _ = load_judge(
                spec.source, device=where, dtype=dtype, quantization=spec.quantization
            )
        else:
            model, processor = load_scorer(
                spec.source, dtype=dtype, device=where, quantization=spec.quantization
            )
    check_processor_family(model, processor, spec.source)
    tokenizer = getattr(processor, "tokenizer", processor)
    family = str(getattr(getattr(model, "config", None), "model_type", "") or "")
    return LoadedJudge(
        spec, model, processor, where, family, score_token_ids(tokenizer, spec.rubric.scale.values)
    )


def check_processor_family(model, processor, source) -> None:
    """Refuse a processor of another family than the model's (a judge folder whose ``processor/`` was copied
    from another judge): its images would become tokens the model does not read, and the forward would fail
    deep inside transformers, or worse, score."""
    from judge.models.families import of_model, of_processor

    mf, pf = of_model(model), of_processor(processor)
    if mf is not None and pf is not None and mf is not pf:
        raise ConfigError(
            f"{source}: the model is a {mf.name} model but its processor is a {pf.name} processor "
            f"({type(processor).__name__}); a judge folder's processor/ must come from the same base as its "
            "model (copy both from one judge, or retrain)"
        )


__all__ = ["JudgeSpec", "LoadedJudge", "check_processor_family", "load", "resolve"]
