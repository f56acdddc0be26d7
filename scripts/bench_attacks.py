"""What issue 28's attacks cost judge-serve (the tiny judge, on loopback), measured in one run, for the
server of this checkout and, with ``--before DIR``, of another checkout (the code before the fix) under the
same load:

* ``images``: each hand-made file whose header lies (:mod:`judge.testing.image_bombs`: an ICO holding a
  9459 x 9459 PNG, a GIF / animated WebP / APNG with a 10000 x 10000 frame, a 1 x 1 PNG with 4 MB of data,
  a multi-page TIFF), sent as a path under ``--image-root``: the answer, its time, and the server's resident
  memory (now and peak) after it;
* ``stall``: a normal one-item request's latency alone (the median of ``--normal`` requests), then while
  one client sends items of ``--huge-mb`` MB of text in a loop (each with ``timeout`` 3), and what the
  huge requests got;
* ``connections``: under an open-file limit of 1024, ``--half-open`` connections that each send part of a
  request head and stay; then ``/health``'s and a normal request's latency;
* ``bodies``: a body of tiny items (``{}`` repeated to ``--tiny-mb`` MB): the answer, its time and the
  server's peak memory growth.

Every request has a client timeout, so a server that cannot answer is recorded as such, not waited for.
Prints a table and writes JSON (``benchmarks/results/attacks_cpu.json`` or ``--out``) with the commits,
whether the trees were clean, the versions and the command.

    python scripts/bench_attacks.py --before ../judge-522a9a3
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

SCRIPTS = Path(__file__).resolve().parent
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from bench_huge_images import REPO, memory, run_facts, server, write_result  # noqa: E402

from judge.testing.image_bombs import BOMBS  # noqa: E402

ITEM = {"id": "n", "task": "SA", "question": "What is in the garden?", "response": "A red flower."}


def timed(call, *args, **kwargs) -> tuple[float, str]:
    """Seconds an HTTP call (``call(*args, **kwargs)``) took and its status (or the error's name)."""
    t0 = time.perf_counter()
    try:
        status = str(call(*args, **kwargs).status_code)
    except httpx.HTTPError as e:
        status = type(e).__name__
    return time.perf_counter() - t0, status


def normal(url: str, timeout: float = 30) -> tuple[float, str]:
    body = {"items": [ITEM], "criteria": ["overall"]}
    return timed(httpx.post, url + "/v1/score", json=body, timeout=timeout)


def images(url: str, proc) -> dict:
    out = {}
    for name, (_, expected) in BOMBS.items():
        item = {**ITEM, "response": [{"type": "image", "image": name}]}
        seconds, status = timed(httpx.post, url + "/v1/score", json={"items": [item]}, timeout=120)
        out[name] = {
            "status": status,
            "expected": expected,
            "seconds": seconds,
            "memory_mib": memory(proc.pid),
        }
    return out


def stall(url: str, proc, huge_mb: float, n: int, budget_s: float) -> dict:
    alone = [normal(url)[0] for _ in range(n)]
    huge = {**ITEM, "id": "huge", "response": "word " * int(huge_mb * 1e6 / 5)}
    body = json.dumps({"items": [huge], "criteria": ["overall"], "timeout": 3}).encode()
    got: list[tuple[float, str]] = []
    stop = time.monotonic() + budget_s

    def flood():
        while time.monotonic() < stop:
            headers = {"Content-Type": "application/json"}
            got.append(timed(httpx.post, url + "/v1/score", content=body, headers=headers, timeout=60))

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    time.sleep(0.5)
    beside = []
    while len(beside) < n and time.monotonic() < stop:
        beside.append(normal(url, timeout=60))
    stop = time.monotonic()
    t.join(90)
    ok = [s for s, status in beside if status == "200"]
    return {
        "huge_mb": huge_mb,
        "alone_median_s": statistics.median(alone),
        "beside_median_s": statistics.median(ok) if ok else None,
        "ratio": statistics.median(ok) / statistics.median(alone) if ok else None,
        "beside_statuses": sorted({status for _, status in beside}),
        "beside_answered": f"{len(ok)}/{len(beside)}",
        "huge_statuses": sorted({status for _, status in got}),
        "huge_median_s": statistics.median([s for s, _ in got]) if got else None,
        "memory_mib": memory(proc.pid),
    }


def connections(url: str, n: int) -> dict:
    port = int(url.rsplit(":", 1)[1])
    socks, refused = [], 0
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
            socks.append(s)
        except OSError:
            refused += 1
    try:
        health = timed(httpx.get, url + "/health", timeout=5)
        scored = normal(url, timeout=10)
    finally:
        for s in socks:
            s.close()
    return {
        "half_open": n,
        "refused_at_connect": refused,
        "health": {"seconds": health[0], "status": health[1]},
        "normal": {"seconds": scored[0], "status": scored[1]},
    }


def bodies(url: str, proc, tiny_mb: float) -> dict:
    n = int(tiny_mb * 1e6 / 3)
    body = b'{"items": [' + b"{}," * n + b"{}]}"
    before = memory(proc.pid)["VmHWM"]
    headers = {"Content-Type": "application/json"}
    seconds, status = timed(httpx.post, url + "/v1/score", content=body, headers=headers, timeout=120)
    return {
        "body_mb": len(body) / 1e6,
        "status": status,
        "seconds": seconds,
        "peak_growth_mib": memory(proc.pid)["VmHWM"] - before,
    }


def measure(code: Path | None, a, tmp: Path) -> dict:
    root = tmp / "images"
    root.mkdir(exist_ok=True)
    for name, (make, _) in BOMBS.items():
        if not (root / name).exists():
            (root / name).write_bytes(make())
    out: dict = {}
    args = ["--image-root", str(root)]
    with server(args, tmp / "images.log", code=code) as (url, proc):
        normal(url)
        out["images"] = images(url, proc)
        out["bodies"] = bodies(url, proc, a.tiny_mb)
    out["stall"] = []
    for mb in a.huge_mb:
        with server([], tmp / f"stall-{mb}.log", code=code) as (url, proc):
            normal(url)
            out["stall"].append(stall(url, proc, mb, a.normal, a.budget_s))
    with server([], tmp / "conn.log", code=code, open_files=1024) as (url, proc):
        normal(url)
        out["connections"] = connections(url, a.half_open)
    return out


def git_of(code: Path) -> dict:
    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=code, capture_output=True, text=True).stdout.strip()

    return {"git_commit": run("rev-parse", "HEAD"), "git_clean": run("status", "--porcelain") == ""}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", type=Path, help="a checkout of the code before, measured the same way")
    p.add_argument(
        "--before-huge-mb",
        type=float,
        nargs="+",
        default=[4.0],
        help="text sizes (MB) the code before is measured with (default 4: at 50 MB it grew to 12 GB)",
    )
    p.add_argument("--huge-mb", type=float, nargs="+", default=[4.0, 50.0])
    p.add_argument("--normal", type=int, default=15, help="normal requests per latency median")
    p.add_argument("--budget-s", type=float, default=60.0, help="seconds the stall phase may take")
    p.add_argument("--half-open", type=int, default=3000)
    p.add_argument("--tiny-mb", type=float, default=60.0)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "attacks_cpu.json")
    a = p.parse_args(argv)  # fmt: skip

    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["after"] = {**git_of(REPO), **measure(None, a, Path(tmp))}
        if a.before is not None:
            a_before = argparse.Namespace(**{**vars(a), "huge_mb": a.before_huge_mb})
            results["before"] = {**git_of(a.before), **measure(a.before.resolve(), a_before, Path(tmp))}

    print(f"{'code':7s} {'attack':28s} {'answer':>12s} {'seconds':>8s}   memory MiB (RSS / peak)")
    for when, res in results.items():
        for name, r in res["images"].items():
            mem = r["memory_mib"]
            print(
                f"{when:7s} {name:28s} {r['status']:>12s} {r['seconds']:8.2f}   {mem['VmRSS']:.0f} / {mem['VmHWM']:.0f}"
            )
        b = res["bodies"]
        print(
            f"{when:7s} {'tiny items ' + format(b['body_mb'], '.0f') + ' MB':28s} {b['status']:>12s} "
            f"{b['seconds']:8.2f}   peak +{b['peak_growth_mib']:.0f}"
        )
        for s in res["stall"]:
            ratio = f"{s['ratio']:.2f}x" if s["ratio"] else "none answered"
            print(
                f"{when:7s} {'normal beside ' + format(s['huge_mb'], 'g') + ' MB items':28s} "
                f"{s['beside_answered']:>12s} {s['beside_median_s'] or float('nan'):8.3f}   "
                f"alone {s['alone_median_s']:.3f} s: {ratio}; huge {','.join(s['huge_statuses'])}; "
                f"peak {s['memory_mib']['VmHWM']:.0f}"
            )
        c = res["connections"]
        print(f"{when:7s} {'health, ' + str(c['half_open']) + ' half-open':28s} {c['health']['status']:>12s} "
              f"{c['health']['seconds']:8.3f}   normal request {c['normal']['status']} in {c['normal']['seconds']:.3f} s")  # fmt: skip
    out = {
        "what": "judge-serve (tiny judge, CPU) under issue 28's attacks: lying image files, huge text, "
        "half-open connections, bodies of tiny items",
        **run_facts("bench_attacks.py", argv),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "results": results,
    }
    write_result(a.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
