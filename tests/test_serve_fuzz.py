"""judge-serve fuzzed from its own OpenAPI description with schemathesis, on a live server on loopback:
every route, a few hundred generated bodies for each route that takes one (valid ones and broken ones),
bounded in time. Nothing may answer 5xx (but the 504 of a request whose own `timeout` passed), nothing may
hang, every 4xx is OpenAI's error shape.

It found that a chat message whose `role` was an object answered 500 (an unhashable dict looked up)."""

from __future__ import annotations

import json
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
    ]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s
    # What the run saw, per route and status, in the test log.
    counts = {k: dict(sorted(v.items())) for k, v in sorted(seen.items())}
    request.config.pluginmanager.get_plugin("terminalreporter").write_line(f"fuzz run: {json.dumps(counts)}")


@pytest.fixture(scope="module")
def api(live):
    return schemathesis.openapi.from_url(live.url + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api")


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
