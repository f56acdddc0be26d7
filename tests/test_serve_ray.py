"""``judge-serve --ray --replicas 2``: two real Ray Serve replicas on loopback, each its own process with
the judge loaded, answering the same scores as the judge in memory; SIGTERM leaves no Ray process behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from serving import REPO, running_server, server_env

DEMO = REPO / "annotations" / "demo"
ITEM_IDS = ("sa-000-r0", "pbl-000-r0", "msr-000-r0")  # one per task family, 2 or 3 images each
TINY = ["--judge", "tiny", "--rubric", "mmie"]
KEY = "sk-ray-test"
AUTH = {"Authorization": f"Bearer {KEY}"}


def demo_items() -> list[dict]:
    """Prediction items (images as paths relative to the demo folder) from the demo annotations."""
    keep = ("id", "task", "question", "response", "reference", "model")
    items = {}
    for line in (DEMO / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["id"] in ITEM_IDS:
            items[rec["id"]] = {k: rec[k] for k in keep if rec.get(k) is not None}
    return [items[i] for i in ITEM_IDS]


def processes_with(marker: str) -> list[str]:
    """The command lines of live processes whose environment carries ``marker`` (Ray's processes inherit
    the environment of the judge-serve that started them)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker.encode() in (proc / "environ").read_bytes():
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # gone meanwhile, or not ours
            pass
    return found


@pytest.mark.slow
def test_two_replicas_serve_the_same_scores_and_stop_clean(tmp_path):
    pytest.importorskip("ray", reason="Ray Serve is an optional extra: pip install 'judge[ray]'")
    from judge import Judge

    items = demo_items()
    marker = f"JUDGE_RAY_TEST_RUN={uuid.uuid4().hex}"
    name, value = marker.split("=")
    t0 = time.monotonic()
    args = [*TINY, "--device", "cpu", "--ray", "--replicas", "2", "--image-root", "annotations/demo"]
    # The key comes from the environment of judge-serve: the replicas must get it from the driver.
    env = server_env(**{name: value, "JUDGE_API_KEY": KEY})
    # Not forked: what outlives the stop is found by the marker in /proc/PID/environ, which a forked server
    # would not show (it shows its parent's).
    with running_server(args, tmp_path, env=env, wait_ready=False, fork=False) as server:
        # The reference scores, from the judge in memory, while Ray starts.
        judge = Judge.load("tiny", rubric="mmie", device="cpu")
        expected = {(r.id, r.criterion): r.score for r in judge.score_records(items, root=DEMO)}
        assert len(expected) > len(items) and all(v is not None for v in expected.values())

        deadline = time.monotonic() + 180
        while "2 replica(s) running" not in server.output():
            assert server.proc.poll() is None, server.output()
            assert time.monotonic() < deadline, f"the replicas did not start:\n{server.output()}"
            time.sleep(0.2)
        started_s = time.monotonic() - t0
        assert "Ray Serve: 2 replica(s)" in server.output()  # the banner states the replicas
        # The probe a load balancer uses, through Ray; auth as without Ray: all routes but /health.
        ready = httpx.get(server.url + "/ready", headers=AUTH, timeout=10)
        assert ready.status_code == 200 and ready.json() == {"ready": True}
        assert ready.headers["x-judge-replica"]

        assert httpx.get(server.url + "/health", timeout=10).status_code == 200
        refused = httpx.post(server.url + "/v1/score", json={"items": items[:1]}, timeout=10)
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"

        def score(item: dict) -> httpx.Response:
            return httpx.post(server.url + "/v1/score", json={"items": [item]}, headers=AUTH, timeout=60)

        # Concurrent requests: Ray's router sends each to the less busy of two replicas, so both answer.
        replicas: set[str] = set()
        with ThreadPoolExecutor(6) as pool:
            for _ in range(5):
                for resp in pool.map(score, items * 2):
                    assert resp.status_code == 200, resp.text
                    replicas.add(resp.headers["x-judge-replica"])
                    (result,) = resp.json()["results"]
                    got = {(result["id"], c): s["score"] for c, s in result["scores"].items()}
                    assert got.keys() == {k for k in expected if k[0] == result["id"]}
                    for key, got_score in got.items():
                        assert got_score == pytest.approx(expected[key], abs=1e-4), key
                if len(replicas) == 2:
                    break
        assert len(replicas) == 2, f"answers came from {replicas} only"
        # The other routes go through Ray unchanged: /v1/judge names the same weights and rubric.
        info = httpx.get(server.url + "/v1/judge", headers=AUTH, timeout=10).json()
        assert info["provenance"]["fingerprint"] == judge.spec.fingerprint
        assert info["provenance"]["rubric"] == "mmie" and info["ready"] is True
        served_s = time.monotonic() - t0

        t1 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=90) == 0, server.output()
        stop_s = time.monotonic() - t1
    deadline = time.monotonic() + 20
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, "Ray processes left after SIGTERM:\n" + "\n".join(left)
    assert "Traceback" not in server.output(), server.output()
    print(f"2 replicas up {started_s:.1f} s, both served {served_s:.1f} s, stopped in {stop_s:.1f} s")


def test_without_ray_the_flag_is_a_one_line_error(tmp_path):
    """A machine without the extra: ``--ray`` names it (``sys.modules['ray'] = None`` makes ``import
    ray`` fail as it does when Ray is not installed)."""
    code = (
        "import sys; sys.modules['ray'] = None; from judge.cli.serve import main; "
        f"sys.exit(main({[*TINY, '--ray', '--replicas', '2']!r}))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=server_env(), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert "--ray" in lines[0] and "pip install 'judge[ray]'" in lines[0]


def test_a_taken_port_is_refused_before_ray_starts(tmp_path):
    pytest.importorskip("ray", reason="Ray Serve is an optional extra: pip install 'judge[ray]'")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run(
            [sys.executable, "-m", "judge.cli.serve", *TINY, "--ray", "--port", str(port)],
            cwd=REPO, env=server_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert f"cannot listen on 127.0.0.1:{port} (--host, --port)" in run.stderr
    assert "Traceback" not in run.stderr
