"""The rubric a running ``judge-serve`` scores with, as :class:`~judge.scoring.remote.JudgeClient` reads it from
``GET /v1/judge``: :class:`ServedRubric` (criteria without level anchors, the server's hash) and
:func:`served_rubric`, which builds it from the description."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import PrivateAttr

from judge.core.rubric import OVERALL, Criterion, Family, OverallSpec, Rubric, Scale


class ServedRubric(Rubric):
    """The rubric a server scores with, as its ``GET /v1/judge`` describes it: name, scale, families,
    criterion ids, names and what they measure (no level anchors: the prompts are built by the server).
    :attr:`hash` is the server's hash of its full rubric, so run identities compare as with a local one."""

    _served_hash: str = PrivateAttr(default="")

    @property
    def hash(self) -> str:
        return self._served_hash


def served_rubric(desc: Mapping[str, Any]) -> ServedRubric:
    """A :class:`ServedRubric` from the ``rubric`` part of ``GET /v1/judge``."""
    families = {}
    for fam_id, fam in desc["families"].items():
        crits = [c for c in fam["criteria"] if c["id"] != OVERALL]
        overall = next(c for c in fam["criteria"] if c["id"] == OVERALL)
        families[fam_id] = Family(
            name=fam["name"],
            description="",
            uses_reference=bool(fam["uses_reference"]),
            criteria=[
                Criterion(id=c["id"], name=c["name"], measures=c["measures"], levels={}) for c in crits
            ],
            overall=OverallSpec(name=overall["name"], measures=overall["measures"], levels={}),
        )
    rubric = ServedRubric(
        name=desc["name"], scale=Scale(min=desc["scale"]["min"], max=desc["scale"]["max"]), families=families
    )
    rubric._served_hash = str(desc["hash"])
    return rubric


__all__ = ["ServedRubric", "served_rubric"]
