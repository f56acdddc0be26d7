"""load_test's workload and what it measures of it: seeded requests of demo items (images as data URLs), each
answer checked against the request, and the load phases summarised (counts, latencies, rates)."""

from __future__ import annotations

import asyncio
import base64
import json
import mimetypes
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _bench_common import latency_stats

SIZES = (1, 2, 4, 8)
#: extra words appended to a response, drawn per item use: most items short, some long
EXTRA_WORDS = (0, 0, 30, 100, 300)
SCORE_KEYS = ("score", "argmax", "distribution", "status")


# ----------------------------------------------------------------------------- the workload


@dataclass
class Workload:
    """The requests to send: item dicts with data URLs (server) and with file paths (judge-score)."""

    demo_dir: Path
    items_url: list[dict]  #: images as base64 data URLs
    items_path: list[dict]  #: the same items, images as paths relative to ``demo_dir``
    requests: list[list[int]]  #: each request's items (indices into the item lists)
    bodies: list[bytes]  #: each request's JSON body, serialised once
    facts: dict[str, Any] = field(default_factory=dict)


def _filler(rng: random.Random, pool: list[str], words: int) -> str:
    out: list[str] = []
    while len(out) < words:
        out.extend(rng.choice(pool).split())
    return " ".join(out[:words])


def build_workload(folder: Path, n_requests: int, seed: int, demo_questions: int) -> Workload:
    """A demo set in ``folder`` and ``n_requests`` requests over it; see the module doc."""
    from judge.testing.demo import generate_demo

    path = generate_demo(folder, n_questions=demo_questions, responses_per_question=3, seed=seed)
    demo = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    pool = [
        s["text"]
        for r in demo
        for s in r["response"]
        if isinstance(s, dict) and s.get("type") == "text" and s.get("text")
    ]
    data_urls: dict[str, str] = {}

    def data_url(rel: str) -> str:
        if rel not in data_urls:
            mime = mimetypes.guess_type(rel)[0] or "image/png"
            data_urls[rel] = f"data:{mime};base64," + base64.b64encode((folder / rel).read_bytes()).decode()
        return data_urls[rel]

    def with_data_urls(content: Any) -> Any:
        if not isinstance(content, list):
            return content
        return [
            {**s, "image": data_url(s["image"])} if isinstance(s, dict) and s.get("image") else s
            for s in content
        ]

    rng = random.Random(seed)
    order = list(range(len(demo)))
    rng.shuffle(order)
    items_url: list[dict] = []
    items_path: list[dict] = []
    requests: list[list[int]] = []
    extra_used: list[int] = []
    for i in range(n_requests):
        size = rng.choice(SIZES)
        idx = []
        for j in range(size):
            base = demo[order[len(items_path) % len(order)]]
            extra = rng.choice(EXTRA_WORDS)
            response = list(base["response"])
            if extra:
                response.append({"type": "text", "text": _filler(rng, pool, extra)})
            item = {
                "id": f"{base['id']}~{i}.{j}",  # unique per use: judge-score keys records by id
                "task": base["task"],
                "model": base["model"],
                "question": base["question"],
                "response": response,
                "reference": base.get("reference"),
            }
            idx.append(len(items_path))
            items_path.append(item)
            items_url.append(
                {**item, **{f: with_data_urls(item[f]) for f in ("question", "response", "reference")}}
            )
            extra_used.append(extra)
        requests.append(idx)
    bodies = [json.dumps({"items": [items_url[k] for k in idx]}).encode() for idx in requests]
    n_images = [
        sum(
            1
            for f in ("question", "response", "reference")
            for s in (it[f] or [])
            if isinstance(s, dict) and s.get("image")
        )
        for it in items_path
    ]
    image_bytes = [len(base64.b64decode(u.split(",", 1)[1])) for u in data_urls.values()]
    facts = {
        "demo": {"questions": demo_questions, "responses": len(demo), "seed": seed},
        "requests": n_requests,
        "items": len(items_path),
        "requests_by_size": dict(sorted(Counter(len(r) for r in requests).items())),
        "extra_words_choices": list(EXTRA_WORDS),
        "extra_words_mean": statistics.fmean(extra_used) if extra_used else 0,
        "images_per_item_mean": statistics.fmean(n_images) if n_images else 0,
        "image_bytes_mean": statistics.fmean(image_bytes) if image_bytes else 0,
        "body_bytes_mean": statistics.fmean(len(b) for b in bodies) if bodies else 0,
        "body_bytes_max": max((len(b) for b in bodies), default=0),
    }
    return Workload(folder, items_url, items_path, requests, bodies, facts)


# ----------------------------------------------------------------------------- the load


@dataclass
class Outcome:
    index: int
    items: int
    latency: float | None = None
    status: int | None = None  #: None: no HTTP answer
    error: str | None = None
    scores: dict[tuple[str, str], float | None] = field(default_factory=dict)


def check_answer(body: bytes, expected_ids: list[str]) -> tuple[str | None, dict]:
    """A 200 body's problem (None if every item is there with its criteria), and its scores by (id, criterion)."""
    try:
        data = json.loads(body)
    except ValueError:
        return "the 200 body is not JSON", {}
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or [r.get("id") for r in results] != expected_ids:
        return f"the 200 body's results do not match the {len(expected_ids)} items sent", {}
    scores = {}
    for r in results:
        crits = r.get("scores") or {}
        if not crits or any(
            not isinstance(v, dict) or any(k not in v for k in SCORE_KEYS) for v in crits.values()
        ):
            return f"item {r.get('id')!r} lacks criteria or score fields", {}
        for c, v in crits.items():
            scores[(r["id"], c)] = v["score"]
    return None, scores


async def run_load(
    url: str, wl: Workload, concurrency: int, max_seconds: float, timeout: float, headers: dict[str, str]
) -> tuple[list[Outcome], float]:
    import httpx

    outcomes: list[Outcome] = []
    n = len(wl.bodies)
    next_i = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    hdrs = {**headers, "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:
        t_start = time.perf_counter()
        stop_at = t_start + max_seconds

        async def worker() -> None:
            nonlocal next_i
            while next_i < n and time.perf_counter() < stop_at:
                i = next_i
                next_i += 1
                ids = [wl.items_url[k]["id"] for k in wl.requests[i]]
                o = Outcome(i, len(ids))
                outcomes.append(o)
                t0 = time.perf_counter()
                try:
                    r = await client.post("/v1/score", content=wl.bodies[i], headers=hdrs)
                    o.latency = time.perf_counter() - t0
                    o.status = r.status_code
                    if r.status_code == 200:
                        o.error, o.scores = check_answer(r.content, ids)
                    else:
                        o.error = f"{r.status_code}: {r.text[:300]}"
                except httpx.HTTPError as e:  # no HTTP answer: connection refused or reset, or the timeout
                    o.error = f"{type(e).__name__}: {e}"[:300]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - t_start
    outcomes.sort(key=lambda o: o.index)
    return outcomes, seconds


def summarise_load(phases: list[tuple[list[Outcome], float]], planned: int) -> dict[str, Any]:
    """Counts and latencies pooled over the load phases; requests/s and items/s per phase and their median."""
    outcomes = [o for outs, _ in phases for o in outs]
    answered = [o for o in outcomes if o.status is not None]
    ok = [o for o in answered if o.status == 200 and o.error is None]
    statuses = Counter(str(o.status) for o in answered)
    errors = [
        f"phase {p + 1}, request {o.index}: {o.error}"
        for p, (outs, _) in enumerate(phases)
        for o in outs
        if o.error
    ]
    lat_ok = [o.latency for o in ok if o.latency is not None]
    by_size = {
        str(s): latency_stats([o.latency for o in ok if o.items == s and o.latency is not None])
        for s in SIZES
    }
    per_phase: list[dict[str, Any]] = []
    rates: list[float] = []
    req_rates: list[float] = []
    for outs, seconds in phases:
        good = [o for o in outs if o.status == 200 and o.error is None]
        items = sum(o.items for o in good)
        per_phase.append(
            {
                "requests_sent": len(outs),
                "ok_requests": len(good),
                "ok_items": items,
                "seconds": seconds,
                "requests_per_s": len(good) / seconds if seconds else None,
                "items_per_s": items / seconds if seconds else None,
                "latency_s": latency_stats([o.latency for o in good if o.latency is not None]),
            }
        )
        if seconds:
            rates.append(items / seconds)
            req_rates.append(len(good) / seconds)
    return {
        "phases": len(phases),
        "requests_planned_per_phase": planned,
        "requests_sent": len(outcomes),
        "requests_not_sent": planned * len(phases) - len(outcomes),
        "answered": len(answered),
        "unanswered": len(outcomes) - len(answered),
        "by_status": dict(sorted(statuses.items())),
        "status_5xx": sum(1 for o in answered if o.status is not None and o.status >= 500),
        "bad_200": sum(1 for o in answered if o.status == 200 and o.error is not None),
        "ok_requests": len(ok),
        "ok_items": sum(o.items for o in ok),
        "requests_per_s": statistics.median(req_rates) if req_rates else None,
        "items_per_s": statistics.median(rates) if rates else None,
        "latency_s": latency_stats(lat_ok),
        "latency_s_by_items": by_size,
        "per_phase": per_phase,
        "errors": errors[:20],
        "errors_total": len(errors),
        "rates_note": "requests/s and items/s: the median over phases of (200 answers, or their items) / "
        "(seconds from the first request sent to the last answer); latencies pooled over phases, 200 "
        "answers only",
    }
