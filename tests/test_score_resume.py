"""Nothing lost: a judge-score run killed (SIGKILL) and started again, a torn last line, and two-process
sharding all end with the records of one uninterrupted run, none doubled."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import forkserver
import pytest

from judge.cli.score import main
from judge.scoring import ScoreConfig, score_files

TOL = 1e-4
REPO = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_thread")


def scores(out: Path) -> dict[tuple, dict]:
    """Records by (id, metric, criterion); fails on a key written twice."""
    recs = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    keyed = {(r["id"], r["metric"], r["criterion"]): r for r in recs}
    assert len(keyed) == len(recs), "a record was written twice"
    return keyed


def assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for k, w in want.items():
        assert abs(got[k]["score"] - w["score"]) < TOL, k
        assert (
            got[k]["argmax"] == w["argmax"] or abs(max(got[k]["distribution"]) - max(w["distribution"])) < TOL
        )


def env() -> dict:
    e = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.setdefault("OMP_NUM_THREADS", "1")
    return e


@pytest.fixture(scope="module")
def inputs(small_demo) -> Path:
    """Six demo responses of all three families (annotation records), beside the demo's images."""
    lines = small_demo.read_text().splitlines()[::6]
    p = small_demo.parent / "serve_resume.jsonl"
    p.write_text("".join(x + "\n" for x in lines))
    return p


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory) -> dict:
    """One uninterrupted single-process run."""
    out = tmp_path_factory.mktemp("reference")
    score_files(ScoreConfig(inputs=[str(inputs)], judge="tiny", rubric="mmie", out=str(out), progress=False))
    ref = scores(out)
    assert len(ref) == 6 * 7
    return ref


@pytest.mark.slow
def test_kill_and_resume(inputs, reference, tmp_path, capsys):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "judge.cli.score",
        str(inputs),
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--out",
        str(out),
        "--batch-size",
        "1",
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    target = out / "scores.jsonl"
    deadline = time.monotonic() + 120
    try:
        # Kill as soon as the first batch (one response, seven lines) has landed.
        while time.monotonic() < deadline and proc.poll() is None:
            if target.exists() and target.read_bytes().count(b"\n") >= 1:
                break
            time.sleep(0.005)
        assert proc.poll() is None, (
            "the run ended before it could be killed: " + proc.stderr.read().decode()[-2000:]
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    n_before = target.read_bytes().count(b"\n")
    assert 1 <= n_before < len(reference)
    # The kill may have torn a line itself; tear one more for certain, as a kill mid-write would.
    with open(target, "ab") as f:
        f.write(b'{"id": "sa-000-r0", "benchmark": "mmie", "metric": "jud')
    assert main([str(inputs), "--judge", "tiny", "--rubric", "mmie", "--out", str(out), "--no-progress"]) == 0
    assert "torn last line" in capsys.readouterr().err
    assert_same(scores(out), reference)
    history = json.loads((out / "run.json").read_text())["history"]
    assert len(history) == 2 and history[-1]["resumed_from"] >= 1
    # A third run finds everything done and changes nothing.
    before = (out / "scores.jsonl").read_bytes()
    assert main([str(inputs), "--judge", "tiny", "--rubric", "mmie", "--out", str(out), "--no-progress"]) == 0
    assert (out / "scores.jsonl").read_bytes() == before


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_give_the_records_of_one(inputs, reference, tmp_path):
    out = tmp_path / "out"
    # accelerate 1.15: "--cpu --num_processes 2" starts ONE process (its simple launcher needs an MPI hostfile
    # for more); two CPU processes come from the multi-process launcher (torchrun), with the engine on CPU.
    args = [
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        "-m",
        "judge.cli.score",
        str(inputs),
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--out",
        str(out),
        "--device",
        "cpu",
        "--no-progress",
    ]
    cmd, launch_env = forkserver.launcher(env(), *args, cwd=tmp_path)  # its processes forked
    res = subprocess.run(cmd, cwd=tmp_path, env=launch_env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert_same(scores(out), reference)
    assert not list(out.glob("scores.part*.jsonl"))
    run = json.loads((out / "run.json").read_text())
    assert run["world_size"] == 2
    # The merged file is sorted by the stable key, as a single-process run's is.
    assert list(scores(out)) == list(reference)


def test_run_json_of_another_version_resumes_and_a_broken_one_is_refused_by_field(inputs, tmp_path):
    from judge.core.errors import JudgeError

    out = tmp_path / "out"
    cfg = ScoreConfig(inputs=[str(inputs)], no_judge=True, out=str(out), progress=False)
    score_files(cfg)
    run = json.loads((out / "run.json").read_text())
    assert "judge_fingerprint" not in run["identity"] and run["status"] == "finished"
    run["written_by"] = {"version": "0.0"}  # a key this version does not know: no reason to refuse
    (out / "run.json").write_text(json.dumps(run))
    score_files(cfg)
    again = json.loads((out / "run.json").read_text())
    assert len(again["history"]) == 2 and again["history"][0] == run["history"][0]
    assert again["history"][-1]["resumed_from"] == again["records"]
    again["identity"]["rubric_hash"] = None
    (out / "run.json").write_text(json.dumps(again))
    with pytest.raises(
        JudgeError, match=r"run\.json: cannot read the record of the earlier run \(identity\.rubric_hash"
    ):
        score_files(cfg)


def test_the_run_lifecycle_every_job_shares(tmp_path):
    """judge-score, judge-audit and judge-bench start and finish their run.json through one pair of
    functions: a resumed start keeps the earlier history, and an overwrite removes the job's own outputs
    beside the scores, the run and the summary (nothing else in the folder)."""
    from judge.scoring.output import RunIdentity, RunInfo, ScoreStore, finish_run, read_run, start_run

    out = tmp_path / "out"
    store = ScoreStore(out)
    store.prepare()
    info = RunInfo(identity=RunIdentity(rubric="mmie", rubric_hash="0" * 12))
    start_run(out, info, None, inputs=["a.jsonl"])
    assert read_run(out).status == "running"
    finish_run(out, info, records=3, items=1, written=3)
    first = json.loads((out / "run.json").read_text())
    assert first["status"] == "finished" and first["records"] == 3 and first["items"] == 1
    assert first["history"][0]["written"] == 3 and "resumed_from" not in first["history"][0]

    again = RunInfo(identity=RunIdentity(rubric="mmie", rubric_hash="0" * 12))
    start_run(out, again, read_run(out), inputs=["a.jsonl"], world_size=2)
    finish_run(out, again, records=5, items=2, written=2, resumed_from=3)
    run = json.loads((out / "run.json").read_text())
    assert run["history"][0] == first["history"][0] and len(run["history"]) == 2
    assert run["history"][1]["resumed_from"] == 3 and run["history"][1]["world_size"] == 2

    for name in ("scores.jsonl", "summary.md", "audit.json", "notes.txt"):
        (out / name).write_text("x\n")
    store.prepare(overwrite=True, outputs=("audit.json",))
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
