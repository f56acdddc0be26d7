"""One client cannot stall the others, and what the operator sees is true (issue 28's round 2, sections
5 to 7), against a real judge-serve on loopback:

* a megabyte-sized text is answered at once as over the context (before: the one batcher thread tokenised
  4 MB for 16.7 s while every other request waited, and 50 MB stalled the server for minutes), and a string
  longer than any text that fits is refused while the body is read, before it is parsed;
* thousands of half-open connections, under a lowered open-file limit, do not keep ``/health`` or a
  normal request from an answer within a second (before: connection resets at accept);
* a connection that never finishes its request head, or stalls its body, is closed;
* a body of tiny items is refused while it is read, before it is parsed (before: +1.7 GB for 64 MB);
* a client that hangs up mid-body is counted as 499, not 500; a 500 is logged with its type and traceback.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from serving import REPO, running_server, serving_in_process

from judge.serve.config import ServeConfig
from judge.serve.service import JudgeService

pytestmark = pytest.mark.usefixtures("one_thread")
ITEM = {"id": "n", "task": "SA", "question": "What is in the garden?", "response": "A red flower."}
PROMPT = "<|im_start|>user\nWhat is shown?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--reward-task", "SA", "--header-timeout-s", "2"]
    args += ["--chat", "generate"]  # a chat over the context budget is refused by generation's own check
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


def normal_score(server) -> float:
    t0 = time.monotonic()
    r = httpx.post(server.url + "/v1/score", json={"items": [ITEM], "criteria": ["overall"]}, timeout=60)
    assert r.status_code == 200 and r.json()["results"][0]["scores"]["overall"]["status"] == "ok", r.text
    return time.monotonic() - t0


@pytest.mark.slow
def test_a_megabyte_text_is_refused_at_once_and_stalls_no_one(server):
    """A text over the context budget but under the string bound (1 MB; the tiny judge's bound is 3.1 MB) is
    answered as too long from a prefix's tokens, at once, on every route."""
    normal_score(server)  # warm
    alone = min(normal_score(server) for _ in range(3))
    huge = {**ITEM, "id": "huge", "response": "word " * 200_000}  # 1 MB
    answers: dict[str, httpx.Response] = {}

    def send_huge():
        body = {"items": [huge], "criteria": ["overall"], "timeout": 3}
        answers["score"] = httpx.post(server.url + "/v1/score", json=body, timeout=60)

    t = threading.Thread(target=send_huge)
    t0 = time.monotonic()
    t.start()
    time.sleep(0.05)
    beside = normal_score(server)
    t.join()
    took = time.monotonic() - t0
    got = answers["score"].json()["results"][0]["scores"]["overall"]
    assert got["status"] == "unscorable" and got["details"]["reason_code"] == "too_long", got
    assert took < 3 and beside < alone + 2, (took, alone, beside)
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "word " * 200_000}], "max_tokens": 1}
    t0 = time.monotonic()
    r = httpx.post(server.url + "/v1/chat/completions", json=chat, timeout=60)
    assert r.status_code == 413 and "context budget" in r.json()["error"]["message"], r.text
    reward = {"query": [PROMPT + "word " * 200_000, PROMPT + "A red flower.<|im_end|>"]}
    r = httpx.post(server.url + "/get_reward", json=reward, timeout=60)
    assert r.json()["extra_logs"]["judge_unscorable"] == [1.0, 0.0], r.text
    assert time.monotonic() - t0 < 5


@pytest.mark.slow
def test_a_string_longer_than_any_text_that_fits_is_refused_while_the_body_is_read(server):
    """50 MB of text in one string (inside the 64 MB body limit) is a 413 naming --max-string-bytes before
    the body is parsed, on every route, sent whole or chunked with the string across chunks; the server
    reads a few MB of it and its memory does not grow by the body's size (before: the body parsed and
    validated, 50 MB of text per request, every other client waiting behind the parser's C calls)."""
    limits = httpx.get(server.url + "/v1/judge", timeout=10).json()["limits"]
    assert limits["max_string_bytes"] == 384 * limits["max_tokens"]
    text = "word " * 10_000_000  # 50 MB
    before = peak_kb(server)
    bodies = {
        "/v1/score": {"items": [{**ITEM, "response": text}]},
        "/v1/chat/completions": {"model": "tiny", "messages": [{"role": "user", "content": text}]},
        "/get_reward": {"query": [PROMPT + text]},
    }
    for route, body in bodies.items():
        t0 = time.monotonic()
        r = httpx.post(server.url + route, json=body, timeout=60)
        assert r.status_code == 413, (route, r.text[:300])
        error = r.json()["error"]
        assert error["code"] == "string_too_long" and "--max-string-bytes" in error["message"], error
        assert time.monotonic() - t0 < 5, route
    raw = json.dumps(bodies["/v1/score"]).encode()

    def chunks():  # no Content-Length: the string arrives across many chunks
        for i in range(0, len(raw), 65_536):
            yield raw[i : i + 65_536]

    r = httpx.post(
        server.url + "/v1/score", content=chunks(), headers={"Content-Type": "application/json"}, timeout=60
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "string_too_long", r.text[:300]
    assert (peak_kb(server) - before) * 1024 < 50_000_000, peak_kb(server) - before
    assert normal_score(server) < 5  # still serving


def half_open(port: int, n: int) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
        socks.append(s)
    return socks


@pytest.mark.slow
def test_thousands_of_half_open_connections_leave_health_and_a_request_answered(tmp_path):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    args = ["--judge", "tiny", "--rubric", "mmie", "--header-timeout-s", "60"]
    with running_server(args, tmp_path, open_files=1024) as s:
        port = int(s.url.rsplit(":", 1)[1])
        socks = half_open(port, 3000)  # three times what the server may hold open
        try:
            t0 = time.monotonic()
            r = httpx.get(s.url + "/health", timeout=5)
            health = time.monotonic() - t0
            assert r.status_code == 200 and health < 1.0, health
            scored = normal_score(s)
            assert scored < 1.0, scored
        finally:
            for sock in socks:
                sock.close()
        assert "at most 896 open (open files: 1,024)" in s.output()


def test_a_request_head_or_body_that_stalls_is_closed(server):
    port = int(server.url.rsplit(":", 1)[1])
    (head,) = half_open(port, 1)
    body = socket.create_connection(("127.0.0.1", port), timeout=10)
    body.sendall(
        b"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    t0 = time.monotonic()
    head.settimeout(10)
    assert head.recv(1024) == b""  # closed by the server, after --header-timeout-s 2
    assert body.recv(1024) == b""
    assert 1.5 < time.monotonic() - t0 < 6
    head.close()
    body.close()


def test_a_body_of_tiny_items_is_refused_while_it_is_read(server):
    before = peak_kb(server)
    body = b'{"items": [' + b"{}," * 8_000_000 + b"{}]}"  # 24 MB: 8 million items
    t0 = time.monotonic()
    r = post_body(server, body)
    took = time.monotonic() - t0
    assert r.status_code == 413 and "JSON values" in r.json()["error"]["message"], r.text
    assert (peak_kb(server) - before) < 64 * 1024 and took < 3, (peak_kb(server) - before, took)


def peak_kb(server) -> int:
    return int(open(f"/proc/{server.pid}/status").read().split("VmHWM:")[1].split()[0])


def post_body(server, body: bytes) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    return httpx.post(server.url + "/v1/score", content=body, headers=headers, timeout=120)


@pytest.mark.slow
def test_the_largest_bodies_allowed_stay_bounded_once_parsed(server):
    """What parsing and validating the largest bodies the server takes costs its peak memory: a body near
    the 64 MB limit (256 items of 240 kB of text) at most 4 times its size; the densest body the value
    budget lets through (256 items of one-letter text segments) at most 64 MB. The items' family is
    unknown, so they are answered without scoring: what is measured is the body's way in."""
    from judge.serve.body import StructureCount, structure_budget

    big = [{**ITEM, "id": str(i), "task": "XX", "response": "a " * 120_000} for i in range(256)]
    body = json.dumps({"items": big, "criteria": "all"}).encode()
    before = peak_kb(server)
    assert post_body(server, body).status_code == 200
    assert (peak_kb(server) - before) * 1024 < 4 * len(body), (peak_kb(server) - before, len(body))

    segment = {"type": "text", "text": "a"}
    count = StructureCount(0)
    count.add(json.dumps(segment).encode() + b",")
    per_item = structure_budget(256) * 95 // 100 // 256 // count.seen
    dense = [{**ITEM, "id": str(i), "task": "XX", "response": [segment] * per_item} for i in range(256)]
    body = json.dumps({"items": dense, "criteria": "all"}).encode()
    before = peak_kb(server)
    assert post_body(server, body).status_code == 200
    assert (peak_kb(server) - before) < 64 * 1024, (peak_kb(server) - before, len(body))


def test_a_client_that_hangs_up_mid_body_is_counted_499(server):
    port = int(server.url.rsplit(":", 1)[1])
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(
        b"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"
    )
    time.sleep(0.2)
    s.close()
    time.sleep(0.5)
    metrics = httpx.get(server.url + "/metrics").text
    lines = [x for x in metrics.splitlines() if x.startswith("judge_requests_total") and "/v1/score" in x]
    assert any('status="499"' in x for x in lines) and not any('status="500"' in x for x in lines), lines


class Injected(RuntimeError):
    pass


def test_a_500_is_logged_with_its_type_and_traceback(capsys):
    service = JudgeService(ServeConfig(judge="tiny", rubric="mmie", max_wait_ms=0))
    service.load()

    def broken(rec, criteria=None, key=None):
        raise Injected("encoding broke")

    service.engine.prepare = broken
    try:
        with serving_in_process(service) as url:
            r = httpx.post(url + "/v1/score", json={"items": [ITEM]}, timeout=60)
    finally:
        service.close()
    assert r.status_code == 500 and "Traceback" not in r.text
    err = capsys.readouterr().err
    assert (
        "POST /v1/score failed: Injected: encoding broke" in err
        and "Traceback (most recent call last)" in err
    )
    assert REPO.name  # the log names the failing frame's file
    assert "batcher.py" in err or "app.py" in err


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_string_runs_find_a_long_string_across_any_chunking_and_leave_data_urls_alone(size):
    """The bound holds wherever chunks cut the body (inside the string, inside ``data:``, between a backslash
    and the quote it escapes), is not crossed by strings at the limit, cannot be dodged with escaped quotes,
    and a data URL of any length passes (the image limits bound it)."""
    from judge.serve.body import StringRuns

    def feed(body: bytes, limit: int) -> bool:
        runs = StringRuns(limit)
        return all(runs.add(body[i : i + size]) for i in range(0, len(body), size))

    at_limit = json.dumps({"a": "x" * 100, "b": ["y" * 100, "z" * 100]}).encode()
    assert feed(at_limit, 100)
    assert not feed(json.dumps({"a": "x" * 100, "b": "y" * 101}).encode(), 100)
    assert not feed(json.dumps({"a": ["short", "x" * 101, "short"]}).encode(), 100)
    data_url = json.dumps({"image": "data:image/png;base64," + "A" * 5000, "t": "ok"}).encode()
    assert feed(data_url, 100)
    # "data:" must open the string: the same bytes later in a text do not exempt it.
    assert not feed(json.dumps({"t": "x data:" + "A" * 5000}).encode(), 100)
    # Escaped quotes every 50 characters do not cut a long string into short runs (chunked anywhere,
    # the backslash and its quote in two chunks too).
    assert not feed(json.dumps({"t": ("x" * 50 + '"') * 5}).encode(), 100)
    assert feed(json.dumps({"t": ("x" * 20 + '"') * 4}).encode(), 100)
