"""judge-serve's transport and chat path against a real server on loopback (issue 37, 5b, 6, 7 and the key):

* the worst reward query for the chat markup parser, at the string bound, leaves ``/health`` under 100 ms;
* a chat request refused without ``stream`` is refused the same way with it (status and body), before
  any event;
* the ``data:`` exemption of the string bound holds only for image fields: a huge question, text part or
  query that starts with ``data:`` is a 413 as fast as one that does not, and a long ``data:`` string
  where the route reads no image (an unknown ``url``, a text part's ``image_url``) is a 413 naming it,
  while a real image's data URL in each image place still scores;
* a configured API key with whitespace around it is refused at start (no client could send it), and the
  key is compared exactly."""

from __future__ import annotations

import base64
import io
import json
import random
import struct
import subprocess
import sys
import threading
import time
import zlib

import httpx
import pytest
from PIL import Image
from serving import REPO, running_server, server_env

from judge.serve.body import default_string_limit

MODEL = "tiny"
BOUND = default_string_limit(8192)  #: the tiny judge's longest string in a body (--max-string-bytes)
ITEM = {"id": "x", "task": "SA", "question": "Continue the story.", "response": "Then it rained."}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--protocol-task", "SA", "--reward-task", "SA"]
    args += ["--chat", "generate"]  # a chat with a long image is generated text here (judge-only refuses it)
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


def _fill(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


@pytest.mark.parametrize(
    "query, prompt",
    [
        (_fill("<|vision_start|>", BOUND - 64), None),  # unterminated image spans (was 8 s at 64 kB)
        (_fill("a", BOUND - 64), "ab" + _fill("a", BOUND // 2)),  # a prompt not in its query (str.rfind)
    ],
    ids=["vision-starts", "prompt-not-in-query"],
)
def test_health_stays_fast_while_the_worst_reward_query_is_parsed(server, query, prompt):
    body = json.dumps({"query": [query], **({"prompts": [prompt]} if prompt else {})}).encode()
    answered: list[int] = []

    def post() -> None:
        try:
            answered.append(_timed_post(server.url + "/get_reward", body)[0].status_code)
        except httpx.HTTPError:
            answered.append(-1)

    sender = threading.Thread(target=post)
    sender.start()
    took: list[float] = []
    with httpx.Client(timeout=30) as client:
        end = time.monotonic() + 20
        while sender.is_alive() and time.monotonic() < end:
            t = time.perf_counter()
            assert client.get(server.url + "/health").status_code == 200
            took.append(time.perf_counter() - t)
            time.sleep(0.02)
    sender.join(60)
    assert answered == [200]
    # Under 100 ms; one poll of the lot may lose its core to the other processes of a shared machine.
    took.sort()
    assert took[:-1] and took[-2] < 0.1 and took[-1] < 0.5, f"/health took {took[-3:]} s ({len(took)} polls)"


INVALID = [
    {"stop": 5},
    {"stop": True},
    {"stop": 1.5},
    {"stop": ["a", "b", "c", "d", "e"]},
    {"stop": [""]},
    {"max_tokens": "x"},
    {"max_tokens": 0},
    {"temperature": -1},
    {"n": 2},
    {"logprobs": "yes"},
    {"top_logprobs": 30, "logprobs": True},
    {"tools": [{"type": "function", "function": {"name": "f"}}]},
    {"response_format": {"type": "weird"}},
    {"response_format": {"type": "json_object"}},  # generated text held to a format
    {"timeout": -1},
    {"model": "nope"},
    {"messages": []},
    {"messages": [{"role": "robot", "content": "hi"}]},
    {"messages": [{"role": "user", "content": "x " * 20_000}]},  # over the context: 413
    {"stream_options": {"include_usage": "yes"}},
]


@pytest.mark.parametrize("fields", INVALID, ids=[json.dumps(f)[:40] for f in INVALID])
def test_a_refusal_without_stream_is_the_same_refusal_with_it(server, fields):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Count the stars."}], **fields}
    plain = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    streamed = httpx.post(server.url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60)
    assert 400 <= streamed.status_code < 500, streamed.text[:300]
    if "stream_options" in fields:  # refused without stream for being there at all; with it, for its value
        assert "stream_options" in streamed.json()["error"]["message"]
        return
    assert (streamed.status_code, streamed.json()) == (plain.status_code, plain.json())


def _timed_post(url: str, body: bytes) -> tuple[httpx.Response, float]:
    t = time.perf_counter()
    r = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=120)
    return r, time.perf_counter() - t


def test_a_huge_question_starting_with_data_is_refused_as_fast_as_a_plain_one(server):
    huge = _fill("lorem ipsum ", 40_000_000)
    times = {}
    for name, text in (("plain", huge), ("data-prefixed", "data:" + huge)):
        body = json.dumps({"items": [{**ITEM, "question": text}]}).encode()
        r, times[name] = _timed_post(server.url + "/v1/score", body)
        assert r.status_code == 413 and r.json()["error"]["code"] == "string_too_long", (name, r.text[:200])
    assert times["data-prefixed"] < 2 * times["plain"] + 0.3, times


_LONG_URL = "data:image/png;base64," + "A" * (BOUND + 1000)


@pytest.mark.parametrize(
    "route, body, is_image",
    [
        ("/v1/score", {"items": [{**ITEM, "question": _LONG_URL}]}, False),
        ("/v1/score", {"items": [{**ITEM, "question": [{"type": "image", "image": _LONG_URL}]}]}, True),
        ("/v1/score", {"items": [{**ITEM, "response": [{"type": "text", "text": _LONG_URL}]}]}, False),
        ("/get_reward", {"query": [_LONG_URL]}, False),
        ("/get_reward", {"query": ["data:x", _LONG_URL]}, False),
        ("/get_reward", {"query": ["q"], "images": [[_LONG_URL]]}, True),
        ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": _LONG_URL}]}, False),
        (
            "/v1/chat/completions",
            {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text", "text": _LONG_URL}]}]},
            False,
        ),
        (
            "/v1/chat/completions",
            {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": _LONG_URL}}]}]},
            True,
        ),
        ("/v1/responses", {"model": MODEL, "input": _LONG_URL}, False),
        (
            "/v1/responses",
            {"model": MODEL, "input": [{"role": "user", "content": [{"type": "input_text", "text": _LONG_URL}]}]},
            False,
        ),
        (
            "/v1/responses",
            {"model": MODEL, "input": [{"role": "user", "content": [{"type": "input_image", "image_url": _LONG_URL}]}]},
            True,
        ),
    ],
    ids=["score-question", "score-image", "score-text-part", "reward-query", "reward-query-after-data",
         "reward-images", "chat-content", "chat-text-part", "chat-image-url", "responses-input",
         "responses-input-text", "responses-input-image"],
)  # fmt: skip
def test_the_data_exemption_holds_for_image_fields_only(server, route, body, is_image):
    r = httpx.post(server.url + route, json=body, timeout=120)
    refused_as_text = r.status_code == 413 and r.json()["error"]["code"] == "string_too_long"
    assert refused_as_text != is_image, (r.status_code, r.text[:300])


def _fat_png_url(min_chars: int) -> str:
    """A real 64x64 PNG, under the server's pixel limits, whose data URL is longer than ``min_chars``: a
    private ancillary chunk (which decoders skip) carries the bulk."""
    buf = io.BytesIO()
    Image.frombytes("RGB", (64, 64), random.Random(0).randbytes(64 * 64 * 3)).save(buf, "PNG")
    png, pad = buf.getvalue(), bytes(min_chars * 3 // 4)
    chunk = struct.pack(">I", len(pad)) + b"prVt" + pad + struct.pack(">I", zlib.crc32(b"prVt" + pad))
    fat = png[:-12] + chunk + png[-12:]  # before IEND
    return "data:image/png;base64," + base64.b64encode(fat).decode()


_HI = {"role": "user", "content": "hi"}
_BIG = "data:" + "A" * 40_000_000


@pytest.mark.parametrize(
    "route, body, field",
    [
        ("/v1/chat/completions", {"model": MODEL, "url": _BIG, "messages": [_HI], "max_tokens": 2}, "url"),
        (
            "/v1/chat/completions",
            {"model": MODEL, "max_tokens": 2, "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi", "image_url": _BIG}]}]},
            "messages[0].content[0].image_url",
        ),
        (  # the part's type after its value: the byte guard cannot tell, the parsed body can
            "/v1/chat/completions",
            {"model": MODEL, "max_tokens": 2, "messages": [
                {"role": "user", "content": [{"image_url": {"url": _BIG}, "type": "text", "text": "hi"}]}]},
            "messages[0].content[0].image_url.url",
        ),
        ("/v1/score", {"items": [{**ITEM, "meta": {"image": _BIG}}]}, "items[0].meta.image"),
        ("/v1/score", {"items": [ITEM], "url": _BIG}, "url"),
        ("/get_reward", {"query": ["q"], "image": _BIG}, "image"),
        ("/v1/responses", {"model": MODEL, "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "hi", "image_url": _BIG}]}]}, "input[0].content[0].image_url"),
    ],
    ids=["chat-top-level-url", "chat-text-part-image_url", "chat-url-before-text-type", "score-meta-image",
         "score-top-level-url", "reward-image-key", "responses-text-part-image_url"],
)  # fmt: skip
def test_a_long_data_string_outside_an_image_field_is_refused(server, route, body, field):
    r, took = _timed_post(server.url + route, json.dumps(body).encode())
    assert r.status_code == 413, (r.status_code, r.text[:300])
    err = r.json()["error"]
    assert err["code"] == "string_too_long" and err["param"] == field and f"`{field}`" in err["message"], err
    assert took < 10, took


@pytest.mark.parametrize(
    "route, body",
    [
        ("/v1/chat/completions", {"model": MODEL, "max_tokens": 2, "messages": [
            {"role": "user", "content": [{"image_url": {"url": "LONG"}, "type": "image_url"}, {"type": "text", "text": "hi"}]}]}),
        ("/v1/chat/completions", {"model": MODEL, "max_tokens": 2, "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": "LONG"}, {"type": "text", "text": "hi"}]}]}),
        ("/v1/score", {"items": [{**ITEM, "question": [{"type": "text", "text": "Look."}, {"type": "image", "image": "LONG"}]}]}),
        ("/v1/score", {"items": [{"id": "SA_1", "question": [{"text": "Look.", "image": "LONG"}], "answer": "A cat."}]}),
        ("/get_reward", {"query": ["q"], "images": [["LONG"]]}),
        ("/v1/responses", {"model": MODEL, "max_output_tokens": 2, "input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": "LONG"}, {"type": "input_text", "text": "hi"}]}]}),
    ],
    ids=["chat-url-before-type", "chat-image_url-string", "score-image-segment", "score-mmie-segment",
         "reward-images", "responses-input-image"],
)  # fmt: skip
def test_a_long_image_data_url_in_its_place_still_scores(server, route, body):
    url = _fat_png_url(BOUND + 1000)
    r = httpx.post(server.url + route, content=json.dumps(body).replace('"LONG"', json.dumps(url)),
                   headers={"Content-Type": "application/json"}, timeout=120)  # fmt: skip
    assert r.status_code == 200, r.text[:300]


@pytest.mark.parametrize("where", ["option", "environment"])
def test_an_api_key_with_spaces_around_it_is_refused_at_start(where, tmp_path):
    key = " sk-local\n"
    args = ["--judge", "tiny", "--rubric", "mmie", "--port", "0"]
    env = server_env(**({"JUDGE_API_KEY": key} if where == "environment" else {}))
    if where == "option":
        args += ["--api-key", key]
    done = subprocess.run(
        [sys.executable, "-m", "judge.cli.serve", *args], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    named = "--api-key" if where == "option" else "JUDGE_API_KEY"
    assert named in done.stderr and "whitespace" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_the_key_is_compared_exactly(tmp_path):
    args = ["--judge", "tiny", "--rubric", "mmie", "--api-key", "sk-local"]
    with running_server(args, tmp_path) as s:
        for given, status in [
            ("Bearer sk-local", 200),
            ("bearer sk-local", 200),
            ("Bearer  sk-local", 200),  # HTTP's separator may be several spaces
            ("Bearer sk-loca", 401),
            ("Bearer sk-local2", 401),
            ("Bearer \tsk-local", 401),
            ("Bearer sk local", 401),
            ("sk-local", 401),
        ]:
            r = httpx.get(s.url + "/v1/models", headers={"Authorization": given}, timeout=30)
            assert r.status_code == status, given
