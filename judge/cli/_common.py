"""What every command shares: the argument parser, checked number options, how an expected error is printed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (``prog: error: ... (see prog --help)``), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number ``>= low``; anything else is a usage error naming the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    parse.__name__ = f"int>={low}"
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def fail(e: Exception) -> int:
    """Print ``error: ...`` to stderr and return the exit code of a user error (2)."""
    print(f"error: {e}", file=sys.stderr)
    return 2
