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
_TAIL = "###Feedback:"


def _anchor(prompt: Prompt, first: str, needed: tuple[str, ...]) -> tuple[int, int] | None:
    """The template's frame: its head, whose instructions name the ``[RESULT]`` format, and its closing
    ``###Feedback:``, with the ``needed`` sections between them. A head whose first section is not
    ``first`` is still this tool's (its extract names the missing section), but loses a tie to the
    template whose first section it is."""
    t = prompt.text
    start = t.find(_HEAD)
    if start < 0:
        return None
    body = t.find("###", start + len(_HEAD))
    tail = t.rfind(_TAIL)
    if body < 0 or t.find("[RESULT]", start, body) < 0 or tail < body or t[tail + len(_TAIL) :].strip():
        return None
    if any(t.find(m, body, tail) < 0 for m in needed):
        return None
    return start + (not t.startswith(first, body)), tail + len(_TAIL)


def _with_reference(prompt: Prompt) -> bool:
    """Whether the template has a reference slot: its fixed head says so ("... a reference answer ...")."""
    t = prompt.text
    start = t.find(_HEAD)
    return "a reference answer" in t[start : t.find("###", start + len(_HEAD))]


class PrometheusAbsolute(Protocol):
    name = "prometheus-absolute"
    tool = "prometheus-eval"
    answer = "feedback then [RESULT] n, n on 1-5"
    scale = "integer_scale 1-5"

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        return _anchor(
            prompt, "###The instruction to evaluate:", ("###Response to evaluate:", "###Score Rubrics:")
        )

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        with_ref = _with_reference(prompt)
        after = ["###Reference Answer (Score 5):\n"] if with_ref else []
        f = fields(
            prompt,
            ["###The instruction to evaluate:\n", "###Response to evaluate:\n"],
            [*after, "###Score Rubrics:\n"],
            end=_TAIL,
            free_response=True,
        )
        spans = f.spans
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

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        return _anchor(prompt, "###Instruction:", ("###Response A:", "###Response B:", "###Score Rubric:"))

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        with_ref = _with_reference(prompt)
        after = ["###Reference Answer:\n"] if with_ref else []
        f = fields(
            prompt,
            ["###Instruction:\n", "###Response A:\n", "###Response B:\n"],
            [*after, "###Score Rubric:\n"],
            end=_TAIL,
        )
        spans = f.spans
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
