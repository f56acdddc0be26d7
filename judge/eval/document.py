"""The report's document: a list of blocks (headings, paragraphs, tables, images) rendered to Markdown and to
self-contained HTML (images embedded), and the cell formats every section of ``report.md`` uses."""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Sequence
from pathlib import Path

from judge.core.tables import md_table
from judge.eval.report_data import Interval


def fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, int):
        return str(x)
    return f"{x:.{digits}f}"


def fmt_ci(stat: Interval | None, small: bool = False, digits: int = 3) -> str:
    """A value and its interval at the same number of decimals (a bound at fewer could print below the value
    it bounds: ``0.956 [0.96, 0.96]``)."""
    if stat is None or stat.value is None:
        return "undefined"
    out = f"{stat.value:.{digits}f}"
    if stat.ci:
        out += f" [{stat.ci[0]:.{digits}f}, {stat.ci[1]:.{digits}f}]"
    return out + (" †" if small else "")


def pct(x) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


class Doc:
    """A list of blocks rendered to Markdown and to self-contained HTML (images embedded)."""

    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str):
        self.blocks.append(("h", level, text))

    def p(self, text: str):
        self.blocks.append(("p", text))

    def note(self, text: str):
        self.blocks.append(("note", text))

    def ul(self, items: Sequence[str]):
        if items:
            self.blocks.append(("ul", list(items)))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]):
        self.blocks.append(("table", list(header), [list(r) for r in rows]))

    def img(self, path: Path, alt: str):
        self.blocks.append(("img", path, alt))

    def markdown(self) -> str:
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out.append(f"{'#' * b[1]} {b[2]}")
            elif b[0] == "p":
                out.append(b[1])
            elif b[0] == "note":
                out.append(f"> **{b[1]}**")
            elif b[0] == "ul":
                out.append("\n".join(f"- {x}" for x in b[1]))
            elif b[0] == "table":
                out.append(md_table(b[1], b[2]))
            elif b[0] == "img":
                out.append(f"![{b[2]}]({b[1].name})")
        return "\n\n".join(out) + "\n"

    def html(self, title: str) -> str:
        e = html.escape
        body = []
        for b in self.blocks:
            if b[0] == "h":
                body.append(f"<h{b[1]}>{e(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                body.append(f"<p>{_inline(b[1])}</p>")
            elif b[0] == "note":
                body.append(f'<p class="note">{_inline(b[1])}</p>')
            elif b[0] == "ul":
                body.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in b[1]) + "</ul>")
            elif b[0] == "table":
                head = "".join(f"<th>{e(c)}</th>" for c in b[1])
                rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in b[2])
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif b[0] == "img":
                data = base64.b64encode(Path(b[1]).read_bytes()).decode("ascii")
                body.append(
                    f'<figure><img alt="{e(b[2])}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{e(b[2])}</figcaption></figure>"
                )
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
        )


_CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;"
    "color:#222;line-height:1.45}table{border-collapse:collapse;margin:1em 0;font-size:.88em}"
    "th,td{border:1px solid #ccc;padding:.3em .55em;text-align:left;vertical-align:top}th{background:#f1f3f5}"
    "tr:nth-child(even) td{background:#fafafa}code{background:#f1f3f5;padding:0 .2em;border-radius:3px}"
    ".note{background:#fff8e1;border-left:4px solid #f0b400;padding:.6em 1em}"
    "figure{margin:1.5em 0}img{max-width:100%;border:1px solid #eee}figcaption{color:#666;font-size:.85em}"
)


def _inline(text: str) -> str:
    """Escape text for HTML, keeping Markdown's `code` and **bold**."""
    t = html.escape(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)


def fmt_signed(stat: Interval | None, small: bool = False) -> str:
    if stat is None or stat.value is None:
        return "undefined"
    out = f"{stat.value:+.3f}"
    if stat.ci:
        out += f" [{stat.ci[0]:+.3f}, {stat.ci[1]:+.3f}]"
    return out + (" †" if small else "")


__all__ = ["Doc", "fmt", "fmt_ci", "fmt_signed", "pct"]
