"""arize-phoenix-evals' built-in classification templates (``phoenix.evals.metrics``, 3.9.4):
``CorrectnessEvaluator`` (correct/incorrect), ``DocumentRelevanceEvaluator`` (relevant/unrelated), ``RetrievalRelevanceEvaluator`` (relevant/irrelevant),
``HallucinationEvaluator`` (grounded/hallucinated), and the others written the same way.

Each template puts its item in a ``<data>`` block, one field per tag: ``<input>`` (or ``<question>``, ``<request>``) is
the question, ``<output>`` (or ``<document_text>``, ``<retrieved_information>``: what is judged relevant or not) the response, and
``<reference>`` the reference answer where a template has one; the rubric and the question it asks ("Is the
output correct or incorrect?") are outside the block. The tags are found from the block's ends: the
question's from the start, the response's closing tag and a reference after it from the end (the block
ends with ``</reference>`` only in a template with one), so a response that writes ``</output>``,
``<reference>`` or ``<input>`` stays the response, whole, and a judged context holding ``<output>`` is judged
whole. A yes/no (true/false, pass/fail) template whose question names an aspect the judge does not measure
("Is the output toxic?") is refused (:mod:`judge.serve.protocols.aspects`). The labels are the template's: a binary pair
(:data:`judge.serve.structured.BINARY`) named after ``</data>``, the passing one when the judge's verdict
passes (:func:`~judge.serve.protocols.scales.binary`).

phoenix's classifiers send ``response_format`` ``json_schema`` (strict) with a ``label`` enum and an
``explanation``, and after a 400 a forced tool call of the same schema: both are filled from the reading by
:mod:`judge.serve.structured`. Without either, the answer is the label alone.
"""

from __future__ import annotations

import re

from judge.core.rubric import Rubric
from judge.serve.protocols import aspects, scales
from judge.serve.protocols.base import (
    Outcome,
    Prompt,
    Protocol,
    ProtocolError,
    Task,
    fields,
    register_protocol,
)

_BEGIN, _END = "<data>", "</data>"
#: The tags a template's question and response sit in, in the order templates write them.
_QUESTION = ("input", "question", "request")
_RESPONSE = ("output", "document_text", "retrieved_information")
#: Label pairs whose "good" label says nothing by itself: the question decides what a "yes" means.
_UNSIGNED = {("yes", "no"), ("y", "n"), ("true", "false"), ("pass", "fail"), ("passed", "failed")}


def _binary_pairs() -> tuple[tuple[str, str], ...]:
    from judge.serve.structured import BINARY  # here: structured imports this package's base

    return BINARY


def _labels(tail: str) -> tuple[str, str] | None:
    """The template's binary labels (passing first): of the known pairs both named after ``</data>``, the
    one named last (templates end with their question: "Is the output correct or incorrect?")."""
    last: dict[str, int] = {}
    for m in re.finditer(r"[a-z_]+", tail[:20000].lower()):
        last[m.group(0)] = m.start()
    found = [
        (min(last[g], last[b]), g, b) for g, b in _binary_pairs() if len(g) > 1 and g in last and b in last
    ]
    if not found:
        return None
    _, good, bad = max(found)
    return good, bad


class PhoenixClassification(Protocol):
    name = "phoenix-classification"
    tool = "arize-phoenix-evals"
    answer = "the template's label (correct/incorrect, relevant/unrelated, grounded/hallucinated)"
    scale = "binary"

    def _tags(self, prompt: Prompt) -> tuple[str, str, bool] | None:
        """(question tag, response tag, whether a reference follows) of the block, from its fixed layout:
        the question's tag opens it, and the tags after the response are read from its end (the text
        before ``</data>`` ends with the response's closing tag, or with ``</reference>`` and, before that
        ``<reference>``, the response's). What follows the response is the template's own text, so no text
        of the response (a ``<reference>`` or ``</output>`` it writes) or of the judged context (an
        ``<output>`` inside ``<retrieved_information>``) decides the tags."""
        t = prompt.text
        start = t.find(_BEGIN)
        end = t.rfind(_END)
        if start < 0 or end < start:
            return None
        head = t[start + len(_BEGIN) :].lstrip()
        q = next((n for n in _QUESTION if head.startswith(f"<{n}>")), None)
        if q is None:
            return None
        body = t[start:end].rstrip()
        ref = body.endswith("</reference>")
        if ref:
            body = body[: body.rfind("<reference>")].rstrip()
        r = next((n for n in _RESPONSE if body.endswith(f"</{n}>")), None)
        if r is None:
            return None
        return q, r, ref

    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        t = prompt.text
        if self._tags(prompt) is None:
            return None
        end = t.rfind(_END)
        if _labels(t[end:]) is None:
            return None
        return t.find(_BEGIN), end + len(_END)

    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        tags = self._tags(prompt)
        if tags is None:
            raise ProtocolError("its <data> block has no question and output tags")
        q, r, ref = tags
        t = prompt.text
        # Template order: the question, then the response; a reference, where there is one, after it.
        forward = [f"<{q}>", f"</{q}>", f"<{r}>"]
        backward = [f"</{r}>"] + (["<reference>", "</reference>"] if ref else [])
        f = fields(prompt, forward, backward, end=_END, free_response=True)
        spans = f.spans
        labels = _labels(t[t.rfind(_END) :])
        assert labels is not None  # anchor found them
        if labels in _UNSIGNED:
            # "yes" is good or bad only by the question: one about harm, toxicity, ... is not the judge's.
            asked = f.head + t[t.rfind(_END) :]
            word = aspects.unmeasured(asked)
            if word is not None:
                raise ProtocolError(
                    aspects.refusal(
                        f"its {labels[0]}/{labels[1]} question",
                        word,
                        "Templates answered: label pairs that name the good label (correct/incorrect, "
                        "relevant/irrelevant, grounded/hallucinated), or a yes/no question about the "
                        "response's quality (is it correct, relevant, helpful).",
                    )
                )
        return Task(
            mode="point",
            question=prompt.content(*spans[0]) + prompt.images_outside([(spans[0][0], spans[-1][1])]),
            responses=[prompt.content(*spans[2])],
            reference=prompt.content(*spans[4]) if ref else None,
            criterion_text=f.head.strip()[:2000] or None,
            options={"labels": labels},
        )

    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        good, bad = task.options["labels"]
        return good if scales.binary(outcome.readings[0]) else bad

    def value(self, task: Task, outcome: Outcome) -> int:
        return int(scales.binary(outcome.readings[0]))


register_protocol(PhoenixClassification())
