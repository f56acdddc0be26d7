"""An item on its way through the engine: what was asked of it, and what preparing it gave.

Shared by the engine (:mod:`judge.scoring.engine`), which prepares and scores items, and the encoding
workers (:mod:`judge.scoring.workers`), which prepare them in other processes: neither imports the other
for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from judge.core.schema import PredictionRecord, ScoreRecord


@dataclass
class Item:
    """One record to score, the criteria asked of it, and its images while it is prepared."""

    rec: PredictionRecord
    criteria: list[str]  #: the criteria asked for (one record each, in this order)
    images: list = field(default_factory=list)
    max_patches: int | None = None
    #: the criteria run through the model (default: ``criteria``; reproducible: the whole family's)
    compute: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.compute:
            self.compute = list(self.criteria)


@dataclass
class Prepared:
    """One item made ready by :meth:`JudgeEngine.prepare <judge.scoring.engine.JudgeEngine.prepare>`: encoded
    for the model, or already settled as unscorable (``records`` set, ``encoded`` None). ``cost``: the tokens
    it adds to a forward pass."""

    key: Any
    item: Item
    encoded: Any  #: :class:`~judge.models.readout.Encoded`, or None
    records: list[ScoreRecord] | None
    cost: int

    @property
    def rec(self) -> PredictionRecord:
        return self.item.rec


class Preparer(Protocol):
    """What the workers need of an engine: to prepare an item, and a copy of itself without the model."""

    def prepare(
        self, rec: PredictionRecord, criteria: Sequence[str] | None = None, key: Any = None
    ) -> Prepared: ...

    def without_model(self) -> Preparer: ...
