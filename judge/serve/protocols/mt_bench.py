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

from judge.core.rubric import Rubric
from judge.serve.protocols import scales, stated
from judge.serve.protocols.base import Outcome, Prompt, Protocol, Task, fields, register_protocol

_REF_START, _REF_END = "[The Start of Reference Answer]", "[The End of Reference Answer]"
_ANSWER, _ANSWER_END = "[The Start of Assistant's Answer]", "[The End of Assistant's Answer]"
_A, _A_END = "[The Start of Assistant A's Answer]", "[The End of Assistant A's Answer]"
_B, _B_END = "[The Start of Assistant B's Answer]", "[The End of Assistant B's Answer]"


def _frame(prompt: Prompt, opening: str, closing: str, needed: tuple[str, ...]) -> tuple[int, int] | None:
    """The user text's ``opening`` field and its last ``closing`` marker, with ``needed`` between them, where
    nothing but blank space follows the closing marker (images aside: the benchmarks append them)."""
    t = prompt.text
    start = t.find(opening)
    end = t.rfind(closing)
    if start < 0 or end < start or t[end + len(closing) :].replace("\x00", "").strip():
        return None
    if any(t.find(m, start, end) < 0 for m in needed):
        return None
    return start, end + len(closing)


def _instructions(prompt: Prompt, opening: str) -> str:
    """The instructions: the system message and the user text before the template's first field."""
    return f"{prompt.system}\n{prompt.text[: prompt.text.find(opening)]}"


def _with_reference(prompt: Prompt, opening: str, answer: str) -> bool:
    """A reference field stands between the question and the (first) answer."""
    t = prompt.text
    ref = t.find(_REF_START, t.find(opening))
    return 0 <= ref < t.find(answer, t.find(opening))


class Single(Protocol):
    name = "mt-bench-single"
    tool = "MT-Bench (FastChat llm_judge) format"
    answer = "explanation then Rating: [[n]], n on the prompt's scale (1-10 by default)"
    scale = "integer_scale, or nearest_choice for offered values"

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        found = _frame(prompt, "[Question]\n", _ANSWER_END, (_ANSWER,))
        if found is None or "[[rating]]" not in _instructions(prompt, "[Question]\n"):
            return None
        return found

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        with_ref = _with_reference(prompt, "[Question]\n", _ANSWER)
        markers = ["[Question]\n", _REF_START + "\n", _REF_END] if with_ref else ["[Question]\n"]
        spans = fields(prompt, [*markers, _ANSWER + "\n"], end=_ANSWER_END, free_response=True).spans
        # The scale and the offered values are read in the instructions only, bounded and ordered.
        said = _instructions(prompt, "[Question]\n")
        offered = stated.offered(said)
        scale = stated.stated_range(said, stated.Scale(1, 10)) if offered is None else None
        # FastChat reads the rating with \[\[(\d+\.?\d*)\]\]: no sign, so no negative value can be answered.
        if (scale is not None and scale.lo < 0) or any(v < 0 for v, _ in offered or ()):
            where = f"the scale {scale.stated!r}" if scale else "the values offered"
            raise stated.ScaleError(f"{where} has negative values, which MT-Bench's [[rating]] cannot hold")
        choices = [v for v, _ in offered] if offered else None
        return Task(
            mode="point",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[-1])],
            reference=prompt.content(*spans[1]) if with_ref else None,
            options={
                "range": (scale.lo, scale.hi) if scale else None,
                "choices": choices,
                "tokens": [t for _, t in offered] if offered else None,
            },
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        # An offered value is written back as the prompt wrote it, an integer with str(): never ":g"'s
        # rounding (2.34568 for 2.3456789) or exponent (2e-05, 1e+06), which FastChat's pattern cannot read.
        value = self.value(task, outcome)
        if task.options["choices"]:
            shown = task.options["tokens"][task.options["choices"].index(value)]
        else:
            shown = str(int(value))
        return f"{note}\n\nRating: [[{shown}]]"

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

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        found = _frame(prompt, "[User Question]\n", _B_END, (_A, _A_END, _B))
        said = _instructions(prompt, "[User Question]\n")
        if found is None or "[[A]]" not in said or "[[B]]" not in said:
            return None
        return found

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        with_ref = _with_reference(prompt, "[User Question]\n", _A)
        markers = ["[User Question]\n", _REF_START + "\n", _REF_END] if with_ref else ["[User Question]\n"]
        spans = fields(prompt, [*markers, _A + "\n", _A_END, _B + "\n"], end=_B_END).spans
        return Task(
            mode="pair",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[-3]), prompt.content(*spans[-1])],
            reference=prompt.content(*spans[1]) if with_ref else None,
            options={"ties": "[[C]]" in _instructions(prompt, "[User Question]\n")},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        verdict = scales.preference_verdict(outcome.preference.p_first_better, task.options["ties"])
        return f"{note}\n\n[[{'C' if verdict == 'tie' else verdict}]]"


register_protocol(Single())
register_protocol(Pair())
