"""The reward route's throughput beside /v1/score's on the same items, in one run.

One ``judge-serve`` (the tiny judge by default, ``--reward-task SA``) on loopback. The workload: ``--items``
text items of the demo set's SA family (question and response text; images left out, since RL prompts
carry them only sometimes), sent ``--per-request`` at a time from ``--concurrency`` closed-loop clients:

* to ``/v1/score`` as items, criterion ``overall``;
* to ``/get_reward`` as OpenRLHF sends them: each item's prompt and response in the ChatML template
  (``query``, ``prompts``, ``labels``).

``--repeats`` rounds alternate the order (score first, then reward first, ...). Reported: items/s per
route (median over the repeats), their ratio paired per repeat, and the largest difference between a reward
and the score of its item. Prints a table and writes JSON (``benchmarks/results/reward_vs_score_cpu.json``
or ``--out``) with the commit, whether the tree was clean, the versions and the command.

    python scripts/bench_reward.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from bench_huge_images import run_facts, server, write_result  # noqa: E402  (the same server start-up and run facts)

CHATML = "<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"


def items(n: int) -> list[dict]:
    """``n`` text items of the demo set's SA family, its 252 items again from the start when ``n`` is larger
    (each copy with an id of its own)."""
    text = lambda c: " ".join(s["text"] for s in c if s.get("type") == "text")  # noqa: E731
    sa = []
    for line in (REPO / "annotations" / "demo" / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["task"] == "SA" and text(rec["question"]).strip():
            sa.append(
                {
                    "task": "SA",
                    "question": text(rec["question"]),
                    "response": text(rec["response"]),
                    "id": rec["id"],
                }
            )
    return [sa[k % len(sa)] | {"id": f"{sa[k % len(sa)]['id']}~{k}"} for k in range(n)]


def run(url: str, route: str, chunks: list[list[dict]], concurrency: int) -> tuple[float, dict[str, float]]:
    """Items/s of sending every chunk to ``route``, and each item's score or reward by id."""

    def body(chunk: list[dict]) -> dict:
        if route == "/v1/score":
            return {"items": chunk, "criteria": ["overall"]}
        prompts = [CHATML.format(q=x["question"]) for x in chunk]
        return {"query": [p + x["response"] + "<|im_end|>" for p, x in zip(prompts, chunk, strict=True)],
                "prompts": prompts, "labels": [None] * len(chunk)}  # fmt: skip

    def send(chunk: list[dict]) -> dict[str, float]:
        r = httpx.post(url + route, json=body(chunk), timeout=600)
        r.raise_for_status()
        data = r.json()
        if route == "/v1/score":
            return {x["id"]: x["scores"]["overall"]["score"] for x in data["results"]}
        return {x["id"]: v for x, v in zip(chunk, data["rewards"], strict=True)}

    t0 = time.perf_counter()
    values: dict[str, float] = {}
    with ThreadPoolExecutor(concurrency) as pool:
        for part in pool.map(send, chunks):
            values.update(part)
    return sum(len(c) for c in chunks) / (time.perf_counter() - t0), values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--items", type=int, default=512)
    p.add_argument("--per-request", type=int, default=8)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--judge", default="tiny")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "reward_vs_score_cpu.json")
    a = p.parse_args(argv)
    work = items(a.items)
    chunks = [work[i : i + a.per_request] for i in range(0, len(work), a.per_request)]
    rates: dict[str, list[float]] = {"/v1/score": [], "/get_reward": []}
    ratios, max_diff = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        args = ["--reward-task", "SA"] if a.judge == "tiny" else []
        args = ["--judge", a.judge, *(["--rubric", "mmie"] if a.judge == "tiny" else []), *args]
        with server(args, Path(tmp) / "serve.log", base=()) as (url, _):
            run(url, "/v1/score", chunks[:2], a.concurrency)  # warm-up, not timed
            for k in range(a.repeats):
                order = ["/v1/score", "/get_reward"] if k % 2 == 0 else ["/get_reward", "/v1/score"]
                got = {}
                for route in order:
                    rate, got[route] = run(url, route, chunks, a.concurrency)
                    rates[route].append(rate)
                ratios.append(rates["/get_reward"][-1] / rates["/v1/score"][-1])
                max_diff = max(
                    max_diff, *(abs(got["/get_reward"][i] - got["/v1/score"][i]) for i in got["/v1/score"])
                )
    med = {r: statistics.median(v) for r, v in rates.items()}
    print(f"{'route':12s} {'items/s (median)':>17s}   per repeat")
    for route, values in rates.items():
        print(f"{route:12s} {med[route]:17.2f}   {', '.join(f'{v:.2f}' for v in values)}")
    print(
        f"reward / score, paired: {', '.join(f'{r:.3f}' for r in ratios)} (median {statistics.median(ratios):.3f})"
    )
    print(f"largest |reward - score| over {len(work)} items: {max_diff:.2e}")
    out = {
        "what": "judge-serve: /get_reward (OpenRLHF's protocol, ChatML queries) beside /v1/score on the same items",
        **run_facts("bench_reward.py", argv),
        "settings": vars(a) | {"out": str(a.out)},
        "items_per_second": rates,
        "items_per_second_median": med,
        "reward_over_score_paired": ratios,
        "max_abs_reward_minus_score": max_diff,
    }
    write_result(a.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
