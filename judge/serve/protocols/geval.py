"""G-Eval as deepeval runs it (``deepeval.metrics.GEval``, 4.3): its results prompt, answered with the JSON
``{"score": n, "reason": "..."}`` its parser reads (``n`` an integer on the prompt's range, 0-10 unless a
rubric sets another; 0 or 1 under ``strict_mode``), and its evaluation-steps prompt.

The results prompt lists the test case's fields as ``Input:``, ``Actual Output:``, ``Expected Output:``
(and others), each on its own line: the input (with any context) is the question, the actual output the
response, the expected output the reference. The steps prompt asks for evaluation steps written from the
criteria: this judge writes none, so the steps returned are the criteria as given (one step), marked
unscored; pass ``evaluation_steps`` to ``GEval`` to skip that call.
"""

from __future__ import annotations

import json
import re

from judge.core.rubric import Rubric
from judge.serve.protocols import scales
from judge.serve.protocols.base import (
    Content,
    Outcome,
    Prompt,
    Protocol,
    ProtocolError,
    Task,
    register_protocol,
    text_of,
)

_PARAMS = ("Input", "Actual Output", "Expected Output", "Context", "Retrieval Context", "Metadata", "Tags",
           "Expected Tools", "Tools Called")  # fmt: skip
_HEADING = re.compile(r"(?m)^(" + "|".join(re.escape(p) for p in _PARAMS) + r"):\n")
#: Where the test case's fields end in the results templates.
_AFTER = re.compile(r"\n\s*(?:Parameters:|Additional Context:|\*\*|---)")


def _test_case(prompt: Prompt) -> tuple[dict[str, Content], list[tuple[int, int]]]:
    """The test case's fields after "Evaluation Steps:", by name, and their spans."""
    start = prompt.text.find("Evaluation Steps:")
    if start < 0:
        raise ProtocolError("the prompt has no 'Evaluation Steps:'")
    heads = list(_HEADING.finditer(prompt.text, start))
    if not heads:
        raise ProtocolError("the prompt's test case has none of Input:, Actual Output:, ...")
    out: dict[str, Content] = {}
    spans = []
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else None
        if end is None:
            after = _AFTER.search(prompt.text, m.end())
            end = after.start() if after else len(prompt.text)
        out[m.group(1)] = prompt.content(m.end(), end)
        spans.append((m.end(), end))
    return out, spans


class GEvalResults(Protocol):
    name = "deepeval-geval"
    tool = "deepeval"
    answer = 'JSON {"score": n, "reason": ...}, n on the prompt\'s range (0-10 by default; 0/1 strict)'
    scale = "integer_scale (binary under strict_mode)"
    json_reply = True

    def match(self, prompt: Prompt) -> bool:
        t = prompt.text
        plain = t.lstrip().startswith("You are an evaluator. Given the following evaluation steps")
        strict = "a `score` key that is STRICTLY EITHER 1" in t
        return (plain or strict) and "Evaluation Steps:" in t and '"score"' in t

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        case, spans = _test_case(prompt)
        if "Actual Output" not in case:
            raise ProtocolError(
                "the test case has no 'Actual Output:' (add ACTUAL_OUTPUT to evaluation_params)"
            )
        question = case.get("Input", []) + case.get("Context", []) + case.get("Retrieval Context", [])
        if not question:
            raise ProtocolError(
                "the test case has no 'Input:' (add INPUT to evaluation_params): the judge scores a response "
                "to a question"
            )
        strict = "STRICTLY EITHER 1" in prompt.text
        m = re.search(r"an integer between (-?\d+) and (-?\d+)", prompt.text)
        steps = prompt.text[prompt.text.find("Evaluation Steps:") + len("Evaluation Steps:") : spans[0][0]]
        return Task(
            mode="point",
            question=question + prompt.images_outside(spans),
            responses=[case["Actual Output"]],
            reference=case.get("Expected Output"),
            criterion_text=steps.split("Test Case:")[0].strip(),
            options={"strict": strict, "range": (int(m.group(1)), int(m.group(2))) if m else (0, 10)},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        return json.dumps({"reason": note, "score": self.value(task, outcome)})

    def value(self, task: Task, outcome: Outcome) -> int:
        if task.options["strict"]:
            return int(scales.binary(outcome.readings[0]))
        lo, hi = task.options["range"]
        return scales.integer_scale(outcome.readings[0], lo, hi)


class GEvalSteps(Protocol):
    name = "deepeval-geval-steps"
    tool = "deepeval"
    answer = 'JSON {"steps": [the criteria as given]} (unscored: this judge writes no steps)'
    scale = "none"
    json_reply = True

    def match(self, prompt: Prompt) -> bool:
        t = prompt.text
        return "concise evaluation steps based on the criteria below" in t and "Evaluation Criteria:" in t

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        start = prompt.text.find("Evaluation Criteria:") + len("Evaluation Criteria:")
        end = prompt.text.find("\n**", start)
        criteria = text_of(prompt.content(start, end if end >= 0 else len(prompt.text)))
        if not criteria:
            raise ProtocolError("the prompt's 'Evaluation Criteria:' is empty")
        return Task(mode="none", question=[], responses=[], criterion_text=criteria)

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        return json.dumps({"steps": [task.criterion_text]})


register_protocol(GEvalResults())
register_protocol(GEvalSteps())
