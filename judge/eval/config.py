"""The settings of one report (``judge-report``): :class:`ReportConfig`, and the score files it compares
(:class:`ScoreSpec`).

The command's options are generated from these fields (``judge/cli/report.py``), as for
:class:`judge.scoring.config.ScoreConfig`: one name, one default and one description per setting;
`field` in backticks names another setting (the command shows its flag).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from judge.core.errors import ConfigError
from judge.core.settings import PathText, Settings
from judge.eval.ppi import MIN_LABELS

_SCORER_NAME = re.compile(r"[A-Za-z0-9_.:+-]+")


@dataclass
class ScoreSpec:
    """A score file under a scorer name: ``NAME=FILE`` (or ``FILE``, named by its stem)."""

    name: str
    path: str

    @classmethod
    def parse(cls, text: str) -> ScoreSpec:
        if "=" in text:
            name, path = text.split("=", 1)
        else:
            name, path = Path(text).stem, text
        name = name.strip()
        if not name or not path:
            raise ConfigError(
                f"`scores` {text!r}: expected NAME=FILE, e.g. `scores` judge=runs/demo/score/scores.jsonl"
            )
        if not _SCORER_NAME.fullmatch(name):
            raise ConfigError(f"`scores` {text!r}: a scorer name may use letters, digits and _ . : + - only")
        return cls(name, path)


class ReportConfig(Settings):
    """Every setting of ``judge-report``: ``ReportConfig(human=["test.jsonl"], scores=["judge=scores.jsonl"])``.
    A bad value is a ConfigError naming the field."""

    human: list[PathText] = Field(
        description="annotation records with human scores (.jsonl/.json); repeatable",
        json_schema_extra={"metavar": "FILE"},
    )
    scores: list[ScoreSpec] = Field(
        [],
        description="a score file (ScoreRecord JSONL) under a scorer name; repeatable (at least one, "
        "unless `clip_model`)",
        json_schema_extra={"metavar": "NAME=FILE"},
    )
    rubric: PathText = Field("mmie", description="rubric name in rubrics/ or a YAML path (default: mmie)")
    root: PathText | None = Field(
        None,
        description="resolve the human files' relative image paths from this folder (default: each file's "
        "folder)",
    )
    out: PathText = Field("runs/report", description="output folder (default: runs/report)")
    clip_model: PathText | None = Field(
        None,
        description="also compute CLIPScore on the human file's responses with this CLIP checkpoint (folder, "
        "hub id, or 'tiny' for the seeded random tiny CLIP); written to OUT/clipscore.jsonl and "
        "reported as scorer 'clipscore'",
        json_schema_extra={"metavar": "PATH|tiny"},
    )
    clip_pairing: Literal["neighbour", "whole"] = Field(
        "neighbour",
        description="CLIPScore image-text pairs: each image with the text just before it (neighbour, "
        "default) or with the whole response text",
    )
    clip_batch_size: int = Field(
        32, ge=1, description="CLIPScore pairs per forward pass", json_schema_extra={"flag": None}
    )
    device: str = Field("cpu", description="device for `clip_model` (default: cpu)")
    bootstrap: int = Field(
        1000,
        ge=1,
        description="bootstrap resamples of questions (default: 1000)",
        json_schema_extra={"metavar": "N"},
    )
    seed: int = Field(0, ge=0, description="seed of the bootstrap (default: 0)")
    title: str = Field("Judge agreement with human scores", description="the report's title")
    note: str | None = Field(
        None, description="a sentence placed at the top of the report", json_schema_extra={"metavar": "TEXT"}
    )
    criteria: list[str] | None = Field(
        None,
        description="compare only these criteria ('overall', a criterion id); repeatable (default: all)",
        json_schema_extra={"flag": "--criterion", "metavar": "ID"},
    )
    on_scale: list[str] = Field(
        [],
        description="treat scorer NAME as scoring on the rubric scale (judges are detected by themselves); "
        "repeatable",
        json_schema_extra={"metavar": "NAME"},
    )

    ppi_fraction: float = Field(
        0.2,
        gt=0,
        lt=1,
        description="the prediction-powered inference check: the share of the questions treated as labelled "
        "(every response to each) in each random draw (default 0.2)",
        json_schema_extra={"metavar": "F"},
    )
    ppi_draws: int = Field(
        2000,
        ge=0,
        description="random draws of the prediction-powered inference check (default 2000; 0: no check)",
        json_schema_extra={"metavar": "N"},
    )
    min_labels: int = Field(
        MIN_LABELS,
        ge=2,
        description=f"labelled questions a human-only or prediction-powered estimate of the check needs, as "
        f"judge-score's `min_labels` (default {MIN_LABELS})",
        json_schema_extra={"metavar": "N"},
    )

    @field_validator("human")
    @classmethod
    def _some_human_file(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError(
                "no human file: give `human` FILE (annotation records, e.g. runs/demo/data/splits/test.jsonl)"
            )
        return v

    @field_validator("scores", mode="before")
    @classmethod
    def _parse_scores(cls, v: Any) -> Any:
        # NAME=FILE text, as the command line gives it, or ScoreSpec objects.
        return (
            [ScoreSpec.parse(s) if isinstance(s, str) else s for s in v] if isinstance(v, list | tuple) else v
        )

    @model_validator(mode="after")
    def _scorers(self) -> ReportConfig:
        if not self.scores and not self.clip_model:
            raise ValueError("nothing to compare: give at least one `scores` NAME=FILE, or `clip_model`")
        names = [s.name for s in self.scores] + (["clipscore"] if self.clip_model else [])
        dup = sorted(n for n, c in Counter(names).items() if c > 1)
        if dup:
            raise ValueError(
                f"scorer name(s) used twice: {', '.join(dup)}; give each `scores` a different NAME"
                + (" ('clipscore' is taken by `clip_model`)" if "clipscore" in dup else "")
            )
        return self


class CalibrateConfig(Settings):
    """Every setting of ``judge-calibrate``: ``CalibrateConfig(judge="runs/demo/judge")`` fits on the judge's
    validation split. A bad value is a ConfigError naming the field."""

    judge: PathText = Field(description="the judge folder to calibrate (written by judge-train)")
    human: list[PathText] = Field(
        [],
        description="annotation files with human scores to fit on (default: the validation split of the "
        "dataset the judge card names); never the data a report will evaluate on",
        json_schema_extra={"metavar": "FILE"},
    )
    scores: PathText | None = Field(
        None,
        description="the judge's scores of those files (judge-score output, with distributions; default: "
        "scored here, uncalibrated, into `out`)",
        json_schema_extra={"metavar": "FILE"},
    )
    method: Literal["auto", "temperature", "isotonic", "none"] = Field(
        "auto",
        description="auto (default: per criterion, the map with the lowest cross-validated NLL of the "
        "annotators' ratings, or none when neither beats the read-out), temperature (one temperature of the "
        "scale distribution), isotonic (a monotone map of the expected score: it also removes a shift, but "
        "needs more labels) or none (the read-out, with intervals); a map that hits its bounds or flattens "
        "the scores is refused, and so is a forced one whose cross-validated NLL is not below the read-out's",
    )
    force_method: bool = Field(
        False,
        description="keep a forced `method` (temperature or isotonic) even where it is refused or no better "
        "than the read-out on held-out labels; the warning is printed and stored in calibration.json",
    )
    level: float = Field(0.9, gt=0, lt=1, description="coverage level of the intervals (default 0.9)")
    conformal_fraction: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="share of the questions held out from the fit for the conformal intervals and the "
        "comparison (default 0.5)",
    )
    min_items: int = Field(
        30,
        ge=2,
        description="a criterion with fewer labelled items than this in either part takes the pooled "
        "calibration (default 30)",
    )
    min_conformal: int = Field(
        20,
        ge=2,
        description="a criterion with at least this many held-out items (and enough for the level) gets its "
        "own conformal interval (Mondrian), else the pooled one (default 20; at most `min_items`)",
    )
    seed: int = Field(
        0, ge=0, description="seed of the split into fit and conformal parts and of the folds (default 0)"
    )
    selective: bool = Field(
        False,
        description="also fit selective evaluation (Trust or Escalate): the confidence thresholds above which "
        "the judge's scores agree with humans at least `agreement` of the time with probability 1 - `delta`; "
        "written beside the calibration (selective.json) and named in the card: scores are then marked "
        "trusted or escalated",
    )
    plan: bool = Field(
        False,
        description="with --selective: print how many labelled items a promise of `agreement` needs at the "
        "agreement this judge shows on the held-out items, and write nothing",
    )
    power: float = Field(
        0.8,
        gt=0,
        lt=1,
        description="with --plan: the chance of certifying the promise the plan's number of labels must give "
        "(for that number and every larger one) if the judge agrees at the observed rate",
    )
    agreement: float = Field(
        0.9,
        gt=0,
        lt=1,
        description="selective evaluation: the agreement with humans guaranteed on trusted scores (default 0.9)",
    )
    delta: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="selective evaluation: the chance the guarantee may fail, over the labels it is fitted on "
        "(default 0.1)",
    )
    tolerance: float = Field(
        1.0,
        ge=0,
        description="selective evaluation: a score agrees with the humans when within this of their mean "
        "score (default 1.0)",
    )
    confidence: Literal["mass", "spread"] = Field(
        "mass",
        description="selective evaluation's confidence of a score: mass (default: the probability the "
        "calibrated distribution puts within `tolerance` of its mean) or spread (minus its standard deviation)",
    )
    out: PathText | None = Field(
        None,
        description="folder for the judge's raw scores of the human files, scores.jsonl (default: JUDGE/calibration)",
        json_schema_extra={"metavar": "DIR"},
    )
    device: str = Field("auto", description="cpu, cuda, cuda:1, ... for scoring (default auto)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights' dtype for scoring (auto: bfloat16 on GPU, float32 on CPU)"
    )
    progress: bool = Field(
        True,
        description="show a progress bar",
        json_schema_extra={"flag": "--no-progress", "flag_help": "no progress bar"},
    )


__all__ = ["CalibrateConfig", "ReportConfig", "ScoreSpec"]
