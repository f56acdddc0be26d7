"""Reproducible scoring (``--reproducible``): an item's scores depend on that item alone, bit for bit.

Compared with ``==``, never a tolerance: alone or among items of other lengths and families, at any
batch size and token budget, for any subset of its criteria, through the API, ``judge-score`` (one
process or two shards) and a real ``judge-serve`` on loopback under concurrent requests. The default
mode is checked to differ in its last bits on the same items, so these tests can fail.
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import forkserver
import httpx
import pytest
from serving import REPO, running_server, server_env

import judge
from judge.cli.score import main as score_main

pytestmark = pytest.mark.usefixtures("one_thread")

DEMO = REPO / "annotations" / "demo" / "annotations.jsonl"
FIELDS = ("id", "task", "question", "response", "reference", "model")


def demo_items(per_task: int) -> list[dict]:
    """``per_task`` demo records of each family (lengths and image counts vary), as prediction items."""
    out: dict[str, list[dict]] = {}
    for line in DEMO.read_text().splitlines():
        rec = json.loads(line)
        if len(out.setdefault(rec["task"], [])) < per_task:
            out[rec["task"]].append({**{k: rec[k] for k in FIELDS if k in rec}, "benchmark": "mmie"})
    return [x for group in out.values() for x in group]


def by_key(records) -> dict[tuple[str, str], float]:
    return {(r.id, r.criterion): r.score for r in records}


def unequal(a: dict, b: dict) -> int:
    assert a.keys() == b.keys()
    return sum(a[k] != b[k] for k in a)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_items_scores_do_not_move_with_its_batch(dtype):
    root = DEMO.parent
    items = demo_items(3)
    repro = judge.Judge.load("tiny", rubric="mmie", dtype=dtype, reproducible=True)
    default = judge.Judge.load("tiny", rubric="mmie", dtype=dtype)
    assert repro.provenance["reproducible"] is True and "reproducible" not in default.provenance

    alone = {k: v for it in items for k, v in by_key(repro.score_records([it], root=root)).items()}
    together = by_key(repro.score_records(items, root=root))
    assert unequal(alone, together) == 0
    # Other packings: one response per forward pass, a budget that splits nothing, the items reversed.
    small = judge.Judge.load("tiny", rubric="mmie", dtype=dtype, reproducible=True, batch_size=1)
    assert unequal(alone, by_key(small.score_records(items, root=root))) == 0
    assert unequal(alone, by_key(repro.score_records(items[::-1], root=root))) == 0

    # A subset of the criteria (what a resumed run or a /v1/score request with `criteria` asks for).
    rec = repro.engine  # the engine behind the API
    from judge.scoring.inputs import prediction_records

    first = prediction_records([items[4]], "mmie", root=root)[0]
    crits = rec.pending(first)
    prepared = rec.prepare(first, [crits[-1], crits[1]])
    for _ in rec.score_prepared([prepared]):
        pass
    got = {(r.id, r.criterion): r.score for r in prepared.records}
    assert list(got) == [(first.id, crits[-1]), (first.id, crits[1])]
    assert all(got[k] == alone[k] for k in got)

    # The default mode packs items together: the same items differ in their last bits (so the checks above
    # could fail), by little.
    d_alone = {k: v for it in items for k, v in by_key(default.score_records([it], root=root)).items()}
    d_together = by_key(default.score_records(items, root=root))
    assert unequal(d_alone, d_together) > 0
    assert max(abs(d_alone[k] - d_together[k]) for k in d_alone) < (1e-5 if dtype == "float32" else 0.02)
    if dtype == "float32":  # in float32 the reproducible path is the default computation, item by item
        assert max(abs(alone[k] - d_together[k]) for k in alone) < 1e-5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scores_file(out: Path) -> dict[tuple[str, str], float]:
    recs = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return {(r["id"], r["criterion"]): r["score"] for r in recs if r["metric"] == "judge"}


@pytest.mark.slow
def test_judge_score_shards_and_judge_serve_give_the_same_bits(tmp_path):
    """bfloat16 (where the default mode's packings differ most): judge-score at two batch settings and in two
    processes, and judge-serve under concurrent requests of mixed sizes, all equal to the API alone."""
    data = tmp_path / "data"
    shutil.copytree(DEMO.parent / "images", data / "images")
    items = demo_items(4)
    (data / "items.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items))
    common = ["--judge", "tiny", "--rubric", "mmie", "--dtype", "bfloat16", "--reproducible", "--no-progress"]

    api = judge.Judge.load("tiny", rubric="mmie", dtype="bfloat16", reproducible=True)
    want = {k: v for it in items for k, v in by_key(api.score_records([it], root=data)).items()}

    runs = {
        "batch 16": ["--batch-size", "16"],
        "batch 1, 512 tokens": ["--batch-size", "1", "--batch-tokens", "512"],
    }
    for name, extra in runs.items():
        out = tmp_path / name.replace(" ", "_").replace(",", "")
        assert score_main([str(data / "items.jsonl"), "--out", str(out), *common, *extra]) == 0
        assert unequal(scores_file(out), want) == 0, name

    # Two shards (accelerate's multi-process launcher on the CPU, as the sharded scoring test runs it).
    out = tmp_path / "two"
    args = ["--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
            "--dynamo_backend", "no", "--main_process_port", str(free_port()), "-m", "judge.cli.score",
            str(data / "items.jsonl"), "--out", str(out), "--device", "cpu", *common]  # fmt: skip
    # The launcher and its processes forked by the test run's fork server.
    cmd, env = forkserver.launcher({**server_env(), "OMP_NUM_THREADS": "1"}, *args, cwd=tmp_path)
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["world_size"] == 2
    assert unequal(scores_file(out), want) == 0

    # judge-serve: requests of 1-5 items, shuffled, 4 in flight, one asking for a subset of criteria.
    args = ["--judge", "tiny", "--rubric", "mmie", "--dtype", "bfloat16", "--reproducible"]
    args += ["--image-root", str(data), "--max-wait-ms", "50"]
    rng = random.Random(0)
    order = items[:]
    rng.shuffle(order)
    bodies, i = [], 0
    while i < len(order):
        n = rng.randint(1, 5)
        bodies.append({"items": order[i : i + n]})
        i += n
    bodies[0]["criteria"] = ["overall"]
    with running_server(args, tmp_path) as server:
        with ThreadPoolExecutor(4) as pool:
            answers = list(
                pool.map(lambda b: httpx.post(server.url + "/v1/score", json=b, timeout=120), bodies)
            )
    got = {}
    for r in answers:
        assert r.status_code == 200, r.text
        for res in r.json()["results"]:
            for crit, s in res["scores"].items():
                got[(res["id"], crit)] = s["score"]
    assert len(got) == len(want) - sum(len(judge_criteria_of(it)) - 1 for it in bodies[0]["items"])
    assert all(got[k] == want[k] for k in got), [(k, got[k], want[k]) for k in got if got[k] != want[k]][:3]


def judge_criteria_of(item: dict) -> list[str]:
    from judge.core.rubric import load_rubric

    return load_rubric("mmie").family(item["task"]).criterion_ids
