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

from judge.core.rubric import Rubric
from judge.serve.protocols import scales, stated
from judge.serve.protocols.base import (
    Content,
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

_PARAMS = ("Input", "Actual Output", "Expected Output", "Context", "Retrieval Context", "Metadata", "Tags",
           "Expected Tools", "Tools Called")  # fmt: skip
_PLAIN = "You are an evaluator. Given the following evaluation steps"
_STRICT = "a `score` key that is STRICTLY EITHER 1"
_STEPS = "Evaluation Steps:"
#: Where the test case ends: the plain template's parameter list, the strict one's closing instructions.
_PARAMETERS = "\nParameters:\n"
_IMPORTANT = "\nIMPORTANT: Please make sure to only return in JSON format"
_MENTION = ("Please mention specific information from ", " in your reason")


def _names(listed: str) -> list[str]:
    """The test case's fields, in order, as deepeval lists them ("Input, Actual Output, and Context")."""
    parts = listed.replace(", and ", ", ").replace(" and ", ", ").split(", ")
    return [p.strip() for p in parts if p.strip() in _PARAMS]


def _test_case(prompt: Prompt, strict: bool) -> tuple[dict[str, Content], Fields]:
    """The test case's fields by name, split at the headings the template's own parameter list names
    (read from its fixed parts). The headings up to the actual output are found from the start, those
    after it from the end: an actual output that writes ``Input:`` or ``Expected Output:`` lines stays
    the actual output."""
    t = prompt.text
    steps = t.find(_STEPS)
    if strict:
        end = _IMPORTANT
        a = t.find(_MENTION[0], 0, steps)
        b = t.find(_MENTION[1], a, steps) if a >= 0 else -1
        listed = t[a + len(_MENTION[0]) : b] if b >= 0 else ""
    else:
        end = _PARAMETERS
        at = t.rfind(_PARAMETERS)
        line_end = t.find("\n", at + len(_PARAMETERS)) if at >= 0 else -1
        listed = t[at + len(_PARAMETERS) : line_end if line_end >= 0 else len(t)] if at >= 0 else ""
    names = _names(listed)
    if "Actual Output" not in names:
        raise ProtocolError("the test case has no 'Actual Output:' (add ACTUAL_OUTPUT to evaluation_params)")
    cut = names.index("Actual Output") + 1
    heads = [f"\n{n}:\n" for n in names]
    f = fields(prompt, [_STEPS, *heads[:cut]], heads[cut:], end=end, free_response=True)
    spans = list(f.spans)
    if strict:  # the strict template closes the test case with a "**" line
        spans[-1] = trim_rule(t, spans[-1], "*", least=2)
    case = {n: prompt.content(*span) for n, span in zip(names, spans[1:], strict=True)}
    return case, Fields(spans, f.head, f.tail)


class GEvalResults(Protocol):
    name = "deepeval-geval"
    tool = "deepeval"
    answer = 'JSON {"score": n, "reason": ...}, n on the prompt\'s range (0-10 by default; 0/1 strict)'
    scale = "integer_scale (binary under strict_mode)"
    json_reply = True

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        t = prompt.text
        steps = t.find(_STEPS)
        if steps < 0 or t.find('"score"') < 0:
            return None
        plain = t.lstrip().startswith(_PLAIN)
        strict = not plain and t.find(_STRICT, 0, steps) >= 0
        end = t.rfind(_PARAMETERS if plain else _IMPORTANT) if plain or strict else -1
        if end < steps:
            return None
        return t.find(_PLAIN) if plain else t.find(_STRICT), end + 1

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        t = prompt.text
        steps_at = t.find(_STEPS)
        strict = t.find(_STRICT, 0, steps_at) >= 0 and not t.lstrip().startswith(_PLAIN)
        case, f = _test_case(prompt, strict)
        question = case.get("Input", []) + case.get("Context", []) + case.get("Retrieval Context", [])
        if not question:
            raise ProtocolError(
                "the test case has no 'Input:' (add INPUT to evaluation_params): the judge scores a response "
                "to a question"
            )
        # The range is the template's: stated in its head, before the evaluation steps.
        scale = stated.integer_range(t[:steps_at], stated.Scale(0, 10))
        steps = t[f.spans[0][0] : f.spans[0][1]]
        return Task(
            mode="point",
            question=question + prompt.images_outside(f.spans[1:]),
            responses=[case["Actual Output"]],
            reference=case.get("Expected Output"),
            criterion_text=steps.split("Test Case:")[0].strip(),
            options={"strict": strict, "range": (scale.lo, scale.hi)},
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

    _HEAD = "concise evaluation steps based on the criteria below"

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        t = prompt.text
        start = t.find(self._HEAD)
        crit = t.find("Evaluation Criteria:", start) if start >= 0 else -1
        return (start, len(t)) if crit >= 0 else None

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        t = prompt.text
        start = t.find("Evaluation Criteria:", t.find(self._HEAD)) + len("Evaluation Criteria:")
        end = t.rfind("\n**\nIMPORTANT", start)
        end = end if end >= 0 else t.find("\n**", start)
        criteria = text_of(prompt.content(start, end if end >= 0 else len(t)))
        if not criteria:
            raise ProtocolError("the prompt's 'Evaluation Criteria:' is empty")
        return Task(mode="none", question=[], responses=[], criterion_text=criteria)

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        return json.dumps({"steps": [task.criterion_text]})


register_protocol(GEvalResults())
register_protocol(GEvalSteps())
