"""Command-line entry points, one module per command; argument parsing only.

Each command calls one function of a room (``judge.data``, ``judge.train``, ``judge.serve``,
``judge.eval``) and turns a :class:`~judge.data.errors.JudgeError` into ``error: ...`` and exit 2.
"""

from .data import data_main

__all__ = ["data_main"]
