"""arize-phoenix-evals' own evaluators pointed at judge-serve (``arize-phoenix-evals`` 3.9.4 from
``.clients``): the built-in ``CorrectnessEvaluator``, ``DocumentRelevanceEvaluator`` and
``HallucinationEvaluator`` (and ``RetrievalRelevanceEvaluator``, the relevance template that replaces
the deprecated document one) by ``evaluate`` and ``evaluate_dataframe``, and ``create_classifier`` with a
built-in template, each through phoenix's OpenAI adapter (``response_format`` ``json_schema`` strict with a
``label`` enum and an ``explanation``). Each label is the judge's verdict on the same item (``/v1/score``)
in the template's labels; every request is recorded on the wire and its reply validated against the
request's schema (``jsonschema``). ``evaluate_dataframe`` hides a failed call in its execution details, so
the table's scores are checked, not only its shape."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest
from serving import running_server
from test_serve_protocols import BAD, GOOD, QUESTION, _clients, read, reading

from judge.serve.protocols import scales

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--protocol-task", "SA", "--served-name", "tiny"]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


class Wire:
    """The chat requests phoenix's openai client sent and the replies it got."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict, int, dict]] = []

    def llm(self, server):
        from phoenix.evals import LLM

        def on_response(response: httpx.Response) -> None:
            response.read()
            self.sent.append((json.loads(response.request.content), response.status_code, response.json()))

        http = httpx.Client(event_hooks={"response": [on_response]}, timeout=60)
        return LLM(provider="openai", model="tiny", base_url=server.url + "/v1", api_key="unused",
                   sync_client_kwargs={"http_client": http})  # fmt: skip

    def labels(self) -> list[str]:
        """Each reply's label, the reply validated against the request's strict json_schema."""
        out = []
        for body, status, reply in self.sent:
            assert status == 200, reply
            fmt = body["response_format"]
            assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
            schema = fmt["json_schema"]["schema"]
            assert schema["properties"]["label"]["enum"] and "explanation" in schema["properties"]
            content = json.loads(reply["choices"][0]["message"]["content"])
            jsonschema.validate(content, schema)
            out.append(content["label"])
        return out


def _want(server, response: str, labels: tuple[str, str]) -> str:
    return labels[0] if scales.binary(reading(read(server, response))) else labels[1]


CASES = [
    ("CorrectnessEvaluator", "output", ("correct", "incorrect"), {"correct": 1.0, "incorrect": 0.0}),
    ("DocumentRelevanceEvaluator", "document_text", ("relevant", "unrelated"), {"relevant": 1.0, "unrelated": 0.0}),
    ("RetrievalRelevanceEvaluator", "context", ("relevant", "irrelevant"), {"relevant": 1.0, "irrelevant": 0.0}),
    ("HallucinationEvaluator", "output", ("grounded", "hallucinated"), {"hallucinated": 1.0, "grounded": 0.0}),
]  # fmt: skip


@pytest.mark.parametrize("name,field,labels,scores", CASES, ids=[c[0] for c in CASES])
def test_phoenix_builtin_evaluator(server, name, field, labels, scores):
    """``Evaluator(llm=LLM(...)).evaluate({"input": ..., field: ...})``, as phoenix's docs show."""
    _clients("phoenix.evals")
    from phoenix.evals import metrics

    wire = Wire()
    evaluator = getattr(metrics, name)(llm=wire.llm(server))
    for response in (GOOD, BAD):
        (score,) = evaluator.evaluate({"input": QUESTION, field: response})
        want = _want(server, response, labels)
        assert (score.label, score.score) == (want, scores[want])
        assert "learned judge" in score.explanation
    assert wire.labels() == [_want(server, r, labels) for r in (GOOD, BAD)]


def test_phoenix_evaluate_dataframe_and_create_classifier(server):
    """``evaluate_dataframe`` (which keeps a failed call's error in its execution details and leaves the
    score empty) over two rows, and ``create_classifier`` with the built-in correctness template."""
    _clients("phoenix.evals")
    import pandas as pd
    from phoenix.evals import create_classifier, evaluate_dataframe
    from phoenix.evals.metrics import CorrectnessEvaluator

    wire = Wire()
    llm = wire.llm(server)
    classifier = create_classifier(
        name="correct", prompt_template=CorrectnessEvaluator.PROMPT.template, llm=llm,
        choices={"correct": 1.0, "incorrect": 0.0},
    )  # fmt: skip
    df = pd.DataFrame({"input": [QUESTION, QUESTION], "output": [GOOD, BAD]})
    out = evaluate_dataframe(dataframe=df, evaluators=[classifier, CorrectnessEvaluator(llm=llm)])
    want = [_want(server, r, ("correct", "incorrect")) for r in (GOOD, BAD)]
    for column in ("correct_score", "correctness_score"):
        got = [json.loads(s)["label"] if isinstance(s, str) else s["label"] for s in out[column]]
        assert got == want, out.to_dict()
    assert sorted(wire.labels()) == sorted(want * 2)
