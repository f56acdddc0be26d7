"""judge-serve's /v1/chat/completions through the official ``openai`` client: what lmms-eval and VLMEvalKit
send is answered, the judge's own rubric prompt is answered with the score /v1/score gives, logprobs have
OpenAI's shape, and refusals are 4xx errors naming the field while the server keeps serving."""

from __future__ import annotations

import base64
import io
import json
import math

import httpx
import openai
import pytest
from openai import OpenAI
from PIL import Image
from serving import REPO, running_server

from judge.serve.judge_prompt import judge_chat_messages
from judge.testing.tiny import tokens_per_tile

KEY = "sk-test"
MODEL = "tiny"  # the served id: the --judge argument's name
DEMO = REPO / "annotations" / "demo"
ITEM_FIELDS = ("id", "task", "question", "response", "reference", "model")
TOL = 1e-4


def demo_item(task: str) -> dict:
    """The first demo annotation of ``task`` as a prediction item (image paths relative to the demo folder)."""
    for line in (DEMO / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["task"] == task:
            return {k: rec[k] for k in ITEM_FIELDS if k in rec}
    raise AssertionError(f"no demo item of task {task}")


def jpeg_data_url() -> str:
    buf = io.BytesIO()
    with Image.open(DEMO / "images" / "sa-000-q0.png") as im:
        im.convert("RGB").save(buf, "JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # --chat generate: tests below are about generation (judge-only, the default, refuses it; see
    # test_the_default_refuses_an_unrecognised_conversation).
    args = [
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--api-key",
        KEY,
        "--image-root",
        str(DEMO),
        "--chat",
        "generate",
    ]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def v1_score(server, item: dict, criterion: str) -> dict:
    r = httpx.post(
        server.url + "/v1/score",
        json={"items": [item], "criteria": [criterion]},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["scores"][criterion]


def test_harness_request_with_a_jpeg_image(client):
    """What lmms-eval / VLMEvalKit send: text and a low-detail JPEG data URL, temperature 0, max_tokens, n=1."""

    def ask(with_image: bool):
        content: list[dict] = [{"type": "text", "text": "What does the picture show?"}]
        if with_image:
            content.append({"type": "image_url", "image_url": {"url": jpeg_data_url(), "detail": "low"}})
        return client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": content}], temperature=0, max_tokens=8, n=1
        )

    r = ask(True)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == MODEL
    choice = r.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    u = r.usage
    assert u is not None and 1 <= u.completion_tokens <= 8
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    # The image reached the model: it adds its tile's context tokens to the prompt.
    no_image = ask(False)
    assert no_image.usage is not None and u.prompt_tokens >= no_image.usage.prompt_tokens + tokens_per_tile()
    # Greedy decoding: the same request gives the same answer.
    assert ask(True).choices[0].message.content == choice.message.content


@pytest.mark.parametrize(("task", "criterion"), [("SA", "text_quality"), ("MSR", "overall")])
def test_rubric_prompt_is_answered_with_the_score_of_v1_score(server, client, task, criterion):
    item = demo_item(task)
    messages = judge_chat_messages("mmie", item, criterion, root=DEMO)
    assert any(p["type"] == "image_url" for p in messages[0]["content"])
    r = client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=4)
    judged = (r.model_extra or {})["judge"]
    assert judged["criterion"] == criterion and judged["family"] == task
    assert judged["scale"] == list(range(7))
    content = r.choices[0].message.content
    assert content is not None and int(content) == judged["argmax"] and int(content) in judged["scale"]
    ref = v1_score(server, item, criterion)
    assert abs(judged["expected"] - ref["score"]) < TOL
    assert judged["argmax"] == ref["argmax"]
    assert all(abs(a - b) < TOL for a, b in zip(judged["distribution"], ref["distribution"], strict=True))
    assert abs(judged["scale_mass"] - ref["details"]["scale_mass"]) < TOL

    # A harness that joins adjacent text parts sends the same prompt: still recognised, same score.
    merged: list[dict] = []
    for part in messages[0]["content"]:
        if part["type"] == "text" and merged and merged[-1]["type"] == "text":
            merged[-1] = {"type": "text", "text": merged[-1]["text"] + part["text"]}
        else:
            merged.append(part)
    assert len(merged) < len(messages[0]["content"])
    again = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": merged}])
    assert abs((again.model_extra or {})["judge"]["expected"] - ref["score"]) < TOL


def test_a_prompt_that_only_resembles_the_rubric_is_a_plain_conversation(client):
    messages = judge_chat_messages("mmie", demo_item("SA"), "text_quality", root=DEMO)
    last = messages[0]["content"][-1]
    last["text"] = last["text"].replace("Anchor levels", "Levels")
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, max_tokens=2)
    r = raw.parse()
    # Generated, not read as a score, and marked so: "judge": null and the header.
    assert (r.model_extra or {})["judge"] is None and raw.headers["x-judge-scored"] == "false"


def test_a_scored_reply_is_marked_and_a_leading_system_message_keeps_the_match(server, client):
    item = demo_item("PBL")
    messages = judge_chat_messages("mmie", item, "overall", root=DEMO)
    ref = v1_score(server, item, "overall")
    system = {"role": "system", "content": "You are a careful evaluator. Answer with the score only."}
    for msgs in (messages, [system, *messages]):
        raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=msgs, max_tokens=1)
        assert raw.headers["x-judge-scored"] == "true"
        assert abs((raw.parse().model_extra or {})["judge"]["expected"] - ref["score"]) < TOL


def test_models_retrieve_and_several_served_names(tmp_path):
    """The openai client's models.retrieve(id) (a 404 in FastAPI's shape before), and a harness's default
    model name mapped to the judge on purpose with a second --served-name."""
    args = [
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--served-name",
        "judge",
        "--served-name",
        "gpt-4o-2024-11-20",
        "--chat",
        "generate",  # the model-name check below is made on a generated reply
    ]
    with running_server(args, tmp_path) as s:
        c = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        assert [m.id for m in c.models.list()] == ["judge", "gpt-4o-2024-11-20"]
        assert c.models.retrieve("gpt-4o-2024-11-20").id == "gpt-4o-2024-11-20"
        with pytest.raises(openai.NotFoundError) as e:
            c.models.retrieve("gpt-4")
        assert e.value.code == "model_not_found" and "'judge'" in e.value.message
        r = c.chat.completions.create(
            model="gpt-4o-2024-11-20", messages=[{"role": "user", "content": "hi"}], max_tokens=1
        )
        assert r.model == "gpt-4o-2024-11-20"


def test_judge_only_and_greedy_sampling(tmp_path):
    args = ["--judge", "tiny", "--rubric", "mmie", "--image-root", str(DEMO), "--chat", "judge-only"]
    args += ["--sampling", "greedy"]
    with running_server(args, tmp_path) as s:
        c = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        with pytest.raises(openai.UnprocessableEntityError) as e:
            c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Rate this 1-10."}])
        assert "judge_chat_messages" in e.value.message and e.value.code == "not_a_judge_prompt"
        assert (
            "prometheus-absolute" in e.value.message and "mt-bench-pair" in e.value.message
        )  # what it answers
        messages = judge_chat_messages("mmie", demo_item("SA"), "overall", root=DEMO)
        greedy = c.chat.completions.with_raw_response.create(model=MODEL, messages=messages, temperature=0)
        sampled = c.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, temperature=1, top_p=0.9, n=1
        )
        assert "x-judge-sampling" not in greedy.headers
        assert sampled.headers["x-judge-sampling"] == "greedy (temperature 1, top_p 0.9 decoded greedily)"
        a, b = (greedy.parse().model_extra or {})["judge"], (sampled.parse().model_extra or {})["judge"]
        assert a == b  # the same reading, whatever the sampling settings said
        with pytest.raises(openai.UnprocessableEntityError):
            c.chat.completions.create(model=MODEL, messages=messages, n=2)


def test_the_default_refuses_an_unrecognised_conversation(tmp_path):
    """Issue 41: with no --chat, a conversation that is neither the judge's prompt nor a tool's is a 422 that
    names the recognised formats and how to build the judge's prompt; the openai client raises (streamed or
    not), so a client that parses numbers from text cannot turn generated text into a silent NaN."""
    with running_server(["--judge", "tiny", "--rubric", "mmie"], tmp_path) as s:
        c = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        for stream in (False, True):
            with pytest.raises(openai.UnprocessableEntityError) as e:
                c.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": "Rate this answer 1-10: 42"}],
                    stream=stream,
                )
            assert e.value.code == "not_a_judge_prompt" and e.value.param == "messages"
            message = e.value.message
            assert "--chat judge-only, the default" in message and "--chat generate" in message
            assert "judge.judge_chat_messages(rubric, item, criterion)" in message and "/v1/score" in message
            for name in ("prometheus-absolute", "inspect-model-graded-qa", "lmms-eval-binary", "deepeval-geval",
                         "mt-bench-single"):  # fmt: skip
                assert name in message
        # The judge's own prompt is still answered, scored.
        messages = judge_chat_messages("mmie", demo_item("SA"), "overall", root=REPO / "annotations" / "demo")
        raw = httpx.post(
            s.url + "/v1/chat/completions", json={"model": MODEL, "messages": messages}, timeout=60
        )
        assert raw.status_code == 200 and raw.headers["x-judge-scored"] == "true", raw.text


def test_chat_generate_answers_other_conversations_unscored(client):
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "Rate this answer 1-10: 42"}], max_tokens=3
    )
    r = raw.parse()
    assert raw.headers["x-judge-scored"] == "false" and (r.model_extra or {})["judge"] is None
    assert r.choices[0].message.content and r.usage is not None and r.usage.completion_tokens >= 1


def test_a_bad_chat_value_names_the_option():
    import subprocess
    import sys

    from judge.core.errors import ConfigError
    from judge.serve.config import ServeConfig

    out = subprocess.run(
        [sys.executable, "-m", "judge.cli.serve", "--judge", "tiny", "--chat", "sometimes"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "argument --chat: invalid choice: 'sometimes'" in out.stderr
    assert "'judge-only', 'generate'" in out.stderr
    with pytest.raises(ConfigError, match="`chat`: Input should be 'judge-only', 'generate' or 'any'"):
        ServeConfig(judge="tiny", chat="sometimes")  # type: ignore[arg-type]
    assert ServeConfig(judge="tiny").chat == "judge-only"


def test_logprobs_of_generation(client):
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Count the stars."}],
        temperature=0,
        max_tokens=4,
        logprobs=True,
        top_logprobs=3,
    )
    choice = r.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content
    entries = choice.logprobs.content
    assert r.usage is not None and len(entries) <= r.usage.completion_tokens
    for e in entries:
        assert isinstance(e.token, str) and e.logprob <= 0 and e.bytes == list(e.token.encode())
        assert len(e.top_logprobs) == 3
        lps = [t.logprob for t in e.top_logprobs]
        assert lps == sorted(lps, reverse=True)
        # Greedy: the chosen token is the most probable one.
        assert e.top_logprobs[0].token == e.token and abs(lps[0] - e.logprob) < 1e-6
    if choice.finish_reason == "length":
        assert "".join(e.token for e in entries) == choice.message.content


def test_logprobs_of_the_score(client):
    messages = judge_chat_messages("mmie", demo_item("PBL"), "overall", root=DEMO)
    r = client.chat.completions.create(model=MODEL, messages=messages, logprobs=True, top_logprobs=20)
    judged = (r.model_extra or {})["judge"]
    choice = r.choices[0]
    assert choice.logprobs is not None
    (entry,) = choice.logprobs.content or []
    assert entry.token == choice.message.content == str(judged["argmax"])
    tops = {t.token: math.exp(t.logprob) for t in entry.top_logprobs}
    assert sorted(tops) == [str(v) for v in judged["scale"]]  # the scale values, however many were asked
    # Full-vocabulary probabilities: they sum to the scale mass, and renormalised give the distribution.
    assert abs(sum(tops.values()) - judged["scale_mass"]) < 1e-6
    for v, p in zip(judged["scale"], judged["distribution"], strict=True):
        assert abs(tops[str(v)] / judged["scale_mass"] - p) < 1e-6
    assert abs(math.exp(entry.logprob) - max(tops.values())) < 1e-9


def test_key_and_model_are_checked(server, client):
    wrong = OpenAI(base_url=server.url + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert "'gpt-4o'" in e.value.message and f"'{MODEL}'" in e.value.message


def _image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url, "detail": "low"}}


@pytest.mark.parametrize(
    ("options", "content", "named"),
    [
        ({"temperature": 0.7}, "hi", "`temperature`"),
        ({"n": 2}, "hi", "`n`"),
        ({"tools": [{"type": "function", "function": {"name": "grade", "parameters": {}}}]}, "hi", "`tools`"),
        ({"tool_choice": "auto"}, "hi", "`tool_choice`"),
        ({"logit_bias": {"15": 5}}, "hi", "`logit_bias`"),
        ({"frequency_penalty": 0.5}, "hi", "`frequency_penalty`"),
        ({"presence_penalty": -1}, "hi", "`presence_penalty`"),
        ({"response_format": {"type": "json_object"}}, "hi", "`response_format`"),
        ({}, [{"type": "text", "text": "hi"}, _image_part("data:image/jpeg;base64,not*base64")],
         "messages[0].content[1].image_url"),
        ({}, [_image_part("https://example.com/cat.jpg")], "messages[0].content[0].image_url"),
        ({}, [_image_part("data:image/png;base64," + base64.b64encode(b"not a png").decode())],
         "messages[0].content[0].image_url"),
    ],
    ids=["temperature", "n", "tools", "tool_choice", "logit_bias", "frequency_penalty", "presence_penalty",
         "json_object", "broken-data-url", "remote-url", "not-an-image"],
)  # fmt: skip
def test_refusals_name_the_field_and_the_server_keeps_serving(client, options, content, named, request):
    with pytest.raises(openai.APIStatusError) as e:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": content}], **options
        )
    # Bytes that are no image of a format the judge reads: 415 Unsupported Media Type.
    assert e.value.status_code == (415 if request.node.callspec.id == "not-an-image" else 422)
    assert named in e.value.message
    ok = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=1
    )
    assert ok.choices[0].message.content is not None


def test_models_lists_the_served_id(client):
    assert [m.id for m in client.models.list()] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL


def test_readme_openai_example_runs_as_written(tmp_path):
    """The README's openai example, against a server named as the demo judge's folder is ("judge")."""
    import re
    import subprocess
    import sys

    text = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- chat-example[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert m, "README.md lost its openai example block (marked <!-- chat-example ... -->)"
    args = ["--judge", "tiny", "--rubric", "mmie", "--served-name", "judge"]
    with running_server(args, tmp_path) as s:
        code = m.group(1).replace("http://127.0.0.1:8000", s.url)
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
        )
    assert out.returncode == 0, out.stderr[-3000:]
    content, expected = out.stdout.split()
    assert content in {str(v) for v in range(7)} and 0 <= float(expected) <= 6


def test_a_tool_prompt_without_a_task_family_is_a_422_naming_the_flag(client):
    """This server has no --protocol-task and its rubric has three families: a tool's grading prompt is
    recognised and refused with what to do, not answered with unscored text."""
    from prometheus_eval.prompts import ABSOLUTE_PROMPT_WO_REF

    prompt = ABSOLUTE_PROMPT_WO_REF.format(instruction="What is 3+5?", response="8", rubric="[Correct?]")
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}])
    assert e.value.code == "no_protocol_task" and "--protocol-task" in e.value.message
    assert "SA, PBL, MSR" in e.value.message


def test_metrics_count_model_lookups_under_their_route(server, client):
    client.models.retrieve(MODEL)
    text = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=10).text
    assert 'judge_requests_total{route="/v1/models/{id}",status="200"}' in text


def test_the_startup_lines_say_what_reward_and_tool_prompts_are_scored_on(server):
    out = server.output()
    assert "reward routes (/get_reward, /v1/reward): NO default task family" in out
    assert "--reward-task FAMILY" in out
    assert (
        "tools' grading prompts (prometheus-eval, inspect-ai, lmms-eval, deepeval, MT-Bench, ragas, "
        "arize-phoenix-evals): refused" in out
    )
