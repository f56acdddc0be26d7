"""Scoring through a running judge-serve (``judge-score --server``, :class:`JudgeClient`) against real servers
on loopback: the same scores, unscorable items, rule-based metrics and summary as local scoring, resume
and its refusal for another judge, 429s retried under a one-item queue, the API key, and the client's
records equal to :meth:`judge.Judge.score`'s."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import httpx
import pytest
from serving import REPO, running_server

from judge.api import Judge
from judge.cli.score import main as score_main
from judge.core.errors import JudgeError
from judge.scoring.remote import JudgeClient
from judge.testing.demo import generate_demo

# Every test here talks to a judge-serve process started for it (module-scoped): "slow" by the marker's terms.
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]

TOL = 1e-4
KEY = "sk-client-test"
DEMO = REPO / "annotations" / "demo"


def judge_records(out: Path) -> dict[tuple[str, str], dict]:
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return {(r["id"], r["criterion"]): r for r in rows if r["metric"] == "judge"}


def assert_same_score(got: dict, want: dict) -> None:
    """Two judge records (dicts) agree: status, score, distribution, argmax, reason and details."""
    assert got["status"] == want["status"], (got, want)
    if want["status"] == "ok":
        assert got["score"] == pytest.approx(want["score"], abs=TOL)
        assert got["distribution"] == pytest.approx(want["distribution"], abs=TOL)
        assert got["argmax"] == want["argmax"] or max(want["distribution"]) - min(want["distribution"]) < TOL
        assert got["details"]["num_tokens"] == want["details"]["num_tokens"]
    else:
        assert got["score"] is None
        assert got["details"]["reason_code"] == want["details"]["reason_code"]
        assert got["reason"] == want["reason"]


def assert_same_rows(got: list[dict], want: list[dict]) -> None:
    """Summary rows equal, numbers to TOL (the ``files``/``run`` parts differ by folder and are not rows)."""
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            if isinstance(b[k], float):
                assert a[k] == pytest.approx(b[k], abs=TOL), (k, a, b)
            elif k != "example":  # an unscorable row's example names the input file's folder: the same here
                assert a[k] == b[k], (k, a, b)


def score_cli(inputs: list[Path], out: Path, *args: str) -> int:
    return score_main([*map(str, inputs), "--out", str(out), "--no-progress", *args])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[Path]:
    """A small demo annotation set (6 responses, one with a missing image) and two MMRA rows (a
    rule-based metric)."""
    d = tmp_path_factory.mktemp("inputs")
    ann = generate_demo(d / "demo", n_questions=3, responses_per_question=2, n_annotators=1)
    rows = [json.loads(x) for x in ann.read_text().splitlines()]
    rows[0]["response"].append({"type": "image", "image": "images/missing.png"})
    ann.write_text("".join(json.dumps(r) + "\n" for r in rows))
    mmra = d / "mmra.jsonl"
    mmra.write_text(
        "".join(
            json.dumps(
                {
                    "Task": "SubEvent",
                    "QA_type": "Choice QA",
                    "question": f"Q{i}?",
                    "image1": "a.jpg",
                    "image2": "b.jpg",
                    "options": "{'A': 'cat', 'B': 'dog'}",
                    "answer": "B",
                    "option": resp,
                }
            )
            + "\n"
            for i, resp in enumerate(["B", "A"])
        )
    )
    return [ann, mmra]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(["--judge", "tiny", "--rubric", "mmie"], tmp_path_factory.mktemp("log")) as s:
        yield s


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """Another judge (the tiny model of seed 1) behind an API key, taking one item per request and one
    waiting item at most."""
    args = ["--judge", "tiny:seed=1", "--rubric", "mmie", "--api-key", KEY, "--max-queue", "1"]
    with running_server([*args, "--max-items", "1"], tmp_path_factory.mktemp("log")) as s:
        yield s


@pytest.fixture(scope="module")
def local_out(inputs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "out"
    assert score_cli(inputs, out, "--judge", "tiny", "--rubric", "mmie") == 0
    return out


@pytest.fixture(scope="module")
def remote_out(inputs, server, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("remote") / "out"
    assert score_cli(inputs, out, "--server", server.url) == 0
    return out


def test_judge_score_through_a_server_equals_local_scoring(local_out, remote_out, server):
    want, got = judge_records(local_out), judge_records(remote_out)
    assert got.keys() == want.keys() and len(want) == 6 * 7
    for key, rec in want.items():
        assert_same_score(got[key], rec)
    unscorable = [r for r in got.values() if r["status"] == "unscorable"]
    assert len(unscorable) == 7 and {r["details"]["reason_code"] for r in unscorable} == {"image"}
    # Who scored, as local scoring names it, plus the server.
    local_producer = next(iter(want.values()))["producer"]
    for r in got.values():
        assert r["producer"]["server"] == server.url
        for k in ("judge", "fingerprint", "rubric", "rubric_hash", "target_format"):
            assert r["producer"][k] == local_producer[k]
    # The rule-based metrics and the summary are the same run's.
    rules = [json.loads(x) for x in (local_out / "scores.jsonl").read_text().splitlines()]
    rules_remote = [json.loads(x) for x in (remote_out / "scores.jsonl").read_text().splitlines()]
    assert [r for r in rules_remote if r["metric"] != "judge"] == [r for r in rules if r["metric"] != "judge"]
    assert any(r["metric"].startswith("mmra") for r in rules)
    a, b = (json.loads((d / "summary.json").read_text()) for d in (remote_out, local_out))
    assert a["counts"] == b["counts"]
    for part in ("judge", "metrics", "unscorable"):
        assert_same_rows(a[part], b[part])
    assert a["run"]["identity"] == b["run"]["identity"]


def test_model_settings_given_with_server_are_named_as_ignored(remote_out, inputs, server, tmp_path, capsys):
    """With --server the server's own model and engine settings decide: a setting given anyway is named in
    one warning, by its flag, instead of silently doing nothing."""
    out = tmp_path / "out"
    shutil.copytree(remote_out, out)
    capsys.readouterr()
    assert (
        score_cli(
            inputs,
            out,
            "--server",
            server.url,
            "--max-tokens",
            "900",
            "--batch-size",
            "3",
            "--dtype",
            "float32",
        )
        == 0
    )
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "the server's own settings decide" in x)
    for flag in ("--max-tokens", "--batch-size", "--dtype"):
        assert flag in line, line
    assert "--quantization" not in line  # left at its default: not named


def test_engine_settings_given_to_the_api_with_server_are_named_as_ignored(
    remote_out, inputs, server, tmp_path
):
    """The API's `chunk_size` (no flag) is one of the engine's settings too: named, not silently dropped."""
    from judge import score_files

    out = tmp_path / "out"
    shutil.copytree(remote_out, out)
    # A handler on the library's own logger: the commands' logging setup (conftest) stops "judge" from
    # propagating, so pytest's caplog, which listens on the root logger, would not see the record.
    messages: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("judge")
    log.addHandler(handler)
    try:
        score_files(
            inputs=[str(p) for p in inputs], out=str(out), server=server.url, chunk_size=5, progress=False
        )
    finally:
        log.removeHandler(handler)
    (line,) = [m for m in messages if "the server's own settings decide" in m]
    assert "`chunk_size`" in line, line


def test_resume_skips_what_is_done_and_fills_in_what_a_kill_lost(
    remote_out, inputs, server, local_out, tmp_path, capsys
):
    out = tmp_path / "out"
    shutil.copytree(remote_out, out)
    before = (out / "scores.jsonl").read_bytes()
    capsys.readouterr()
    assert score_cli(inputs, out, "--server", server.url) == 0
    assert "wrote 0 new score records" in capsys.readouterr().out
    assert (out / "scores.jsonl").read_bytes() == before
    # The identity is the judge's, not the way it was reached: a local run with the same judge resumes too.
    assert score_cli(inputs, out, "--judge", "tiny", "--rubric", "mmie") == 0
    assert "wrote 0 new score records" in capsys.readouterr().out
    # A run killed mid-way: the last 10 judge records lost, so one item has only some of its criteria left.
    lines = before.decode().splitlines(keepends=True)
    judge_lines = [i for i, x in enumerate(lines) if json.loads(x)["metric"] == "judge"][-10:]
    lost = {(json.loads(lines[i])["id"], json.loads(lines[i])["criterion"]) for i in judge_lines}
    assert len({k[0] for k in lost}) == 2  # one whole item and part of another
    (out / "scores.jsonl").write_text("".join(x for i, x in enumerate(lines) if i not in judge_lines))
    assert score_cli(inputs, out, "--server", server.url) == 0
    assert "wrote 10 new score records" in capsys.readouterr().out
    got, want = judge_records(out), judge_records(local_out)
    assert got.keys() == want.keys()
    for key in lost:
        assert_same_score(got[key], want[key])


def test_resume_against_another_judge_is_refused(remote_out, inputs, other, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    shutil.copytree(remote_out, out)
    before = (out / "scores.jsonl").read_bytes()
    monkeypatch.setenv("JUDGE_API_KEY", KEY)
    assert score_cli(inputs, out, "--server", other.url) == 2
    err = capsys.readouterr().err
    assert "holds scores of a different run" in err and "judge weights" in err and "--overwrite" in err
    assert (out / "scores.jsonl").read_bytes() == before


def test_a_rubric_other_than_the_servers_is_refused(inputs, server, tmp_path, capsys):
    import yaml

    from judge.core.rubric import find_shipped_file

    edited = yaml.safe_load(find_shipped_file("mmie").read_text())
    edited["description"] = "An edited copy of the MMIE rubric."
    (tmp_path / "edited.yaml").write_text(yaml.safe_dump(edited))
    out = tmp_path / "out"
    assert score_cli(inputs, out, "--server", server.url, "--rubric", str(tmp_path / "edited.yaml")) == 2
    err = capsys.readouterr().err
    assert "edited.yaml" in err and "not the rubric the server" in err and "Traceback" not in err
    assert not out.exists()
    # The rubric it does score with is accepted by name.
    assert score_cli(inputs, out, "--server", server.url, "--rubric", "mmie") == 0


def demo_items(n: int) -> list[dict]:
    """The first ``n`` demo annotations of each family as prediction dicts (relative image paths)."""
    out: dict[str, list[dict]] = {}
    for line in (DEMO / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if len(out.setdefault(rec["task"], [])) < n:
            keep = ("id", "task", "question", "response", "reference", "model")
            out[rec["task"]].append({k: rec[k] for k in keep if k in rec})
    return [x for group in out.values() for x in group]


def rejected_429(server) -> float:
    text = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
    m = re.search(r'judge_requests_total\{route="/v1/score",status="429"\} ([0-9.e+]+)', text)
    return float(m.group(1)) if m else 0.0


def test_a_full_queue_is_retried_until_every_item_is_scored(other):
    items = demo_items(2)
    with JudgeClient(other.url, api_key=KEY, concurrency=4, backoff=0.2) as client:
        recs = client.score_records(items, root=DEMO)
    assert [(r.id, r.criterion) for r in recs if r.criterion == "overall"] == [
        (x["id"], "overall") for x in items
    ]
    assert len(recs) == 6 * 7 and all(r.status == "ok" for r in recs)
    # Four one-item requests at once into a queue of one: the server turned some away, the client came back.
    assert rejected_429(other) > 0


def test_a_keyed_server_refuses_a_client_without_the_key(other, inputs, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("JUDGE_API_KEY", raising=False)
    assert score_cli(inputs, tmp_path / "out", "--server", other.url) == 2
    err = capsys.readouterr().err
    assert "JUDGE_API_KEY" in err and "API key" in err and "Traceback" not in err
    with pytest.raises(JudgeError, match="is not the server's"):
        JudgeClient(other.url, api_key="wrong").info()


def test_client_scores_equal_judge_scores(server):
    items = demo_items(2)
    items[1] = {
        **items[1],
        "response": [*items[1]["response"], {"type": "image", "image": "images/nope.png"}],
    }
    items.append({**items[0], "id": "other-family", "task": "XYZ"})
    judge = Judge.load("tiny", rubric="mmie", device="cpu")
    want = judge.score_records(items, root=DEMO)
    with JudgeClient(server.url) as client:
        got = client.score_records(items, root=DEMO)
        overall = client.score_records(items, criteria=["overall"], root=DEMO)
    assert [(r.id, r.criterion) for r in got] == [(r.id, r.criterion) for r in want]
    for g, w in zip(got, want, strict=True):
        assert_same_score(g.model_dump(), w.model_dump())
        assert g.producer["fingerprint"] == w.producer["fingerprint"] and g.producer["server"] == server.url
    codes = {r.id: (r.details or {}).get("reason_code") for r in got if r.status == "unscorable"}
    assert codes == {items[1]["id"]: "image", "other-family": "unknown_family"}
    by_key = {(r.id, r.criterion): r for r in want}
    assert [r.criterion for r in overall] == ["overall"] * len(items)
    for r in overall:
        assert_same_score(r.model_dump(), by_key[(r.id, r.criterion)].model_dump())


def test_server_settings_that_cannot_go_together_are_named(inputs, tmp_path, capsys):
    for extra, words in [
        (["--server", "localhost:8000"], "--server 'localhost:8000' must be a URL"),
        (["--server", "http://h:1", "--judge", "tiny"], "--server and --judge exclude each other"),
        (["--server", "http://h:1", "--rationale"], "--rationale is not available with --server"),
    ]:
        assert score_cli(inputs, tmp_path / "out", *extra) == 2
        assert words in capsys.readouterr().err
