"""``judge-score --workers N``: items encoded in worker processes while the judge scores.

The scores must be the same bit for bit as encoding in the process itself (the same chunks are scored),
unscorable items must come through with their reasons, a run must resume, and the encoding must really
happen in other processes. Real worker processes, the tiny judge, real files.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil

import pytest
from test_reproducible import DEMO, demo_items

import judge
from judge.cli.score import main as score_main
from judge.core.errors import ConfigError
from judge.scoring.inputs import prediction_records
from judge.scoring.workers import part_size

pytestmark = pytest.mark.usefixtures("one_thread")


def items_with_bad_ones() -> list[dict]:
    """Demo items of every family (0 to 3 images, mixed lengths), one with a missing image, one of a task the
    rubric lacks: unscorable items must come through the workers too."""
    items = demo_items(4)
    with_image = next(it for it in items if any(s.get("type") == "image" for s in it["response"]))
    missing = json.loads(json.dumps(with_image))
    missing["id"] += "-missing"
    next(s for s in missing["response"] if s.get("type") == "image")["image"] = "images/nope.png"
    stranger = {**items[0], "id": items[0]["id"] + "-stranger", "task": "Juggling"}
    return [*items, missing, stranger]


def test_workers_score_the_same_bits_as_inline_encoding_and_really_run_elsewhere():
    items = items_with_bad_ones()
    inline = judge.Judge.load("tiny", rubric="mmie", chunk_size=4)
    pooled = judge.Judge.load("tiny", rubric="mmie", chunk_size=4, workers=2)
    want = [r.model_dump() for r in inline.score_records(items, root=DEMO.parent)]

    records = prediction_records(items, "mmie", DEMO.parent)
    before = {p.pid for p in multiprocessing.active_children()}  # another test's workers may still be alive
    got, children, batches = [], set(), 0
    for batch in pooled.engine.iter_batches(records):
        batches += 1
        got += [r.model_dump() for r in batch.records]
        children |= {p.pid for p in multiprocessing.active_children()} - before
    assert len(children) == 2 and os.getpid() not in children  # the encoding ran in two new processes
    assert batches > 3  # several chunks of 4 went through the workers
    key = lambda r: (r["id"], r["criterion"])  # noqa: E731
    assert sorted(got, key=key) == sorted(want, key=key)  # every field, every score: ==
    reasons = {r["id"]: r["details"]["reason_code"] for r in got if r["status"] == "unscorable"}
    assert reasons == {items[-2]["id"]: "image", items[-1]["id"]: "unknown_family"}


def test_part_sizes_give_every_worker_several_tasks():
    assert part_size(256, 4) == 16  # capped: the first chunk is ready soon
    assert part_size(8, 2) == 2
    assert part_size(1, 8) == 1


def test_judge_score_with_workers_writes_the_same_file_and_resumes(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DEMO.parent / "images", data / "images")
    items = items_with_bad_ones()
    (data / "preds.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    common = [str(data / "preds.jsonl"), "--judge", "tiny", "--rubric", "mmie", "--no-progress"]

    def scores(name: str) -> bytes:
        return (tmp_path / name / "scores.jsonl").read_bytes()

    assert score_main([*common, "--out", str(tmp_path / "inline")]) == 0
    assert score_main([*common, "--out", str(tmp_path / "pooled"), "--workers", "2"]) == 0
    assert scores("pooled") == scores("inline")
    # Part of the run, then the rest resumed, with workers. A resumed run batches its items otherwise, so
    # only the reproducible mode promises the same bits as one run.
    repro = [*common, "--reproducible"]
    assert score_main([*repro, "--out", str(tmp_path / "inline-repro")]) == 0
    assert score_main([*repro, "--out", str(tmp_path / "resumed"), "--workers", "2", "--limit", "5"]) == 0
    assert score_main([*repro, "--out", str(tmp_path / "resumed"), "--workers", "2"]) == 0
    run = json.loads((tmp_path / "resumed" / "run.json").read_text())
    assert run["options"]["workers"] == 2 and len(run["history"]) == 2
    assert scores("resumed") == scores("inline-repro")


def test_a_bad_worker_count_is_named(capsys):
    with pytest.raises(SystemExit) as e:
        score_main(["x.jsonl", "--judge", "tiny", "--rubric", "mmie", "--workers", "-1"])
    assert e.value.code == 2
    assert "argument --workers: must be at least 0, got -1" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="workers"):
        judge.Judge.load("tiny", rubric="mmie", workers=-2)
