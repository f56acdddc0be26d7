"""inspect-ai's model-graded scorers (``inspect_ai.scorer``, 0.3.285): ``model_graded_qa`` (``[Task]``,
``[Submission]``, ``[Criterion]``) and ``model_graded_fact`` (``[Question]``, ``[Expert]``,
``[Submission]``), both between ``[BEGIN DATA]`` and ``[END DATA]``, answered ``GRADE: C``, ``GRADE: P``
or ``GRADE: I`` (P only when the instructions offer it: ``partial_credit=True``, or custom instructions
that offer a P grade in their own words). Custom instructions that ask for ``SCORE: n`` on a range they
state are answered so; instructions in any other format are refused (a 422), not answered in a format the
client's ``grade_pattern`` cannot read.

The qa template's criterion and the fact template's expert answer are the reference the judge is shown
(for task families whose prompt shows one); the qa criterion is also reported as the tool's criterion.
"""

from __future__ import annotations

import re
from typing import Any

from judge.core.rubric import Rubric
from judge.serve.protocols import scales, stated
from judge.serve.protocols.base import (
    Fields,
    Outcome,
    Prompt,
    Protocol,
    ProtocolError,
    Task,
    fields,
    register_protocol,
    text_of,
    trim_rule,
)

_BEGIN, _END = "[BEGIN DATA]", "[END DATA]"


# Custom instructions offer a P grade in their own words: a P standing alone as a letter ("P for partly
# right", "'P'", "GRADE: P"), never a P inside a word or a name such as "P-value".
_LETTER_P = re.compile(r"(?<![\w'-])['\"]?P['\"]?(?![\w-])")
# The answer format custom instructions define: "GRADE: ..." (inspect-ai's own), or a score label with a
# stated range ("end with 'SCORE: n' where n is from 0 to 10", read with a matching grade_pattern).
_GRADE = re.compile(r"GRADE\s*:", re.I)
_SCORE_LABEL = re.compile(r"\b(SCORE|Score|RATING|Rating)\s*:")


def _instructions(prompt: Prompt, f: Fields) -> str:
    """The system message and the template's text after ``[END DATA]`` (its instructions), never the data."""
    return f"{prompt.system}\n{f.tail}"


def _offers_partial(text: str) -> bool:
    """Whether the instructions offer P: the default instructions say "LETTER is one of CPI"; custom ones
    that offer a P grade in any words ("'P' for partially correct", "P if it is partly right")."""
    i = text.find("LETTER is one of ")
    if i >= 0:
        letters = text[i + len("LETTER is one of ") :][:8]
        return "P" in letters[: len(letters) - len(letters.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))]
    return _LETTER_P.search(text) is not None


def _answer_format(text: str) -> dict[str, Any]:
    """What the instructions ask the grader to end with: ``{"partial": bool}`` for inspect-ai's GRADE
    letters, or ``{"label": "SCORE", "range": (lo, hi)}`` for a score on a stated range. Instructions that
    ask for neither are refused (a 422): answering GRADE to a client whose grade_pattern reads something else
    would come back as NaN, silently."""
    if _GRADE.search(text):
        return {"partial": _offers_partial(text)}
    m = _SCORE_LABEL.search(text)
    if m is not None:
        found = stated.stated_range(text, None) or stated.item_range(text)
        if found is None:
            raise ProtocolError(
                f"the grading instructions ask for '{m.group(1)}: ...' but state no range for it (write "
                "'from A to B' or '(A-B)'), so the judge's reading cannot be put on it"
            )
        return {"partial": False, "label": m.group(1), "range": (found.lo, found.hi)}
    raise ProtocolError(
        "the grading instructions after [END DATA] ask for no answer format this server reads: it answers "
        "inspect-ai's graders with 'GRADE: C', 'GRADE: P' or 'GRADE: I' (instructions that say GRADE), or "
        "'SCORE: n' on a range the instructions state ('from 1 to 10')"
    )


def _anchor(prompt: Prompt, first: str, needed: tuple[str, ...]) -> tuple[int, int] | None:
    """``[BEGIN DATA]`` whose first field (past the ``***`` rule) is ``first``, the last ``[END DATA]``
    after it, and the ``needed`` fields between them."""
    t = prompt.text
    start = t.find(_BEGIN)
    if start < 0:
        return None
    rest = t.find(first, start)
    if rest < 0 or t[start + len(_BEGIN) : rest].strip().strip("*").strip():
        return None
    end = t.rfind(_END)
    if end < rest or any(t.find(m, rest, end) < 0 for m in needed):
        return None
    return start, end + len(_END)


def _spans(prompt: Prompt, f: Fields) -> list[tuple[int, int]]:
    return [trim_rule(prompt.text, span, "*") for span in f.spans]


class ModelGradedQA(Protocol):
    name = "inspect-model-graded-qa"
    tool = "inspect-ai"
    answer = "reasoning then GRADE: C, P or I"
    scale = "grade C/P/I"

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        return _anchor(prompt, "[Task]:", ("[Submission]:", "[Criterion]:"))

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        # The submission (what is graded) is found from the start, the criterion after it from the end.
        f = fields(prompt, ["[Task]:", "[Submission]:"], ["[Criterion]:"], end=_END, free_response=True)
        spans = _spans(prompt, f)
        criterion = prompt.content(*spans[2])
        return Task(
            mode="point",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[1])],
            reference=criterion,
            criterion_text=text_of(criterion),
            options=_answer_format(_instructions(prompt, f)),
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        opts = task.options
        if "label" in opts:
            return f"{note}\n\n{opts['label']}: {scales.integer_scale(outcome.readings[0], *opts['range'])}"
        return f"{note}\n\nGRADE: {scales.grade(outcome.readings[0], opts['partial'])}"


class ModelGradedFact(ModelGradedQA):
    name = "inspect-model-graded-fact"
    answer = "reasoning then GRADE: C, P or I"

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        return _anchor(prompt, "[Question]:", ("[Expert]:", "[Submission]:"))

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        f = fields(prompt, ["[Question]:", "[Expert]:", "[Submission]:"], end=_END, free_response=True)
        spans = _spans(prompt, f)
        return Task(
            mode="point",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[2])],
            reference=prompt.content(*spans[1]),
            options=_answer_format(_instructions(prompt, f)),
        )


register_protocol(ModelGradedQA())
register_protocol(ModelGradedFact())
