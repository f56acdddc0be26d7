"""The clients harnesses use, pointed at judge-serve as their judge: the ``openai`` client, LiteLLM (what
prometheus-eval calls, with its temperature 1), inspect-ai's ``openai-api`` provider and lmms-eval's
LLM-judge OpenAI provider. Each asks for a score with the judge's own prompt
(:func:`judge.judge_chat_messages`) and gets the expected score ``/v1/score`` gives for the same item:
from the reply's ``judge`` field where the client keeps it, and from the score token's ``top_logprobs``
(:func:`judge.score_from_logprobs`), which every OpenAI-compatible client returns."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import httpx
import pytest
from serving import REPO, running_server

from judge import judge_chat_messages, score_from_logprobs

DEMO = REPO / "annotations" / "demo"
TOL = 1e-4
#: A harness's default judge model, mapped to this judge on purpose (--served-name).
HARNESS_MODEL = "gpt-4o-2024-11-20"


def item() -> dict:
    for line in (DEMO / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["task"] == "SA" and any(s.get("type") == "image" for s in rec["response"]):
            return {k: rec[k] for k in ("id", "task", "question", "response", "model")}
    raise AssertionError("no SA demo item with an image")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--image-root", str(DEMO), "--served-name", "judge"]
    args += ["--served-name", HARNESS_MODEL, "--sampling", "greedy"]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


@pytest.fixture(scope="module")
def want(server) -> dict:
    r = httpx.post(server.url + "/v1/score", json={"items": [item()], "criteria": ["overall"]}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["scores"]["overall"]


@pytest.fixture(scope="module")
def messages() -> list[dict]:
    return judge_chat_messages("mmie", item(), "overall", root=DEMO)


def test_openai_client(server, want, messages):
    from openai import OpenAI

    client = OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    r = client.chat.completions.create(
        model=HARNESS_MODEL, messages=messages, max_tokens=1, temperature=0, logprobs=True, top_logprobs=7
    )
    assert (r.model_extra or {})["judge"]["expected"] == pytest.approx(want["score"], abs=TOL)
    top = r.choices[0].logprobs.content[0].top_logprobs  # type: ignore[union-attr,index]
    assert score_from_logprobs(top) == pytest.approx(want["score"], abs=TOL)


def test_litellm_with_prometheus_evals_temperature(server, want, messages, monkeypatch):
    """prometheus-eval calls judges through LiteLLM with temperature 1: a server started with
    --sampling greedy accepts it, decodes greedily and says so."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of its price list at import
    import litellm

    r = litellm.completion(
        model=f"openai/{HARNESS_MODEL}", api_base=server.url + "/v1", api_key="unused", messages=messages,
        max_tokens=1, temperature=1, logprobs=True, top_logprobs=7,
    )  # fmt: skip
    headers = r._hidden_params["additional_headers"]
    assert headers["llm_provider-x-judge-scored"] == "true"
    assert headers["llm_provider-x-judge-sampling"].startswith("greedy (temperature 1")
    assert r.judge["expected"] == pytest.approx(want["score"], abs=TOL)  # type: ignore[attr-defined]
    assert score_from_logprobs(r.choices[0].logprobs.content[0].top_logprobs) == pytest.approx(
        want["score"], abs=TOL
    )
    assert r.choices[0].message.content == str(want["argmax"])


def test_inspect_ai_openai_api_provider(server, want, messages, monkeypatch):
    from inspect_ai.model import ChatMessageUser, ContentImage, ContentText, GenerateConfig, get_model

    monkeypatch.setenv("JUDGE_BASE_URL", server.url + "/v1")  # the openai-api provider's <SERVICE>_BASE_URL
    monkeypatch.setenv("JUDGE_API_KEY", "unused")
    content = [
        ContentText(text=p["text"]) if p["type"] == "text" else ContentImage(image=p["image_url"]["url"])
        for p in messages[0]["content"]
    ]
    config = GenerateConfig(max_tokens=1, temperature=0, logprobs=True, top_logprobs=7)
    model = get_model(f"openai-api/judge/{HARNESS_MODEL}", config=config)
    out = asyncio.run(model.generate([ChatMessageUser(content=content)]))
    assert out.completion == str(want["argmax"])
    logprobs = out.choices[0].logprobs
    assert logprobs is not None
    assert score_from_logprobs(logprobs.content[0].top_logprobs or []) == pytest.approx(
        want["score"], abs=TOL
    )


def test_lmms_evals_llm_judge_provider(server, want, messages, monkeypatch):
    """lmms-eval 0.7.3's OpenAIProvider (installed by tests/requirements-clients.txt), configured as lmms-eval
    configures it: OPENAI_API_URL, OPENAI_API_KEY and the model name."""
    if importlib.util.find_spec("lmms_eval") is None:
        pytest.skip(
            "lmms-eval is not installed (pip install --no-deps --target .clients -r tests/requirements-clients.txt)"
        )
    monkeypatch.setenv("OPENAI_API_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    from lmms_eval.llm_judge.protocol import Request, ServerConfig
    from lmms_eval.llm_judge.providers.openai import OpenAIProvider

    config = ServerConfig(model_name=HARNESS_MODEL, temperature=0, max_tokens=1, num_retries=1)
    response = OpenAIProvider(config).evaluate(Request(messages=messages, config=config))
    assert response.success and response.content == str(want["argmax"])
    assert response.raw_response.model_extra["judge"]["expected"] == pytest.approx(want["score"], abs=TOL)
