"""lmms-eval's LLM-judge helpers (``lmms_eval.llm_judge``, 0.7.3), each answered as its parser reads it:

* ``evaluate_binary`` (``BINARY_JUDGE_PROMPT``): the positive or the negative token the prompt names
  (``1``/``0`` or ``Yes``/``No``), alone;
* the correctness prompt (``CORRECTNESS_JUDGE_PROMPT``): ``Yes`` or ``No`` (or what it names);
* ``evaluate_comparative`` (``COMPARATIVE_JUDGE_PROMPT``, the generic two-assistant judge prompt, e.g.
  LLaVA-in-the-Wild): a first line with the two assistants' scores on the prompt's range (1-10 by
  default), then an explanation;
* ``evaluate_with_rubric``: a JSON object with a score per rubric item.

lmms-eval's providers append ``Request.images`` after the prompt's text (as image parts of the last user
message): images outside the template's fields go with the question.
"""

from __future__ import annotations

import json
import re

from judge.core.rubric import Rubric
from judge.serve.protocols import scales, stated
from judge.serve.protocols.base import (
    Outcome,
    Prompt,
    Protocol,
    ProtocolError,
    Task,
    fields,
    register_protocol,
    trim_rule,
)


class Binary(Protocol):
    name = "lmms-eval-binary"
    tool = "lmms-eval"
    answer = "the prompt's positive or negative token alone (1/0, Yes/No)"
    scale = "binary"

    #: the template's opening text; what its head says the two tokens are; its fields' heads (the last one
    #: the prediction's), the rule that closes a field, and the closing marker found from the end
    _OPENING = "You are a strict evaluator assessing answer correctness."
    _OUTPUT = re.compile(r"You must output (\S+) for fully correct answers and (\S+) for any other case")
    _FIELDS = ["Question:\n```\n", "Ground Truth Answer:\n```\n", "Model Prediction:\n```\n"]
    _RULE = "`"
    _END = "\n```"

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        t = prompt.text
        start = t.find(self._OPENING)
        first = t.find(self._FIELDS[0], start) if start >= 0 else -1
        if first < 0:
            return None
        last = t.find(self._FIELDS[-1], first)
        end = t.rfind(self._END)
        if last < 0 or end < last + len(self._FIELDS[-1]) - 1:
            return None
        return start, end + len(self._END)

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        f = fields(prompt, self._FIELDS, end=self._END, free_response=True)
        m = self._OUTPUT.search(f.head)  # the tokens are stated in the template's head, before the data
        if m is None:
            raise ProtocolError("the prompt does not say which tokens mean correct and incorrect")
        spans = [trim_rule(prompt.text, span, self._RULE) for span in f.spans]
        return Task(
            mode="point",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[2])],
            reference=prompt.content(*spans[1]),
            options={"positive": m.group(1), "negative": m.group(2)},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        # lmms-eval's parser takes any "1" in the reply for correct: the token alone, no explanation.
        return task.options["positive" if scales.binary(outcome.readings[0]) else "negative"]


class Correctness(Binary):
    """lmms-eval's correctness prompt: the binary one's reading, with its own markers and fields."""

    name = "lmms-eval-correctness"
    answer = 'the prompt\'s positive or negative token alone ("Yes"/"No")'

    _OPENING = "You are given a question, the solution and the correct answer."
    _OUTPUT = re.compile(
        r'Return only "([^"\n]+)" if the solution is correct or "([^"\n]+)" if it is incorrect'
    )
    _FIELDS = ["Question:", "Correct Answer:\n", "Solution:"]
    _RULE = "-"
    _END = "\n--------"


class Comparative(Protocol):
    name = "lmms-eval-comparative"
    tool = "lmms-eval"
    answer = "a first line with the two assistants' scores on the prompt's range (1-10 by default)"
    scale = "integer_scale, per response"

    _FIELDS = ["[Question]\n", "[Assistant 1]\n", "[End of Assistant 1]", "[Assistant 2]\n"]
    _END = "[End of Assistant 2]"

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        t = prompt.text
        start = t.find(self._FIELDS[0])
        end = t.rfind(self._END)
        if start < 0 or end < start or any(t.find(m, start, end) < 0 for m in self._FIELDS[1:]):
            return None
        return start, end + len(self._END)

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        f = fields(prompt, self._FIELDS, end=self._END)
        spans = f.spans
        # The scale is the template's: stated in its head (before the question) or in its instructions
        # after the answers ([System]), never in the question or the answers.
        head = f"{prompt.system}\n{f.head}"
        scale = stated.stated_range(head, None) or stated.stated_range(f.tail, None) or stated.Scale(1, 10)
        return Task(
            mode="pair",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[1]), prompt.content(*spans[3])],
            options={"range": (scale.lo, scale.hi)},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        lo, hi = task.options["range"]
        a, b = (scales.integer_scale(r, lo, hi) for r in outcome.readings)
        return f"{a} {b}\n{note}"


class WithRubric(Protocol):
    name = "lmms-eval-rubric"
    tool = "lmms-eval"
    answer = "a JSON object, one score per rubric item"
    scale = "integer_scale on an item's stated range, else the judge's own scale"
    json_reply = True

    _OPENING = "Evaluate the following response according to the given rubric."
    _END = "\n\nProvide a JSON response with scores for each rubric item."

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        t = prompt.text
        start = t.find(self._OPENING)
        if start < 0 or t[:start].replace("\x00", "").strip():
            return None
        end = t.rfind(self._END)
        return (start, end + len(self._END)) if end > start else None

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        # The response is found from the start, the rubric after it from the end: a response that writes
        # "Rubric:" lines stays the response.
        spans = fields(
            prompt, ["Question: ", "\n\nResponse: "], ["\n\nRubric:\n"], end=self._END, free_response=True
        ).spans
        items: dict[str, str] = {}
        for line in prompt.text[slice(*spans[2])].splitlines():
            key, sep, desc = line.removeprefix("- ").partition(": ")
            if line.startswith("- ") and sep and key.strip():
                items[key.strip()] = desc
        if not items:
            raise ProtocolError("the rubric lists no '- item: description' lines")
        ranges = {}
        for key, desc in items.items():
            try:
                found = stated.item_range(desc)
            except stated.ScaleError as e:
                raise stated.ScaleError(f"rubric item {key[:40]!r}: {e}") from None
            ranges[key] = (found.lo, found.hi) if found else None
        return Task(
            mode="criteria",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[1])],
            criterion_text="; ".join(f"{k}: {v}" for k, v in items.items()),
            # A rubric item named like one of the judge's criteria is scored on it (e.g. text_quality).
            criteria={k: re.sub(r"\W+", "_", k.strip().lower()) for k in items},
            options={"ranges": ranges},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        out: dict[str, float | int] = {}
        for key, reading in outcome.by_key.items():
            found = task.options["ranges"][key]
            out[key] = scales.integer_scale(reading, *found) if found else round(reading.expected, 4)
        return json.dumps(out)


register_protocol(Binary())
register_protocol(Correctness())
register_protocol(Comparative())
register_protocol(WithRubric())
