"""Rubrics: the scale, the task families and their criteria, loaded from YAML.

A rubric has a content hash (:attr:`Rubric.hash`): SHA-256 of its canonical JSON
(keys sorted), so it is stable across key order and YAML formatting and changes
with any text. A judge checkpoint records the hash it was trained on.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from judge.core.errors import ConfigError, invalid
from judge.core.schema import StrictModel

OVERALL = "overall"
#: A user's own rubrics and run configs: ``./rubrics`` (looked at before the shipped ones).
USER_DIR = Path("rubrics")


def shipped_dir() -> Path:
    """The rubrics and run configs shipped inside the package (``judge/rubrics``, package data).

    Found through importlib.resources, so an installed wheel finds its own copies from any folder."""
    return Path(str(resources.files("judge.rubrics")))


def find_shipped_file(name_or_path: str | Path, what: str = "rubric") -> Path:
    """A YAML file by path or by name: the path as given if it is a file, else ``NAME``,
    ``NAME.yaml`` or ``NAME.yml`` in ``./rubrics`` (the user's own), then in the package's
    shipped ``judge/rubrics``. ``what`` names the kind of file in the error."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    tried = [str(p)]
    for d in (USER_DIR, shipped_dir()):
        for cand in (d / p, d / f"{p}.yaml", d / f"{p}.yml"):
            if cand.is_file():
                return cand
            tried.append(str(cand))
    shipped = sorted(f.stem for f in shipped_dir().glob("*.yaml"))
    raise ConfigError(
        f"{what} {str(name_or_path)!r} not found; looked in: {', '.join(tried)} "
        f"(shipped: {', '.join(shipped)})"
    )


class Scale(StrictModel):
    min: int = 0
    max: int = 6

    @model_validator(mode="after")
    def _ordered(self) -> Scale:
        if self.max <= self.min:
            raise ValueError(f"scale max ({self.max}) must be greater than min ({self.min})")
        return self

    @property
    def values(self) -> list[int]:
        return list(range(self.min, self.max + 1))


class Criterion(StrictModel):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str
    measures: str
    levels: dict[int, str] = Field(description="Anchor descriptions by score value (e.g. 0, 3, 6).")


class OverallSpec(StrictModel):
    name: str = "Overall quality"
    measures: str
    levels: dict[int, str]


class Penalty(StrictModel):
    id: str
    name: str
    description: str


class Family(StrictModel):
    name: str
    description: str
    uses_reference: bool = False
    criteria: list[Criterion] = Field(min_length=1)
    penalties: list[Penalty] = Field(default_factory=list)
    overall: OverallSpec

    @field_validator("criteria")
    @classmethod
    def _unique_ids(cls, v: list[Criterion]) -> list[Criterion]:
        ids = [c.id for c in v]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise ValueError(f"duplicate criterion id(s): {sorted(dup)}")
        if OVERALL in ids:
            raise ValueError(f"'{OVERALL}' is reserved for the family's overall score; use the 'overall' key")
        return v

    def criterion(self, criterion_id: str) -> Criterion | OverallSpec:
        if criterion_id == OVERALL:
            return self.overall
        for c in self.criteria:
            if c.id == criterion_id:
                return c
        raise KeyError(criterion_id)

    @property
    def criterion_ids(self) -> list[str]:
        """The family's criteria in rubric order, then 'overall'."""
        return [c.id for c in self.criteria] + [OVERALL]


class Rubric(StrictModel):
    name: str
    version: str = "1"
    description: str = ""
    scale: Scale = Scale()
    families: dict[str, Family] = Field(min_length=1)

    @model_validator(mode="after")
    def _levels_on_scale(self) -> Rubric:
        for fam_id, fam in self.families.items():
            crits: list[Criterion | OverallSpec] = [*fam.criteria, fam.overall]
            for crit in crits:
                off = [k for k in crit.levels if not self.scale.min <= k <= self.scale.max]
                if off:
                    cid = getattr(crit, "id", OVERALL)
                    raise ValueError(
                        f"family {fam_id}, criterion {cid}: level(s) {off} outside the scale "
                        f"{self.scale.min}..{self.scale.max}"
                    )
        return self

    @property
    def hash(self) -> str:
        blob = json.dumps(
            self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, separators=(",", ":")
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def family(self, family_id: str) -> Family:
        try:
            return self.families[family_id]
        except KeyError:
            raise KeyError(
                f"unknown task family {family_id!r}; rubric {self.name!r} has {sorted(self.families)}"
            ) from None

    def render(self) -> str:
        """Human-readable text of the whole rubric (what `judge-data rubric show` prints)."""
        lines = [
            f"Rubric {self.name} v{self.version}  (hash {self.hash[:12]})",
            f"Scale: integers {self.scale.min} to {self.scale.max}",
        ]
        if self.description:
            lines += ["", self.description]
        for fam_id, fam in self.families.items():
            ref = "sees the reference answer" if fam.uses_reference else "no reference answer"
            lines += ["", f"== {fam_id}: {fam.name} ({ref}) ==", fam.description]
            crits: list[Criterion | OverallSpec] = [*fam.criteria, fam.overall]
            for crit in crits:
                cid = getattr(crit, "id", OVERALL)
                lines += ["", f"  [{cid}] {crit.name}", f"    {crit.measures}"]
                lines += [f"    {k}: {v}" for k, v in sorted(crit.levels.items())]
            for pen in fam.penalties:
                lines += ["", f"  penalty [{pen.id}] {pen.name}: {pen.description}"]
        return "\n".join(lines)


def load_rubric(name_or_path: str | Path) -> Rubric:
    """Load and validate a rubric by path or by name (``mmie``: ``./rubrics/mmie.yaml`` if the user has
    one, else the shipped ``judge/rubrics/mmie.yaml``)."""
    path = find_shipped_file(name_or_path, "rubric")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a rubric must be a YAML mapping, got {type(data).__name__}")
    if "families" not in data and {"rubric", "data"} <= set(data):
        raise ConfigError(
            f"{path} is a run config (for judge-train --config), not a rubric: a rubric has `name` and "
            f"`families`. The rubric this run config names is {data['rubric']!r}: pass `rubric` {data['rubric']}"
        )
    try:
        return Rubric.model_validate(data)
    except ValidationError as e:
        raise invalid(f"{path}: invalid rubric", e, Rubric) from None
