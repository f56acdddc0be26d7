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
from judge.serve.protocols import scales
from judge.serve.protocols.base import (
    Outcome,
    Prompt,
    Protocol,
    ProtocolError,
    Task,
    fields,
    number_range,
    register_protocol,
)


class Binary(Protocol):
    name = "lmms-eval-binary"
    tool = "lmms-eval"
    answer = "the prompt's positive or negative token alone (1/0, Yes/No)"
    scale = "binary"

    #: what the prompt says the two tokens are; the texts that mark it; its fields' heads and its end
    _OUTPUT = re.compile(r"You must output (\S+) for fully correct answers and (\S+) for any other case")
    _MARKERS = ("You are a strict evaluator assessing answer correctness.", "Model Prediction:")
    _FIELDS = [
        r"Question:\n```\n",
        r"\n```\s*Ground Truth Answer:\n```\n",
        r"\n```\s*Model Prediction:\n```\n",
    ]
    _END = r"\n```\s*#"

    def match(self, prompt: Prompt) -> bool:
        return all(m in prompt.text for m in self._MARKERS)

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        m = self._OUTPUT.search(prompt.text)
        if m is None:
            raise ProtocolError("the prompt does not say which tokens mean correct and incorrect")
        spans = fields(prompt, self._FIELDS, end=self._END)
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

    _OUTPUT = re.compile(r'Return only "([^"]+)" if the solution is correct or "([^"]+)" if it is incorrect')
    _MARKERS = ("You are given a question, the solution and the correct answer.", "Solution:")
    _FIELDS = [r"Question:\s*\n", r"\n-{8,}\nCorrect Answer:\n", r"\n-{8,}\nSolution:\s*\n"]
    _END = r"\n-{8,}\s*$"


class Comparative(Protocol):
    name = "lmms-eval-comparative"
    tool = "lmms-eval"
    answer = "a first line with the two assistants' scores on the prompt's range (1-10 by default)"
    scale = "integer_scale, per response"

    def match(self, prompt: Prompt) -> bool:
        t = prompt.text
        return all(
            s in t for s in ("[Assistant 1]", "[End of Assistant 1]", "[Assistant 2]", "[End of Assistant 2]")
        )

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        spans = fields(
            prompt,
            [r"\[Question\]\n", r"\s*\[Assistant 1\]\n", r"\n\[End of Assistant 1\]\s*\[Assistant 2\]\n"],
            end=r"\n\[End of Assistant 2\]",
        )
        question = prompt.content(*spans[0])
        return Task(
            mode="pair",
            question=question + prompt.images_outside(spans),
            responses=[prompt.content(*spans[1]), prompt.content(*spans[2])],
            options={"range": number_range(prompt.whole, (1, 10))},
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

    def match(self, prompt: Prompt) -> bool:
        t = prompt.text
        return t.lstrip().startswith("Evaluate the following response according to the given rubric.") and (
            "Provide a JSON response with scores for each rubric item." in t
        )

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        spans = fields(
            prompt,
            [r"Question: ", r"\n\nResponse: ", r"\n\nRubric:\n"],
            end=r"\n\nProvide a JSON response with scores for each rubric item\.",
        )
        items: dict[str, str] = {}
        for line in prompt.text[slice(*spans[2])].splitlines():
            key, sep, desc = line.removeprefix("- ").partition(": ")
            if line.startswith("- ") and sep and key.strip():
                items[key.strip()] = desc
        if not items:
            raise ProtocolError("the rubric lists no '- item: description' lines")
        return Task(
            mode="criteria",
            question=prompt.content(*spans[0]) + prompt.images_outside(spans),
            responses=[prompt.content(*spans[1])],
            criterion_text="; ".join(f"{k}: {v}" for k, v in items.items()),
            # A rubric item named like one of the judge's criteria is scored on it (e.g. text_quality).
            criteria={k: re.sub(r"\W+", "_", k.strip().lower()) for k in items},
            options={"ranges": {k: number_range(v, (0, 0)) for k, v in items.items()}},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        out: dict[str, float | int] = {}
        for key, reading in outcome.by_key.items():
            lo, hi = task.options["ranges"][key]
            out[key] = scales.integer_scale(reading, lo, hi) if hi > lo else round(reading.expected, 4)
        return json.dumps(out)


register_protocol(Binary())
register_protocol(Correctness())
register_protocol(Comparative())
register_protocol(WithRubric())
