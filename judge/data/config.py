"""The ``rubric`` and ``data`` sections of a run config (``judge/rubrics/rubric6.yaml``).

The same YAML file drives ``judge-data build`` and ``judge-train``. This module
owns the sections the data layer reads; it checks the top-level keys of the whole
file so a misspelt section is caught here too. Paths inside the file (annotations,
image_root, output_dir) are taken from the current working directory, not from the config file's folder
(a shipped config's ``annotations/demo/annotations.jsonl`` is found from the repository root only);
:func:`check_data_paths` refuses a missing one at once, naming its key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from judge.core.errors import ConfigError, invalid
from judge.core.rubric import find_shipped_file
from judge.core.schema import StrictModel

#: Every top-level section a run config may have (the training sections belong to judge.train).
RUN_SECTIONS = (
    "rubric",
    "data",
    "model",
    "lora",
    "quantization",
    "train",
    "eval",
    "logging",
    "output_dir",
    "seed",
)


class SplitConfig(StrictModel):
    train: float = Field(0.7, ge=0)
    validation: float = Field(0.15, ge=0)
    test: float = Field(0.15, ge=0)
    seed: int = 0
    stratify: bool = Field(True, description="Stratify by task family.")

    @model_validator(mode="after")
    def _positive(self) -> SplitConfig:
        if self.train + self.validation + self.test <= 0:
            raise ValueError("split fractions sum to 0")
        return self

    @property
    def fractions(self) -> tuple[float, float, float]:
        return (self.train, self.validation, self.test)


class DataConfig(StrictModel):
    annotations: list[str] = Field(
        default_factory=list, description="Annotation files (JSONL or JSON): human scores per response."
    )
    pairs: list[str] = Field(
        default_factory=list,
        description="Preference-pair files (JSONL or JSON; judge.data.pairs): two responses, which one humans "
        "preferred. With annotations, both are split together by question.",
    )
    pairs_task: str | None = Field(
        None, description="Task family of pair records that name none (the public layouts have none)."
    )
    image_root: str | None = Field(
        None, description="Resolve image paths from here instead of each file's folder."
    )
    allow_urls: bool = False
    aggregation: Literal["mean", "median", "majority"] = "mean"
    split: SplitConfig = SplitConfig()
    target: Literal["score", "score_rationale", "rationale_score"] = "score"
    criteria: Literal["all", "overall", "criteria"] | list[str] = Field(
        "all",
        description="'all' (every criterion and overall), 'overall', 'criteria' (no overall) or a list of ids.",
    )
    max_images: int | None = Field(None, ge=1, description="Most images per example; more is an error.")
    max_tokens: int | None = Field(None, ge=16, description="Token budget per example (prompt + answer).")
    tile_fallback: bool = Field(
        True, description="Over max_tokens, lower the image tiles per image (down to 1) before failing."
    )
    skip_invalid: bool = False
    output_dir: str | None = Field(None, description="Where the SFT dataset goes; default <output_dir>/data.")

    @field_validator("annotations", "pairs", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _some_labels(self) -> DataConfig:
        if not self.annotations and not self.pairs:
            raise ValueError("data needs `annotations` (human scores), `pairs` (human preferences), or both")
        if self.pairs and self.target == "rationale_score":
            raise ValueError(
                "data.pairs needs data.target score or score_rationale: a pair is read at the score position "
                "right after the prompt, and rationale_score puts a rationale there"
            )
        return self


class DataSections(StrictModel):
    """What the data layer reads of a run config; other sections are kept raw in ``other``."""

    rubric: str = "mmie"
    data: DataConfig
    output_dir: str = "runs/demo"
    seed: int = 0
    other: dict[str, Any] = Field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return Path(self.data.output_dir or Path(self.output_dir) / "data")


def check_data_paths(data: DataConfig, config: str | Path | None = None) -> None:
    """Refuse at once (before any model loads) a config path that does not exist, naming its key and how to
    set it. Relative paths are taken from the working directory, not from the config file's folder."""
    where = f"{config}: " if config is not None else ""
    cwd = Path.cwd()
    missing = [("data.annotations", a, "file") for a in data.annotations if not Path(a).is_file()]
    missing += [("data.pairs", a, "file") for a in data.pairs if not Path(a).is_file()]
    if data.image_root is not None and not Path(data.image_root).is_dir():
        missing.append(("data.image_root", data.image_root, "folder"))
    if not missing:
        return

    def found(value: str, kind: str) -> str:
        # What is there instead: a folder where a file belongs (or the reverse) is named as such.
        p = Path(value)
        if kind == "file" and p.is_dir():
            return "is a folder, not a file of records"
        if kind == "folder" and p.exists():
            return "is a file, not a folder"
        return f"{kind} not found" + ("" if p.is_absolute() else f" (from {cwd})")

    lines = [f"`{key}` {value}: {found(value, kind)}" for key, value, kind in missing]
    keys = list(dict.fromkeys(key for key, _, _ in missing))
    how = {
        "data.annotations": '--set data.annotations=PATH (or "[A.jsonl, B.jsonl]")',
        "data.pairs": '--set data.pairs=PATH (or "[A.jsonl, B.jsonl]")',
        "data.image_root": "--set data.image_root=DIR",
    }
    raise ConfigError(
        where
        + "; ".join(lines)
        + ". Paths in a config are taken from the working directory, not from the config file's folder; "
        + "set it with "
        + " and ".join(how[k] for k in keys)
    )


def find_config(name_or_path: str | Path) -> Path:
    """A path as given, else ``NAME`` / ``NAME.yaml`` in ``./rubrics``, then among the shipped run configs
    (``judge-train --config rubric6`` works from any folder)."""
    return find_shipped_file(name_or_path, "config")


def parse_overrides(assignments: Iterable[str]) -> dict[str, Any]:
    """``section.key=value`` strings (as ``--set`` takes them) -> ``{"section.key": value}``, each value
    parsed as YAML (``3`` an int, ``[a, b]`` a list, ``true`` a bool)."""
    out: dict[str, Any] = {}
    for assignment in assignments:
        if "=" not in assignment:
            raise ConfigError(f"override {assignment!r} must look like section.key=value")
        dotted, value = assignment.split("=", 1)
        try:
            out[dotted.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            raise ConfigError(f"override {assignment!r}: value is not valid YAML: {e}") from None
    return out


def apply_overrides(raw: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Set each dotted key of ``overrides`` (``{"train.learning_rate": 1e-4}``) in a raw config mapping,
    making the sections on the way; the values are checked later, with the whole config."""
    for dotted, value in overrides.items():
        keys = [k for k in dotted.split(".") if k]
        if not keys:
            raise ConfigError(f"override key {dotted!r} names no config key")
        node = raw
        for i, k in enumerate(keys[:-1]):
            nxt = node.setdefault(k, {})
            if not isinstance(nxt, dict):
                section = ".".join(keys[: i + 1])
                raise ConfigError(f"override {dotted}: {section} is a value ({nxt!r}), not a section")
            node = nxt
        node[keys[-1]] = value


def check_sections(raw: Mapping[str, Any], where: str) -> None:
    """Every top-level key of a run config must be a known section (a misspelt one fails here, by name)."""
    unknown = sorted(set(raw) - set(RUN_SECTIONS))
    if unknown:
        raise ConfigError(f"{where}: unknown section(s) {unknown}; allowed: {', '.join(RUN_SECTIONS)}")


def read_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> tuple[Path, dict[str, Any]]:
    """Read a run config file as a raw mapping with overrides applied, top-level keys checked."""
    path = find_config(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a run config must be a YAML mapping")
    apply_overrides(raw, overrides or {})
    check_sections(raw, str(path))
    return path, raw


def load_data_sections(path: str | Path, overrides: Mapping[str, Any] | None = None) -> DataSections:
    """Validate the ``rubric`` and ``data`` sections of a run config (strictly: unknown keys are errors).

    ``overrides``: dotted keys to values, ``{"data.aggregation": "median"}`` (:func:`parse_overrides`
    makes them from ``--set`` strings)."""
    path, raw = read_config(path, overrides)
    mine = {k: raw[k] for k in ("rubric", "data", "output_dir", "seed") if k in raw}
    if "data" not in mine:
        raise ConfigError(f"{path}: the config has no 'data' section")
    try:
        return DataSections.model_validate({**mine, "other": {k: v for k, v in raw.items() if k not in mine}})
    except ValidationError as e:
        raise invalid(f"{path}: invalid config", e, DataSections) from None
