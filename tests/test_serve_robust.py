"""No request is lost or orphaned: a unit the worker took is answered whatever raises before it joins a
round; when one unit of a request fails, the request's other units are withdrawn instead of scored for
nobody; a chat generation stops at the request's deadline and does not hold the model past it."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from serving import REPO, running_server, serving_in_process
from test_score_engine import engine

from judge.serve.batcher import Batcher, BatcherStats, Ticket
from judge.serve.config import ServeConfig
from judge.serve.service import JudgeService

pytestmark = pytest.mark.usefixtures("one_thread")
DEMO = REPO / "annotations" / "demo"


def items(n: int) -> list[dict]:
    out = []
    for line in (DEMO / "annotations.jsonl").read_text().splitlines()[:n]:
        rec = json.loads(line)
        out.append({k: rec[k] for k in ("id", "task", "question", "response", "model") if k in rec})
    return out


class Injected(RuntimeError):
    """The fault a test puts into a hook (what a bug there would raise)."""


def test_a_unit_taken_from_the_queue_is_answered_when_a_hook_raises(tiny, rubric, small_demo):
    """Before: an exception in ``stats.on_queue_wait`` left the unit popped and unanswered until its
    request's deadline."""
    from judge.scoring.inputs import load_inputs

    rec = load_inputs([small_demo]).records[0]
    eng = engine(tiny, rubric)

    def broken(seconds: float) -> None:
        raise Injected("on_queue_wait broke")

    batcher = Batcher(eng, stats=BatcherStats(on_queue_wait=broken))

    async def main():
        (fut,) = batcher.submit([(rec, eng.pending(rec))], Ticket(deadline=time.monotonic() + 600))
        return await asyncio.wait_for(fut, timeout=20)

    try:
        with pytest.raises(Injected):
            asyncio.run(main())
    finally:
        batcher.stop()


@pytest.fixture(scope="module")
def service():
    svc = JudgeService(ServeConfig(judge="tiny", rubric="mmie", image_root=str(DEMO), max_wait_ms=0))
    svc.load()
    yield svc
    svc.close()


def test_when_one_unit_fails_the_requests_other_units_are_withdrawn(service):
    """Before: the request was answered (500) at the first failure, its images deleted, and its other units
    were then scored for nobody."""
    eng = service.engine
    real_prepare, real_score = eng.prepare, eng.score_prepared
    scored: list[str] = []

    def prepare(rec, criteria=None, key=None):
        if rec.id == "boom":
            raise Injected("encoding broke")
        return real_prepare(rec, criteria, key=key)

    def score_prepared(prepared, **kw):
        scored.extend(p.rec.id for p in prepared)
        return real_score(prepared, **kw)

    eng.prepare, eng.score_prepared = prepare, score_prepared
    body = {"items": [{**items(1)[0], "id": "boom"}, *items(5)], "criteria": ["overall"]}
    try:
        with serving_in_process(service) as url:
            service.model_lock.acquire()  # the model is busy: the request's units wait for it
            try:
                r = httpx.post(url + "/v1/score", json=body, timeout=60)
            finally:
                service.model_lock.release()
            assert r.status_code == 500 and "Traceback" not in r.text
            time.sleep(1.0)  # the worker's round, had it kept the units, would have scored them by now
            ok = httpx.post(url + "/v1/score", json={"items": items(1), "criteria": ["overall"]}, timeout=60)
            assert ok.status_code == 200  # and the server keeps serving
    finally:
        eng.prepare, eng.score_prepared = real_prepare, real_score
    assert not set(scored) & {x["id"] for x in items(5)} - {items(1)[0]["id"]}, scored
    metrics = service.metrics.render().decode()
    dropped = sum(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("judge_dropped_items_total")
    )
    assert dropped >= 5


@pytest.fixture(scope="module")
def chatty(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--max-new-tokens", "4000", "--chat", "generate"]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


CHAT = {
    "model": "tiny",
    "messages": [{"role": "user", "content": "Tell me a long story about the garden."}],
    "max_tokens": 4000,
}


@pytest.mark.slow
@pytest.mark.parametrize("how", ["header", "body"])
def test_a_chat_generation_stops_at_its_deadline_and_frees_the_model(chatty, how):
    """Before: a long generation held the model lock with no deadline (4,000 tokens: about 15 s of the
    tiny judge on a CPU) and /v1/score waited behind it."""
    headers = {"X-Request-Timeout": "1"} if how == "header" else {}
    body = {**CHAT, "timeout": 1} if how == "body" else CHAT
    answers: dict[str, tuple[int, float]] = {}
    t0 = time.perf_counter()

    def chat():
        r = httpx.post(chatty.url + "/v1/chat/completions", json=body, headers=headers, timeout=120)
        answers["chat"] = (r.status_code, time.perf_counter() - t0)
        answers["chat_error"] = r.json().get("error", {}).get("code")  # type: ignore[assignment]

    thread = threading.Thread(target=chat)
    thread.start()
    time.sleep(0.3)  # the generation holds the model now
    text_only = {"id": "t", "task": "SA", "question": "Continue the story.", "response": "The garden slept."}
    r = httpx.post(
        chatty.url + "/v1/score", json={"items": [text_only], "criteria": ["overall"]}, timeout=120
    )
    answers["score"] = (r.status_code, time.perf_counter() - t0)
    thread.join()
    assert answers["chat"][0] == 504 and answers["chat_error"] == "timeout", answers
    assert answers["chat"][1] < 4, answers
    assert answers["score"][0] == 200 and answers["score"][1] < 5, answers
