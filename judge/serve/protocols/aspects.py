"""Aspects a tool's criterion may ask about that the judge does not measure.

A learned judge rates a response's quality on its rubric. A yes/no criterion (ragas' ``AspectCritic``, a
phoenix template labelled yes/no) or a score criterion that asks whether the response is harmful, toxic,
biased, hallucinated, ... is a question about another aspect, one where "yes" means the response is bad:
answering it with the quality verdict would call a correct, harmless answer harmful, and flipping the
verdict would claim a measurement of harm the judge never made. Such criteria are refused (a 422 naming
the aspect and what is answered); the word is matched in any form ("harmful", "harmless", "unbiased"),
since the judge measures the aspect neither way."""

from __future__ import annotations

import re

#: Word stems of aspects outside a quality rubric, where a "yes" reports a fault.
_STEMS = (
    "harm", "malic", "toxic", "offensiv", "bias", "unsafe", "safe", "danger", "hallucinat",
    "deceiv", "decept", "exploit", "hate", "abus", "insult", "profan", "obscen", "violen",
    "illegal", "racis", "sexis", "misogyn", "discriminat", "jailbreak", "manipulat", "privacy", "pii",
)  # fmt: skip
_PATTERN = re.compile(r"\b(?:un|non-?|anti-?)?(?:" + "|".join(_STEMS) + r")[\w-]*", re.IGNORECASE)


def unmeasured(text: str) -> str | None:
    """The first word of ``text`` that names an aspect the judge does not measure, or None."""
    m = _PATTERN.search(text)
    return m.group(0) if m else None


def refusal(where: str, word: str, answered: str) -> str:
    """The 422's message: why the criterion in ``where`` is not answered, and what is."""
    return (
        f"{where} asks about {word!r}, an aspect the judge does not measure (harm, toxicity, bias, safety, "
        "hallucination, ...): it rates the response's quality on its rubric, so its verdict can answer that "
        f"aspect neither way (a pass is not 'not {word}'). {answered}"
    )
