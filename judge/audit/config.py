"""The settings of one audit (``judge-audit``): :class:`AuditConfig`.

As for :class:`judge.scoring.config.ScoreConfig`, the command's options are generated from these fields
(``judge/cli/audit.py``): one name, one default and one description per setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from judge.audit.perturb import PERTURBATIONS
from judge.core.settings import PathText, Settings
from judge.models import BATCH_TOKENS
from judge.scoring.inputs import check_format


class AuditConfig(Settings):
    """Every setting of ``judge-audit``: ``AuditConfig(inputs=["test.jsonl"], judge="runs/demo/judge")``."""

    inputs: list[PathText] = Field(
        min_length=1,
        description="annotation files or prediction files (any format judge-score reads) whose responses "
        "are perturbed",
    )
    judge: PathText = Field(
        description="a judge folder (with judge_card.json), or a plain model folder / hub id / 'tiny' "
        "together with `rubric`"
    )
    rubric: PathText | None = Field(
        None, description="rubric name or YAML path (default: the one the judge card names)"
    )
    perturb: list[str] = Field(
        default_factory=lambda: list(PERTURBATIONS),
        description=f"perturbations to apply (repeatable; default all: {', '.join(PERTURBATIONS)})",
        json_schema_extra={"metavar": "NAME"},
    )
    criteria: list[str] | None = Field(
        None,
        description="audit only these criteria (repeatable; overall is always audited; default: every "
        "criterion of each item's family): a judge trained on the overall score only, or a quicker audit",
        json_schema_extra={"metavar": "CRITERION"},
    )
    clip_model: PathText | None = Field(
        None,
        description="also audit CLIPScore with this CLIP model (folder, hub id, or 'tiny' for the seeded "
        "random tiny CLIP)",
    )
    out: PathText = Field("runs/audit", description="output folder (default runs/audit)")
    overwrite: bool = Field(False, description="start afresh in `out` instead of resuming")
    force: bool = Field(False, description="audit even when the rubric's hash differs from the judge card's")
    format: str = Field("auto", description="input format (default auto: detected per file)")
    root: PathText | None = Field(
        None, description="resolve relative image paths from this folder instead of each file's folder"
    )
    skip_invalid: bool = Field(False, description="skip invalid records (counted) instead of stopping")
    limit: int | None = Field(None, ge=1, description="audit only the first N records (in input order)")
    bootstrap: int = Field(
        1000, ge=10, description="bootstrap resamples of questions for the intervals (default 1000)"
    )
    seed: int = Field(
        0, ge=0, description="seed of the perturbations' choices and of the bootstrap (default 0)"
    )
    device: str = Field("auto", description="cpu, cuda, cuda:1, ... (default auto: CUDA when available)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights' dtype (auto: bfloat16 on GPU, float32 on CPU)"
    )
    batch_tokens: int = Field(
        BATCH_TOKENS, ge=1, description=f"tokens per forward pass, padding included (default {BATCH_TOKENS})"
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="context budget of one prompt (default: the model's max positions); a longer item is "
        "unscorable and left out of the comparison",
    )
    progress: bool = Field(
        True,
        description="show a progress bar",
        json_schema_extra={"flag": "--no-progress", "flag_help": "no progress bar"},
    )

    @field_validator("perturb")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        unknown = [p for p in v if p not in PERTURBATIONS]
        if unknown:
            raise ValueError(
                f"`perturb`: unknown perturbation {', '.join(map(repr, unknown))}; "
                f"choose from {', '.join(PERTURBATIONS)}"
            )
        if not v:
            raise ValueError("`perturb`: give at least one perturbation")
        return list(dict.fromkeys(v))

    _known_format = field_validator("format")(check_format)
