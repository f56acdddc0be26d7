"""Telling a prompt cannot fit the judge's context before tokenising all of it.

Tokenising costs time in proportion to the text, and a request may carry megabytes of it: a judge that
tokenised every text in full before finding it over its context budget would spend seconds per huge item
(in the one thread that scores for every client). :func:`text_tokens_over` counts the tokens of an item's
texts from growing prefixes instead, and stops as soon as the count passes the budget, so the work it does
is bounded by the budget, not by the text.

Why a count of the texts alone is a sound test: a prompt holds each text as a run of its own tokens, save
for at most one token at each end that may merge with the template's text beside it. So a prompt holds at
least ``sum(tokens(text)) - 2 * len(texts)`` tokens, and when that is over the budget the prompt cannot fit,
whatever template and images come with it. A prefix holds the text's tokens up to the cut, save for the
last one or two, which the cut may split: so its count, less 2, is a lower bound on the whole text's.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The first prefix tried is this many characters per token of budget; each next one is 4 times longer.
_CHARS_PER_TOKEN = 4


def count_tokens(tokenizer, text: str) -> int:
    """Tokens of ``text`` alone (no special tokens), by the fast tokenizer's backend where there is one."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return len(backend.encode(text, add_special_tokens=False).ids)
    return len(tokenizer.encode(text, add_special_tokens=False))


def text_tokens_over(tokenizer, texts: Sequence[str], budget: int) -> int | None:
    """A lower bound on the tokens a prompt holding ``texts`` needs, when it is over ``budget``; None when
    the texts may fit (the full encoding then decides). Tokenises at most about ``4 * 4 * budget``
    characters per text beyond what fits, however long the texts are (see the module doc)."""
    slack = 2 * len(texts)
    cap = budget + slack
    total = 0
    for text in texts:
        size = _CHARS_PER_TOKEN * max(cap, 1)
        while True:
            n = count_tokens(tokenizer, text[:size])
            if size < len(text):
                n -= 2  # tokens the cut may have split in two
            if n + total > cap or size >= len(text):
                break
            size *= 4
        total += n
        if total > cap:
            return total - slack
    return None


__all__ = ["count_tokens", "text_tokens_over"]
