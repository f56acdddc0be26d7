"""scripts/load_test.py against a real judge-serve on loopback, with tiny numbers.

The full load test is a benchmark (benchmarks/results/load_test_cpu.json); these tests prove the script
does what its numbers claim: every request is sent and answered, the counts and percentiles are in the
JSON, judge-score scores the same items (same scores), the wall-time bound stops it by itself, and a
request left unanswered makes it exit non-zero saying why.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from serving import REPO, running_server, server_env

SCRIPT = REPO / "scripts" / "load_test.py"


def _run(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_small_load_test_answers_every_request_and_compares_with_judge_score(tmp_path):
    out = tmp_path / "load.json"
    args = ["--requests", "12", "--concurrency", "3", "--max-seconds", "60", "--repeats", "1"]
    proc = _run([*args, "--out", str(out)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| phase | sent | 200 items |" in proc.stdout and "server / judge-score items/s" in proc.stdout

    d = json.loads(out.read_text())
    s, w = d["server"], d["workload"]
    assert d["settings"]["server_started_by_script"] and d["settings"]["concurrency"] == 3
    assert d["settings"]["server"]["max_wait_ms"] == 10.0 and d["settings"]["server"]["max_batch_tokens"]
    assert w["requests"] == 12 and sum(w["requests_by_size"].values()) == 12
    assert set(w["requests_by_size"]) <= {"1", "2", "4", "8"}
    # Every request sent, every one answered 200, no 5xx, nothing left out by the time bound.
    assert s["requests_sent"] == s["answered"] == s["ok_requests"] == 12
    assert s["unanswered"] == s["status_5xx"] == s["requests_not_sent"] == s["bad_200"] == 0
    assert s["by_status"] == {"200": 12}
    assert s["ok_items"] == w["items"]
    lat = s["latency_s"]
    assert lat["count"] == 12 and 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    assert s["requests_per_s"] > 0 and s["items_per_s"] > 0
    assert len(d["server_batching"]) == 1 and d["server_batching"][0]["rounds"] >= 1
    assert d["cpu_seconds_per_item"]["server"] > 0
    # judge-score scored the same items, with the same scores (batching must not change a score).
    js = d["judge_score"]
    assert js["items"] == w["items"] and js["items_per_s"] > 0 and js["judge_seconds"] <= js["call_seconds"]
    # One repeat: the paired ratio is the ratio of the two rates.
    assert d["ratio_server_over_judge_score"] == pytest.approx(s["items_per_s"] / js["items_per_s"])
    assert d["ratios"]["paired"] == [pytest.approx(d["ratio_server_over_judge_score"])]
    assert d["ratios"]["cpu_efficiency"] > 0
    a = d["agreement"]
    assert a["pairs"] == 7 * w["items"] and a["missing_in_judge_score"] == 0  # 6 criteria + overall each
    assert a["null_mismatch"] == 0 and a["max_abs_diff"] < 1e-4
    assert d["goals"]["zero_5xx"] and d["goals"]["all_answered_200_or_429"]
    assert d["ok"] and d["failures"] == []
    for key in ("command", "date", "device", "versions", "git_commit"):
        assert key in d, key


@pytest.mark.slow
def test_running_server_time_bound_and_unanswered_requests(tmp_path):
    key = "sk-load"
    # /ready needs the key too: the script, given it, waits for the server to be ready.
    env = server_env(JUDGE_API_KEY=key)
    with running_server(
        ["--judge", "tiny", "--rubric", "mmie"], tmp_path, env=env, wait_ready=False
    ) as server:
        # --url with its key: no server started, no judge-score comparison; the time bound stops sending.
        out = tmp_path / "bounded.json"
        common = ["--url", server.url, "--api-key", key, "--repeats", "1"]
        proc = _run(
            [*common, "--requests", "400", "--concurrency", "2", "--max-seconds", "2", "--out", str(out)]
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        d = json.loads(out.read_text())
        s = d["server"]
        assert not d["settings"]["server_started_by_script"] and d["settings"]["url"] == server.url
        assert 0 < s["requests_sent"] < 400 and s["requests_not_sent"] == 400 - s["requests_sent"]
        assert s["answered"] == s["requests_sent"] and set(s["by_status"]) == {"200"}
        assert "judge_score" not in d and d["ratio_server_over_judge_score"] is None
        assert d["ok"]

        # A client timeout shorter than any scoring: every request is sent and none is answered.
        out = tmp_path / "unanswered.json"
        proc = _run(
            [
                *common,
                "--requests",
                "3",
                "--concurrency",
                "3",
                "--request-timeout",
                "0.001",
                "--out",
                str(out),
            ]
        )
        assert proc.returncode == 1
        assert "FAILED: 3 requests sent got no HTTP answer" in proc.stderr
        d = json.loads(out.read_text())
        assert d["server"]["unanswered"] == 3 and not d["ok"] and not d["goals"]["all_answered_200_or_429"]
