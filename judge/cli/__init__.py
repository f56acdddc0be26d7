"""Command-line entry points, one module per command; argument parsing only.

Each command calls one function of a room (``judge.data``, ``judge.train``, ``judge.scoring``,
``judge.eval``) and turns a :class:`~judge.core.errors.JudgeError` into ``error: ...`` and exit 2.
"""

from judge.cli.data import data_main

__all__ = ["data_main"]
