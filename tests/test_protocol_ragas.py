"""ragas' own metrics pointed at judge-serve (``ragas`` 0.4.3 from ``.clients``): ``AspectCritic`` and
``SimpleCriteriaScore`` through ``llm_factory`` (instructor: ``response_format`` ``json_object`` at
temperature 0.01) by ``single_turn_ascore`` and by ``evaluate()``, its quickstart path, which turns an
error into NaN: each returns the judge's reading of the same item (``/v1/score``) mapped to the metric's
scale. Every request ragas sent is recorded on the wire and each reply validated (``jsonschema``) against
the schema the request carries. ``DiscreteMetric`` (the user's own prompt) is refused, saying why."""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import jsonschema
import pytest
from serving import running_server
from test_serve_protocols import BAD, GOOD, QUESTION, REFERENCE, _clients, read, reading

from judge.serve.protocols import scales
from judge.serve.structured import prompt_schema

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--protocol-task", "SA", "--served-name", "tiny"]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


class Wire:
    """The chat requests an async openai client sent and the replies it got, as JSON."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict, int, dict]] = []

    def client(self, server):
        from openai import AsyncOpenAI

        async def on_response(response: httpx.Response) -> None:
            await response.aread()
            self.sent.append((json.loads(response.request.content), response.status_code, response.json()))

        http = httpx.AsyncClient(event_hooks={"response": [on_response]}, timeout=60)
        return AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, http_client=http)

    def validated(self) -> list[dict]:
        """Each recorded reply's JSON content, checked against the request: ``json_object`` with the schema
        instructor puts in the system message, at temperature 0.01."""
        out = []
        for body, status, reply in self.sent:
            assert status == 200, reply
            assert body["response_format"] == {"type": "json_object"} and body["temperature"] == 0.01
            schema = prompt_schema(body["messages"][0]["content"])
            assert schema is not None
            content = json.loads(reply["choices"][0]["message"]["content"])
            jsonschema.validate(content, schema)
            out.append(content)
        return out


def _llm(server, wire: Wire):
    from ragas.llms import llm_factory

    return llm_factory("tiny", client=wire.client(server))


def test_ragas_aspect_critic_single_turn_ascore(server):
    """The docs' ``AspectCritic(name, definition, llm).single_turn_ascore(sample)``: the judge's verdict."""
    _clients("ragas")
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics import AspectCritic

    wire = Wire()
    metric = AspectCritic(
        name="correct", definition="Is the response a correct answer?", llm=_llm(server, wire)
    )

    async def run() -> list[float]:
        return [
            await metric.single_turn_ascore(
                SingleTurnSample(user_input=QUESTION, response=r, reference=REFERENCE)
            )
            for r in (GOOD, BAD)
        ]

    got = asyncio.run(run())
    want = [int(scales.binary(reading(read(server, r, REFERENCE)))) for r in (GOOD, BAD)]
    assert got == want
    replies = wire.validated()
    assert [r["verdict"] for r in replies] == want and "learned judge" in replies[0]["reason"]


def test_ragas_evaluate_simple_criteria_and_aspect_critic(server):
    """``evaluate()`` (ragas' quickstart path, which reports a failed call as NaN) with SimpleCriteriaScore
    on the range its definition states and AspectCritic: each score is the judge's reading, never NaN."""
    _clients("ragas")
    from ragas import EvaluationDataset, evaluate
    from ragas.metrics import AspectCritic, SimpleCriteriaScore

    wire = Wire()
    llm = _llm(server, wire)
    metrics = [
        SimpleCriteriaScore(name="similarity", definition="Score 0 to 5 by similarity to the reference"),
        AspectCritic(name="correct", definition="Is the response a correct answer?"),
    ]
    data = EvaluationDataset.from_list(
        [{"user_input": QUESTION, "response": r, "reference": REFERENCE} for r in (GOOD, BAD)]
    )
    result = evaluate(dataset=data, metrics=metrics, llm=llm, show_progress=False, raise_exceptions=True)
    table = result.to_pandas()
    for k, r in enumerate((GOOD, BAD)):
        u = reading(read(server, r, REFERENCE))
        assert table["similarity"][k] == scales.integer_scale(u, 0, 5)
        assert table["correct"][k] == int(scales.binary(u))
        assert not math.isnan(table["similarity"][k])
    assert len(wire.validated()) == 4


def test_ragas_simple_criteria_without_a_range_gets_the_judges_scale(server):
    _clients("ragas")
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics import SimpleCriteriaScore

    wire = Wire()
    metric = SimpleCriteriaScore(name="q", definition="How good is the answer?", llm=_llm(server, wire))
    got = asyncio.run(metric.single_turn_ascore(SingleTurnSample(user_input=QUESTION, response=GOOD)))
    assert got == scales.integer_scale(reading(read(server, GOOD)), 0, 6)
    wire.validated()


def test_ragas_discrete_metric_is_refused_saying_why(server):
    """A DiscreteMetric's prompt is the user's own text: a 422 that names the metrics the server reads,
    which ragas raises (not a silent NaN or a guessed label)."""
    _clients("ragas")
    from ragas.metrics import DiscreteMetric

    wire = Wire()
    metric = DiscreteMetric(
        name="quality",
        prompt="Check the response: {response}. Return 'pass' or 'fail'.",
        allowed_values=["pass", "fail"],
    )
    with pytest.raises(Exception, match="DiscreteMetric") as e:
        asyncio.run(metric.ascore(llm=_llm(server, wire), response=GOOD))
    assert "AspectCritic" in str(e.value)
    assert [status for _, status, _ in wire.sent] == [422]


def _critic_prompt(metric, response: str) -> str:
    from ragas.metrics._aspect_critic import AspectCritic, AspectCriticInput

    critic = AspectCritic(name=metric.name, definition=metric.definition)
    return critic.single_turn_prompt.to_string(AspectCriticInput(user_input=QUESTION, response=response))


def _chat(server, prompt: str) -> httpx.Response:
    body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}]}
    body |= {"response_format": {"type": "json_object"}, "temperature": 0.01}  # what instructor sends
    return httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)


def test_ragas_builtin_critics_on_a_fault_are_refused_and_the_others_answered(server):
    """ragas' own predefined ``harmfulness`` and ``maliciousness`` critics (definitions read from the
    installed package) ask whether the response is bad: a 422 naming the aspect, never verdict 1 for a
    correct, harmless answer (nor a flipped verdict: the judge does not measure harm). The positive
    built-ins (correctness, coherence, conciseness) still get the judge's verdict."""
    _clients("ragas")
    from ragas.metrics import _aspect_critic as builtin

    for metric in (builtin.harmfulness, builtin.maliciousness):
        r = _chat(server, _critic_prompt(metric, GOOD))
        assert r.status_code == 422, r.text
        message = r.json()["error"]["message"]
        assert "harm" in message and "does not measure" in message and "correctness" in message
    want = int(scales.binary(reading(read(server, GOOD))))
    for metric in (builtin.correctness, builtin.coherence, builtin.conciseness):
        r = _chat(server, _critic_prompt(metric, GOOD))
        assert r.status_code == 200, r.text
        assert json.loads(r.json()["choices"][0]["message"]["content"])["verdict"] == want


def test_ragas_simple_criteria_scoring_a_fault_is_refused(server):
    """A score "0 to 5 by how toxic" is higher for a worse response: refused through ragas, which raises."""
    _clients("ragas")
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics import SimpleCriteriaScore

    wire = Wire()
    metric = SimpleCriteriaScore(
        name="tox", definition="Score 0 to 5 by how toxic the response is", llm=_llm(server, wire)
    )
    with pytest.raises(Exception, match="toxic"):
        asyncio.run(metric.single_turn_ascore(SingleTurnSample(user_input=QUESTION, response=GOOD)))
    assert [status for _, status, _ in wire.sent] == [422]
