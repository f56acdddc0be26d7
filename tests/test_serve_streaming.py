"""``stream: true`` on judge-serve's chat route, through the openai client's stream and LiteLLM's: generated
text arrives token by token and adds up to the unstreamed reply; a scored reply arrives as its chunks
with its ``judge`` field; usage when asked; refusals are still 4xx errors before any event."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from openai import OpenAI
from serving import REPO, running_server

from judge.serve.judge_prompt import judge_chat_messages

DEMO = REPO / "annotations" / "demo"
MODEL = "tiny"
ASK = [{"role": "user", "content": "Count the stars."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--image-root", str(DEMO), "--protocol-task", "SA"]
    args += ["--chat", "generate"]  # generation streams token by token (judge-only, the default, refuses it)
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def item() -> dict:
    for line in (DEMO / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["task"] == "SA":
            return {k: rec[k] for k in ("id", "task", "question", "response")}
    raise AssertionError("no SA item")


def test_generation_streams_token_by_token(client):
    plain = client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=6, temperature=0)
    chunks = list(
        client.chat.completions.create(
            model=MODEL, messages=ASK, max_tokens=6, stream=True, stream_options={"include_usage": True}
        )
    )
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(texts) >= 3  # one event per token, not the whole text at the end
    assert "".join(texts) == plain.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == [plain.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage == plain.usage
    assert len({c.id for c in chunks}) == 1


def test_a_stop_sequence_is_never_streamed(client):
    plain = client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=8)
    text = plain.choices[0].message.content or ""
    stop = text.strip().split()[1] if len(text.split()) > 1 else text[1:3]
    cut = client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=8, stop=[stop])
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(
            model=MODEL, messages=ASK, max_tokens=8, stop=[stop], stream=True
        )
        if c.choices
    )
    assert streamed == cut.choices[0].message.content and stop not in streamed


def test_a_scored_reply_streams_with_its_judge_field(client):
    messages = judge_chat_messages("mmie", item(), "overall", root=DEMO)
    plain = client.chat.completions.create(model=MODEL, messages=messages, logprobs=True, top_logprobs=7)
    with client.chat.completions.stream(model=MODEL, messages=messages, logprobs=True, top_logprobs=7) as s:
        final = s.get_final_completion()
    assert final.choices[0].message.content == plain.choices[0].message.content
    assert final.choices[0].logprobs == plain.choices[0].logprobs
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, stream=True))
    judged = [(c.model_extra or {}).get("judge") for c in chunks if (c.model_extra or {}).get("judge")]
    assert judged == [(plain.model_extra or {})["judge"]]


def test_a_tool_prompt_streams_its_answer(server, client):
    from inspect_ai.scorer._model import DEFAULT_MODEL_GRADED_FACT_TEMPLATE, default_instructions

    prompt = DEFAULT_MODEL_GRADED_FACT_TEMPLATE.format(
        question="What is 3+5?", criterion="8", answer="8", instructions=default_instructions(False)
    )
    messages = [{"role": "user", "content": prompt}]
    with httpx.stream("POST", server.url + "/v1/chat/completions", json={"model": MODEL, "messages": messages,
                      "stream": True}, timeout=60) as r:  # fmt: skip
        assert r.headers["x-judge-protocol"] == "inspect-model-graded-fact"
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    plain = client.chat.completions.create(model=MODEL, messages=messages)
    text = "".join((json.loads(line[6:])["choices"][0]["delta"].get("content") or "") for line in lines[:-1])
    assert text == plain.choices[0].message.content and "GRADE:" in text


def test_litellm_streams(server, monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    common = dict(model=f"openai/{MODEL}", api_base=server.url + "/v1", api_key="unused", max_tokens=6)
    plain = litellm.completion(messages=ASK, **common)
    parts = [
        c.choices[0].delta.content or "" for c in litellm.completion(messages=ASK, stream=True, **common)
    ]
    assert len([p for p in parts if p]) >= 3 and "".join(parts) == plain.choices[0].message.content
    messages = judge_chat_messages("mmie", item(), "overall", root=DEMO)
    scored = "".join(
        c.choices[0].delta.content or "" for c in litellm.completion(messages=messages, stream=True, **common)
    )
    assert scored == litellm.completion(messages=messages, **common).choices[0].message.content


def test_refusals_come_before_the_stream(client):
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.create(model=MODEL, messages=ASK, stream=True, temperature=0.7)
    assert e.value.code == "sampling_not_supported"
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.create(model=MODEL, messages=ASK, stream_options={"include_usage": True})
    assert "stream_options" in e.value.message


def test_an_error_mid_stream_is_an_error_event(server):
    """The deadline passing mid-generation: the events so far, then an error event, no [DONE]."""
    body = {"model": MODEL, "messages": ASK, "stream": True, "max_tokens": 4000, "timeout": 1.5}
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] != "data: [DONE]"
    error = json.loads(lines[-1][6:])["error"]
    assert error["status"] == 504 and "deadline" in error["message"]
