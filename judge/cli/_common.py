"""What every command shares: how an expected error is printed."""

from __future__ import annotations

import sys


def fail(e: Exception) -> int:
    """Print ``error: ...`` to stderr and return the exit code of a user error (2)."""
    print(f"error: {e}", file=sys.stderr)
    return 2
