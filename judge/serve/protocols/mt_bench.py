"""MT-Bench's judge prompts (FastChat's ``llm_judge``) and the many benchmarks that reuse their format
(lmms-eval's multimodal_rewardbench and egothink among them): single-answer grading, answered
``Rating: [[n]]`` on the prompt's scale (1-10, or the values it offers, e.g. 0, 0.5 or 1), and pairwise
comparison, answered ``[[A]]``, ``[[B]]`` or, when the prompt offers a tie, ``[[C]]``.

Recognised by the format's markers: ``[[rating]]`` with ``[The Start of Assistant's Answer]``, or ``[[A]]``
and ``[[B]]`` with ``[The Start of Assistant A's Answer]`` and ``[The Start of Assistant B's Answer]``;
the instructions may be in the system message (MT-Bench) or open the user message. A reference answer
(``[The Start of Reference Answer]``) is the reference. The multi-turn templates are not read.
"""

from __future__ import annotations

import re

from judge.core.rubric import Rubric
from judge.serve.protocols import scales
from judge.serve.protocols.base import (
    Outcome,
    Prompt,
    Protocol,
    Task,
    fields,
    number_range,
    register_protocol,
)

_REF = r"\s*\[The Start of Reference Answer\]\n"
_CHOICES = re.compile(r"with either ((?:-?\d+(?:\.\d+)?\s*,\s*)*-?\d+(?:\.\d+)?),?\s+or\s+(-?\d+(?:\.\d+)?)")


class Single(Protocol):
    name = "mt-bench-single"
    tool = "MT-Bench (FastChat llm_judge) format"
    answer = "explanation then Rating: [[n]], n on the prompt's scale (1-10 by default)"
    scale = "integer_scale, or nearest_choice for offered values"

    def match(self, prompt: Prompt) -> bool:
        return "[[rating]]" in prompt.whole and "[The Start of Assistant's Answer]" in prompt.text

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        with_ref = "[The Start of Reference Answer]" in prompt.text
        markers = [r"\[Question\]\n"]
        if with_ref:
            markers += [_REF, r"\n\[The End of Reference Answer\]\s*\[The Start of Assistant's Answer\]\n"]
        else:
            markers += [r"\s*\[The Start of Assistant's Answer\]\n"]
        spans = fields(prompt, markers, end=r"\n\[The End of Assistant's Answer\]")
        m = _CHOICES.search(prompt.whole)
        choices = [float(x) for x in re.split(r"\s*,\s*", m.group(1))] + [float(m.group(2))] if m else None
        return Task(
            mode="point",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[-1])],
            reference=prompt.content(*spans[1]) if with_ref else None,
            options={"range": number_range(prompt.whole, (1, 10)), "choices": choices},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        return f"{note}\n\nRating: [[{self.value(task, outcome):g}]]"

    def value(self, task: Task, outcome: Outcome) -> float:
        reading = outcome.readings[0]
        if task.options["choices"]:
            return scales.nearest_choice(reading, task.options["choices"])
        return scales.integer_scale(reading, *task.options["range"])


class Pair(Protocol):
    name = "mt-bench-pair"
    tool = "MT-Bench (FastChat llm_judge) format"
    answer = "explanation then [[A]], [[B]] or (when offered) [[C]] for a tie"
    scale = "preference_verdict"

    def match(self, prompt: Prompt) -> bool:
        w, t = prompt.whole, prompt.text
        return (
            "[[A]]" in w
            and "[[B]]" in w
            and "[The Start of Assistant A's Answer]" in t
            and "[The Start of Assistant B's Answer]" in t
        )

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        with_ref = "[The Start of Reference Answer]" in prompt.text
        markers = [r"\[User Question\]\n"]
        if with_ref:
            markers += [_REF, r"\n\[The End of Reference Answer\]\s*\[The Start of Assistant A's Answer\]\n"]
        else:
            markers += [r"\s*\[The Start of Assistant A's Answer\]\n"]
        markers += [r"\n\[The End of Assistant A's Answer\]\s*\[The Start of Assistant B's Answer\]\n"]
        spans = fields(prompt, markers, end=r"\n\[The End of Assistant B's Answer\]")
        return Task(
            mode="pair",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[-2]), prompt.content(*spans[-1])],
            reference=prompt.content(*spans[1]) if with_ref else None,
            options={"ties": "[[C]]" in prompt.whole},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        verdict = scales.preference_verdict(outcome.preference.p_first_better, task.options["ties"])
        return f"{note}\n\n[[{'C' if verdict == 'tie' else verdict}]]"


register_protocol(Single())
register_protocol(Pair())
