"""prometheus-eval's grading prompts (``prometheus_eval.prompts``, 0.1.20): absolute grading, answered
``(feedback) [RESULT] n`` with ``n`` on 1-5, and relative grading, answered ``(feedback) [RESULT] A|B``.

Both templates open with ``###Task Description:`` and close with ``###Feedback:``; the absolute one has
``###Response to evaluate:`` and ``###Score Rubrics:``, the relative one ``###Response A:``,
``###Response B:`` and ``###Score Rubric:``; either may carry a reference answer. The tool's score rubric
is its own criterion text: reported, not scored (the judge scores its own criterion).
"""

from __future__ import annotations

from judge.core.rubric import Rubric
from judge.serve.protocols import scales
from judge.serve.protocols.base import Outcome, Prompt, Protocol, Task, fields, register_protocol, text_of

_HEAD = "###Task Description:"
_TAIL = r"\n*###Feedback:\s*$"


class PrometheusAbsolute(Protocol):
    name = "prometheus-absolute"
    tool = "prometheus-eval"
    answer = "feedback then [RESULT] n, n on 1-5"
    scale = "integer_scale 1-5"

    def match(self, prompt: Prompt) -> bool:
        t = prompt.text
        return _HEAD in t and "###Response to evaluate:" in t and "###Score Rubrics:" in t and "[RESULT]" in t

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        with_ref = "###Reference Answer (Score 5):" in prompt.text
        markers = [r"###The instruction to evaluate:\n", r"\n*###Response to evaluate:\n"]
        if with_ref:
            markers.append(r"\n*###Reference Answer \(Score 5\):\n")
        markers.append(r"\n*###Score Rubrics:\n")
        spans = fields(prompt, markers, end=_TAIL)
        question = prompt.content(*spans[0]) + prompt.images_outside(spans)
        return Task(
            mode="point",
            question=question,
            responses=[prompt.content(*spans[1])],
            reference=prompt.content(*spans[2]) if with_ref else None,
            criterion_text=text_of(prompt.content(*spans[-1])),
            options={"range": (1, 5)},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        return f"{note} [RESULT] {self.value(task, outcome)}"

    def value(self, task: Task, outcome: Outcome) -> int:
        return scales.integer_scale(outcome.readings[0], 1, 5)


class PrometheusRelative(Protocol):
    name = "prometheus-relative"
    tool = "prometheus-eval"
    answer = "feedback then [RESULT] A or B"
    scale = "preference_verdict, no ties"

    def match(self, prompt: Prompt) -> bool:
        t = prompt.text
        return _HEAD in t and "###Response A:" in t and "###Response B:" in t and "###Score Rubric:" in t

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        with_ref = "###Reference Answer:" in prompt.text
        markers = [r"###Instruction:\n", r"\n*###Response A:\n", r"\n*###Response B:\n"]
        if with_ref:
            markers.append(r"\n*###Reference Answer:\n")
        markers.append(r"\n*###Score Rubric:\n")
        spans = fields(prompt, markers, end=_TAIL)
        return Task(
            mode="pair",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[1]), prompt.content(*spans[2])],
            reference=prompt.content(*spans[3]) if with_ref else None,
            criterion_text=text_of(prompt.content(*spans[-1])),
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        verdict = scales.preference_verdict(outcome.preference.p_first_better, ties=False)
        return f"{note} [RESULT] {verdict}"


register_protocol(PrometheusAbsolute())
register_protocol(PrometheusRelative())
