"""inspect-ai's model-graded scorers (``inspect_ai.scorer``, 0.3.285): ``model_graded_qa`` (``[Task]``,
``[Submission]``, ``[Criterion]``) and ``model_graded_fact`` (``[Question]``, ``[Expert]``,
``[Submission]``), both between ``[BEGIN DATA]`` and ``[END DATA]``, answered ``GRADE: C``, ``GRADE: P``
or ``GRADE: I`` (P only when the instructions offer it: ``partial_credit=True``).

The qa template's criterion and the fact template's expert answer are the reference the judge is shown
(for task families whose prompt shows one); the qa criterion is also reported as the tool's criterion.
"""

from __future__ import annotations

import re

from judge.core.rubric import Rubric
from judge.serve.protocols import scales
from judge.serve.protocols.base import Outcome, Prompt, Protocol, Task, fields, register_protocol, text_of

_SEP = r"\s*\*{3,}\s*"


def _offers_partial(prompt: Prompt) -> bool:
    """Whether the instructions offer P: the default instructions say "LETTER is one of CPI"; custom ones
    that mention 'GRADE: P' or a "P" grade offer it too."""
    m = re.search(r"LETTER is one of ([A-Z]+)", prompt.whole)
    if m is not None:
        return "P" in m.group(1)
    return bool(re.search(r"GRADE:\s*P\b|\"P\" for partial", prompt.whole))


class ModelGradedQA(Protocol):
    name = "inspect-model-graded-qa"
    tool = "inspect-ai"
    answer = "reasoning then GRADE: C, P or I"
    scale = "grade C/P/I"

    def match(self, prompt: Prompt) -> bool:
        t = prompt.text
        return "[BEGIN DATA]" in t and "[Task]:" in t and "[Submission]:" in t and "[Criterion]:" in t

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        spans = fields(
            prompt,
            [r"\[Task\]:", _SEP + r"\[Submission\]:", _SEP + r"\[Criterion\]:"],
            end=_SEP + r"\[END DATA\]",
        )
        criterion = prompt.content(*spans[2])
        return Task(
            mode="point",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[1])],
            reference=criterion,
            criterion_text=text_of(criterion),
            options={"partial": _offers_partial(prompt)},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        return f"{note}\n\nGRADE: {scales.grade(outcome.readings[0], task.options['partial'])}"


class ModelGradedFact(ModelGradedQA):
    name = "inspect-model-graded-fact"
    answer = "reasoning then GRADE: C, P or I"

    def match(self, prompt: Prompt) -> bool:
        t = prompt.text
        return "[BEGIN DATA]" in t and "[Question]:" in t and "[Expert]:" in t and "[Submission]:" in t

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        spans = fields(
            prompt,
            [r"\[Question\]:", _SEP + r"\[Expert\]:", _SEP + r"\[Submission\]:"],
            end=_SEP + r"\[END DATA\]",
        )
        return Task(
            mode="point",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[2])],
            reference=prompt.content(*spans[1]),
            options={"partial": _offers_partial(prompt)},
        )


register_protocol(ModelGradedQA())
register_protocol(ModelGradedFact())
