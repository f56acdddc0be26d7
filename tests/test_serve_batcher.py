"""The serve batcher and its packing on the tiny judge, without HTTP: what a round gathers, and the
padding cap that keeps a window of a few requests from paying for padding."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from test_score_engine import assert_close, engine, subset

from judge.models.readout import batch_cost, real_tokens
from judge.scoring.inputs import load_inputs
from judge.serve.batcher import Batcher, BatcherStats, Ticket

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def records(small_demo):
    return load_inputs([subset(small_demo, "batcher", every=3)]).records


def test_a_round_takes_every_item_already_waiting(tiny, rubric, records):
    """Items that queued while the model was busy are scored in one round, not one round each."""
    eng = engine(tiny, rubric, batch_size=64, batch_tokens=10**7)
    rounds: list[int] = []
    lock = threading.Lock()
    stats = BatcherStats(on_batch=lambda units, tokens, seconds: rounds.append(units))
    batcher = Batcher(eng, max_wait_ms=1, stats=stats, lock=lock)
    reference = eng.score_records(records)

    async def main():
        ticket = Ticket(deadline=time.monotonic() + 120)
        lock.acquire()  # the model is busy (as with a round or a chat generation running)
        first = batcher.submit([(records[0], eng.pending(records[0]))], ticket)
        await asyncio.sleep(0.3)  # the worker has gathered the first item and waits for the model
        rest = batcher.submit([(r, eng.pending(r)) for r in records], ticket)
        await asyncio.sleep(0.3)  # ... long past max_wait_ms of every item now waiting
        lock.release()
        return await asyncio.gather(*first, *rest)

    try:
        results = asyncio.run(main())
    finally:
        batcher.stop()
    assert rounds == [1, len(records)]
    assert_close([r for res in results[1:] for r in res.records], reference)


def test_padding_cap_splits_uneven_batches_and_changes_no_score(tiny, rubric, records):
    eng = engine(tiny, rubric, batch_size=64, batch_tokens=10**7)
    prepared = [eng.prepare(r, key=i) for i, r in enumerate(records)]
    assert len({p.encoded.max_len for p in prepared}) > 2, "the items must differ in length"

    uncapped = list(eng.score_prepared(prepared))
    assert len(uncapped) == 1  # one forward batch: the budget and size do not bound it
    loose = batch_cost([p.encoded for p in prepared], True) / real_tokens([p.encoded for p in prepared], True)
    assert loose > 1.10

    prepared = [eng.prepare(r, key=i) for i, r in enumerate(records)]
    capped = list(eng.score_prepared(prepared, max_padding=0.10))
    assert len(capped) > 1
    for group in capped:
        enc = [p.encoded for p in group]
        assert len(group) == 1 or batch_cost(enc, True) <= 1.10 * real_tokens(enc, True)
    assert sorted(p.key for g in capped for p in g) == list(range(len(records)))
    assert_close(
        [r for g in capped for p in g for r in p.records], [r for g in uncapped for p in g for r in p.records]
    )
