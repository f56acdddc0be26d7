"""Load test of judge-serve on loopback, beside judge-score on the same items, in one run.

1. Builds a seeded workload: a demo set (``judge.testing.demo.generate_demo``) in a temp folder, then
   ``--requests`` requests of 1, 2, 4 or 8 items (a fixed, seeded mix), each item a demo response with
   a seeded amount of extra text (0 to 300 words) and its images as base64 data URLs. Every use of a
   demo item gets its own id, so the same items can be written to a JSONL file for judge-score.
2. Starts its own ``judge-serve`` (127.0.0.1, ``--port 0``: the OS picks a free port; ``--judge tiny
   --rubric mmie`` by default, batching options passed through) and waits for ``/ready``; or targets
   ``--url`` (with ``--api-key``) without starting one, and then compares with judge-score only when
   ``--judge`` is given too.
3. A load phase sends the requests from ``--concurrency`` closed-loop clients (each sends its next
   request when its last one is answered), bodies serialised before the clock starts. It stops sending at
   ``--requests`` or after ``--max-seconds``, whichever comes first; requests in flight then get up to
   ``--request-timeout`` to be answered, so a phase always ends by itself. Reported: latency
   p50/p95/p99 of 200 answers, requests/s and items/s (200 answers, or their items, / seconds from the
   first request sent to the last answer), responses by status, errors, the CPU seconds the server and
   the client used, and the server's batching from its ``/metrics`` (rounds, items per round, model time).
4. judge-score: the items the server answered in the first phase, written to a JSONL file (images as
   files), scored with ``judge.api.score_files`` (what ``judge-score`` runs) in this process, with the
   same judge, device, dtype, ``batch_tokens`` = ``--max-batch-tokens`` and ``batch_size``, after an
   untimed warm-up call on 8 items. Timed: the judge loop of ``score_files``, from the first item encoded
   to the last batch appended to ``scores.jsonl`` (images opened, prompts encoded, forward passes, records
   built and written), which is what the server's batcher does; not timed: process start, imports,
   loading the model, reading the JSONL, the summary (the whole call is reported beside it). Both sides
   use ``--threads`` torch threads. The scores of both are compared.
5. ``--repeats`` (default 3) load phases and judge-score runs, alternated (load first, then score first,
   ...) so that a drift in the machine's load favours neither; the server stays up, idle, while
   judge-score runs. Rates are medians over the repeats; counts and latencies are pooled.

Prints a table and writes JSON (``benchmarks/results/load_test_<device>.json`` or ``--out``) with the
machine, versions, commit, settings, workload and results. Exits 1 if any request got a 5xx, was sent and
never answered, got another status than 200 or 429, or got a 200 lacking items or criteria (it says which);
0 otherwise, whether or not the throughput goal (server items/s >= 90% of judge-score's, issue 23's goal) is met.

    python scripts/load_test.py                              # tiny judge, 200 requests at concurrency 8, x3
    python scripts/load_test.py --judge runs/demo/judge      # a trained judge (its card names the rubric)
    python scripts/load_test.py --url http://127.0.0.1:8000 --api-key KEY   # a running server, no comparison
    python scripts/load_test.py --device cuda --dtype bfloat16 --judge DIR --threads 4
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import mimetypes
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import bench_score as bs  # noqa: E402  (machine facts, device names, versions)

from judge.scoring.remote import API_KEY_ENV  # noqa: E402  (the variable judge-serve reads its key from)

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


# ----------------------------------------------------------------------------- the server


@dataclass
class OwnServer:
    url: str
    proc: subprocess.Popen
    log: Path

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def cpu_seconds(self) -> float | None:
        return _proc_cpu_seconds(self.proc.pid)


def _proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process and its threads (Linux /proc), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_command(args: argparse.Namespace) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "judge.cli.serve",
        "--judge",
        args.judge,
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    if args.rubric:
        cmd += ["--rubric", args.rubric]
    cmd += ["--device", args.device, "--dtype", args.dtype]
    cmd += ["--max-batch-tokens", str(args.max_batch_tokens), "--batch-size", str(args.batch_size)]
    cmd += ["--max-wait-ms", f"{args.max_wait_ms:g}", "--max-queue", str(args.max_queue)]
    cmd += ["--max-padding", f"{args.max_padding:g}"]
    return cmd + list(getattr(args, "server_args", []))  # a caller's further options (bench_repro.py)


def thread_env(threads: int | None) -> dict[str, str]:
    """The server's environment: no API key (the script's own server is keyless), offline, N torch threads."""
    env = {k: v for k, v in os.environ.items() if k != API_KEY_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def start_server(args: argparse.Namespace, log: Path) -> OwnServer:
    """``judge-serve`` on 127.0.0.1 with ``--port 0`` (the OS picks a free port; the banner names it), ready."""
    import httpx

    with open(log, "wb") as out:
        proc = subprocess.Popen(
            server_command(args), cwd=REPO, env=thread_env(args.threads), stdout=out, stderr=subprocess.STDOUT
        )
    server = OwnServer("", proc, log)
    deadline = time.monotonic() + args.ready_timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(
                f"judge-serve exited with {proc.returncode} before it was ready:\n{server.tail()}"
            )
        if not server.url:
            m = re.search(r"listening on (http://\S+)", log.read_text(errors="replace"))
            server.url = m.group(1) if m else ""
        if server.url:
            try:
                if httpx.get(server.url + "/ready", timeout=5).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
        if time.monotonic() > deadline:
            stop_server(server)
            raise RuntimeError(f"judge-serve not ready after {args.ready_timeout:g} s:\n{server.tail()}")
        time.sleep(0.2)


def stop_server(server: OwnServer) -> int | None:
    """SIGTERM (the server drains), then SIGKILL after 60 s; its exit code."""
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()
    return server.proc.returncode


def wait_ready(url: str, headers: dict[str, str], timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            r = httpx.get(url + "/ready", headers=headers, timeout=5)
            if r.status_code == 200:
                return
            if r.status_code in (401, 403):
                raise RuntimeError(
                    f"{url}/ready answered {r.status_code}: give the server's key with --api-key"
                )
            last = f"{r.status_code} {r.text[:200]}"
        except httpx.TransportError as e:
            last = str(e)
        time.sleep(0.5)
    raise RuntimeError(f"{url}/ready did not answer 200 within {timeout:g} s (last: {last})")


def server_info(url: str, headers: dict[str, str]) -> dict[str, Any]:
    """``GET /v1/judge``: the server's limits (batch tokens, wait, queue) and provenance."""
    import httpx

    r = httpx.get(url + "/v1/judge", headers=headers, timeout=10)
    r.raise_for_status()
    d = r.json()
    return {"limits": d.get("limits"), "provenance": d.get("provenance")}


#: the batcher's Prometheus histograms the report reads
_METRICS = ("judge_batch_items", "judge_batch_tokens", "judge_compute_seconds", "judge_queue_wait_seconds")


def scrape(url: str, headers: dict[str, str]) -> dict[str, float]:
    """The ``_sum`` and ``_count`` of the batcher's histograms, from ``/metrics``."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    r = httpx.get(url + "/metrics", headers=headers, timeout=10)
    r.raise_for_status()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            if fam.name in _METRICS and s.name.endswith(("_sum", "_count")):
                out[s.name] = s.value
    return out


def batching_figures(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, Any]:
    """What the server's batcher did during the load phase: rounds, items and tokens per round, model time."""

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    rounds = delta("judge_batch_items_count")
    items = delta("judge_batch_items_sum")
    compute = delta("judge_compute_seconds_sum")
    waits = delta("judge_queue_wait_seconds_count")
    return {
        "rounds": int(rounds),
        "items_per_round_mean": items / rounds if rounds else None,
        "tokens_per_round_mean": delta("judge_batch_tokens_sum") / rounds if rounds else None,
        "model_seconds": compute,
        "model_seconds_fraction_of_wall": compute / seconds if seconds else None,
        "queue_wait_mean_s": delta("judge_queue_wait_seconds_sum") / waits if waits else None,
    }


BATCHING_NOTE = (
    "per load phase, from the server's /metrics before and after it: rounds = judge_batch_items_count (one "
    "per gathering round of the batcher), items_per_round_mean = judge_batch_items_sum / rounds; "
    "model_seconds = judge_compute_seconds_sum, the time inside JudgeEngine.score_prepared (forward passes "
    "and records), not the encoding the batcher does while gathering"
)


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


async def _load(
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


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between closest ranks (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def latency_stats(values: list[float]) -> dict[str, float | None]:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values) if values else None,
        "max": max(values) if values else None,
        "count": len(values),
    }


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


# ----------------------------------------------------------------------------- judge-score


@contextmanager
def timed_judge_loop(times: list[float]) -> Iterator[None]:
    """Time each run of ``JudgeEngine.iter_batches`` inside ``score_files``: from its first item encoded
    to its exhaustion, which includes the caller appending each batch to the output (instrumentation
    only; the engine runs unchanged)."""
    from judge.scoring.engine import JudgeEngine

    original = JudgeEngine.iter_batches

    def iter_batches(self, *a, **k):
        t0 = time.perf_counter()
        try:
            yield from original(self, *a, **k)
        finally:
            times.append(time.perf_counter() - t0)

    JudgeEngine.iter_batches = iter_batches  # type: ignore[method-assign]
    try:
        yield
    finally:
        JudgeEngine.iter_batches = original  # type: ignore[method-assign]


class BatchPath:
    """judge-score on the items the server answered, through ``judge.api.score_files`` in this process
    (what the command runs, without its process start); see the module doc for what is timed.
    ``benchmark``: the rubric's name, which the server gives items that do not name one (files must)."""

    def __init__(self, args: argparse.Namespace, wl: Workload, benchmark: str, work: Path):
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        self.args, self.wl, self.benchmark, self.work = args, wl, benchmark, work
        self.path = wl.demo_dir / "load_items.jsonl"
        self.items = 0
        self.runs: list[dict[str, Any]] = []
        self.options = dict(
            judge=args.judge,
            rubric=args.rubric,
            device=args.device,
            dtype=args.dtype,
            batch_tokens=args.max_batch_tokens,
            batch_size=args.batch_size,
            overwrite=True,
            progress=False,
        )

    def prepare(self, ids: set[str]) -> None:
        """Write the items (same ids and content; images as files) and score 8 of them once, untimed."""
        from judge.api import score_files

        items = [{**it, "benchmark": self.benchmark} for it in self.wl.items_path if it["id"] in ids]
        self.path.write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
        warm = self.wl.demo_dir / "warmup_items.jsonl"
        warm.write_text("".join(json.dumps(it) + "\n" for it in items[:8]), encoding="utf-8")
        score_files(inputs=[str(warm)], out=str(self.work / "warmup"), **self.options)
        self.items = len(items)

    def run(self) -> dict[str, Any]:
        from judge.api import score_files

        times: list[float] = []
        load0 = os.getloadavg()[0]
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        with timed_judge_loop(times):
            res = score_files(inputs=[str(self.path)], out=str(self.work / "score"), **self.options)
        total = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        if res.items_scored != self.items or len(times) != 1:
            raise RuntimeError(f"judge-score scored {res.items_scored} of {self.items} items")
        run = {
            "items": self.items,
            "judge_seconds": times[0],
            "call_seconds": total,
            "items_per_s": self.items / times[0],
            "cpu_seconds": cpu,
            "load_average_before": load0,
            "load_average_after": os.getloadavg()[0],
        }
        self.runs.append(run)
        print(
            f"judge-score run {len(self.runs)}: {self.items} items, judge loop {times[0]:.2f} s",
            file=sys.stderr,
        )
        return run

    def scores(self) -> dict[tuple[str, str], float | None]:
        """The last run's judge scores by (id, criterion)."""
        out: dict[tuple[str, str], float | None] = {}
        for line in (self.work / "score" / "scores.jsonl").read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec.get("metric") == "judge":
                out[(rec["id"], rec.get("criterion") or "")] = rec.get("score")
        return out

    def summary(self) -> dict[str, Any]:
        judge_s = statistics.median(r["judge_seconds"] for r in self.runs)
        call_s = statistics.median(r["call_seconds"] for r in self.runs)
        cpu_s = statistics.median(r["cpu_seconds"] for r in self.runs)
        return {
            "items": self.items,
            "judge_seconds": judge_s,
            "call_seconds": call_s,
            "items_per_s": self.items / judge_s,
            "items_per_s_whole_call": self.items / call_s,
            "cpu_seconds_per_item": cpu_s / self.items,
            "runs": self.runs,
            "timed": "judge_seconds: the judge loop of judge.api.score_files (JudgeEngine.iter_batches from the "
            "first item encoded to the last batch appended to scores.jsonl and fsync-ed: images opened, prompts "
            "encoded, forward passes, records built and written); not timed: process start, imports, a warm-up "
            "call on 8 items, loading the model, reading the JSONL, the summary. call_seconds: the whole "
            "score_files call (model load included). Medians over runs",
        }


def agreement(server: list[tuple[tuple[str, str], float | None]], batch: dict) -> dict[str, Any]:
    """How far the server's scores (every answer of every phase) are from judge-score's."""
    diffs = [abs(v - batch[k]) for k, v in server if k in batch and v is not None and batch[k] is not None]
    return {
        "pairs": sum(1 for k, _ in server if k in batch),
        "missing_in_judge_score": sum(1 for k, _ in server if k not in batch),
        "null_mismatch": sum(1 for k, v in server if k in batch and (v is None) != (batch[k] is None)),
        "max_abs_diff": max(diffs) if diffs else None,
    }


# ----------------------------------------------------------------------------- report


def machine(device: str) -> dict[str, Any]:
    import torch

    gpu = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else None
    return bs.machine_facts(device, None, gpu)


def _f(x: Any, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def print_table(result: dict[str, Any]) -> None:
    s, w = result["server"], result["settings"]
    print(
        f"\njudge-serve load test: {w['requests']} requests ({result['workload']['items']} items) per phase, "
        f"{s['phases']} phase(s), concurrency {w['concurrency']}, max wait {w['server'].get('max_wait_ms')} ms, "
        f"batch {w['server'].get('max_batch_tokens')} tokens, {w['threads']} torch thread(s); "
        f"{result['device']['name']} ({result['device']['cpus']} CPUs)"
    )
    head = "| phase | sent | 200 items | seconds | requests/s | items/s | p50 s | p95 s | p99 s | items/round | model % |"
    print(head)
    print("|" + "---|" * head.count(" | ") + "---|")
    for k, (p, b) in enumerate(zip(s["per_phase"], result["server_batching"], strict=True)):
        lat = p["latency_s"]
        print(
            f"| {k + 1} | {p['requests_sent']} | {p['ok_items']} | {p['seconds']:.2f} | "
            f"{_f(p['requests_per_s'], '.2f')} | {_f(p['items_per_s'], '.2f')} | {_f(lat['p50'], '.3f')} | "
            f"{_f(lat['p95'], '.3f')} | {_f(lat['p99'], '.3f')} | {_f(b['items_per_round_mean'], '.2f')} | "
            f"{_f(b['model_seconds_fraction_of_wall'], '.0%')} |"
        )
    lat = s["latency_s"]
    print(
        f"| all | {s['requests_sent']} | {s['ok_items']} | - | {_f(s['requests_per_s'], '.2f')} (median) | "
        f"{_f(s['items_per_s'], '.2f')} (median) | {_f(lat['p50'], '.3f')} | {_f(lat['p95'], '.3f')} | "
        f"{_f(lat['p99'], '.3f')} | - | - |"
    )
    status = ", ".join(f"{k}: {v}" for k, v in s["by_status"].items()) or "none"
    print(
        f"responses by status: {status}; 5xx: {s['status_5xx']}; unanswered: {s['unanswered']}; "
        f"not sent (time bound): {s['requests_not_sent']}; errors: {s['errors_total']}"
    )
    by_items = [f"{k}: {_f(v['p50'], '.3f')} s" for k, v in s["latency_s_by_items"].items() if v["count"]]
    print("latency p50 by items per request: " + ", ".join(by_items))
    cpu = result.get("cpu_seconds_per_item") or {}
    js = result.get("judge_score")
    if js:
        print("\n| path | items | seconds timed (median) | items/s | CPU s per item |")
        print("|---|---|---|---|---|")
        print(
            f"| judge-serve, load phase | {s['per_phase'][0]['ok_items']} | "
            f"{statistics.median(p['seconds'] for p in s['per_phase']):.2f} | {_f(s['items_per_s'], '.2f')} | "
            f"{_f(cpu.get('server'), '.4f')} server + {_f(cpu.get('client'), '.4f')} client |"
        )
        print(
            f"| judge-score, judge loop | {js['items']} | {js['judge_seconds']:.2f} | {js['items_per_s']:.2f} | "
            f"{js['cpu_seconds_per_item']:.4f} |"
        )
        print(
            f"| judge-score, whole score_files call | {js['items']} | {js['call_seconds']:.2f} | "
            f"{js['items_per_s_whole_call']:.2f} | - |"
        )
        g = result["goals"]
        r = result.get("ratios") or {}
        print(
            f"server / judge-score items/s: {_f(result['ratio_server_over_judge_score'], '.2f')} (median of the "
            f"paired repeats: {', '.join(format(x, '.2f') for x in r.get('paired', []))}; goal >= "
            f"{g['server_over_judge_score_min']:.2f}: {'met' if g['throughput_met'] else 'MISSED'}); ratio of "
            f"medians {_f(r.get('of_medians'), '.2f')}; CPU seconds per item, judge-score / server: "
            f"{_f(r.get('cpu_efficiency'), '.2f')}"
        )
        a = result.get("agreement")
        if a:
            print(
                f"scores, server vs judge-score: {a['pairs']} pairs, max |diff| {_f(a['max_abs_diff'], '.2e')}"
            )
    for e in s["errors"][:5]:
        print(f"error: {e}")


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    def positive_int(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
        return int(text)

    def positive_float(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return v

    def non_negative_float(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not v >= 0:
            raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
        return v

    from judge.models import BATCH_TOKENS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--judge",
        help="judge folder, model folder or 'tiny' (default tiny, with --rubric mmie, "
        "when this script starts the server; with --url: the judge for the judge-score comparison)",
    )
    p.add_argument("--rubric", help="rubric (default mmie for tiny; a judge folder's card names its own)")
    p.add_argument("--url", help="target a running judge-serve (http://host:port) instead of starting one")
    p.add_argument(
        "--api-key", help=f"the running server's API key (with --url; default: ${API_KEY_ENV} if set)"
    )
    p.add_argument("--requests", type=positive_int, default=200, help="requests to send (default 200)")
    p.add_argument(
        "--concurrency", type=positive_int, default=8, help="clients, one request each in flight (default 8)"
    )
    p.add_argument(
        "--max-seconds",
        type=positive_float,
        default=300.0,
        help="stop sending after this many seconds (default 300); requests in flight finish",
    )
    p.add_argument(
        "--request-timeout",
        type=positive_float,
        default=120.0,
        help="client timeout per request in seconds (default 120); past it a request is unanswered",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the demo set and the request mix (default 0)")
    p.add_argument(
        "--demo-questions",
        type=positive_int,
        default=40,
        help="questions of the demo set (3 responses each; default 40); items are reused with new ids",
    )
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument(
        "--max-batch-tokens",
        type=positive_int,
        default=BATCH_TOKENS,
        help=f"the server's --max-batch-tokens and judge-score's batch_tokens (default {BATCH_TOKENS})",
    )
    p.add_argument(
        "--batch-size",
        type=positive_int,
        default=16,
        help="responses per forward pass, both sides (default 16)",
    )
    p.add_argument(
        "--max-wait-ms", type=non_negative_float, default=10.0, help="the server's --max-wait-ms (default 10)"
    )
    p.add_argument(
        "--max-padding",
        type=non_negative_float,
        default=0.10,
        help="the server's --max-padding (default 0.10)",
    )
    p.add_argument(
        "--max-queue", type=positive_int, default=1024, help="the server's --max-queue (default 1024)"
    )
    p.add_argument(
        "--threads",
        type=positive_int,
        default=1,
        help="torch threads of the server (OMP_NUM_THREADS) and of judge-score (default 1: the load "
        "generator needs a core of its own on a small machine)",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=3,
        help="load phases and judge-score runs, alternated, medians reported (default 3)",
    )
    p.add_argument("--no-compare", action="store_true", help="skip the judge-score comparison")
    p.add_argument(
        "--ready-timeout", type=positive_float, default=300.0, help="seconds to wait for /ready (default 300)"
    )
    p.add_argument("--out", help="JSON result path (default benchmarks/results/load_test_<device>.json)")
    args = p.parse_args(argv)
    args.start_server = args.url is None
    if args.api_key and args.start_server:
        p.error("--api-key goes with --url (the server this script starts has no key)")
    if not args.start_server and args.api_key is None:
        args.api_key = os.environ.get(API_KEY_ENV) or None
    args.compare = not args.no_compare and (args.start_server or args.judge is not None)
    if args.judge is None:
        args.judge = "tiny"
    if args.rubric is None and args.judge == "tiny":
        args.rubric = "mmie"
    return args


def notes(result: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """What a reader of the numbers should know: the method's fixed caveats and what this run showed."""
    out = [
        "The load generator runs on the same machine as the server (loopback): its CPU seconds are in "
        "cpu_seconds_per_item.client. judge-score runs while the server is idle, never at the same time.",
        "Server items/s counts items in 200 answers over the whole phase, ramp-up and tail included; "
        "judge-score's judge loop has no such tail.",
    ]
    cpus = result["device"]["cpus"] or 1
    loads = [x for pair in result["load_average"] for x in pair]
    if loads and max(loads) > cpus * 0.75:
        out.append(
            f"The machine was shared: 1-minute load average up to {max(loads):.1f} on {cpus} CPUs during the "
            "phases, so the rates are noisy (see per_phase and judge_score.runs); CPU seconds per item are "
            "steadier than rates."
        )
    wait_ms = (result["settings"]["server"] or {}).get("max_wait_ms")
    for k, b in enumerate(result["server_batching"]):
        per_round, queued = b["items_per_round_mean"], b["queue_wait_mean_s"]
        if (
            per_round is not None
            and per_round < 1.5
            and queued
            and wait_ms is not None
            and queued * 1000 > wait_ms
        ):
            out.append(
                f"Phase {k + 1}: the batcher scored {per_round:.2f} items per round although items waited "
                f"{queued:.2f} s in the queue on average (> max_wait_ms {wait_ms:g}): it gathered no more "
                "than the first waiting item per round."
            )
            break
    return out


def load_phase(
    url: str, wl: Workload, args: argparse.Namespace, headers: dict[str, str], server: OwnServer | None
) -> dict[str, Any]:
    """One pass of the requests; the server's batching figures and the CPU both processes used."""
    before = scrape(url, headers)
    load0 = os.getloadavg()[0]
    server_cpu0 = server.cpu_seconds() if server else None
    cpu0 = time.process_time()
    outcomes, seconds = asyncio.run(
        _load(url, wl, args.concurrency, args.max_seconds, args.request_timeout, headers)
    )
    client_cpu = time.process_time() - cpu0
    server_cpu1 = server.cpu_seconds() if server else None
    after = scrape(url, headers)
    ok = [o for o in outcomes if o.status == 200 and o.error is None]
    print(
        f"load phase: {len(outcomes)} requests sent, {len(ok)} answered 200, {seconds:.2f} s",
        file=sys.stderr,
    )
    return {
        "outcomes": outcomes,
        "seconds": seconds,
        "batching": batching_figures(before, after, seconds),
        "ok_items": sum(o.items for o in ok),
        "cpu": {
            "client": client_cpu,
            "server": server_cpu1 - server_cpu0
            if server_cpu0 is not None and server_cpu1 is not None
            else None,
        },
        "load_average_before": load0,
        "load_average_after": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    import httpx

    args = parse_args(argv)
    failures: list[str] = []
    headers = {"authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    with tempfile.TemporaryDirectory(prefix="judge-load-") as tmp:
        work = Path(tmp)
        wl = build_workload(work / "demo", args.requests, args.seed, args.demo_questions)
        sizes = ", ".join(f"{v} of {k}" for k, v in wl.facts["requests_by_size"].items())
        print(
            f"workload: {args.requests} requests, {wl.facts['items']} items ({sizes} items), "
            f"bodies {wl.facts['body_bytes_mean'] / 1024:.1f} KiB on average",
            file=sys.stderr,
        )
        server: OwnServer | None = None
        t_ready = time.perf_counter()
        try:
            if args.start_server:
                server = start_server(args, work / "serve.log")
                url = server.url
            else:
                url = args.url.rstrip("/")
                wait_ready(url, headers, args.ready_timeout)
        except RuntimeError as e:
            print(f"load test not run: {e}", file=sys.stderr)
            return 1
        ready_s = time.perf_counter() - t_ready
        print(f"server ready at {url} ({ready_s:.1f} s)", file=sys.stderr)
        phases: list[dict[str, Any]] = []
        batch: BatchPath | None = None
        try:
            info = server_info(url, headers)
            if args.compare:
                benchmark = (info.get("provenance") or {}).get("rubric") or args.rubric or "mmie"
                batch = BatchPath(args, wl, benchmark, work)
            for k in range(args.repeats):
                # Alternate the order, so that a drift in the machine's load favours neither side. The server
                # stays up, idle, while judge-score runs.
                for what in ("load", "score") if k % 2 == 0 else ("score", "load"):
                    if what == "load":
                        phases.append(load_phase(url, wl, args, headers, server))
                    elif batch is not None:
                        if k == 0:
                            first = phases[0]["outcomes"]
                            ids = {
                                wl.items_url[i]["id"]
                                for o in first
                                if o.status == 200 and not o.error
                                for i in wl.requests[o.index]
                            }
                            if not ids:
                                batch = None
                                continue
                            batch.prepare(ids)
                        batch.run()
        except httpx.HTTPError as e:  # the server's /v1/judge or /metrics failed: nothing to report
            print(f"load test stopped: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        finally:
            exit_code = stop_server(server) if server else None
            if server is not None and exit_code != 0:
                print(f"judge-serve log (last lines):\n{server.tail()}", file=sys.stderr)

        load = summarise_load([(p["outcomes"], p["seconds"]) for p in phases], args.requests)
        if server is not None and exit_code != 0:
            failures.append(f"judge-serve exited with {exit_code} after SIGTERM")
        if load["status_5xx"]:
            failures.append(f"{load['status_5xx']} requests got a 5xx")
        if load["unanswered"]:
            failures.append(
                f"{load['unanswered']} requests sent got no HTTP answer (timeout or connection error)"
            )
        if load["bad_200"]:
            failures.append(f"{load['bad_200']} 200 answers lacked items, criteria or score fields")
        other = {
            k: v for k, v in load["by_status"].items() if k not in ("200", "429") and not k.startswith("5")
        }
        if other:
            failures.append(f"answers other than 200 or 429: {other}")

        limits = info.get("limits") or {}
        ok_items = sum(p["ok_items"] for p in phases)
        server_cpu = [p["cpu"]["server"] for p in phases]
        result: dict[str, Any] = {
            "benchmark": "judge-serve load test on loopback, beside judge-score on the same items",
            "command": "python scripts/load_test.py" + (" " + shlex.join(argv) if argv else ""),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "device": machine(bs.resolve_device(args.device)),
            "versions": _versions(),
            "git_commit": _git_commit(),
            "settings": {
                "judge": args.judge if args.start_server or args.compare else None,
                "rubric": args.rubric,
                "url": None if args.start_server else url,
                "server_started_by_script": args.start_server,
                "server_command": shlex.join(["python", *server_command(args)[1:]])
                if args.start_server
                else None,
                "requests": args.requests,
                "concurrency": args.concurrency,
                "max_seconds": args.max_seconds,
                "request_timeout_s": args.request_timeout,
                "repeats": args.repeats,
                "seed": args.seed,
                "sizes": list(SIZES),
                "threads": args.threads,
                "device": args.device,
                "dtype": args.dtype,
                "batch_size": args.batch_size,
                "server": {
                    k: limits.get(k)
                    for k in (
                        "max_batch_tokens",
                        "max_wait_ms",
                        "max_padding",
                        "max_queue",
                        "max_items",
                        "timeout_s",
                        "max_tokens",
                    )
                },
                "ready_seconds": ready_s,
                "provenance": info.get("provenance"),
            },
            "workload": wl.facts,
            "server": load,
            "server_batching": [p["batching"] for p in phases],
            "server_batching_note": BATCHING_NOTE,
            "load_average": [[p["load_average_before"], p["load_average_after"]] for p in phases],
            "cpu_seconds_per_item": {
                "server": sum(server_cpu) / ok_items if ok_items and None not in server_cpu else None,
                "client": sum(p["cpu"]["client"] for p in phases) / ok_items if ok_items else None,
            },
        }
        ratio = None
        if batch is not None and batch.runs:
            js = batch.summary()
            result["judge_score"] = js
            result["cpu_seconds_per_item"]["judge_score"] = js["cpu_seconds_per_item"]
            server_scores = [(k, v) for p in phases for o in p["outcomes"] for k, v in o.scores.items()]
            result["agreement"] = agreement(server_scores, batch.scores())
            # Each repeat's load phase and judge-score run ran next to each other: their ratio is the least
            # exposed to a drift in the machine's load; the median of those ratios is the headline.
            paired = [
                p["ok_items"] / p["seconds"] / r["items_per_s"]
                for p, r in zip(phases, batch.runs, strict=False)
                if p["seconds"] and r["items_per_s"]
            ]
            ratio = statistics.median(paired) if paired else None
            result["ratios"] = {
                "paired": paired,
                "of_medians": load["items_per_s"] / js["items_per_s"] if load["items_per_s"] else None,
                "cpu_efficiency": js["cpu_seconds_per_item"] / result["cpu_seconds_per_item"]["server"]
                if result["cpu_seconds_per_item"]["server"]
                else None,
                "note": "ratio_server_over_judge_score is the median of the paired ratios (repeat k: the server's "
                "items/s in load phase k over judge-score's in run k, which ran right before or after it). "
                "of_medians: median server items/s over median judge-score items/s. cpu_efficiency: judge-score's "
                "CPU seconds per item over the server process's (the client's excluded)",
            }
        elif args.compare:
            result["judge_score"] = None
        result["ratio_server_over_judge_score"] = ratio
        goal = 0.9
        result["goals"] = {
            "server_over_judge_score_min": goal,
            "throughput_met": ratio is not None and ratio >= goal,
            "zero_5xx": load["status_5xx"] == 0,
            "all_answered_200_or_429": load["unanswered"] == 0
            and set(load["by_status"]) <= {"200", "429"}
            and not load["bad_200"],
        }
        result["notes"] = notes(result, args)
        result["failures"] = failures
        result["ok"] = not failures
        print_table(result)
        for n in result["notes"]:
            print(f"note: {n}")
        out = (
            Path(args.out)
            if args.out
            else REPO
            / "benchmarks"
            / "results"
            / f"load_test_{bs.device_tag(result['device']['type'], result['device']['name'])}.json"
        )
        from judge.core.atomic import write_json

        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, result)
        print(f"wrote {out}")
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


def _versions() -> dict[str, Any]:
    """bench_score's versions, and the server's stack."""
    import importlib.metadata as md

    v = bs.versions()
    for pkg in ("fastapi", "uvicorn", "httpx", "starlette", "pydantic"):
        try:
            v[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return v


def _git_commit() -> str | None:
    from judge.models.card import git_commit

    return git_commit(REPO)


if __name__ == "__main__":
    sys.exit(main())
