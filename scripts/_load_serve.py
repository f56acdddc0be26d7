"""load_test's own judge-serve: the command line, start and stop, readiness, and the batching figures read
from its ``/metrics`` (``bench_repro`` starts its server the same way)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _bench_common import REPO

from judge.scoring.remote import API_KEY_ENV  # the variable judge-serve reads its key from


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
