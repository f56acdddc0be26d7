"""The toolkit's strict answer extractor, shared by every benchmark module (``strict`` mode).

The benchmarks' own extractors have known bugs (see the MileBench and MMRA modules). This one:

* reads the usual answer forms: ``"B"``, ``"B."``, ``"(B)"``, ``"**B**"``, ``"B. cat"``,
  ``"The answer is B"``, ``"Answer: (C)"``, ``"the answer is b"``, or the option's own text;
* never takes the article "a"/"A" for option A (``"it is a truck, not a car"``,
  ``"A good choice is C"``), and skips option texts that are negated (``"not a car"``);
* returns no answer, never a guess, for an empty, refusing or ambiguous response;
  :attr:`Extraction.how` says which rule decided, or why there is no answer.

Entry points: :func:`extract_choice` (multiple choice) and :func:`extract_yes_no`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NO_ANSWER = "no answer"


@dataclass(frozen=True)
class Extraction:
    """``answer``: an option key (``"B"``), ``"yes"``/``"no"``, or None; ``how``: the deciding rule or why none."""

    answer: str | None
    how: str

    @property
    def no_answer(self) -> bool:
        return self.answer is None


def option_keys(n: int) -> list[str]:
    """Option keys for ``n`` options: A..Z, then AA, AB, ... (spreadsheet-column style)."""
    keys = []
    for i in range(n):
        key, i = "", i + 1
        while i:
            i, r = divmod(i - 1, 26)
            key = chr(65 + r) + key
        keys.append(key)
    return keys


def as_options(choices: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    """``{key: text}`` from a mapping (keys upper-cased) or a list (keyed A, B, ...)."""
    if isinstance(choices, Mapping):
        return {str(k).strip().upper(): str(v) for k, v in choices.items()}
    return dict(zip(option_keys(len(choices)), (str(c) for c in choices), strict=True))


# ----------------------------------------------------------------------------- text helpers

_MARKUP_RE = re.compile(r"[*`#]+")
_WORD_SPLIT_RE = re.compile(r"[\W_]+")
# Words after which a capital "A" or "I" is still an answer letter ("A is correct"), not an article/pronoun.
_LETTER_VERBS = {
    "is",
    "was",
    "would",
    "should",
    "seems",
    "appears",
    "matches",
    "fits",
    "and",
    "or",
    "because",
    "since",
    "as",
    "looks",
    "best",
    "correct",
    "right",
}
_NEGATIONS = {"not", "no", "never", "nor", "t"}  # "t": the tail of "isn't"/"doesn't" once split into words
_ARTICLES = {"a", "an", "the"}
_REFUSAL_RE = re.compile(
    r"\b(?:i\s+(?:can\s*not|can't|cannot|am\s+(?:not\s+able|unable)|don't\s+know|do\s+not\s+know|'m\s+sorry)"
    r"|unable\s+to|cannot\s+(?:be\s+)?determine|can't\s+(?:be\s+)?determine|not\s+possible\s+to"
    r"|not\s+enough\s+information|sorry|none\s+of\s+the\s+(?:options|above|choices|answers))\b",
    re.IGNORECASE,
)
# "The answer is B", "Answer: (C)", "correct option: b", "final answer would be [D]".
_ANSWER_STATEMENT_RE = re.compile(
    r"\b(?:final\s+answer|correct\s+answer|correct\s+option|correct\s+choice|right\s+answer|answer)\b"
    r"(?:\s+(?:is|would\s+be|should\s+be|will\s+be|must\s+be))?\s*(?:[:=\-]\s*)?"
    r"(?:(?:option|choice|letter)\s+)?"
    r"(?P<tok>\(\s*[A-Za-z]{1,2}\s*\)|\[\s*[A-Za-z]{1,2}\s*\]|[A-Za-z]{1,2})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_OPTION_MENTION_RE = re.compile(
    r"\b(?:option|choice)\b(?:\s+(?:is|would\s+be|should\s+be))?\s*"
    r"(?P<tok>\(\s*[A-Za-z]{1,2}\s*\)|[A-Za-z]{1,2})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_WHOLE_LETTER_RE = re.compile(r"^[(\[]?\s*([A-Za-z]{1,2})\s*[)\]]?\s*[.:)]?$")
_LEADING_LETTER_RE = re.compile(r"^[(\[]?([A-Za-z]{1,2})\s*([)\].:])\s*\S")
_PAREN_LETTER_RE = re.compile(r"\(\s*([A-Za-z]{1,2})\s*\)")
_BARE_CAPITAL_RE = re.compile(r"(?<![A-Za-z0-9'])([A-Z]{1,2})(?![A-Za-z0-9'])")


def _clean(text: str) -> str:
    """Markdown emphasis and code marks removed, whitespace collapsed."""
    return " ".join(_MARKUP_RE.sub("", text).split())


def _words(text: str) -> list[str]:
    return [w for w in _WORD_SPLIT_RE.split(text.lower()) if w]


def _letter_token(tok: str) -> tuple[str, bool]:
    """The letter(s) of a matched token and whether they were bracketed."""
    bracketed = tok[:1] in "(["
    return tok.strip("()[] \t"), bracketed


def _accept_letter(
    letter: str, bracketed: bool, after: str, keys: set[str], case_sensitive: bool
) -> str | None:
    """The option key a letter stands for, or None when it is not one (or reads as a word)."""
    if letter.upper() not in keys:
        return None
    if letter.islower():
        if case_sensitive:
            return None
        # A bare lower-case letter followed by a word is an article or a word ("is a car"), not a key.
        if not bracketed and re.match(r"\s+[A-Za-z]", after):
            return None
    return letter.upper()


def _is_word_use(letter: str, after: str) -> bool:
    """A capital "A"/"I" followed by a lower-case word is an article/pronoun ("A good choice", "I think")."""
    if letter not in ("A", "I"):
        return False
    m = re.match(r"\s+([a-z][a-z']*)", after)
    return m is not None and m.group(1) not in _LETTER_VERBS


# ----------------------------------------------------------------------------- option text


def _text_matches(text: str, options: dict[str, str]) -> list[str]:
    """Keys of the options whose text occurs (word-aligned, not negated) and is not part of a longer match."""
    words = _words(text)
    spans: dict[str, list[tuple[int, int]]] = {}
    for key, opt in options.items():
        ow = _words(opt)
        if not ow:
            continue
        for i in range(len(words) - len(ow) + 1):
            if words[i : i + len(ow)] != ow:
                continue
            j = i - 1
            while j >= 0 and words[j] in _ARTICLES:
                j -= 1
            if j >= 0 and words[j] in _NEGATIONS:
                continue  # "not a car": the option is rejected, not chosen
            spans.setdefault(key, []).append((i, i + len(ow)))
    keep = []
    for key, own in spans.items():
        others = [s for k, ss in spans.items() if k != key for s in ss]
        # "dark red" wins over "red" when every "red" lies inside a longer option's match.
        inside = all(
            any(o[0] <= s[0] and s[1] <= o[1] and (o[1] - o[0]) > (s[1] - s[0]) for o in others) for s in own
        )
        if not inside:
            keep.append(key)
    return keep


# ----------------------------------------------------------------------------- extractors


def extract_choice(
    text: str | None,
    choices: Mapping[str, str] | Sequence[str],
    *,
    letters_shown: bool = True,
    case_sensitive: bool = False,
) -> Extraction:
    """The option a response picks, by the first rule that decides:

    1. the whole response is a key (``"B"``, ``"(b)"``, ``"B."``, ``"**B**"``);
    2. the whole response is an option's text (exactly, then ignoring case and punctuation);
    3. the last answer statement (``"The answer is B"``, ``"Answer: (C)"``);
    4. a leading key with a delimiter (``"B. cat"``, ``"(B) cat"``, ``"B: cat"``);
    5. bracketed keys ``"(B)"`` anywhere, if they name one option;
    6. ``option B``/``choice B`` mentions, if they name one option;
    7. option texts found in the response (word-aligned, not negated, longest wins), if one;
    8. standalone capital keys, if they name one option (an article "A"/pronoun "I" is skipped).

    ``letters_shown=False`` (the prompt listed the options without keys, as MileBench does for
    GPR1200) uses only the text rules. ``case_sensitive=True`` accepts upper-case keys only,
    so "a" is never a key (MMRA's rule). Otherwise no answer, with ``how`` saying why
    (empty, refusal, ambiguous, nothing found).
    """
    options = as_options(choices)
    keys = set(options)
    raw = (text or "").strip()
    clean = _clean(raw)
    if not clean:
        return Extraction(None, f"{NO_ANSWER} (empty response)")
    ambiguous: list[str] = []

    if letters_shown:
        m = _WHOLE_LETTER_RE.match(clean)
        if m:
            key = _accept_letter(m.group(1), True, "", keys, case_sensitive)
            if key:
                return Extraction(key, "whole response is the key")

    for key, opt in options.items():
        if raw == opt.strip():
            return Extraction(key, "whole response is the option text")
    exact = [k for k, opt in options.items() if _words(opt) and _words(opt) == _words(clean)]
    if len(exact) == 1:
        return Extraction(exact[0], "whole response is the option text (ignoring case and punctuation)")

    if letters_shown:
        found = []
        for m in _ANSWER_STATEMENT_RE.finditer(clean):
            letter, bracketed = _letter_token(m.group("tok"))
            after = clean[m.end() :]
            key = _accept_letter(letter, bracketed, after, keys, case_sensitive)
            if key and not (not bracketed and _is_word_use(letter, after)):
                found.append(key)
        if found:
            return Extraction(found[-1], "answer statement")

        m = _LEADING_LETTER_RE.match(clean)
        if m:
            letter, delim = m.group(1), m.group(2)
            # Lower case only before a closing bracket ("b) cat"): "e.g." and "a. ..." are not keys.
            key = _accept_letter(letter, True, "", keys, case_sensitive)
            if key and (letter.isupper() or delim in ")]"):
                return Extraction(key, "leading key")

        paren = {
            k
            for k in (
                _accept_letter(x, True, "", keys, case_sensitive) for x in _PAREN_LETTER_RE.findall(clean)
            )
            if k
        }
        if len(paren) == 1:
            return Extraction(paren.pop(), "bracketed key")
        ambiguous += sorted(paren)

        mentions = set()
        for m in _OPTION_MENTION_RE.finditer(clean):
            letter, bracketed = _letter_token(m.group("tok"))
            key = _accept_letter(letter, bracketed, clean[m.end() :], keys, case_sensitive)
            if key:
                mentions.add(key)
        if len(mentions) == 1 and not paren:
            return Extraction(mentions.pop(), "option mention")
        ambiguous += sorted(mentions)

    by_text = _text_matches(clean, options)
    if len(by_text) == 1 and not ambiguous:
        return Extraction(by_text[0], "option text")
    ambiguous += by_text

    if letters_shown and not ambiguous:
        capitals = {
            m.group(1)
            for m in _BARE_CAPITAL_RE.finditer(clean)
            if m.group(1) in keys and not _is_word_use(m.group(1), clean[m.end() :])
        }
        if len(capitals) == 1:
            return Extraction(capitals.pop(), "standalone key")
        ambiguous += sorted(capitals)

    if ambiguous:
        return Extraction(None, f"{NO_ANSWER} (ambiguous: {', '.join(sorted(set(ambiguous)))})")
    if _REFUSAL_RE.search(clean):
        return Extraction(None, f"{NO_ANSWER} (refusal)")
    return Extraction(None, f"{NO_ANSWER} (no option found)")


_YES_NO_RE = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
_YES_NO_STATEMENT_RE = re.compile(
    r"\banswer\b(?:\s+(?:is|would\s+be|should\s+be))?\s*[:=\-]?\s*(yes|no)\b", re.IGNORECASE
)
_YES_NO_VALUE = {"yes": "yes", "true": "yes", "no": "no", "false": "no"}


def extract_yes_no(text: str | None) -> Extraction:
    """``"yes"``/``"no"`` from a response: the last answer statement, else a leading yes/no
    followed by punctuation (``"No, the ..."``), else the only one of the two that occurs (case-insensitive;
    true/false read as yes/no); otherwise no answer (empty, refusal, ambiguous, nothing found)."""
    clean = _clean((text or "").strip())
    if not clean:
        return Extraction(None, f"{NO_ANSWER} (empty response)")
    stated = _YES_NO_STATEMENT_RE.findall(clean)
    if stated:
        return Extraction(stated[-1].lower(), "answer statement")
    lead = re.match(r"^\W*(yes|no|true|false)\s*(?:[.,;:!]|$)", clean, re.IGNORECASE)
    if lead:
        return Extraction(_YES_NO_VALUE[lead.group(1).lower()], "leading yes/no")
    values = {_YES_NO_VALUE[w.lower()] for w in _YES_NO_RE.findall(clean)}
    if len(values) == 1:
        return Extraction(values.pop(), "only yes/no word")
    if values:
        return Extraction(None, f"{NO_ANSWER} (ambiguous: no, yes)")
    if _REFUSAL_RE.search(clean):
        return Extraction(None, f"{NO_ANSWER} (refusal)")
    return Extraction(None, f"{NO_ANSWER} (no yes/no found)")


__all__ = ["NO_ANSWER", "Extraction", "as_options", "extract_choice", "extract_yes_no", "option_keys"]
