"""MileBench's official scoring reproduced: ``evaluate.py``'s answer normalization and ``match_choice``
(quirks included) and the ROUGE-L F of the ``rouge`` package it calls (see :mod:`judge.benchmarks.milebench`
for the rules and the commit followed)."""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from importlib import metadata

#: The official code this module reproduces (recorded in every score record's producer version).
OFFICIAL_REF = "MileBench evaluate.py+score.py@9583e1f"

# ----------------------------------------------------------------------------- official normalization
_PUNCT = [
    ";",
    "/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
]
_DIGIT_COMMA_DIGIT = re.compile(r"(\d)(,)(\d)")
# The official pattern meant "not preceded by a digit" but wrote a lookahead "(?!<=\d)", which never fires.
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
# The official code calls periodStrip.sub("", text, re.UNICODE): the flag lands in `count` (= 32).
_PERIOD_COUNT = int(re.UNICODE)


def _process_punctuation(text: str) -> str:
    out = text
    digit_comma = _DIGIT_COMMA_DIGIT.search(text) is not None
    for p in _PUNCT:
        # Both tests look at the text as it came in, not at the text being rewritten.
        if p + " " in text or " " + p in text or digit_comma:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _PERIOD.sub("", out, count=_PERIOD_COUNT)


def normalize_answer(text: str) -> str:
    """The official ``Eval.process``: newlines/tabs to spaces, strip; per punctuation character,
    delete every occurrence if it stands next to a space anywhere (or the text has a
    digit-comma-digit), else replace it by a space; remove the first 32 periods not followed
    by a digit; strip ``'`` then ``"``; strip; lowercase."""
    text = text.replace("\n", " ").replace("\t", " ").strip()
    text = _process_punctuation(text)
    return text.strip("'").strip('"').strip().lower()


_REGEX_SPECIALS = ["\\", ".", "^", "$", "*", "+", "?", "{", "}", "[", "]", "|", "(", ")"]


def _option_pattern(option: str) -> str:
    """The official ``preprocess_option_string``: normalize, then backslash the regex specials."""
    out = normalize_answer(option)
    for ch in _REGEX_SPECIALS:
        if ch in out:
            out = out.replace(ch, "\\" + ch)
    return out


def official_key(index: int) -> str:
    """The official ``Eval.char``: A..Z, then AA..AZ, then ``"B" + chr(index + 13)`` for every later index
    (BA..BZ, and past 78 options the characters after Z, as the official code writes them)."""
    if index < 26:
        return chr(index + 65)
    if index < 52:
        return "A" + chr(index + 65 - 26)
    return "B" + chr(index + 65 - 26 - 26)


def official_options(choices: list[str]) -> dict[str, str]:
    """Options keyed as the official code keys them (:func:`official_key`)."""
    return {official_key(i): c for i, c in enumerate(choices)}


def match_choice_official(text: str, options: dict[str, str]) -> str:
    """The official ``match_choice`` on an already normalized prediction; returns what it returns:

    1. empty prediction -> ``"C"`` (whatever the options);
    2. leftmost match of any ``"<key> <option>"`` (normalized, regex-escaped; at one position
       the first option in option order wins) -> the match's first character, upper-cased;
    3. leftmost match of any option with spaces removed in the space-free prediction; the match
       is then compared with the *escaped* option text, so an option holding a regex special
       ("3.5") never matches here and the rule falls through;
    4. a prediction of 1 or 2 characters that is a key (``"b"``, ``"ab"`` when there are 28+ options);
    5. every character of the prediction that is a key, upper-cased, concatenated
       ("the answer is b" -> "AB").

    Any exception returns the prediction itself, as the official ``except`` does.
    """
    if text == "":
        return "C"
    try:
        pattern = "(" + "|".join(_option_pattern(f"{k} {v}") for k, v in options.items()) + ")"
        m = re.search(pattern, text, re.S)
        if m:
            return m.group(0)[0].upper()
        escaped = {k: _option_pattern(v).replace(" ", "") for k, v in options.items()}
        m = re.search("(" + "|".join(escaped.values()) + ")", text.replace(" ", ""), re.S)
        if m:
            for k, v in escaped.items():
                if m[0].strip() == v:
                    return k.upper()
        if len(text) in (1, 2) and text.upper() in options:
            return text.upper()
    except Exception:  # noqa: BLE001 - the official code answers any failure with the raw text
        return text
    return "".join(c.upper() for c in text if c.upper() in options)


# ----------------------------------------------------------------------------- ROUGE-L

try:
    ROUGE_VERSION = metadata.version("rouge")
except metadata.PackageNotFoundError:  # pragma: no cover - rouge is a declared dependency
    ROUGE_VERSION = "not installed"


@contextmanager
def _recursion_limit(limit: int):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def rouge_l_f(prediction: str, reference: str) -> float:
    """ROUGE-L F of ``rouge`` 1.0.1 (what the official code calls): summary-level union LCS over
    sentences split on ".", words counted as sets. Raises ValueError for text with no sentence."""
    from rouge import Rouge

    scorer = Rouge(metrics=["rouge-l"])  # the same F as Rouge() gives; rouge-1/2 are not needed
    try:
        return scorer.get_scores(prediction, reference)[0]["rouge-l"]["f"]
    except RecursionError:
        # rouge reconstructs the LCS recursively; long texts need a deeper stack, not a different answer.
        n = len(prediction.split()) + len(reference.split())
        with _recursion_limit(4 * n + 1000):
            return scorer.get_scores(prediction, reference)[0]["rouge-l"]["f"]
