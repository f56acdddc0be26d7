"""ragas' LLM-judged metrics (``ragas.metrics``, 0.4.3): ``AspectCritic`` (a verdict 0 or 1) and
``SimpleCriteriaScore`` (an integer score on the range its definition states), answered with the JSON object
their prompt's schema describes; ``DiscreteMetric`` is recognised and refused (a 422 saying why).

Both metrics send a ``PydanticPrompt``: the metric's instruction ("Evaluate the Input based on the criterial
defined. Use only 'Yes' (1) and 'No' (0) as verdict.\\nCriteria Definition: ..." or "Evaluate the input based
on the criteria defined.\\nCriteria Definition: ..."), the output's JSON schema ("Please return the output
in a JSON format that complies with the following schema as specified in JSON Schema:\\n{...}"), then
"Now perform the same with the following input\\ninput: {JSON}\\nOutput: ". The item is that last JSON
object (``user_input``, ``response``, ``reference``, contexts), which escapes every newline of its strings,
so it is read with a JSON decoder from the template's last "input: " line: no text of the item can move a
boundary. The answer is the template's own schema filled from the judge's reading
(:func:`judge.serve.structured.fill`: AspectCritic's integer ``verdict`` gets 1 when the response passes,
SimpleCriteriaScore's integer ``score`` the reading on the definition's range, the ``reason`` the judge's
note). ragas sends it through instructor (``llm_factory``: ``response_format`` ``json_object`` at
temperature 0.01, the schema again in a system message) or a LangChain chat model (plain text): both read
that JSON. A definition that names an aspect the judge does not measure (ragas' own ``harmfulness`` and
``maliciousness``, "how toxic", ...) is refused with a 422 (:mod:`judge.serve.protocols.aspects`): its
"Yes" would report a fault, and the judge's pass says nothing about one.

``DiscreteMetric`` (and ``NumericMetric``, ``RankingMetric``) send the user's own prompt text, with no
template around the item: the judge cannot find a question and a response in it, so the request is refused
naming the metrics whose prompts it reads.
"""

from __future__ import annotations

import json
from typing import Any

from judge.core.rubric import Rubric
from judge.serve.protocols import aspects, scales, stated
from judge.serve.protocols.base import (
    Content,
    Outcome,
    Prompt,
    Protocol,
    ProtocolError,
    Reading,
    Task,
    register_protocol,
)

_SIGNATURE = (
    "Please return the output in a JSON format that complies with the following schema as specified in "
    "JSON Schema:\n"
)
_INPUT = "\nNow perform the same with the following input\ninput: "
_OUTPUT = "\nOutput: "
_DEFINITION = "\nCriteria Definition: "


def _parts(text: str | None) -> Content:
    return [{"type": "text", "text": text}] if text else []


class _RagasPrompt(Protocol):
    """A ragas ``PydanticPrompt`` whose instruction starts with ``HEAD`` and whose output schema has the
    score property ``KEY``."""

    tool = "ragas"
    json_reply = True
    HEAD: str
    KEY: str

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        t = prompt.text
        start = t.find(self.HEAD)
        if start < 0 or t.find(_SIGNATURE, start) < 0:
            return None
        last = t.rfind(_INPUT)
        if last < start or not t.rstrip().endswith(_OUTPUT.strip()):
            return None
        return start, len(t)

    def _schema(self, prompt: Prompt) -> dict[str, Any]:
        """The output schema the template quotes (its fixed part: the metric's output model)."""
        t = prompt.text
        at = t.find(_SIGNATURE, t.find(self.HEAD)) + len(_SIGNATURE)
        try:
            schema, _ = json.JSONDecoder().raw_decode(t, at)
        except ValueError:
            raise ProtocolError(
                "the JSON schema after 'Please return the output ...' does not parse"
            ) from None
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict) or self.KEY not in props:
            raise ProtocolError(
                f"the output schema has no {self.KEY!r} property, which ragas' template gives"
            )
        return schema

    def _item(self, prompt: Prompt) -> dict[str, Any]:
        t = prompt.text
        at = t.rfind(_INPUT) + len(_INPUT)
        try:
            item, end = json.JSONDecoder().raw_decode(t, at)
        except ValueError:
            raise ProtocolError("the item after its last 'input: ' is not a JSON object") from None
        if not isinstance(item, dict) or t[end:].strip() != _OUTPUT.strip():
            raise ProtocolError("the item after its last 'input: ' is not one JSON object before 'Output:'")
        if not isinstance(item.get("response"), str) or not item["response"].strip():
            raise ProtocolError("the sample has no 'response': the judge scores a response")
        return item

    def _definition(self, prompt: Prompt) -> str:
        t = prompt.text
        start = t.find(_DEFINITION, t.find(self.HEAD))
        end = t.find(_SIGNATURE, start)
        return t[start + len(_DEFINITION) : end].strip() if 0 <= start < end else ""

    def _task(self, prompt: Prompt, options: dict[str, Any]) -> Task:
        word = aspects.unmeasured(self._definition(prompt))
        if word is not None:
            # A "yes" (or a high score) there reports a fault the judge does not measure: refused, not flipped.
            raise ProtocolError(
                aspects.refusal(
                    f"the {type(self).__name__} definition",
                    word,
                    "Definitions answered ask about the response's quality on the judge's rubric, as ragas' "
                    "built-in correctness, coherence and conciseness critics do.",
                )
            )
        item = self._item(prompt)
        contexts = [*(item.get("retrieved_contexts") or []), *(item.get("reference_contexts") or [])]
        context = "\n\n".join(c for c in contexts if isinstance(c, str))
        question = _parts(item.get("user_input") if isinstance(item.get("user_input"), str) else None)
        if context:
            question += _parts(("\n\nContext:\n" if question else "") + context)
        reference = item.get("reference") if isinstance(item.get("reference"), str) else None
        return Task(
            mode="point",
            question=question + prompt.images_outside([]),
            responses=[_parts(item["response"])],
            reference=_parts(reference) or None,
            criterion_text=self._definition(prompt) or None,
            options={"schema": self._schema(prompt), **options},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        from judge.serve import structured  # here: structured imports this package's base

        reading = outcome.readings[0]
        judge = {
            "expected": reading.expected,
            "scale": [reading.lo, reading.hi],
            "note": note,
            "value": self.value(task, outcome),
        }
        where = f"messages: {self.name}'s output schema"
        return structured.dumps(structured.fill(task.options["schema"], judge, where), where)


class AspectCritic(_RagasPrompt):
    name = "ragas-aspect-critic"
    answer = 'JSON {"reason": ..., "verdict": 0 or 1} (the template\'s schema)'
    scale = "binary"
    HEAD = "Evaluate the Input based on the criterial defined. Use only 'Yes' (1) and 'No' (0) as verdict."
    KEY = "verdict"

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        return self._task(prompt, {})

    def value(self, task: Task, outcome: Outcome) -> int:
        return int(scales.binary(outcome.readings[0]))


class SimpleCriteriaScore(_RagasPrompt):
    name = "ragas-simple-criteria"
    answer = (
        'JSON {"reason": ..., "score": n}, n on the range the definition states ("Score 0 to 5 ..."), '
        "else the judge's own scale"
    )
    scale = "integer_scale"
    HEAD = "Evaluate the input based on the criteria defined.\nCriteria Definition: "
    KEY = "score"

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        # The range is the definition's, which the metric's user wrote ("Score 0 to 5 by similarity").
        found = stated.item_range(self._definition(prompt))
        return self._task(prompt, {"range": (found.lo, found.hi) if found else None})

    def value(self, task: Task, outcome: Outcome) -> int:
        reading: Reading = outcome.readings[0]
        lo, hi = task.options["range"] or (reading.lo, reading.hi)
        return scales.integer_scale(reading, lo, hi)


#: instructor's JSON-mode system text (ragas' ``llm_factory``), and the response models ragas builds for
#: the metrics whose prompt is the user's own text.
_INSTRUCTOR = "the parsed objects in json that match the following json_schema"
_FREE_MODELS = ('"DiscreteResponseModel"', '"NumericResponseModel"', '"RankingResponseModel"')


class FreePromptMetric(Protocol):
    name = "ragas-discrete-metric"
    tool = "ragas"
    answer = "refused (422): DiscreteMetric's prompt is the user's own text, with no template to read"
    scale = "none"

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        s = prompt.system
        if s.find(_INSTRUCTOR) < 0 or not any(s.find(m) >= 0 for m in _FREE_MODELS):
            return None
        end = len(prompt.text)
        return end, end  # after every template: a tool's template inside the user's prompt answers first

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        raise ProtocolError(
            "a DiscreteMetric (NumericMetric, RankingMetric) prompt is the metric's own text, with no template "
            "that says where the question and the response are, so the judge cannot score it. Use ragas' "
            "AspectCritic (a 0/1 verdict) or SimpleCriteriaScore (a score on the range its definition "
            "states), whose prompts it reads, or POST the item to /v1/score"
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:  # pragma: no cover - never extracted
        raise AssertionError("refused in extract")


register_protocol(AspectCritic())
register_protocol(SimpleCriteriaScore())
register_protocol(FreePromptMetric())
