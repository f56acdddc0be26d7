"""A normal ``/v1/score`` request alone and beside 100 concurrent generating chats (issue 37, case 9).

Starts ``judge-serve --judge tiny --rubric mmie --timeout-s 5`` on loopback (from this checkout, or from
``--before DIR``, another checkout, for the old numbers), times a one-item ``/v1/score`` request alone
``--rounds`` times, then starts 100 chat completions at once (``max_tokens`` 200, plain conversations the
judge generates for) and times the same request ``--rounds`` times while they run. Prints a table and writes
``benchmarks/results/chat_admission_cpu.json`` (``--out``).

    python scripts/bench_chat_admission.py --before /tmp/base   # both, old first
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from serving import running_server, server_env  # noqa: E402

ITEM = {"id": "x", "task": "SA", "question": "Continue the story.", "response": "Then it rained."}
CHAT = {
    "model": "tiny",
    "messages": [{"role": "user", "content": "Tell me a long story."}],
    "max_tokens": 200,
}


def _score(url: str) -> tuple[int, float]:
    t = time.perf_counter()
    r = httpx.post(url + "/v1/score", json={"items": [ITEM]}, timeout=120)
    return r.status_code, time.perf_counter() - t


def measure(checkout: Path, rounds: int, chats: int) -> dict:
    env = server_env()
    env["PYTHONPATH"] = str(checkout) + os.pathsep + env["PYTHONPATH"]
    # `--chat any`: the generating chats need generation (judge-only is the default); `any` is read by old
    # checkouts (--before) and new ones (where it names generate).
    args = [
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--timeout-s",
        "5",
        "--served-name",
        "tiny",
        "--chat",
        "any",
    ]
    with tempfile.TemporaryDirectory() as tmp, running_server(args, Path(tmp), env=env) as s:
        for _ in range(3):  # warm-up
            _score(s.url)
        alone = [_score(s.url) for _ in range(rounds)]
        statuses: Counter = Counter()
        lock = threading.Lock()

        def chat() -> None:
            try:
                code = httpx.post(s.url + "/v1/chat/completions", json=CHAT, timeout=180).status_code
            except httpx.HTTPError as e:
                code = type(e).__name__
            with lock:
                statuses[code] += 1

        threads = [threading.Thread(target=chat) for _ in range(chats)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # the chats arrive and start generating
        beside = [_score(s.url) for _ in range(rounds)]
        t0 = time.perf_counter()
        for t in threads:
            t.join(300)
        drained = time.perf_counter() - t0
    return {
        "checkout": str(checkout),
        "alone": {"statuses": [c for c, _ in alone], "seconds": [round(x, 4) for _, x in alone]},
        "beside_chats": {"statuses": [c for c, _ in beside], "seconds": [round(x, 4) for _, x in beside]},
        "chat_statuses": {str(k): v for k, v in sorted(statuses.items(), key=str)},
        "chats_drained_after_s": round(drained, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="a checkout of the base commit, measured first")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chats", type=int, default=100)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/chat_admission_cpu.json")
    a = ap.parse_args()
    runs = {}
    if a.before:
        runs["before"] = measure(a.before.resolve(), a.rounds, a.chats)
    runs["after"] = measure(REPO, a.rounds, a.chats)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    out = {"commit": commit.stdout.strip(), "cpu": platform.processor() or platform.machine(),
           "cores": os.cpu_count(), "chats": a.chats, "timeout_s": 5, "runs": runs}  # fmt: skip
    print(f"| run | /v1/score alone, median s | beside {a.chats} chats: median / max s | statuses | chats |")
    print("| --- | --- | --- | --- | --- |")
    for name, r in runs.items():
        alone, beside = r["alone"]["seconds"], r["beside_chats"]["seconds"]
        print(
            f"| {name} | {statistics.median(alone):.3f} | {statistics.median(beside):.3f} / {max(beside):.3f} | "
            f"{Counter(r['beside_chats']['statuses'])} | {r['chat_statuses']} |"
        )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
