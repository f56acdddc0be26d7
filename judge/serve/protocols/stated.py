"""The one reader of the numbers a tool's prompt states: its scale ("on a scale of 1 to 10", "an integer
between 0 and 10", "(1-5)") and its offered values ("with either 0, 0.5 or 1"). Every protocol reads
them here, and only from the text its template fixes (the instructions, never a question, reference or
response slot: see :mod:`~judge.serve.protocols.frame`).

Bounds (each refused with :class:`ScaleError`, a 422 that names the scale as read):

* a number is written with at most :data:`MAX_CHARS` characters (sign, digits, point) and no exponent,
  and ``|x| <= MAX_ABS``: a 5,000-digit number or ``10^400`` is never converted;
* a range is ordered, ``low < high``: "5 to 1" and "1 to 1" are refused, not replaced by a default;
* offered values are at most :data:`MAX_CHOICES`, within the same bounds.

The probabilities a distribution (``logprobs``) gives an integer scale are kept only for the integers that
carry mass, at most two per value of the judge's own scale (:func:`~judge.serve.protocols.scales.
integer_distribution`): memory does not depend on the range. Every pattern here is matched at a position
found by a fixed phrase, with single quantifiers over disjoint classes: linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from judge.serve.protocols.base import ProtocolError

#: Largest magnitude of a number a scale may state.
MAX_ABS = 10**6
#: Most characters a stated number may be written with (``-1000000.5`` is 10).
MAX_CHARS = 16
#: Most values a prompt may offer ("with either 0, 0.5 or 1").
MAX_CHOICES = 32

# A number as written: digits, an optional fraction, and an exponent that is read only to be refused.
_NUM = r"-?\d+(?:\.\d+)?(?:(?:\^|\*\*|[eE][+-]?)\d+)?"
_RANGE = re.compile(rf"(?:scale of|from|between)\s+({_NUM})\s+(?:to|and)\s+({_NUM})", re.I)
_PAREN = re.compile(rf"\(\s*({_NUM})\s*(?:-|to)\s*({_NUM})\s*\)")
_INTEGER = re.compile(rf"an integer between ({_NUM}) and ({_NUM})")
# A rubric item's range written bare, as lmms-eval's own docs do ({"accuracy": "1-10"}): the whole
# description, or after "scored"/"rated"/"score"/"scale" ("scored 1-10", "rated 1 to 5"). A number inside other
# words ("the 2-3 key facts") is not a scale. The look-behind starts a match only at a run's first digit.
_BARE_RANGE = r"(?<![\w.-])(\d+)\s*(?:-|\u2013|to)\s*(\d+)(?!\w|\.\d)"
_BARE = re.compile(rf"{_BARE_RANGE}\.?")
_BARE_MAX = 40  # characters: "1-10", "1 to 5." are short
_SCORED = re.compile(rf"\b(?:scored|rated|score|rate|rating|scale(?: of)?)\s*(?::\s*)?{_BARE_RANGE}", re.I)
_NUM_AT = re.compile(_NUM)
_CHOICE_SEP = re.compile(r"\s*,\s*(?:or\s+)?|,?\s+or\s+")


class ScaleError(ProtocolError):
    """A scale or set of values the prompt states that no answer can honour (a 422 naming it)."""


@dataclass(frozen=True)
class Scale:
    """An integer range ``lo..hi`` (``lo < hi``), as stated (``stated``: the words it was read from)."""

    lo: int
    hi: int
    stated: str = ""


def number(token: str, where: str) -> float:
    """The value of a number token, bounded (see the module doc); ``where`` names the scale for the 422."""
    if len(token) > MAX_CHARS or not re.fullmatch(r"-?\d+(?:\.\d+)?", token):
        raise ScaleError(f"{where} states the number {_shown(token)}, beyond |x| <= {MAX_ABS:,}")
    value = float(token)
    if abs(value) > MAX_ABS:
        raise ScaleError(f"{where} states the number {_shown(token)}, beyond |x| <= {MAX_ABS:,}")
    return value


def _shown(token: str) -> str:
    return repr(token if len(token) <= 60 else f"{token[:12]}...{token[-6:]} ({len(token)} characters)")


def _ordered(low: str, high: str, words: str, integer: bool) -> Scale:
    where = f"the scale {_shown(words) if len(words) <= 80 else _shown(low + ' to ' + high)}"
    lo, hi = number(low, where), number(high, where)
    if integer and not (lo.is_integer() and hi.is_integer()):
        raise ScaleError(f"{where} is not a range of integers")
    if not lo < hi:
        raise ScaleError(f"{where} is not a range from a low to a higher number")
    return Scale(int(lo), int(hi), words)


def stated_range(text: str, default: Scale | None, *, pattern: re.Pattern[str] = _RANGE) -> Scale | None:
    """The first integer range ``text`` states ("scale of A to B", "from A to B", "between A and B"), bounded
    and ordered, else ``default``. Raises :class:`ScaleError` for a range stated out of bounds or order."""
    m = pattern.search(text)
    if m is None:
        return default
    return _ordered(m.group(1), m.group(2), m.group(0), integer=True)


def item_range(text: str) -> Scale | None:
    """A rubric item's "(A-B)" or "(A to B)", else its "from A to B" wording, else a bare "A-B" / "A to B"
    (the whole description, or after "scored", "rated", "score", "scale": "scored 1-10"), else None."""
    for pattern in (_PAREN, _RANGE, _SCORED):
        found = stated_range(text, None, pattern=pattern)
        if found is not None:
            return found
    # The whole description a bare range: stripped once (linear), then matched whole. A long description
    # is never a bare range, and matching a pattern with whitespace on both sides of an anchor could
    # backtrack quadratically on a long run of spaces.
    bare = text.strip()
    if len(bare) <= _BARE_MAX and (m := _BARE.fullmatch(bare)) is not None:
        return _ordered(m.group(1), m.group(2), m.group(0), integer=True)
    return None


def integer_range(text: str, default: Scale) -> Scale:
    """G-Eval's "an integer between A and B", else ``default``."""
    return stated_range(text, default, pattern=_INTEGER) or default


def choices(text: str, phrase: str = "with either ") -> list[float] | None:
    """The values offered after ``phrase`` ("with either 0, 0.5 or 1"), in order, or None when the text
    offers none. Raises :class:`ScaleError` for values out of bounds, repeated or too many."""
    found = offered(text, phrase)
    return None if found is None else [v for v, _ in found]


def offered(text: str, phrase: str = "with either ") -> list[tuple[float, str]] | None:
    """:func:`choices` with each value's token as the prompt wrote it (``"2.3456789"``): an answer writes the
    token back, never a reformatted number the prompt did not offer."""
    start = text.find(phrase)
    if start < 0:
        return None
    pos = start + len(phrase)
    tokens: list[str] = []
    while len(tokens) <= MAX_CHOICES:
        m = _NUM_AT.match(text, pos)
        if m is None:
            break
        tokens.append(m.group())
        sep = _CHOICE_SEP.match(text, m.end())
        if sep is None:
            break
        pos = sep.end()
    if len(tokens) < 2:
        return None
    where = f"the values offered {_shown(text[start : start + 80])}"
    if len(tokens) > MAX_CHOICES:
        raise ScaleError(f"{where} are more than {MAX_CHOICES}")
    values = [number(t, where) for t in tokens]
    if len(set(values)) < len(values):
        raise ScaleError(f"{where} repeat a value")
    return list(zip(values, tokens, strict=True))


__all__ = [
    "MAX_ABS",
    "MAX_CHARS",
    "MAX_CHOICES",
    "Scale",
    "ScaleError",
    "choices",
    "integer_range",
    "item_range",
    "number",
    "offered",
    "stated_range",
]
