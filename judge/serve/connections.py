"""What idle and slow connections may hold: a bound on open connections, a deadline on a request's head
and body, and the process's file-descriptor limit raised as far as it goes.

Uvicorn keeps a connection open for as long as its client leaves it half-sent: a client (or thousands of
them) that opens connections and sends part of a request head holds a file descriptor each, until the
process has none left and every other client, ``/health`` included, is refused at ``accept``.
:class:`ConnectionGuard` wraps uvicorn's own HTTP protocol class (:func:`guarded_protocol`):

* at most ``max_connections`` are open; a new one past that closes the oldest connection that has no
  request in flight (one still sending its head, or idle between requests), so a client that sends a whole
  request promptly is always served, whoever holds the other connections;
* a connection that has not finished a request head ``header_timeout`` seconds after it opened (or after
  its last response), or whose request body stalls that long, is closed;
* :func:`raise_fd_limit` lifts the soft limit on open files to the hard one at start, and
  :func:`connection_cap` keeps the bound below it, with room for the files the judge itself opens.

A request in flight is never closed by the guard: the batcher's queue bound (429) and the request
deadlines (504) govern those.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

logger = logging.getLogger(__name__)

#: File descriptors kept for what the process opens besides connections (weights, images, logs, threads).
RESERVED_FDS = 128
#: The connection bound when the descriptor limit allows more (and none was asked for).
DEFAULT_MAX_CONNECTIONS = 4096


def raise_fd_limit() -> int:
    """Raise the soft limit on open files to the hard one (where the platform has one); return the soft
    limit now in force (0 where it cannot be read)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_cap(fd_limit: int, wanted: int | None) -> int:
    """The connection bound: ``wanted`` (or :data:`DEFAULT_MAX_CONNECTIONS`), never closer to the file
    limit than :data:`RESERVED_FDS`."""
    cap = wanted or DEFAULT_MAX_CONNECTIONS
    if fd_limit:
        cap = min(cap, max(fd_limit - RESERVED_FDS, 16))
    return cap


class ConnectionGuard:
    """The open connections of one server and their clocks (see the module doc). All its methods run on
    the event loop."""

    def __init__(self, max_connections: int, header_timeout: float):
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        #: protocol -> [when it last became idle (opened, or answered), when it last received data]; in
        #: opening order, so the first idle one found is the oldest
        self.conns: dict[Any, list[float]] = {}
        self.evicted = 0
        self._sweeper: asyncio.TimerHandle | None = None

    def opened(self, proto: Any) -> None:
        if len(self.conns) >= self.max_connections:
            victim = next((p for p in self.conns if not _busy(p)), None)
            if victim is not None:
                self._close(victim)
        now = time.monotonic()
        self.conns[proto] = [now, now]
        if self._sweeper is None:
            self._schedule()

    def received(self, proto: Any) -> None:
        if proto in self.conns:
            self.conns[proto][1] = time.monotonic()

    def answered(self, proto: Any) -> None:
        """A response went out: the connection is idle, and the next request's head is timed from now."""
        if proto in self.conns:
            self.conns[proto][0] = time.monotonic()

    def closed(self, proto: Any) -> None:
        self.conns.pop(proto, None)

    def sweep(self) -> None:
        """Close every connection idle past ``header_timeout`` without a complete request head (sending one
        slowly does not help), and every request whose body has received nothing for as long."""
        self._sweeper = None
        cutoff = time.monotonic() - self.header_timeout
        for proto, (idle_since, last_data) in list(self.conns.items()):
            if (not _busy(proto) and idle_since < cutoff) or (_receiving(proto) and last_data < cutoff):
                self._close(proto)
        if self.conns:
            self._schedule()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._sweeper = loop.call_later(min(1.0, self.header_timeout / 2), self.sweep)

    def _close(self, proto: Any) -> None:
        self.conns.pop(proto, None)
        self.evicted += 1
        transport = getattr(proto, "transport", None)
        if transport is not None and not transport.is_closing():
            transport.close()


def _busy(proto: Any) -> bool:
    """A request is in flight: its head is complete and its response not yet sent."""
    cycle = getattr(proto, "cycle", None)
    return cycle is not None and not cycle.response_complete


def _receiving(proto: Any) -> bool:
    """A request in flight whose body has not all arrived."""
    cycle = getattr(proto, "cycle", None)
    return cycle is not None and not cycle.response_complete and getattr(cycle, "more_body", False)


def guarded_protocol(guard: ConnectionGuard, base: type | None = None) -> type:
    """Uvicorn's HTTP protocol class (the one ``http="auto"`` picks, unless ``base``) reporting to
    ``guard``: pass the result as ``uvicorn.Config(http=...)``."""
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        base = AutoHTTPProtocol

    class Guarded(base):  # type: ignore[valid-type, misc]
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            guard.opened(self)

        def connection_lost(self, exc) -> None:
            guard.closed(self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            guard.received(self)
            super().data_received(data)

        def on_response_complete(self) -> None:
            guard.answered(self)
            super().on_response_complete()

    Guarded.__name__ = f"Guarded{base.__name__}"
    return Guarded


__all__ = ["ConnectionGuard", "connection_cap", "guarded_protocol", "raise_fd_limit"]
