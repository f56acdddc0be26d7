"""Encoding in worker processes while the model scores: ``judge-score --workers N``.

Encoding an item (opening and checking its images, rendering and tokenising every criterion prompt,
preprocessing the pixels) runs on the CPU, one item at a time. Inline, the model waits for it: on a GPU
a 4B judge scores faster than one CPU process encodes (``benchmarks/README.md``). With ``workers > 0``
a :class:`torch.utils.data.DataLoader` of ``workers`` processes runs :meth:`JudgeEngine.prepare
<judge.scoring.engine.JudgeEngine.prepare>` ahead of the model, on a copy of the engine without the
model (the workers need the processor, the rubric and the image limits only).

The chunks the model scores are the same as inline: the workers' small parts are gathered, in input
order, into chunks of ``chunk_size`` items, so items are packed into the same forward batches and
their scores are equal bit for bit (``tests/test_score_workers.py``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from judge.core.schema import PredictionRecord
from judge.scoring.prepared import Prepared, Preparer

if TYPE_CHECKING:
    from torch.utils.data import Dataset

#: Items a worker encodes per task: small, so that every worker gets several and the first chunk is
#: ready soon; the chunk the model scores is ``chunk_size`` items whatever this is.
MAX_PART = 16


class _PrepareSet:
    """A map-style dataset: item ``i`` of ``todo`` prepared (encoded, or settled as unscorable). A plain class
    (a DataLoader needs ``__getitem__`` and ``__len__`` only), so that importing this module loads no torch."""

    def __init__(self, engine: Preparer, todo: Sequence[tuple[PredictionRecord, list[str]]]):
        self.engine, self.todo = engine, todo

    def __len__(self) -> int:
        return len(self.todo)

    def __getitem__(self, i: int) -> Prepared:
        rec, criteria = self.todo[i]
        return self.engine.prepare(rec, criteria)


def _as_list(batch: list) -> list:
    return batch


def part_size(chunk_size: int, workers: int) -> int:
    """Items per worker task: every worker gets at least two tasks of a chunk, at most :data:`MAX_PART`."""
    return max(1, min(MAX_PART, math.ceil(chunk_size / (2 * workers))))


def prepared_in_workers(
    engine: Preparer, todo: Sequence[tuple[PredictionRecord, list[str]]], workers: int, chunk_size: int
) -> Iterator[list[Prepared]]:
    """``todo`` prepared by ``workers`` processes, yielded in input order in chunks of ``chunk_size``.

    The workers stay at most about one chunk ahead of the model (pixels of two chunks in memory at most,
    as inline encoding holds one)."""
    from torch.utils.data import DataLoader

    # A tokenizer that used its thread pool before the fork would warn in every worker, and could deadlock.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    part = part_size(chunk_size, workers)
    loader: DataLoader = DataLoader(
        cast("Dataset", _PrepareSet(engine.without_model(), todo)),
        batch_size=part,
        num_workers=workers,
        collate_fn=_as_list,
        # Enough tasks in flight to encode a whole chunk while the model scores the one before it.
        prefetch_factor=max(2, math.ceil(chunk_size / (part * workers))),
    )
    buf: list[Any] = []
    for part_items in loader:
        buf.extend(part_items)
        while len(buf) >= chunk_size:
            yield buf[:chunk_size]
            buf = buf[chunk_size:]
    if buf:
        yield buf
