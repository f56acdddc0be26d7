"""inspect-ai's model-graded scorers (``inspect_ai.scorer``, 0.3.285): ``model_graded_qa`` (``[Task]``,
``[Submission]``, ``[Criterion]``) and ``model_graded_fact`` (``[Question]``, ``[Expert]``,
``[Submission]``), both between ``[BEGIN DATA]`` and ``[END DATA]``, answered ``GRADE: C``, ``GRADE: P``
or ``GRADE: I`` (P only when the instructions offer it: ``partial_credit=True``).

The qa template's criterion and the fact template's expert answer are the reference the judge is shown
(for task families whose prompt shows one); the qa criterion is also reported as the tool's criterion.
"""

from __future__ import annotations

from judge.core.rubric import Rubric
from judge.serve.protocols import scales
from judge.serve.protocols.base import (
    Fields,
    Outcome,
    Prompt,
    Protocol,
    Task,
    fields,
    register_protocol,
    text_of,
    trim_rule,
)

_BEGIN, _END = "[BEGIN DATA]", "[END DATA]"


def _offers_partial(prompt: Prompt, f: Fields) -> bool:
    """Whether the instructions offer P: the default instructions say "LETTER is one of CPI"; custom ones
    that mention 'GRADE: P' or a "P" grade offer it too. Read in the system message and the template's
    text after ``[END DATA]`` (its instructions), never in the data."""
    text = f"{prompt.system}\n{f.tail}"
    i = text.find("LETTER is one of ")
    if i >= 0:
        letters = text[i + len("LETTER is one of ") :][:8]
        return "P" in letters[: len(letters) - len(letters.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))]
    return any(s in text for s in ("GRADE: P", "GRADE:P", '"P" for partial'))


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
            options={"partial": _offers_partial(prompt, f)},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        return f"{note}\n\nGRADE: {scales.grade(outcome.readings[0], task.options['partial'])}"


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
            options={"partial": _offers_partial(prompt, f)},
        )


register_protocol(ModelGradedQA())
register_protocol(ModelGradedFact())
