"""judge-serve fuzzed from its own OpenAPI description with schemathesis, on a live server on loopback:
every route, a few hundred generated bodies for each route that takes one (valid ones and broken ones),
bounded in time. Nothing may answer 5xx (but the 504 of a request whose own `timeout` passed), nothing may
hang, every 4xx is OpenAI's error shape.

It found that a chat message whose `role` was an object answered 500 (an unhashable dict looked up)."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from serving import running_server

#: examples per operation that takes a body (the GET routes take none and need a handful)
EXAMPLES = 300
seen: dict[str, Counter] = defaultdict(Counter)


@pytest.fixture(scope="module")
def live(tmp_path_factory, request):
    # Small limits keep a generated request cheap (a valid chat request generates at most 4 tokens).
    args = [
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--max-new-tokens",
        "4",
        "--max-items",
        "8",
        "--reward-task",
        "SA",
        "--chat",
        "generate",  # valid chats generate (judge-only, the default, would refuse them before the model)
    ]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s
    # What the run saw, per route and status, in the test log.
    counts = {k: dict(sorted(v.items())) for k, v in sorted(seen.items())}
    request.config.pluginmanager.get_plugin("terminalreporter").write_line(f"fuzz run: {json.dumps(counts)}")


@pytest.fixture(scope="module")
def api(live):
    loaded = schemathesis.openapi.from_url(live.url + "/openapi.json")
    loaded.hook(flatmap_body)  # every generated body, or a poisoned copy of it
    return loaded


schema = schemathesis.pytest.from_fixture("api")

#: What the generated bodies are poisoned with (issue 28's round 2 found each answering 500): a lone
#: surrogate or a NUL byte in a string, or a value nested deep.
POISONS = ("surrogate", "nul", "nested")


def poisoned(body, how: str, pick: int):
    """``body`` with one of its strings (the ``pick``-th, cyclically) poisoned, or one value nested 200 deep."""
    places: list[tuple[object, object]] = []

    def walk(node):
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            places.append((node, k))
            walk(v)

    body = json.loads(json.dumps(body))
    walk(body)
    seen["poisoned bodies"][how] += 1
    if not places:
        return body
    node, key = places[pick % len(places)]
    value = node[key]  # type: ignore[index]
    if how == "nested":
        for _ in range(200):
            value = [value]
    elif isinstance(value, str):
        value += "\ud800" if how == "surrogate" else "\x00"
    node[key] = value  # type: ignore[index]
    return body


def flatmap_body(ctx, body):
    if not isinstance(body, (dict, list)):
        return st.just(body)
    return st.one_of(
        st.just(body), st.builds(poisoned, st.just(body), st.sampled_from(POISONS), st.integers(0, 10_000))
    )


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
    derandomize=True,
)
def test_no_5xx_no_hang_every_4xx_in_the_error_shape(case, live):
    response = case.call(timeout=60)  # a hang is a failure, not a stuck run
    seen[f"{case.method} {case.path}"][response.status_code] += 1
    # A 504 is the answer to a request's own deadline passing (a generated `timeout` of a microsecond):
    # the documented behaviour, not a fault.
    own_deadline = isinstance(case.body, dict) and case.body.get("timeout") is not None
    assert response.status_code < 500 or (response.status_code == 504 and own_deadline), response.text
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"}, body
        err = body["error"]
        assert set(err) == {"message", "type", "param", "code"} and isinstance(err["code"], str), err
    assert "Traceback" not in live.output()


TEXT = st.text(st.characters(codec="utf-8"), max_size=300)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    task=st.sampled_from(["SA", "PBL", "MSR"]),
    question=TEXT.filter(str.strip),
    response=st.one_of(TEXT, st.lists(TEXT.map(lambda t: {"type": "text", "text": t}), max_size=3)),
    reference=st.one_of(st.none(), TEXT),
    criteria=st.one_of(st.just("all"), st.just(["overall"])),
)
def test_any_text_item_of_a_family_is_scored(live, task, question, response, reference, criteria):
    """The scoring path under generated text (schemathesis mostly meets the refusals): whatever the text,
    a text-only item of a family of the rubric is answered 200 with a score for each criterion asked."""
    item = {"id": "x", "task": task, "question": question, "response": response, "reference": reference}
    r = httpx.post(live.url + "/v1/score", json={"items": [item], "criteria": criteria}, timeout=60)
    seen["POST /v1/score (text items)"][r.status_code] += 1
    assert r.status_code == 200, r.text
    scores = r.json()["results"][0]["scores"]
    assert scores and all(s["status"] == "ok" and 0 <= s["score"] <= 6 for s in scores.values()), scores


POISON = st.text(st.characters(codec="utf-8"), max_size=20).flatmap(
    lambda t: st.sampled_from([t + "\ud800", "\udfff" + t, t + "\x00"])
)


def _raw(body) -> bytes:
    return json.dumps(body).encode()  # ensure_ascii: lone surrogates travel as \\ud800 escapes


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    where=st.sampled_from(
        [
            "question",
            "response",
            "reference",
            "image",
            "chat",
            "stop",
            "image_url",
            "reward",
            "responses",
            "input_image",
        ]
    ),
    text=POISON,
)
def test_a_poisoned_string_anywhere_is_a_4xx_or_its_querys_fallback(live, where, text):
    """Lone surrogates and NUL bytes, wherever a string goes: never a 500. A lone surrogate is a 422 naming
    its field (on the reward route, that query's fallback reward); a NUL byte in an image path is refused
    as any path out of the root; NUL bytes in text are text."""
    item = {"id": "x", "task": "SA", "question": "Q?", "response": "R.", "reference": "F."}
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    route, body = "/v1/score", {"items": [item], "criteria": ["overall"]}
    if where in ("question", "response", "reference"):
        item[where] = text
    elif where == "image":
        item["response"] = [{"type": "image", "image": text}]
    elif where == "chat":
        route, body = "/v1/chat/completions", {**chat, "messages": [{"role": "user", "content": text}]}
    elif where == "stop":
        route, body = "/v1/chat/completions", {**chat, "stop": [text]}
    elif where == "image_url":
        part = {"type": "image_url", "image_url": {"url": text}}
        route, body = "/v1/chat/completions", {**chat, "messages": [{"role": "user", "content": [part]}]}
    elif where in ("responses", "input_image"):
        part = (
            {"type": "input_text", "text": text}
            if where == "responses"
            else {"type": "input_image", "image_url": text}
        )
        route, body = "/v1/responses", {"model": "tiny", "input": [{"role": "user", "content": [part]}],
                                        "max_output_tokens": 1}  # fmt: skip
    else:
        prompt = "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n"
        route, body = "/get_reward", {"query": [prompt + "A.<|im_end|>", prompt + text]}
    r = httpx.post(
        live.url + route, content=_raw(body), headers={"Content-Type": "application/json"}, timeout=60
    )
    seen[f"POST {route} (poisoned {where})"][r.status_code] += 1
    assert r.status_code < 500, r.text
    lone = any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    if route == "/get_reward":
        assert r.status_code == 200 and r.json()["extra_logs"]["judge_unscorable"][0] == 0.0, r.text
        if lone:
            assert r.json()["extra_logs"]["judge_unscorable"][1] == 1.0
    elif lone:
        assert r.status_code == 422 and "surrogate" in r.json()["error"]["message"], r.text
    assert "Traceback" not in live.output()


# ----------------------------------------------------------------------------- the tools' grading prompts

NUMBER = st.one_of(st.integers(-20, 20), st.integers(-(10**7), 10**7), st.integers(-(10**500), 10**500))
SLOT = st.one_of(
    TEXT,
    st.integers(1, 50_000).map(lambda n: "\n" * n + "x"),
    st.sampled_from(["markers", "every"]),
    st.builds(lambda a, b: f"on a scale of {a} to {b}", NUMBER, NUMBER),
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    name=st.sampled_from(["mt-bench-single", "deepeval-geval", "lmms-eval-comparative", "prometheus-absolute",
                          "inspect-model-graded-qa", "lmms-eval-rubric"]),
    lo=NUMBER, hi=NUMBER, question=SLOT, response=SLOT, logprobs=st.booleans(),
)  # fmt: skip
def test_a_tools_prompt_with_fuzzed_slots_and_scale(live, name, lo, hi, question, response, logprobs):
    """Each tool's real template, its scale's numbers of any size and order and its slots fuzzed (text,
    newline runs, every tool's markers, scale sentences): never a 5xx; a 200 only for a scale the parser
    bounds (|x| <= 1e6, low < high), with its value inside it (the template's scale, whatever the slots
    say); each answered within 30 s."""
    from tool_templates import MT_SINGLE, build, markers

    from judge.serve.protocols.stated import MAX_ABS

    def slot(value: str) -> str:
        return markers() if value == "every" else markers(name) if value == "markers" else value

    messages = build(name, slot(question) or "Q?", slot(response) or "R.", "8")
    stated = {"mt-bench-single": "1 to 10", "deepeval-geval": "between 0 and 10"}.get(name)
    if stated:  # the scale the template states, fuzzed
        said = "1 to 10" if stated == "1 to 10" else "between 0 and 10"
        new = f"{lo} to {hi}" if stated == "1 to 10" else f"between {lo} and {hi}"
        for m in messages:
            m["content"] = m["content"].replace(MT_SINGLE, MT_SINGLE.replace(said, new)).replace(said, new)
    t0 = time.perf_counter()
    body = {
        "model": "tiny",
        "messages": messages,
        "logprobs": logprobs,
        "top_logprobs": 5 if logprobs else None,
    }
    r = httpx.post(live.url + "/v1/chat/completions", json=body, timeout=60)
    took = time.perf_counter() - t0
    seen[f"POST /v1/chat/completions (tool prompt {name})"][r.status_code] += 1
    assert r.status_code < 500 and took < 30, (r.status_code, took, r.text[:300])
    if r.status_code == 200 and stated and (r.json().get("judge") or {}).get("value") is not None:
        assert -MAX_ABS <= lo < hi <= MAX_ABS and lo <= r.json()["judge"]["value"] <= hi, r.text[:300]
    if r.status_code == 200 and name == "lmms-eval-comparative":
        first = r.json()["choices"][0]["message"]["content"].splitlines()[0]
        assert all(1 <= int(x) <= 10 for x in first.split()), first
    assert "Traceback" not in live.output()
