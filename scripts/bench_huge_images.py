"""What a request of huge images costs judge-serve, beside a normal request of the same count, in one run.

Two servers of the tiny judge on loopback (``--port 0``):

* ``capped``: the defaults, where the per-image pixel cap follows from the judge's tiling (4 x max tiles x
  tile size^2) and a request has a pixel budget; both are read from image headers before any decoding;
* ``uncapped``: ``--max-image-pixels 40000000`` and an unbounded request budget, what every server did
  before the cap (40,000,000 was the default).

Against each, ``--repeats`` rounds of: a normal request (8 demo items, their own small PNGs as data URLs),
then the huge one (the same 8 items, each response a white 8000 x 5000 PNG, 40 megapixels in a few kB).
Reported per server and request: the status, the median wall time over the rounds, and the server's
resident memory (VmRSS now, VmHWM its peak) after the rounds. Prints a table and writes JSON
(``benchmarks/results/huge_images_cpu.json`` or ``--out``) with the commit, whether the tree was clean, the
versions and the command.

    python scripts/bench_huge_images.py
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "annotations" / "demo"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()


def run_facts(script: str, argv: list[str] | None) -> dict:
    """What a result JSON records of its run: the command, the commit and whether the tree was clean, the
    date and the machine."""
    return {
        "command": " ".join(shlex.quote(x) for x in ["python", f"scripts/{script}", *(argv or sys.argv[1:])]),
        "git_commit": git("rev-parse", "HEAD"),
        # result files a run just wrote (untracked) do not make the tree dirty
        "git_clean": git("status", "--porcelain", "--untracked-files=no") == "",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
    }


def write_result(path: Path, result: dict) -> None:
    """Write a run's result JSON (its folder made) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")


def items(n: int) -> list[dict]:
    """``n`` demo records with images, their images as data URLs."""
    out = []
    for line in (DEMO / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        segs = rec["question"] + rec["response"]
        if not any(s.get("type") == "image" for s in segs):
            continue

        def inline(content: list[dict]) -> list[dict]:
            return [
                {
                    **s,
                    "image": "data:image/png;base64,"
                    + base64.b64encode((DEMO / s["image"]).read_bytes()).decode(),
                }
                if s.get("type") == "image"
                else s
                for s in content
            ]

        out.append({"id": rec["id"], "task": rec["task"], "question": inline(rec["question"]),
                    "response": inline(rec["response"]), "model": rec["model"]})  # fmt: skip
        if len(out) == n:
            return out
    raise SystemExit("the demo set has too few records with images")


def memory(pid: int) -> dict[str, float]:
    """The process's resident memory now and at its peak, in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


TINY = ("--judge", "tiny", "--rubric", "mmie")


@contextmanager
def server(
    args: list[str],
    log: Path,
    base: tuple[str, ...] = TINY,
    *,
    code: Path | None = None,
    open_files: int | None = None,
    memory_gib: float | None = None,
):
    """A judge-serve (``base`` + ``args``, a free port); yields its URL and process once it is ready.
    ``code``: a checkout whose ``judge`` the server runs (another commit, for a before/after); ``open_files``
    and ``memory_gib``: the server's limits on open files and address space."""
    cmd = [sys.executable, "-m", "judge.cli.serve", *base, "--port", "0", *args]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1"}
    if code is not None:
        env["PYTHONPATH"] = str(code)

    def limits() -> None:
        import resource

        if open_files:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
        if memory_gib:
            cap = int(memory_gib * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=code or REPO, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=limits
        )
    try:
        url = None
        deadline = time.monotonic() + 180
        while url is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"judge-serve did not start:\n{log.read_text()}")
            for line in log.read_text().splitlines():
                if "listening on " in line:
                    url = line.split("listening on ")[1].split()[0]
            time.sleep(0.1)
        while True:
            try:
                if httpx.get(url + "/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"judge-serve not ready:\n{log.read_text()}")
            time.sleep(0.2)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(60)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--items", type=int, default=8)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "huge_images_cpu.json")
    a = p.parse_args(argv)

    normal = items(a.items)
    buf = io.BytesIO()
    Image.new("1", (8000, 5000), 1).save(buf, "PNG")
    huge_url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    huge = [{**x, "response": [{"type": "image", "image": huge_url}]} for x in normal]
    bodies = {"normal": {"items": normal}, "huge": {"items": huge}}
    sizes = {k: len(json.dumps(v)) for k, v in bodies.items()}

    results: dict[str, dict] = {}
    settings = {
        "capped": [],
        "uncapped": ["--max-image-pixels", "40000000", "--max-request-pixels", str(10**15)],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in settings.items():
            with server(extra, Path(tmp) / f"{name}.log") as (url, proc):
                limits = httpx.get(url + "/v1/judge").json()["limits"]
                times: dict[str, list[float]] = {"normal": [], "huge": []}
                statuses: dict[str, set[int]] = {"normal": set(), "huge": set()}
                for _ in range(a.repeats):
                    for kind in ("normal", "huge"):
                        t0 = time.perf_counter()
                        r = httpx.post(url + "/v1/score", json=bodies[kind], timeout=600)
                        times[kind].append(time.perf_counter() - t0)
                        statuses[kind].add(r.status_code)
                results[name] = {
                    "limits": {k: limits[k] for k in ("max_image_pixels", "max_request_pixels")},
                    "server_args": extra,
                    **{
                        kind: {
                            "status": sorted(statuses[kind]),
                            "seconds_median": statistics.median(times[kind]),
                            "seconds": times[kind],
                        }
                        for kind in times
                    },
                    "memory_mib": memory(proc.pid),
                }

    print(
        f"{'server':10s} {'request':8s} {'status':>7s} {'median s':>9s} {'body kB':>8s}   RSS / peak MiB after"
    )
    for name, res in results.items():
        mem = res["memory_mib"]
        for kind in ("normal", "huge"):
            r = res[kind]
            status = ",".join(map(str, r["status"]))
            print(
                f"{name:10s} {kind:8s} {status:>7s} {r['seconds_median']:9.3f} {sizes[kind] / 1000:8.1f}"
                + (f"   {mem['VmRSS']:.0f} / {mem['VmHWM']:.0f}" if kind == "huge" else "")
            )
    out = {
        "what": "judge-serve (tiny judge, CPU): a normal request of 8 items vs 8 white 40-megapixel PNGs",
        **run_facts("bench_huge_images.py", argv),
        "repeats": a.repeats,
        "items": a.items,
        "body_bytes": sizes,
        "results": results,
    }
    write_result(a.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
