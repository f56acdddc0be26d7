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
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import _bench_common as bc  # noqa: E402  (machine facts, device names, versions, the JSON's command and date)
from _load_judge_score import BatchPath, agreement  # noqa: E402
from _load_serve import (  # noqa: E402
    BATCHING_NOTE,
    OwnServer,
    batching_figures,
    scrape,
    server_command,
    server_info,
    start_server,
    stop_server,
    wait_ready,
)
from _load_workload import SIZES, Workload, build_workload, run_load, summarise_load  # noqa: E402

from judge.scoring.remote import API_KEY_ENV  # noqa: E402  (the variable judge-serve reads its key from)

# ----------------------------------------------------------------------------- report


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
            f"{bc.fmt(p['requests_per_s'], '.2f')} | {bc.fmt(p['items_per_s'], '.2f')} | {bc.fmt(lat['p50'], '.3f')} | "
            f"{bc.fmt(lat['p95'], '.3f')} | {bc.fmt(lat['p99'], '.3f')} | {bc.fmt(b['items_per_round_mean'], '.2f')} | "
            f"{bc.fmt(b['model_seconds_fraction_of_wall'], '.0%')} |"
        )
    lat = s["latency_s"]
    print(
        f"| all | {s['requests_sent']} | {s['ok_items']} | - | {bc.fmt(s['requests_per_s'], '.2f')} (median) | "
        f"{bc.fmt(s['items_per_s'], '.2f')} (median) | {bc.fmt(lat['p50'], '.3f')} | {bc.fmt(lat['p95'], '.3f')} | "
        f"{bc.fmt(lat['p99'], '.3f')} | - | - |"
    )
    status = ", ".join(f"{k}: {v}" for k, v in s["by_status"].items()) or "none"
    print(
        f"responses by status: {status}; 5xx: {s['status_5xx']}; unanswered: {s['unanswered']}; "
        f"not sent (time bound): {s['requests_not_sent']}; errors: {s['errors_total']}"
    )
    by_items = [f"{k}: {bc.fmt(v['p50'], '.3f')} s" for k, v in s["latency_s_by_items"].items() if v["count"]]
    print("latency p50 by items per request: " + ", ".join(by_items))
    cpu = result.get("cpu_seconds_per_item") or {}
    js = result.get("judge_score")
    if js:
        print("\n| path | items | seconds timed (median) | items/s | CPU s per item |")
        print("|---|---|---|---|---|")
        print(
            f"| judge-serve, load phase | {s['per_phase'][0]['ok_items']} | "
            f"{statistics.median(p['seconds'] for p in s['per_phase']):.2f} | {bc.fmt(s['items_per_s'], '.2f')} | "
            f"{bc.fmt(cpu.get('server'), '.4f')} server + {bc.fmt(cpu.get('client'), '.4f')} client |"
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
            f"server / judge-score items/s: {bc.fmt(result['ratio_server_over_judge_score'], '.2f')} (median of the "
            f"paired repeats: {', '.join(format(x, '.2f') for x in r.get('paired', []))}; goal >= "
            f"{g['server_over_judge_score_min']:.2f}: {'met' if g['throughput_met'] else 'MISSED'}); ratio of "
            f"medians {bc.fmt(r.get('of_medians'), '.2f')}; CPU seconds per item, judge-score / server: "
            f"{bc.fmt(r.get('cpu_efficiency'), '.2f')}"
        )
        a = result.get("agreement")
        if a:
            print(
                f"scores, server vs judge-score: {a['pairs']} pairs, max |diff| {bc.fmt(a['max_abs_diff'], '.2e')}"
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
        run_load(url, wl, args.concurrency, args.max_seconds, args.request_timeout, headers)
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
            "command": bc.command_line("load_test.py", argv),
            "date": bc.run_date(),
            "device": bc.machine(bc.resolve_device(args.device)),
            "versions": bc.serving_versions(),
            "git_commit": bc.git_commit(),
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
            / f"load_test_{bc.device_tag(result['device']['type'], result['device']['name'])}.json"
        )
        from judge.core.atomic import write_json

        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, result)
        print(f"wrote {out}")
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
