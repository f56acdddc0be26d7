"""How the commands show the library's log messages: the one place that configures logging.

The library (everything outside ``judge.cli``) never prints: it logs to ``logging.getLogger(__name__)``,
INFO for progress lines and WARNING for warnings, and leaves the configuration to its user. The commands
call :func:`setup_logging` once, so that they print what they always printed: an INFO line as the plain
message on stdout, a warning as ``warning: <message>`` on stderr.
"""

from __future__ import annotations

import logging
import sys

#: the logger every library module's logger descends from
ROOT = "judge"


class _ConsoleHandler(logging.Handler):
    """INFO (and DEBUG) to stdout as the plain message; WARNING and above to stderr as ``warning: ...``
    (``error: ...`` for an ERROR record).

    The stream is looked up when a record is written, not when the handler is made, so output follows
    ``sys.stdout`` / ``sys.stderr`` when they are replaced (pytest's capture, a redirect in a notebook).
    Every line is flushed at once: a progress line must show before a long step starts, and stdout and
    stderr lines keep their order in a terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            if record.levelno >= logging.WARNING:
                stream, text = sys.stderr, f"{record.levelname.lower()}: {msg}"
            else:
                stream, text = sys.stdout, msg
            stream.write(text + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def setup_logging(level: int = logging.INFO) -> None:
    """Show the ``judge.*`` loggers' messages at ``level`` and above the way the commands print them.

    Safe to call more than once (each command's main calls it; tests call several mains in one process):
    the console handler is installed once. The ``judge`` logger stops propagating, so a dependency that
    configures the root logger cannot print a line twice or in another form.
    """
    logger = logging.getLogger(ROOT)
    logger.setLevel(level)
    logger.propagate = False
    if not any(isinstance(h, _ConsoleHandler) for h in logger.handlers):
        logger.addHandler(_ConsoleHandler())
