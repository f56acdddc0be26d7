"""judge-serve on loopback: scores equal judge-score's whatever they are batched with, limits and malformed
requests are 4xx naming the field, the key is required, a full queue is 429, a deadline 504, a client gone
away has its items dropped, /metrics counts, and SIGTERM under load answers every accepted request."""

from __future__ import annotations

import base64
import json
import random
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image
from serving import REPO, running_server

from judge.cli.score import main as score_main

KEY = "sk-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
TOL = 1e-4
DEMO = REPO / "annotations" / "demo" / "annotations.jsonl"
ITEM_FIELDS = ("id", "task", "question", "response", "reference", "model")


def demo_items(per_task: int = 6) -> list[dict]:
    """``per_task`` demo annotation records of each task family, as prediction items (no human scores)."""
    out: dict[str, list[dict]] = {}
    for line in DEMO.read_text().splitlines():
        rec = json.loads(line)
        if len(out.setdefault(rec["task"], [])) < per_task:
            out[rec["task"]].append({k: rec[k] for k in ITEM_FIELDS if k in rec})
    return [x for group in out.values() for x in group]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """The demo's images, and a 3000x3000 photo-like JPEG whose decoding keeps the worker busy ~0.5 s."""
    root = tmp_path_factory.mktemp("images")
    shutil.copytree(REPO / "annotations" / "demo" / "images", root / "images")
    rng = np.random.default_rng(0)
    # Noise decodes slowly: each item of it keeps the worker busy (~1 s on a 2-core CPU) in the tests below.
    noise = rng.integers(0, 256, size=(6000, 6000, 3), dtype=np.uint8)
    Image.fromarray(noise).save(root / "big.jpg", quality=90)
    return root


@pytest.fixture(scope="module")
def server(root, tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--api-key", KEY, "--image-root", str(root)]
    args += ["--max-items", "8", "--max-images", "6", "--max-image-bytes", "9000000", "--max-body-mb", "2"]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


@pytest.fixture(scope="module")
def batch_scores(tmp_path_factory) -> dict:
    """What judge-score writes for the same items: (id, criterion) -> record."""
    d = tmp_path_factory.mktemp("batch")
    shutil.copytree(REPO / "annotations" / "demo" / "images", d / "images")
    (d / "items.jsonl").write_text(
        "".join(json.dumps({**x, "benchmark": "mmie"}) + "\n" for x in demo_items())
    )
    out = d / "out"
    assert score_main([str(d / "items.jsonl"), "--judge", "tiny", "--rubric", "mmie", "--out", str(out),
                       "--no-progress"]) == 0  # fmt: skip
    recs = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    return {(r["id"], r["criterion"]): r for r in recs if r["metric"] == "judge"}


def post(server, body, *, headers=AUTH, timeout=60.0, path="/v1/score") -> httpx.Response:
    return httpx.post(server.url + path, json=body, headers=headers, timeout=timeout)


def test_scores_equal_judge_score_under_concurrent_mixed_requests(server, batch_scores):
    items = demo_items()
    rng = random.Random(0)
    # Requests of 1-4 items in a shuffled order, some asking for a subset of criteria; sent 4 at a time,
    # so the batcher mixes items of different requests, families and lengths in its forward passes.
    rng.shuffle(items)
    requests, i = [], 0
    while i < len(items):
        n = rng.randint(1, 4)
        requests.append({"items": items[i : i + n]})
        i += n
    requests[0]["criteria"] = ["overall"]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda body: post(server, body), requests))
    seen = 0
    for body, r in zip(requests, answers, strict=True):
        assert r.status_code == 200, r.text
        j = r.json()
        assert [x["id"] for x in j["results"]] == [x["id"] for x in body["items"]]
        assert j["provenance"]["rubric"] == "mmie" and j["provenance"]["fingerprint"]
        assert j["usage"]["items"] == len(body["items"])
        assert j["usage"]["forward_passes"] == sum(len(x["scores"]) for x in j["results"])
        for res in j["results"]:
            if body.get("criteria"):
                assert list(res["scores"]) == body["criteria"]
            for crit, s in res["scores"].items():
                want = batch_scores[(res["id"], crit)]
                assert s["status"] == "ok" and want["status"] == "ok"
                assert s["score"] == pytest.approx(want["score"], abs=TOL)
                assert s["distribution"] == pytest.approx(want["distribution"], abs=TOL)
                assert s["argmax"] == want["argmax"] or max(s["distribution"]) - min(s["distribution"]) < TOL
                seen += 1
    assert seen > 0
    # Every (item, criterion) of the batch run was answered (but those the subset request left out).
    want = {k for k in batch_scores if k[0] not in {x["id"] for x in requests[0]["items"]}}
    got = {(res["id"], c) for r in answers for res in r.json()["results"] for c in res["scores"]}
    assert want <= got


def test_images_as_data_urls_and_unscorable_items_are_results(server, root, batch_scores):
    item = demo_items(1)[0]
    inline = json.loads(json.dumps(item))
    for seg in inline["question"] + inline["response"]:
        if seg.get("type") == "image":
            data = base64.b64encode((root / seg["image"]).read_bytes()).decode()
            seg["image"] = f"data:image/png;base64,{data}"
    broken = {**item, "id": "broken", "response": [{"type": "image", "image": "images/nope.png"}]}
    unknown = {**item, "id": "unknown", "task": "NOPE"}
    r = post(server, {"items": [inline, broken, unknown]})
    assert r.status_code == 200, r.text
    a, b, c = r.json()["results"]
    for crit, s in a["scores"].items():  # the same image sent inline scores as the file does
        assert s["score"] == pytest.approx(batch_scores[(item["id"], crit)]["score"], abs=TOL)
    assert {s["status"] for s in b["scores"].values()} == {"unscorable"}
    assert all(
        s["details"]["reason_code"] == "image" and "nope.png" in s["reason"] for s in b["scores"].values()
    )
    assert (
        list(c["scores"]) == ["overall"]
        and c["scores"]["overall"]["details"]["reason_code"] == "unknown_family"
    )


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"itemz": []}, 422, ["`items`", "`itemz`"]),
        ({"items": []}, 422, ["`items` must be a non-empty list"]),
        ({"items": [{"id": "x", "task": "SA"}]}, 422, ["items[0] (id 'x')", "'question'"]),
        ({"items": [{"id": "a", "task": "SA", "question": "q", "response": "r"}] * 2}, 422, ["duplicate"]),
        ({"items": demo_items(1), "criteria": ["nope"]}, 422, ["items[0]", "'nope'", "text_quality"]),
        ({"items": demo_items(1), "criteria": "some"}, 422, ["`criteria`"]),
        ({"items": demo_items(1), "timeout": -1}, 422, ["`timeout`"]),
        (
            {"items": [{"id": f"i{i}", "task": "SA", "question": "q", "response": "r"} for i in range(9)]},
            413,
            ["9 items", "--max-items"],
        ),  # fmt: skip
        (
            {
                "items": [
                    {
                        "id": "a",
                        "task": "SA",
                        "question": "q",
                        "response": [{"type": "image", "image": "../x.png"}],
                    }
                ]
            },
            422,
            [
                "items[0] (id 'a'): field 'response[0].image'",
                "'../x.png'",
                "outside the server's --image-root",
            ],
        ),  # fmt: skip
        (
            {
                "items": [
                    {
                        "id": "a",
                        "task": "SA",
                        "question": "q",
                        "response": [{"type": "image", "image": "https://e.com/x.png"}],
                    }
                ]
            },
            422,
            ["items[0] (id 'a'): field 'response[0].image'", "fetches nothing"],
        ),  # fmt: skip
        (
            {
                "items": [
                    {
                        "id": "a",
                        "task": "SA",
                        "question": "q",
                        "response": [{"type": "image", "image": "data:image/png;base64,@@@"}],
                    }
                ]
            },
            422,
            ["items[0] (id 'a'): field 'response[0].image'", "base64"],
        ),  # fmt: skip
        (
            {
                "items": [
                    {
                        "id": "a",
                        "task": "SA",
                        "question": "q",
                        "response": [{"type": "image", "image": "images/sa-000-q0.png"}] * 7,
                    }
                ]
            },
            413,
            ["7 images", "--max-images"],
        ),  # fmt: skip
    ],
)
def test_malformed_requests_are_4xx_naming_the_field(server, body, status, words):
    r = post(server, body)
    assert r.status_code == status, r.text
    message = r.json()["error"]["message"]
    for w in words:
        assert w in message, message
    assert "Traceback" not in r.text
    assert httpx.get(server.url + "/health").status_code == 200  # still serving


def test_raw_bodies_and_sizes(server):
    r = httpx.post(
        server.url + "/v1/score", content=b"{not json", headers={**AUTH, "Content-Type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    big = {"items": [{"id": "a", "task": "SA", "question": "x" * 3_000_000, "response": "r"}]}
    r = post(server, big)
    assert r.status_code == 413 and "--max-body-mb" in r.json()["error"]["message"]
    # An image over --max-image-bytes is refused before it is decoded.
    data = base64.b64encode(b"\0" * 1_000_000 * 10).decode()
    r = httpx.post(
        server.url + "/v1/score",
        json={"items": [{"id": "a", "task": "SA", "question": "q", "response": [{"type": "image", "image": f"data:image/png;base64,{data}"}]}]},
        headers=AUTH,
    )  # fmt: skip
    assert r.status_code == 413


def test_api_key(server):
    item = {"items": demo_items(1)}
    assert post(server, item, headers={}).status_code == 401
    r = post(server, item, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(server.url + "/health").status_code == 200  # liveness needs no key
    for path in ("/ready", "/metrics", "/v1/models", "/v1/judge"):
        assert httpx.get(server.url + path).status_code == 401
        assert httpx.get(server.url + path, headers=AUTH).status_code == 200
    assert KEY not in server.output()


def test_info_routes(server):
    models = httpx.get(server.url + "/v1/models", headers=AUTH).json()
    assert models["object"] == "list" and models["data"][0]["id"] == "tiny"
    info = httpx.get(server.url + "/v1/judge", headers=AUTH).json()
    assert info["rubric"]["name"] == "mmie" and info["rubric"]["scale"]["values"] == list(range(7))
    assert set(info["rubric"]["families"]) == {"SA", "PBL", "MSR"}
    assert info["limits"]["max_items"] == 8 and info["limits"]["max_image_bytes"] == 9_000_000


def test_metrics_count_requests_and_items(server):
    def metric(text: str, name: str) -> float:
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))

    before = httpx.get(server.url + "/metrics", headers=AUTH).text
    assert post(server, {"items": demo_items(1)[:2]}).status_code == 200
    after = httpx.get(server.url + "/metrics", headers=AUTH).text
    ok = 'judge_requests_total{route="/v1/score",status="200"}'
    assert metric(after, ok) == metric(before, ok) + 1
    assert metric(after, "judge_items_total") == metric(before, "judge_items_total") + 2
    assert "judge_queue_depth" in after and "judge_batch_tokens_bucket" in after
    assert "judge_queue_wait_seconds_count" in after and "judge_compute_seconds_count" in after


# ----------------------------------------------------------------------------- a busy server


BIG = {"id": "big", "task": "SA", "question": [{"type": "image", "image": "big.jpg"}], "response": "r"}


@pytest.fixture
def tight(root, tmp_path):
    # big.jpg is over the default pixel cap (4x the tiny judge's tiling): the operator raised it.
    args = ["--judge", "tiny", "--rubric", "mmie", "--image-root", str(root), "--max-queue", "3"]
    args += ["--max-image-pixels", "40000000"]
    args += ["--max-items", "3", "--max-batch-tokens", "64", "--max-wait-ms", "0"]
    with running_server(args, tmp_path) as s:
        yield s


def _wait_for_queue(server, depth: int) -> None:
    """Until ``depth`` items wait in the server's queue (the worker busy with the one before them)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = httpx.get(server.url + "/metrics").text
        if any(
            x.startswith("judge_queue_depth ") and float(x.split()[-1]) >= depth for x in text.splitlines()
        ):
            return
        time.sleep(0.02)
    raise AssertionError(f"the queue never held {depth} items")


def _dropped(server) -> float:
    text = httpx.get(server.url + "/metrics").text
    return sum(float(x.split()[-1]) for x in text.splitlines() if x.startswith("judge_dropped_items_total"))


@pytest.mark.slow
def test_full_queue_is_429_with_retry_after(tight):
    # Each big item keeps the worker ~1 s; eight requests of two at once overflow a queue of three.
    bodies = [{"items": [{**BIG, "id": f"b{i}-{j}"} for j in range(2)]} for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda b: post(tight, b, headers={}), bodies))
    codes = sorted(r.status_code for r in answers)
    assert set(codes) == {200, 429}, codes
    busy = next(r for r in answers if r.status_code == 429)
    assert busy.headers["retry-after"] == "1" and "queue" in busy.json()["error"]["message"]


@pytest.mark.slow
def test_deadline_is_504_and_a_gone_client_is_dropped(tight):
    slow = threading.Thread(target=post, args=(tight, {"items": [{**BIG, "id": f"b{i}"} for i in range(3)]}),
                            kwargs={"headers": {}})  # fmt: skip
    slow.start()
    _wait_for_queue(tight, 2)  # the worker is on b0 (~1 s each); b1 and b2 wait
    # A deadline in the body, then one in the header: both pass while b1 and b2 still wait.
    r = post(tight, {"items": demo_items(1)[:1], "timeout": 0.3}, headers={})
    assert r.status_code == 504 and "deadline" in r.json()["error"]["message"]
    r = post(tight, {"items": demo_items(1)[:1]}, headers={"X-Request-Timeout": "0.3"})
    assert r.status_code == 504
    slow.join()
    before = _dropped(tight)
    slow = threading.Thread(target=post, args=(tight, {"items": [{**BIG, "id": f"c{i}"} for i in range(3)]}),
                            kwargs={"headers": {}})  # fmt: skip
    slow.start()
    _wait_for_queue(tight, 2)
    with pytest.raises(httpx.ReadTimeout):  # the client gives up and closes its connection
        post(tight, {"items": demo_items(1)[:1]}, headers={}, timeout=0.2)
    slow.join()
    deadline = time.monotonic() + 10
    while _dropped(tight) < before + 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _dropped(tight) >= before + 1  # its item was dropped, not scored for nobody
    assert post(tight, {"items": demo_items(1)[:1]}, headers={}).status_code == 200


@pytest.mark.slow
def test_sigterm_under_load_answers_every_accepted_request(root, tmp_path):
    args = ["--judge", "tiny", "--rubric", "mmie", "--image-root", str(root), "--grace-s", "60"]
    args += ["--max-image-pixels", "40000000"]
    with running_server(args, tmp_path) as s:
        results: list = []

        def send(i: int) -> None:
            try:
                r = post(s, {"items": [{**BIG, "id": f"b{i}"}]}, headers={}, timeout=120)
                results.append(r.status_code)
            except httpx.ConnectError:
                results.append("refused")  # sent after the listener closed: never accepted
            except httpx.TransportError as e:
                results.append(f"broken: {e!r}")

        threads = [threading.Thread(target=send, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # the first requests are in; the worker needs ~0.5 s for each
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        try:  # a readiness probe now fails: 503, or no longer connects (the listener is closed)
            late = httpx.get(s.url + "/ready", timeout=5).status_code
        except httpx.TransportError:
            late = "refused"
        for t in threads:
            t.join()
        assert s.proc.wait(timeout=60) == 0, s.output()
    assert not [x for x in results if isinstance(x, str) and x.startswith("broken")], results
    assert results.count(200) >= 1 and all(x in (200, 503, "refused") for x in results), results
    assert late in (503, "refused")
    assert "draining" in s.output()


@pytest.mark.slow
def test_not_ready_until_loaded(tmp_path):
    with running_server(["--judge", "tiny", "--rubric", "mmie"], tmp_path, wait_ready=False) as s:
        deadline = time.monotonic() + 60
        codes = []
        while time.monotonic() < deadline:
            try:
                r = httpx.get(s.url + "/ready", timeout=2)
            except httpx.TransportError:
                time.sleep(0.05)
                continue
            codes.append(r.status_code)
            if r.status_code == 200:
                break
            assert r.status_code == 503 and r.json()["status"] == "loading"
            time.sleep(0.05)
        assert codes[-1] == 200
    assert "rubric mmie" in s.output() and "listening on http://127.0.0.1:" in s.output()
