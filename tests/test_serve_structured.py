"""Structured output and forced tool calls from judge-serve's chat route (issue 41): a client's
``response_format`` ``json_schema`` (strict or not) and a forced ``tools`` call are answered with the judge's
reading in the client's shape, for the judge's own prompt and for a tool's grading prompt, against a real
server on loopback through the real ``openai`` client. Every reply is validated against the request's schema
with ``jsonschema``; what cannot be filled is a 422 naming the property, never a 500.
"""

from __future__ import annotations

import enum
import json
from typing import Literal

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
from judge.serve.structured import MAX_NODES

DEMO = REPO / "annotations" / "demo"
MODEL = "tiny"
QUESTION, GOOD, REFERENCE = "What is 3 + 5?", "3 + 5 = 8.", "8"
ITEM = {"id": "x", "task": "SA", "question": QUESTION, "response": GOOD}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--protocol-task", "SA", "--served-name", MODEL]
    args += ["--chat", "generate"]  # the refusals and the sampling policy of generated text are tested too
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def reading(server) -> dict:
    """``/v1/score``'s record of ITEM (task SA, criterion overall): what every reply below must say."""
    r = httpx.post(server.url + "/v1/score", json={"items": [ITEM], "criteria": ["overall"]}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["scores"]["overall"]


def own_prompt() -> list[dict]:
    return judge_chat_messages("mmie", ITEM, "overall")


def inspect_prompt() -> list[dict]:
    """inspect-ai's model_graded_qa prompt, from its own template (a tool's grading prompt)."""
    from inspect_ai.scorer._model import DEFAULT_MODEL_GRADED_QA_TEMPLATE

    text = DEFAULT_MODEL_GRADED_QA_TEMPLATE.format(
        question=QUESTION, answer=GOOD, criterion=REFERENCE, instructions="Reply GRADE: C or GRADE: I."
    )
    return [{"role": "user", "content": text}]


def phoenix_schema(labels: list[str] | dict[str, str]) -> dict:
    """arize-phoenix-evals' classification schema (``generate_classification_schema``: a string ``label``,
    an ``enum`` for a list of labels, ``oneOf`` of ``const`` for labels with descriptions, and an
    ``explanation``), made strict as OpenAI's strict mode wants it."""
    label: dict = {"type": "string", "description": "correctness"}
    if isinstance(labels, dict):
        label["oneOf"] = [{"const": k, "description": v} for k, v in labels.items()]
    else:
        label["enum"] = labels
    return {
        "type": "object",
        "properties": {
            "explanation": {"type": "string", "description": "A brief explanation."},
            "label": label,
        },
        "required": ["explanation", "label"],
        "additionalProperties": False,
    }


def ask_schema(client: OpenAI, messages: list[dict], schema: dict, strict: bool = True) -> dict:
    fmt = {"type": "json_schema", "json_schema": {"name": "classify", "schema": schema, "strict": strict}}
    r = client.chat.completions.create(model=MODEL, messages=messages, response_format=fmt)  # type: ignore[arg-type]
    content = r.choices[0].message.content
    assert content is not None
    out = json.loads(content)
    jsonschema.validate(out, schema)
    return out


def unit(rec: dict) -> Reading:
    return Reading(rec["score"], 0, 6)


# ----------------------------------------------------------------------------- response_format json_schema


@pytest.mark.parametrize(
    "labels", [["correct", "incorrect"], ["Y", "N"], {"pass": "it passes", "fail": "no"}]
)
def test_binary_labels_are_the_judges_verdict(client, reading, labels):
    """phoenix-evals' strict label schema on the judge's own prompt: the label is the verdict the tools'
    binary answers give (pass when the unit score is at least 0.5); the explanation states the reading."""
    out = ask_schema(client, own_prompt(), phoenix_schema(labels))
    names = list(labels)
    assert out["label"] == names[0 if scales.binary(unit(reading)) else 1]
    assert f"{reading['score']:.3f}" in out["explanation"] and "0-6" in out["explanation"]


def test_a_tool_prompt_fills_a_schema_too(client, reading):
    """inspect-ai's grading prompt with a boolean and a string, not strict: the verdict and the tool's note."""
    schema = {"type": "object", "properties": {"passed": {"type": "boolean"}, "why": {"type": "string"}},
              "required": ["passed"]}  # fmt: skip
    out = ask_schema(client, inspect_prompt(), schema, strict=False)
    assert out["passed"] is scales.binary(unit(reading))
    assert "learned judge" in out["why"]


def test_an_integer_on_the_schemas_range_and_any_name(client, reading):
    schema = {"type": "object", "additionalProperties": False, "required": ["rating", "reasoning"],
              "properties": {"reasoning": {"type": "string"}, "rating": {"type": "integer", "minimum": 1, "maximum": 10}}}  # fmt: skip
    out = ask_schema(client, own_prompt(), schema)
    assert out["rating"] == scales.integer_scale(unit(reading), 1, 10)


def test_ordinal_labels_through_openai_parse(client, reading):
    """A pydantic model with an Enum (a $ref into $defs) through ``client.chat.completions.parse``: the
    labels in their order onto the reading's point, whatever order the enum lists them in."""

    class Quality(str, enum.Enum):
        good = "good"
        poor = "poor"
        fair = "fair"

    class Verdict(BaseModel):
        quality: Quality
        comment: str

    parsed = client.chat.completions.parse(model=MODEL, messages=own_prompt(), response_format=Verdict)  # type: ignore[arg-type]
    verdict = parsed.choices[0].message.parsed
    assert verdict is not None
    assert verdict.quality.value == ["poor", "fair", "good"][scales.integer_scale(unit(reading), 0, 2)]


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        ({"type": "object", "properties": {"score": {"type": "number"}, "confidence": {"type": "number"}}},
         "'score', 'confidence'"),
        ({"type": "object", "properties": {"label": {"type": "string", "enum": ["cat", "dog", "bird"]}}},
         "properties.label"),
        ({"type": "object", "properties": {"reason": {"type": "string"}}}, "none"),
    ],
    ids=["two-scores", "unordered-labels", "no-score"],
)  # fmt: skip
def test_a_schema_the_judge_cannot_fill_is_a_422_naming_the_property(client, schema, named):
    with pytest.raises(openai.UnprocessableEntityError) as e:
        ask_schema(client, own_prompt(), schema, strict=False)
    assert named in e.value.message and "response_format.json_schema.schema" in e.value.message


def _deep(n: int) -> dict:
    node: dict = {"type": "string"}
    for _ in range(n):
        node = {"type": "object", "properties": {"a": node}}
    return node


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ([1, 2], "must be a JSON schema object"),
        ({"type": "string"}, "must be an object schema"),
        ({"type": "object", "properties": {"s": {"$ref": "#/$defs/Missing"}}}, "cannot be resolved"),
        ({"type": "object", "properties": {"s": {"$ref": "https://example.com/s.json"}}}, "only local"),
        ({"type": "object", "properties": {f"p{k}": {"type": "string"} for k in range(MAX_NODES)}}, "too large"),
        (_deep(40), "too large"),
        ({"$defs": {"A": {"$ref": "#/$defs/A"}}, "type": "object", "properties": {"s": {"$ref": "#/$defs/A"}}},
         "recursive"),
    ],
    ids=["not-an-object", "not-object-type", "missing-ref", "remote-ref", "huge", "deep", "ref-loop"],
)  # fmt: skip
def test_malformed_schemas_are_a_422_naming_the_field(client, schema, said):
    with pytest.raises(openai.UnprocessableEntityError) as e:
        ask_schema(client, own_prompt(), schema, strict=False)
    assert said in e.value.message and "response_format.json_schema.schema" in e.value.message


def test_the_one_number_schema_still_gets_the_expected_score(client, reading):
    """Today's case, unchanged: one number property and strings."""
    schema = {"type": "object", "properties": {"score": {"type": "number"}, "reason": {"type": "string"}}}
    out = ask_schema(client, own_prompt(), schema, strict=False)
    assert out["score"] == pytest.approx(reading["score"], abs=1e-4)


# ----------------------------------------------------------------------------- json_object with a schema in the prompt


class AspectVerdict(BaseModel):
    """The shape of ragas' aspect critic output (a reason, and a verdict 0 or 1), as a JSON schema."""

    reason: str
    verdict: Literal[0, 1]


def with_system(text: str, messages: list[dict]) -> list[dict]:
    return [{"role": "system", "content": text}, *messages]


@pytest.mark.parametrize("prompt", ["own", "inspect"])
def test_json_object_fills_the_schema_a_system_message_quotes(client, reading, prompt):
    """ragas' way: json_object, the schema quoted in the prompt ("...complies with the following schema as
    specified in JSON Schema: {...}"), temperature 0.01; here in a system message before a prompt the server
    scores."""
    schema = AspectVerdict.model_json_schema()
    text = ("Please return the output in a JSON format that complies with the following schema as specified "
            f"in JSON Schema:\n{json.dumps(schema)}Do not use single quotes in your response but double quotes.")  # fmt: skip
    messages = with_system(text, own_prompt() if prompt == "own" else inspect_prompt())
    r = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        response_format={"type": "json_object"},
        temperature=0.01,  # type: ignore[arg-type]
    )
    out = json.loads(r.choices[0].message.content or "")
    jsonschema.validate(out, schema)
    assert out["verdict"] == (1 if scales.binary(unit(reading)) else 0)


def test_json_object_fills_a_field_list(client, reading):
    text = 'Answer with a JSON object with the keys "rating" and "explanation".'
    r = client.chat.completions.create(
        model=MODEL,
        messages=with_system(text, own_prompt()),
        response_format={"type": "json_object"},  # type: ignore[arg-type]
    )
    out = json.loads(r.choices[0].message.content or "")
    assert set(out) == {"rating", "explanation"} and out["rating"] == pytest.approx(
        reading["score"], abs=1e-4
    )


def test_json_object_without_a_schema_keeps_todays_answer(client, reading):
    r = client.chat.completions.create(
        model=MODEL, messages=own_prompt(), response_format={"type": "json_object"}
    )
    assert json.loads(r.choices[0].message.content or "") == {
        "score": pytest.approx(reading["score"], abs=1e-4)
    }


# ----------------------------------------------------------------------------- forced tool calls


def grade_tool(name: str = "grade") -> dict:
    return {"type": "function", "function": {"name": name, "description": "Grade the response.",
            "parameters": phoenix_schema(["correct", "incorrect"])}}  # fmt: skip


@pytest.mark.parametrize("forced", ["named", "required"])
def test_a_forced_tool_call_carries_the_reading(client, reading, forced):
    tools = [grade_tool(), grade_tool("other")] if forced == "named" else [grade_tool()]
    choice = {"type": "function", "function": {"name": "grade"}} if forced == "named" else "required"
    r = client.chat.completions.create(model=MODEL, messages=own_prompt(), tools=tools, tool_choice=choice)  # type: ignore[arg-type]
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls" and message.content is None
    assert message.tool_calls is not None and len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert call.type == "function" and call.function.name == "grade" and call.id  # type: ignore[union-attr]
    args = json.loads(call.function.arguments)  # type: ignore[union-attr]
    jsonschema.validate(args, tools[0]["function"]["parameters"])
    assert args["label"] == ("correct" if scales.binary(unit(reading)) else "incorrect")


def test_a_forced_tool_call_streams_as_openai_streams_one(client, reading):
    tools = [grade_tool()]
    stream = client.chat.completions.create(
        model=MODEL,
        messages=inspect_prompt(),
        tools=tools,
        tool_choice="required",
        stream=True,  # type: ignore[arg-type]
    )
    chunks = list(stream)
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or []) if c.choices]
    assert calls[0].id and calls[0].function.name == "grade"  # type: ignore[union-attr]
    args = json.loads("".join(tc.function.arguments or "" for tc in calls))  # type: ignore[union-attr]
    jsonschema.validate(args, tools[0]["function"]["parameters"])
    assert args["label"] == ("correct" if scales.binary(unit(reading)) else "incorrect")
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"tools": [grade_tool(), grade_tool("other")]}, "`tool_choice`"),
        ({"tools": [grade_tool()], "tool_choice": "auto"}, "`tool_choice`"),
        ({"tools": [grade_tool()], "tool_choice": "none"}, "`tool_choice`"),
        ({"tools": [grade_tool(), grade_tool("other")], "tool_choice": "required"}, "`tool_choice`"),
        ({"tools": [grade_tool()], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "'nope'"),
        ({"tool_choice": "required"}, "needs `tools`"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"$ref": "x"}}}],
          "tool_choice": "required"}, "tools[0].function.parameters"),
    ],
    ids=["auto-several", "auto", "none", "required-several", "unknown-name", "no-tools", "bad-parameters"],
)  # fmt: skip
def test_other_tool_uses_are_refused_saying_what_is_accepted(client, options, named):
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.create(model=MODEL, messages=own_prompt(), **options)
    assert named in e.value.message
    assert e.value.code in ("tools_not_supported", "invalid_schema")


def test_a_forced_tool_call_on_generated_text_is_refused(client):
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            tools=[grade_tool()],
            tool_choice="required",  # type: ignore[list-item]
        )
    assert "generated text calls no tools" in e.value.message


# ----------------------------------------------------------------------------- sampling that is greedy


@pytest.mark.parametrize("options", [{"temperature": 0.01}, {"temperature": 0, "top_p": 0.5},
                                     {"temperature": 0.005, "top_p": 0.9}])  # fmt: skip
def test_sampling_that_cannot_change_a_greedy_answer_is_accepted(client, options):
    """ragas sends temperature 0.01: generated text is decoded greedily, as with temperature 0, and said."""
    messages = [{"role": "user", "content": "hi"}]
    want = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3, temperature=0)  # type: ignore[arg-type]
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, max_tokens=3, **options
    )  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == want.choices[0].message.content
    assert (
        raw.headers["x-judge-sampling"].startswith("greedy (")
        and "temperature" in raw.headers["x-judge-sampling"]
    )


@pytest.mark.parametrize("options", [{"temperature": 0.02}, {"top_p": 0.5}])
def test_real_sampling_keeps_todays_refusal(client, options):
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], **options)  # type: ignore[arg-type]
    assert e.value.code == "sampling_not_supported"


# ----------------------------------------------------------------------------- attacks (red-team review)


def _laughs(k: int, n: int) -> dict:
    """A few KB of schema that expands to k**n nodes: n levels of $defs, k required properties each
    pointing at the next level."""
    defs: dict = {f"L{n}": {"type": "string"}}
    for i in range(n):
        nxt = {"$ref": f"#/$defs/L{i + 1}"}
        defs[f"L{i}"] = {"type": "object", "properties": {f"p{j}": nxt for j in range(k)},
                         "required": [f"p{j}" for j in range(k)]}  # fmt: skip
    props = {"score": {"type": "number"}, "x": {"$ref": "#/$defs/L0"}}
    return {"type": "object", "$defs": defs, "properties": props, "required": ["score", "x"]}


@pytest.mark.parametrize("where", ["response_format", "tools"])
def test_a_schema_expanding_past_the_node_budget_is_a_422(client, where):
    """B2: the budget counts the schema as filled (each $ref followed), not only as written."""
    schema = _laughs(4, 10)
    assert len(json.dumps(schema)) < 5000
    with pytest.raises(openai.UnprocessableEntityError) as e:
        if where == "tools":
            tool = {"type": "function", "function": {"name": "g", "parameters": schema}}
            client.chat.completions.create(
                model=MODEL, messages=own_prompt(), tools=[tool], tool_choice="required"
            )  # type: ignore[arg-type,list-item]
        else:
            ask_schema(client, own_prompt(), schema, strict=False)
    assert f"expands past {MAX_NODES} nodes" in e.value.message
    # a small expansion of the same shape is still filled
    out = ask_schema(client, own_prompt(), _laughs(2, 3), strict=False)
    assert out["x"]["p1"]["p0"]["p1"].startswith("Learned judge's reading")


BIG = "1" + "0" * 400  # an integer literal past a float's range


def _raw(server, body: str) -> httpx.Response:
    return httpx.post(server.url + "/v1/chat/completions", content=body.encode(),
                      headers={"Content-Type": "application/json"}, timeout=60)  # fmt: skip


def _rf(schema: str) -> str:
    own = json.dumps(own_prompt())
    return f'{{"model":"{MODEL}","messages":{own},"response_format":{{"type":"json_schema","json_schema":{{"name":"x","schema":{schema}}}}}}}'


def _tool(params: str, stream: bool = False) -> str:
    own = json.dumps(own_prompt())
    return (f'{{"model":"{MODEL}","stream":{json.dumps(stream)},"messages":{own},"tools":[{{"type":"function",'
            f'"function":{{"name":"g","parameters":{params}}}}}],"tool_choice":"required"}}')  # fmt: skip


_SCORE = '{"type":"object","properties":{"s":{"type":"number","minimum":0,"maximum":%s}},"required":["s"]}'


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (_rf('{"$ref":"#/x","x":5}'), "points at a int"),
        (_tool('{"$ref":"#/x","x":5}', stream=True), "points at a int"),
        (_rf(_SCORE % BIG), "has `maximum`"),
        (_tool(_SCORE.replace("0,", f"-{BIG},") % BIG, stream=True), "has `minimum`"),
        (_rf(_SCORE % "1e400"), "has `maximum`"),
        (_tool(_SCORE % "1e400"), "has `maximum`"),
        (_rf('{"type":"object","properties":{"s":{"type":"number"},"c":{"const":1e400}},"required":["s","c"]}'),
         "not finite"),
        (_rf('{"type":"object","properties":{"s":{"type":"number","minimum":-1e308,"maximum":1e308}}}'),
         "too far apart"),
        (f'{{"model":"{MODEL}","messages":{json.dumps(own_prompt())},"temperature":{BIG}}}',
         "`temperature` must be a finite number"),
        (f'{{"model":"{MODEL}","messages":{json.dumps(own_prompt())},"top_p":{BIG}}}',
         "`top_p` must be a finite number"),
    ],
    ids=["ref-to-int", "ref-to-int-tools-stream", "max-10e400", "min-10e400-tools-stream", "max-1e400",
         "max-1e400-tools", "const-1e400", "span-overflows", "temperature-10e400", "top-p-10e400"],
)  # fmt: skip
def test_numbers_past_a_float_and_refs_to_values_are_a_422(server, body, said):
    """B3/B4: each was a 500 (TypeError, OverflowError) or a 200 holding `Infinity`, which is not JSON."""
    r = _raw(server, body)
    assert r.status_code == 422, r.text
    assert said in r.json()["error"]["message"]


def test_a_system_text_nested_past_the_decoder_is_no_schema(server):
    """B3: json_object with 3000 '[' after '{"properties": ' in a system message was a RecursionError (500);
    it is read as no schema (the conversation is then answered as any other json_object request)."""
    messages = [{"role": "system", "content": '{"properties": ' + "[" * 3000}, *own_prompt()]
    body = {"model": MODEL, "messages": messages, "response_format": {"type": "json_object"}}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert set(json.loads(r.json()["choices"][0]["message"]["content"])) == {"score"}


def _lmms(items: str) -> list[dict]:
    """lmms-eval's rubric prompt (evaluate_with_rubric), whose answer is the tool's own JSON."""
    text = (f"Evaluate the following response according to the given rubric.\n\nQuestion: {QUESTION}\n\n"
            f"Response: {GOOD}\n\nRubric:\n{items}\n\nProvide a JSON response with scores for each rubric item.")  # fmt: skip
    return [{"role": "user", "content": text}]


_OBJ = {"type": "object", "required": ["score"]}


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score", "reason"]},
         "absent from `properties`"),
        ({**_OBJ, "properties": {"score": {"type": "number", "minimum": 0, "maximum": 10, "multipleOf": 1}}},
         "`multipleOf`"),
        ({**_OBJ, "properties": {"score": {"type": "integer", "enum": [1.5, 2.5]}}}, "`type`"),
        ({**_OBJ, "properties": {"score": {"type": "number"}, "m": {"type": "object", "minProperties": 1}},
          "required": ["score", "m"]}, "`minProperties`"),
        ({**_OBJ, "properties": {"score": {"type": "number"}}, "minProperties": 2}, "`minProperties`"),
        ({**_OBJ, "properties": {"score": {"type": "number"}, "r": {"type": "string", "not": {"type": "string"}}},
          "required": ["score", "r"]}, "`not`"),
        ({**_OBJ, "properties": {"score": {"type": "number"}, "r": {"type": "string", "pattern": "^(a+)+$"}}},
         "regular expression is not run"),
    ],
    ids=["required-absent", "multipleOf", "integer-enum-of-halves", "nested-minProperties", "minProperties",
         "not", "pattern"],
)  # fmt: skip
def test_an_answer_invalid_against_the_schema_is_a_422_naming_the_keyword(client, schema, said):
    """B5: each was a 200 whose content the client's own schema refuses."""
    with pytest.raises(openai.UnprocessableEntityError) as e:
        ask_schema(client, own_prompt(), schema, strict=False)
    assert said in e.value.message


@pytest.mark.parametrize(
    "accuracy",
    [{"type": "integer", "minimum": 0, "maximum": 1}, {"type": "string", "enum": ["bad", "good"]}],
    ids=["integer-0-1", "label-enum"],
)
def test_a_tools_json_answer_off_the_schema_is_filled_from_the_reading(client, reading, accuracy):
    """B5: lmms-eval's rubric answer ({"accuracy": 6.x on 1-10}) was passed through unchanged against a
    schema saying 0..1 or an enum; now the schema is filled from the judge's reading instead."""
    schema = {"type": "object", "properties": {"accuracy": accuracy}, "required": ["accuracy"]}
    out = ask_schema(client, _lmms("- accuracy: 1-10"), schema, strict=False)  # validated inside
    if accuracy["type"] == "integer":
        assert out["accuracy"] == scales.integer_scale(unit(reading), 0, 1)
    else:
        assert out["accuracy"] == ("good" if scales.binary(unit(reading)) else "bad")
