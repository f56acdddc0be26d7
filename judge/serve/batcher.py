"""Dynamic batching: requests' items wait in one bounded queue; one worker thread scores them.

A unit is one item with all its requested criteria, so its shared prompt prefix is computed once.
The worker takes every unit already waiting, up to the forward pass's token budget, and waits for more
only while the first one has waited less than ``max_wait_ms``; it encodes them as they come and scores
the gathered set with :meth:`JudgeEngine.score_prepared`, the packing and scorer ``judge-score`` uses
(sorted by length, token-budget forward batches), where a forward batch also closes before its padding
passes ``max_padding`` of its real tokens (a window of a few requests has less even lengths than a
whole sorted file). An item's scores therefore do not depend on what it was batched with. Units whose
request has passed its deadline or whose client went away are dropped before compute.

The model runs only in the worker thread, off the event loop; results come back to the event loop
through :class:`asyncio.Future` objects.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from judge.core.schema import PredictionRecord, ScoreRecord
from judge.scoring.engine import JudgeEngine
from judge.scoring.prepared import Prepared
from judge.serve.admission import ModelLock

logger = logging.getLogger(__name__)


class QueueFull(Exception):
    """The queue cannot take a request's units (answered with 429)."""


class Stopped(Exception):
    """The batcher no longer takes work (shutting down)."""


@dataclass
class Ticket:
    """A request's claim on the batcher: cancel it to drop its units that have not run yet."""

    deadline: float  #: time.monotonic() after which its units are dropped
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True

    @property
    def expired(self) -> bool:
        return self.cancelled or time.monotonic() > self.deadline


@dataclass
class UnitResult:
    """The records of one unit and what scoring it took."""

    records: list[ScoreRecord]
    prompt_tokens: int = 0
    forward_passes: int = 0  #: criterion prompts run through the model (0 for an unscorable unit)
    queue_seconds: float = 0.0


@dataclass
class _Unit:
    rec: PredictionRecord
    criteria: list[str]
    ticket: Ticket
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    enqueued: float = field(default_factory=time.monotonic)


@dataclass
class BatcherStats:
    """Hooks the service's metrics read (set by the service; no-ops by default)."""

    on_batch: Callable[[int, int, float], None] = lambda units, tokens, seconds: None
    on_queue_wait: Callable[[float], None] = lambda seconds: None
    on_dropped: Callable[[str], None] = lambda why: None
    on_record: Callable[[ScoreRecord], None] = lambda rec: None


class Batcher:
    """The queue and its worker; see the module doc. ``max_queue``: units waiting at most."""

    def __init__(
        self,
        engine: JudgeEngine,
        *,
        max_queue: int = 1024,
        max_wait_ms: float = 10.0,
        max_padding: float | None = None,
        stats: BatcherStats | None = None,
        lock: ModelLock | None = None,
    ):
        self.engine = engine
        self.max_queue = max_queue
        self.max_wait = max_wait_ms / 1000.0
        self.max_padding = max_padding
        self.budget = engine.batch_tokens
        self.stats = stats or BatcherStats()
        self._queue: deque[_Unit] = deque()
        self._cv = threading.Condition()
        self._stopping = False
        self._lock = lock or ModelLock()  #: held while the model runs (chat generation waits behind it)
        self._thread = threading.Thread(target=self._run, name="judge-batcher", daemon=True)
        self._thread.start()

    # -- the event loop's side
    @property
    def depth(self) -> int:
        """Units waiting (not yet taken by the worker)."""
        return len(self._queue)

    def submit(
        self, items: Sequence[tuple[PredictionRecord, list[str]]], ticket: Ticket
    ) -> list[asyncio.Future]:
        """Queue a request's units, all or none; a future per unit resolves to its :class:`UnitResult`.
        Call from the event loop. Raises :class:`QueueFull` or :class:`Stopped`."""
        loop = asyncio.get_running_loop()
        units = [_Unit(rec, crits, ticket, loop.create_future(), loop) for rec, crits in items]
        with self._cv:
            if self._stopping:
                raise Stopped("the server is shutting down")
            if len(self._queue) + len(units) > self.max_queue:
                raise QueueFull(
                    f"the queue holds {len(self._queue)} of at most {self.max_queue} items; this request "
                    f"brings {len(units)}"
                )
            self._queue.extend(units)
            self._cv.notify()
        return [u.future for u in units]

    def withdraw(self, ticket: Ticket) -> int:
        """Cancel ``ticket`` and take its units that are still waiting out of the queue at once (so they
        free their places); returns how many. Units already with the worker finish unread."""
        ticket.cancel()
        with self._cv:
            mine = [u for u in self._queue if u.ticket is ticket]
            if mine:
                self._queue = deque(u for u in self._queue if u.ticket is not ticket)
        for u in mine:
            self._drop(u)
        return len(mine)

    def stop(self, timeout: float | None = None) -> None:
        """Take no more work, finish what is queued, and end the worker."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self._thread.join(timeout)

    # -- the worker's side
    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopping:
                    self._cv.wait()
                if not self._queue and self._stopping:
                    return
            try:
                self._one_round()
            except Exception:  # a bug must not kill the worker: fail this round's units, keep serving
                logger.exception("scoring a batch failed")

    def _take(self, timeout: float) -> _Unit | None:
        with self._cv:
            if not self._queue and timeout > 0 and not self._stopping:
                self._cv.wait(timeout)
            return self._queue.popleft() if self._queue else None

    def _one_round(self) -> None:
        gathered: list[tuple[_Unit, Prepared]] = []
        unit: _Unit | None = None  #: taken from the queue, not yet answered nor gathered
        tokens = 0
        first_at: float | None = None
        try:
            while tokens < self.budget:
                # Units already queued are always taken (up to the budget); the wait only bounds how long
                # the round blocks for units not yet arrived. Breaking on the first unit's age instead
                # would make every round under load a batch of one.
                wait = 0.0 if first_at is None else first_at + self.max_wait - time.monotonic()
                unit = self._take(max(wait, 0.0))
                if unit is None:
                    if first_at is None or wait <= 0 or self._stopping:  # stopping: no more will come
                        break
                    continue
                if unit.ticket.expired:
                    self._drop(unit)
                    unit = None
                    continue
                if first_at is None:
                    first_at = unit.enqueued
                self.stats.on_queue_wait(time.monotonic() - unit.enqueued)
                try:
                    p = self.engine.prepare(unit.rec, unit.criteria, key=len(gathered))
                except Exception as e:  # encoding raised past the engine's own checks: this unit fails alone
                    logger.exception(f"preparing item {unit.rec.id!r} failed")
                    self._answer(unit, exc=e)
                    unit = None
                    continue
                if p.encoded is None:
                    self._answer(unit, UnitResult(p.records or []))
                else:
                    gathered.append((unit, p))
                    tokens += p.cost
                unit = None
            if not gathered:
                return
            with self._lock:
                # A request withdrawn while its units were gathered or waited for the model (one of them
                # failed, its client went away, its deadline passed) is not scored for nobody.
                kept = []
                for u, p in gathered:
                    if u.ticket.expired:
                        self._drop(u)
                    else:
                        kept.append((u, p))
                gathered = kept
                t0 = time.perf_counter()
                units = {p.key: u for u, p in gathered}
                for group in self.engine.score_prepared(
                    [p for _, p in gathered], max_padding=self.max_padding
                ):
                    for p in group:
                        n = p.encoded.lengths
                        self._answer(units.pop(p.key), UnitResult(p.records or [], sum(n), len(n)))
            if gathered:
                self.stats.on_batch(len(gathered), sum(p.cost for _, p in gathered), time.perf_counter() - t0)
        except BaseException as e:
            # Whatever raised, every unit this round holds is answered: none waits for its deadline.
            for u in [*(u for u, _ in gathered), *([unit] if unit is not None else [])]:
                self._answer(u, exc=e)
            raise

    def _drop(self, unit: _Unit) -> None:
        why = "disconnected" if unit.ticket.cancelled else "deadline"
        self.stats.on_dropped(why)
        text = "the client went away" if why == "disconnected" else "the request passed its deadline"
        self._answer(unit, exc=Dropped(f"item {unit.rec.id!r} was dropped before scoring: {text}"))

    def _answer(self, unit: _Unit, result: UnitResult | None = None, *, exc: BaseException | None = None):
        if result is not None:
            result.queue_seconds = time.monotonic() - unit.enqueued
            for r in result.records:
                self.stats.on_record(r)

        def settle(fut: asyncio.Future = unit.future) -> None:
            if fut.done():  # the request gave up on it already
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)

        try:
            unit.loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


class Dropped(Exception):
    """A unit dropped before compute: its request passed its deadline or its client went away."""


__all__ = ["Batcher", "BatcherStats", "Dropped", "QueueFull", "Stopped", "Ticket", "UnitResult"]
