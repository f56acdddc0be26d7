"""Admission: what a request may hold while it waits, so that chat generation cannot starve scoring.

* **A request's deadline starts when it arrives** (:func:`arrived`: the time the app first saw it), not when a
  worker thread gets round to reading its body: waiting for a thread, a slot or the model all count.
* **Chat completions pass a gate of their own** (:class:`ChatGate`): at most ``--max-chat-concurrency`` are
  in progress at once (each holds a worker thread while it is read, encoded, waits for the model and
  generates) and at most ``--max-chat-queue`` wait for one of those places, on the event loop, holding
  nothing. One more is answered 429 with ``Retry-After`` at once; a waiting one whose deadline passes, 504.
  So a flood of chats holds a bounded number of threads, and ``/v1/score`` and the reward routes still find
  threads to read their bodies.
* **Scoring goes before generation on the model** (:class:`ModelLock`): the batcher's rounds take the model
  ahead of any chat waiting for it, and a generation in progress hands it over between two tokens when a
  round is waiting (:meth:`ModelLock.yield_to_scoring`), so a score waits for one decoding step, not for a
  whole generation.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, MutableMapping
from typing import Any

#: Where :class:`~judge.serve.app.Guard` puts the time a request arrived in its ASGI scope.
ARRIVED = "judge.arrived"


def arrived(scope: MutableMapping[str, Any]) -> float:
    """The ``time.monotonic()`` a request arrived at: stamped by the app's first middleware, else now."""
    return scope.setdefault(ARRIVED, time.monotonic())


class GateFull(Exception):
    """No chat may wait now: the chat queue is full (answered 429 with ``Retry-After``)."""


class GateTimeout(Exception):
    """The request's deadline passed while it waited for a chat slot (answered 504)."""


class ChatGate:
    """At most ``slots`` chat completions in progress and ``queue`` waiting, first come first served. Used
    from the event loop only (no lock needed): :meth:`enter` returns the function that gives the slot
    back, to be called once the completion is over (after its stream, for a streamed one)."""

    def __init__(self, slots: int, queue: int):
        self.slots = slots
        self.queue = queue
        self.active = 0
        self._waiting: deque[asyncio.Future] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def enter(self, deadline: float) -> Callable[[], None]:
        """A slot, waited for no later than ``deadline`` (``time.monotonic()``). Raises :class:`GateFull`
        when ``queue`` requests wait already, :class:`GateTimeout` past the deadline."""
        if self.active < self.slots and not self._waiting:
            self.active += 1
            return self._releaser()
        if len(self._waiting) >= self.queue:
            raise GateFull(
                f"{self.active} chat completions are in progress (--max-chat-concurrency) and {len(self._waiting)} "
                "wait (--max-chat-queue)"
            )
        slot = asyncio.get_running_loop().create_future()
        self._waiting.append(slot)
        try:
            await asyncio.wait({slot}, timeout=max(0.0, deadline - time.monotonic()))
        except BaseException:  # cancelled: give back a slot handed over meanwhile, or leave the line
            self._leave(slot)
            raise
        if not slot.done():
            self._leave(slot)
            raise GateTimeout("the request passed its deadline while waiting for a chat slot")
        return self._releaser()

    def _leave(self, slot: asyncio.Future) -> None:
        if slot.done() and not slot.cancelled():
            self._release()  # the slot came as the wait ended: the next in line gets it
        else:
            slot.cancel()
            self._waiting.remove(slot)

    def _release(self) -> None:
        while self._waiting:
            nxt = self._waiting.popleft()
            if not nxt.done():
                nxt.set_result(None)  # the slot passes on: `active` stays as it is
                return
        self.active -= 1

    def _releaser(self) -> Callable[[], None]:
        done = False

        def release() -> None:
            nonlocal done
            if not done:
                done = True
                self._release()

        return release


class ModelLock:
    """The model, one user at a time, scoring first. :meth:`acquire` (and ``with lock:``) is the batcher's:
    it goes ahead of every generation waiting in :meth:`acquire_for_generation`, and a generation holding
    the model hands it over between two tokens (:meth:`yield_to_scoring`). Held by a thread; released only
    by the thread that holds it."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._scoring = 0  #: scoring rounds waiting for the model

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """The model for scoring, before any generation waiting for it."""
        return self._take(True, blocking, None if timeout < 0 else timeout)

    def acquire_for_generation(self, timeout: float) -> bool:
        """The model for generation, once it is free and no scoring round waits; False after ``timeout``."""
        return self._take(False, True, timeout)

    def _take(self, scoring: bool, blocking: bool, timeout: float | None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._scoring += scoring
            try:
                while self._owner is not None or (not scoring and self._scoring):
                    left = None if end is None else end - time.monotonic()
                    if not blocking or (left is not None and left <= 0):
                        return False
                    self._cond.wait(left)
                self._owner = threading.get_ident()
                return True
            finally:
                if scoring:
                    self._scoring -= 1
                    self._cond.notify_all()  # generations waiting on this round may go now

    def release(self) -> None:
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError("the model lock is released by a thread that does not hold it")
            self._owner = None
            self._cond.notify_all()

    def held_here(self) -> bool:
        return self._owner == threading.get_ident()

    @property
    def scoring_waits(self) -> bool:
        return self._scoring > 0

    def yield_to_scoring(self, timeout: float) -> bool:
        """Called by the generation holding the model, between two tokens: when a scoring round waits, let
        it run, then take the model back. False when it could not be taken back within ``timeout`` (the
        model is then not held)."""
        if not self._scoring:
            return True
        self.release()
        return self.acquire_for_generation(timeout)

    def __enter__(self) -> ModelLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["ARRIVED", "ChatGate", "GateFull", "GateTimeout", "ModelLock", "arrived"]
