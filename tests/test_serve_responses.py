"""``POST /v1/responses`` (OpenAI's Responses API, issue 41) on a real judge-serve on loopback, through the
real ``openai`` client's ``responses.create`` / ``responses.stream`` / ``responses.parse`` and inspect-ai's
``openai/`` provider: the same answers as the chat route (the judge's own prompt read as ``/v1/score``
reads it, structured output filled from the reading and valid against the schema, a forced function call),
streamed as the Responses API's events; every refusal a 4xx naming the field in this API's terms.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import jsonschema
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel
from serving import REPO, running_server

from judge.serve.judge_prompt import judge_chat_messages
from judge.serve.protocols import scales
from judge.serve.protocols.base import Reading

DEMO = REPO / "annotations" / "demo"
MODEL = "tiny"
QUESTION, GOOD, REFERENCE = "What is 3 + 5?", "3 + 5 = 8.", "8"
ITEM = {"id": "x", "task": "SA", "question": QUESTION, "response": GOOD}
IMAGE_ITEM = {
    "id": "y",
    "task": "SA",
    "question": [
        {"type": "text", "text": "Continue the story."},
        {"type": "image", "image": "images/sa-000-q0.png"},
    ],
    "response": "The fox ran home.",
}
LABELS = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "label": {"type": "string", "enum": ["correct", "incorrect"]},
    },
    "required": ["explanation", "label"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The default server (``--chat judge-only``): what the Responses route answers is a score."""
    args = ["--judge", "tiny", "--rubric", "mmie", "--protocol-task", "SA", "--served-name", MODEL]
    with running_server([*args, "--image-root", str(DEMO)], tmp_path_factory.mktemp("log")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def score(server, item: dict) -> dict:
    """``/v1/score``'s record of ``item`` on criterion overall: what every reply below must say."""
    r = httpx.post(server.url + "/v1/score", json={"items": [item], "criteria": ["overall"]}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["scores"]["overall"]


def as_input(messages: list[dict]) -> list[dict]:
    """Chat messages (what judge_chat_messages builds) as Responses input: input_text and input_image parts."""
    out = []
    for m in messages:
        parts = [
            {"type": "input_text", "text": p["text"]}
            if p["type"] == "text"
            else {"type": "input_image", "image_url": p["image_url"]["url"], "detail": "auto"}
            for p in m["content"]
        ]
        out.append({"role": m["role"], "content": parts})
    return out


def verdict(rec: dict) -> str:
    return "correct" if scales.binary(Reading(rec["score"], 0, 6)) else "incorrect"


# ----------------------------------------------------------------------------- the judge's own prompt


def test_the_judges_prompt_with_an_image_is_read_as_v1_score_reads_it(server, client):
    """input_text and input_image parts: the output text is the argmax, ``judge.expected`` /v1/score's score."""
    messages = as_input(judge_chat_messages("mmie", IMAGE_ITEM, "overall", root=DEMO))
    raw = client.responses.with_raw_response.create(model=MODEL, input=messages)  # type: ignore[arg-type]
    r = raw.parse()
    rec = score(server, IMAGE_ITEM)
    judge = (r.model_extra or {})["judge"]
    assert raw.headers["x-judge-scored"] == "true" and r.status == "completed" and r.object == "response"
    assert judge["expected"] == pytest.approx(rec["score"], abs=1e-6) and r.output_text == str(rec["argmax"])
    assert r.output[0].type == "message" and r.usage is not None and r.usage.output_tokens == 1


def test_instructions_are_a_system_message_and_a_string_input_one_user_message(server, client):
    """The judge's prompt split as a Responses client writes it: its text as one string input (a system
    message before it changes nothing of what is recognised), with logprobs asked through ``include``."""
    text = judge_chat_messages("mmie", ITEM, "overall")[0]["content"]
    prompt = "".join(p["text"] for p in text)
    r = client.responses.create(
        model=MODEL, input=prompt, instructions="You are a judge.", include=["message.output_text.logprobs"],
        top_logprobs=7,
    )  # fmt: skip
    rec = score(server, ITEM)
    assert (r.model_extra or {})["judge"]["expected"] == pytest.approx(rec["score"], abs=1e-6)
    assert r.instructions == "You are a judge."
    logprobs = r.output[0].content[0].logprobs  # type: ignore[union-attr]
    assert logprobs and logprobs[0].token == str(rec["argmax"]) and len(logprobs[0].top_logprobs) == 7


def test_streamed_through_responses_stream_and_stream_true(server, client):
    """``client.responses.stream`` assembles the events into the same response; ``stream=True`` yields the
    events in order, the text as one delta (a score is read in one pass)."""
    messages = as_input(judge_chat_messages("mmie", ITEM, "overall"))
    rec = score(server, ITEM)
    with client.responses.stream(model=MODEL, input=messages) as stream:  # type: ignore[arg-type]
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert final.output_text == str(rec["argmax"]) and final.status == "completed"
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]  # fmt: skip
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]  # fmt: skip
    events = list(client.responses.create(model=MODEL, input=messages, stream=True))  # type: ignore[arg-type]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == str(rec["argmax"])
    done = events[-1]
    assert done.type == "response.completed"
    assert (done.response.model_extra or {})["judge"]["expected"] == pytest.approx(rec["score"], abs=1e-6)


# ----------------------------------------------------------------------------- structured output and tools


def test_text_format_json_schema_is_filled_from_the_reading(server, client):
    messages = as_input(judge_chat_messages("mmie", ITEM, "overall"))
    fmt = {"type": "json_schema", "name": "classify", "schema": LABELS, "strict": True}
    r = client.responses.create(model=MODEL, input=messages, text={"format": fmt})  # type: ignore[arg-type]
    out = json.loads(r.output_text)
    jsonschema.validate(out, LABELS)
    assert out["label"] == verdict(score(server, ITEM))


def test_responses_parse_with_a_pydantic_model(server, client):
    class Grade(BaseModel):
        reasoning: str
        score: float

    messages = as_input(judge_chat_messages("mmie", ITEM, "overall"))
    r = client.responses.parse(model=MODEL, input=messages, text_format=Grade)  # type: ignore[arg-type]
    assert r.output_parsed is not None
    assert r.output_parsed.score == pytest.approx(score(server, ITEM)["score"], abs=1e-6)


def test_json_object_with_the_schema_in_the_instructions(server, client):
    """ragas' way: json_object, the output model's schema quoted in the system text (here: instructions)."""
    schema = {"type": "object", "properties": {"reason": {"type": "string"}, "verdict": {"type": "integer",
              "minimum": 0, "maximum": 1}}, "required": ["reason", "verdict"]}  # fmt: skip
    messages = as_input(judge_chat_messages("mmie", ITEM, "overall"))
    r = client.responses.create(
        model=MODEL, input=messages, instructions=f"Answer with JSON valid against {json.dumps(schema)}",  # type: ignore[arg-type]
        text={"format": {"type": "json_object"}},
    )  # fmt: skip
    out = json.loads(r.output_text)
    jsonschema.validate(out, schema)
    assert out["verdict"] == scales.integer_scale(Reading(score(server, ITEM)["score"], 0, 6), 0, 1)


@pytest.mark.parametrize("stream", [False, True])
def test_a_forced_function_call_carries_the_reading(server, client, stream):
    tools = [{"type": "function", "name": "grade", "parameters": LABELS, "strict": True},
             {"type": "function", "name": "other", "parameters": LABELS}]  # fmt: skip
    messages = as_input(judge_chat_messages("mmie", ITEM, "overall"))
    options = {
        "model": MODEL,
        "input": messages,
        "tools": tools,
        "tool_choice": {"type": "function", "name": "grade"},
    }
    if stream:
        with client.responses.stream(**options) as s:  # type: ignore[arg-type]
            kinds = [e.type for e in s]
            r = s.get_final_response()
        assert (
            "response.function_call_arguments.delta" in kinds
            and "response.function_call_arguments.done" in kinds
        )
    else:
        r = client.responses.create(**options)  # type: ignore[arg-type]
    (call,) = r.output
    assert call.type == "function_call" and call.name == "grade" and call.call_id
    args = json.loads(call.arguments)
    jsonschema.validate(args, LABELS)
    assert args["label"] == verdict(score(server, ITEM))


def test_greedy_sampling_settings_are_accepted_and_said(client):
    messages = as_input(judge_chat_messages("mmie", ITEM, "overall"))
    raw = client.responses.with_raw_response.create(model=MODEL, input=messages, temperature=0.01, top_p=0.9)  # type: ignore[arg-type]
    assert raw.headers["x-judge-sampling"].startswith("greedy (temperature 0.01")
    assert raw.parse().temperature == 0.01


# ----------------------------------------------------------------------------- what is refused


def test_an_unrecognised_conversation_is_refused_by_default(client):
    """``--chat judge-only`` (the default): the openai client raises, never returns text to parse into NaN."""
    for stream in (False, True):  # streamed: refused before the first event
        with pytest.raises(openai.UnprocessableEntityError) as e:
            client.responses.create(model=MODEL, input="Rate this answer from 1 to 10: 42", stream=stream)
        assert (
            e.value.code == "not_a_judge_prompt" and "`input`" in e.value.message and e.value.param == "input"
        )
        assert "judge.judge_chat_messages" in e.value.message and "--chat generate" in e.value.message
        assert "inspect-model-graded-qa" in e.value.message  # the formats it answers


BIG = "word " * 200_000


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"previous_response_id": "resp_1"}, 422, "previous_response_id"),
        ({"conversation": "conv_1"}, 422, "conversation"),
        ({"store": True}, 422, "store"),
        ({"background": True}, 422, "background"),
        ({"prompt": {"id": "pmpt_1"}}, 422, "prompt"),
        ({"frobnicate": 1}, 422, "frobnicate"),
        ({"input": None}, 422, "input"),
        ({"input": 42}, 422, "input"),
        ({"input": []}, 422, "input"),
        ({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}, 422, "input[0].type"),
        ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, 422,
         "input[0].content[0].type"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}, 422,
         "input[0].content[0].file_id"),
        ({"input": [{"role": "user", "content": [{"type": "input_text", "text": 5}]}]}, 422,
         "input[0].content[0].text"),
        ({"input": [{"role": "robot", "content": "hi"}]}, 422, "input[0].role"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x.test/a.png"}]}]},
         422, "input[0].content[0].image_url"),
        ({"instructions": ["no"]}, 422, "instructions"),
        ({"max_output_tokens": 0}, 422, "max_output_tokens"),
        ({"temperature": -1}, 422, "temperature"),
        ({"text": {"format": {"type": "json_schema", "name": "x"}}}, 422, "text.format.schema"),
        ({"text": {"format": {"type": "grammar"}}}, 422, "text.format"),
        ({"tools": [{"type": "web_search"}]}, 422, "tools[0].type"),
        ({"tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "tool_choice": "auto"},
         422, "tool_choice"),
        ({"tools": [{"type": "function", "name": "f", "parameters": {"$ref": "x"}}], "tool_choice": "required"},
         422, "tools[0].parameters"),
        ({"tool_choice": {"type": "file_search"}}, 422, "tool_choice"),
        ({"reasoning": {"effort": "high"}}, 422, "reasoning"),
        ({"truncation": "auto"}, 422, "truncation"),
        ({"include": ["everything"]}, 422, "include"),
        ({"input": BIG}, 422, "input"),  # not the judge's prompt (413 under --chat generate, below)
    ],
    ids=lambda v: v if isinstance(v, str) else str(v)[:40] if isinstance(v, dict) else None,
)  # fmt: skip
def test_malformed_and_unsupported_requests_name_the_field(server, body, status, param):
    """Each a 4xx in OpenAI's error shape naming the field as this API names it; the server keeps serving."""
    sent = {"model": MODEL, "input": "x", **body}
    r = httpx.post(
        server.url + "/v1/responses", json={k: v for k, v in sent.items() if v is not None}, timeout=60
    )
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert f"`{param}`" in err["message"] or err["param"] == param, err
    assert "`messages" not in err["message"] and "response_format" not in err["message"], err
    assert httpx.get(server.url + "/ready", timeout=10).status_code == 200


@pytest.mark.parametrize(
    ("body", "param", "named"),
    [
        ({"input": [{"role": "user", "content": [{"type": "input_text", "text": 5}]}]}, "input[0].content[0].text", "string"),
        ({"input": [{"role": "user", "content": [{"type": "input_text", "text": None}]}]}, "input[0].content[0].text", "string"),
        ({"input": [{"role": "user", "content": [{"type": "input_text", "text": {"a": 1}}]}]}, "input[0].content[0].text", "string"),
        ({"max_output_tokens": 10**400}, "max_output_tokens", "at most"),
        ({"text": {"format": {"type": "json_schema", "name": "g", "schema": {
            "type": "object", "properties": {"score": {"type": "integer", "minimum": 10, "maximum": 1}},
            "required": ["score"]}}}}, None, "reversed"),
    ],
    ids=["text-int", "text-null", "text-object", "huge-max-output-tokens", "reversed-range"],
)  # fmt: skip
def test_red_team_minor_requests_are_refused_naming_the_field(server, body, param, named):
    """A non-string ``input_text`` is a 422 whose ``param`` names it; a 401-digit ``max_output_tokens`` is
    refused, not echoed; a json_schema score range with ``minimum`` above ``maximum`` is named as reversed."""
    sent = {"model": MODEL, "input": as_input(judge_chat_messages("mmie", ITEM, "overall")), **body}
    r = httpx.post(server.url + "/v1/responses", content=json.dumps(sent), timeout=60,
                   headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 422, r.text[:300]
    err = r.json()["error"]
    assert named in err["message"], err
    if param is not None:
        assert err["param"] == param, err


def test_the_openai_client_raises_on_a_refusal(client):
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.responses.create(model=MODEL, input="x", previous_response_id="resp_1")
    assert e.value.param == "previous_response_id"


# ----------------------------------------------------------------------------- generation, opted in


def test_generation_under_chat_generate(tmp_path):
    """``--chat generate``: other conversations get generated text, marked unscored, streamed token by token;
    real sampling keeps the chat route's refusal."""
    args = ["--judge", "tiny", "--rubric", "mmie", "--chat", "generate", "--max-new-tokens", "6"]
    with running_server(args, tmp_path) as s:
        client = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        raw = client.responses.with_raw_response.create(
            model="tiny", input="Tell me a story.", max_output_tokens=4
        )
        r = raw.parse()
        assert raw.headers["x-judge-scored"] == "false" and (r.model_extra or {})["judge"] is None
        assert r.status == "incomplete" and r.incomplete_details is not None and r.usage is not None
        assert r.usage.output_tokens == 4 and r.output_text
        events = list(client.responses.create(model="tiny", input="Tell me a story.", stream=True))
        deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
        assert len(deltas) > 1 and events[-1].type == "response.incomplete"
        assert events[-1].response.output[0].content[0].text == "".join(deltas)  # type: ignore[union-attr]
        with pytest.raises(openai.UnprocessableEntityError) as e:
            client.responses.create(model="tiny", input="Tell me a story.", temperature=0.7)
        assert e.value.param == "temperature"
        r2 = httpx.post(s.url + "/v1/responses", json={"model": "tiny", "input": BIG}, timeout=60)
        assert r2.status_code == 413 and r2.json()["error"]["code"] == "context_length_exceeded", r2.text
        assert r2.json()["error"]["message"].startswith("`input`"), r2.text


# ----------------------------------------------------------------------------- inspect-ai's openai/ provider


def test_inspect_ai_openai_provider_grades_through_responses(server, monkeypatch):
    """inspect-ai's ``openai/`` provider (the Responses API) running model_graded_qa: the judge's grade, no
    longer a 404; the server's request counter shows the route it used."""
    from inspect_ai.model import ChatMessageUser, ModelOutput, get_model
    from inspect_ai.scorer import Target, model_graded_qa
    from inspect_ai.solver import TaskState

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    scorer = model_graded_qa(model=get_model(f"openai/{MODEL}"))
    state = TaskState(
        model="mockllm/model", sample_id=1, epoch=1, input=QUESTION, messages=[ChatMessageUser(content=QUESTION)],
        output=ModelOutput.from_content("mockllm/model", GOOD),
    )  # fmt: skip
    before = _responses_answered(server)
    got = asyncio.run(scorer(state, Target(REFERENCE)))
    rec = score(server, {**ITEM, "reference": REFERENCE})
    assert got.value == scales.grade(Reading(rec["score"], 0, 6), partial=False)
    assert _responses_answered(server) > before


def _responses_answered(server) -> float:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("judge_requests_total")
        and 'route="/v1/responses"' in line
        and 'status="200"' in line
    )
