"""Tables as text: Markdown (``summary.md``, ``report.md``, ``audit.md``) and aligned plain text (what a
command prints). One place for both, below every room that writes a table.

A cell is formatted by :func:`cell`: None is ``-``, a float has 3 decimals, a dict is ``key: value, ...``,
anything else is ``str()``; a ``|`` inside a Markdown cell is escaped so it cannot split the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def cell(v: Any, digits: int = 3) -> str:
    """One Markdown cell's text (see the module doc)."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {n}" for k, n in v.items()) or "-"
    return str(v).replace("|", "\\|")


def md_table(headers: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table: the header row, the rule, one line per row (cells through :func:`cell`)."""
    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join(" --- " for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned as plain text, a rule under the header (what a command prints)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


__all__ = ["cell", "md_table", "text_table"]
