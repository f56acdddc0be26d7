"""Admission on a real judge-serve on loopback (issue 37, case 9): with 100 generating chats in flight and
``--timeout-s 5``, a normal ``/v1/score`` keeps its latency (before: a 504 after 13.8 s, its deadline not
started while it waited for a worker thread), the chats beyond the gate's queue get 429 with
``Retry-After`` at once, and none of them holds the server past its deadline. Bounded loops, loopback only.
The measured numbers: ``scripts/bench_chat_admission.py``."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx
import pytest
from serving import running_server

ITEM = {"id": "x", "task": "SA", "question": "Continue the story.", "response": "Then it rained."}
CHAT = {
    "model": "tiny",
    "messages": [{"role": "user", "content": "Tell me a long story."}],
    "max_tokens": 200,
}
CHATS = 100


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--served-name", "tiny", "--timeout-s", "5",
            "--max-chat-concurrency", "2", "--max-chat-queue", "40", "--chat", "generate"]  # fmt: skip
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


def test_a_score_keeps_its_latency_beside_100_generating_chats(server):
    def score() -> tuple[int, float]:
        t = time.perf_counter()
        r = httpx.post(server.url + "/v1/score", json={"items": [ITEM]}, timeout=60)
        return r.status_code, time.perf_counter() - t

    alone = min(score()[1] for _ in range(3))
    answers: list[tuple[int | str, float, str | None]] = []
    lock = threading.Lock()
    pool = httpx.Client(limits=httpx.Limits(max_connections=CHATS + 10), timeout=60)

    def chat() -> None:
        t = time.perf_counter()
        try:
            r = pool.post(server.url + "/v1/chat/completions", json=CHAT)
            got = (r.status_code, time.perf_counter() - t, r.headers.get("retry-after"))
        except httpx.HTTPError as e:
            got = (type(e).__name__, time.perf_counter() - t, None)
        with lock:
            answers.append(got)

    threads = [threading.Thread(target=chat) for _ in range(CHATS)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # the chats have arrived: two generate, forty wait, the rest were refused
    beside = [score() for _ in range(3)]
    for t in threads:
        t.join(60)
    pool.close()
    statuses = Counter(code for code, _, _ in answers)
    assert all(code == 200 for code, _ in beside), beside
    assert max(s for _, s in beside) < max(2.0, 10 * alone), (alone, beside)
    # 2 in progress + 40 waiting: those that arrive beyond them are told to come back.
    refused = [after for code, _, after in answers if code == 429]
    assert refused and all(after == "1" for after in refused), statuses
    # Every chat answered by its deadline (5 s; slack for a shared 2-core machine): 200, 429 or 504.
    assert set(statuses) <= {200, 429, 504}, statuses
    assert max(s for _, s, _ in answers) < 9.0, sorted(s for _, s, _ in answers)[-5:]


def test_chat_options_are_validated(tmp_path):
    import subprocess
    import sys

    from serving import REPO, server_env

    for option, value in (("--max-chat-concurrency", "0"), ("--max-chat-concurrency", "33"),
                          ("--max-chat-queue", "-1")):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "judge.cli.serve", "--judge", "tiny", "--rubric", "mmie", option, value],
            cwd=REPO, env=server_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode != 0 and option.lstrip("-").replace("-", "_") in done.stderr.replace("-", "_")
        assert "Traceback" not in done.stderr
