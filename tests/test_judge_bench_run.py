"""judge-bench with a real (tiny) judge: verdicts from the engine, resumable, and read back as outputs."""

from __future__ import annotations

import json

import judge_bench_data as D
import pytest

from judge.cli.bench import main
from judge.models.preference import preference

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]
TINY = ["--judge", "tiny", "--rubric", "mmie", "--task", "SA", "--no-progress", "--bootstrap", "20"]


def read_jsonl(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def mmrb_run(tmp_path_factory):
    """Multimodal RewardBench's fixture scored by the tiny judge, one image removed (an unscorable item)."""
    root = tmp_path_factory.mktemp("bench")
    path, _ = D.write_mmrb(root / "data")
    rows = json.loads(path.read_text())
    (path.parent / rows[3]["Image"]).unlink()  # visitbench_3: its image is missing
    out = root / "out"
    assert main(["multimodal-rewardbench", str(path), *TINY, "--out", str(out)]) == 0
    return path, out


def test_pair_verdicts_are_the_preference_of_the_two_responses(mmrb_run):
    path, out = mmrb_run
    scores = {r["id"]: r for r in read_jsonl(out / "scores.jsonl")}
    assert all(r["criterion"] == "overall" for r in scores.values())  # only the criterion compared
    outputs = {o["id"]: o for o in read_jsonl(out / "judge_outputs.jsonl")}
    rows = json.loads(path.read_text())
    assert list(outputs) == [r["ID"] for r in rows]  # the data file's order
    from judge.benchmarks.judging import get_judge_benchmark
    from judge.scoring.bench import response_records

    data = get_judge_benchmark("multimodal-rewardbench").read(path)
    _, per_item = response_records(data, "SA", "multimodal-rewardbench")
    for item in data.items:
        o = outputs[item.id]
        a, b = (scores[rid] for rid in per_item[item.id])
        if item.id == "visitbench_3":
            assert o["p_first_better"] is None and o["reason"].startswith("image:")
            continue
        pref = preference(a["distribution"], b["distribution"], list(range(7)))
        assert o["p_first_better"] == pref.p_first_better
        assert (o["score_a"], o["score_b"]) == (a["score"], b["score"])
    doc = json.loads((out / "bench.json").read_text())
    assert doc["items"] == {"total": 20, "scored": 19, "unscorable": 1, "unscorable_reasons": {"image": 1}}
    assert doc["judge"]["task"] == "SA" and doc["judge"]["criterion"] == "overall"
    # Official: the unscorable item is absent from the script's input; strict: it counts, as wrong.
    assert doc["official"]["metrics"]["all"]["total"] == 19 and doc["strict"]["metrics"]["all"]["total"] == 20


def test_outputs_read_back_give_the_same_metrics(mmrb_run, tmp_path):
    path, out = mmrb_run
    again = tmp_path / "again"
    assert main(["multimodal-rewardbench", str(path), "--judge-outputs", str(out / "judge_outputs.jsonl"),
                 "--bootstrap", "20", "--out", str(again)]) == 0  # fmt: skip
    a, b = (json.loads((d / "bench.json").read_text()) for d in (out, again))
    for mode in ("official", "strict"):
        assert a[mode]["metrics"] == b[mode]["metrics"] and a[mode]["intervals"] == b[mode]["intervals"]


def test_a_killed_run_resumes_to_the_same_outputs(mmrb_run, tmp_path, capsys):
    path, out = mmrb_run
    import shutil

    resumed = tmp_path / "resumed"
    shutil.copytree(out, resumed)
    lines = (resumed / "scores.jsonl").read_text().splitlines(keepends=True)
    # A kill after 30 records, in the middle of writing the 31st.
    (resumed / "scores.jsonl").write_text("".join(lines[:30]) + lines[30][:40])
    (resumed / "judge_outputs.jsonl").unlink()
    capsys.readouterr()
    assert main(["multimodal-rewardbench", str(path), *TINY, "--out", str(resumed)]) == 0
    assert f"wrote {len(lines) - 30} new score records" in capsys.readouterr().out
    # The same records in the same order; the numbers equal up to round-off, since the resumed run batches the
    # remaining responses differently and CPU kernels round differently per batch shape (CI saw 2e-7).
    got, want = read_jsonl(resumed / "judge_outputs.jsonl"), read_jsonl(out / "judge_outputs.jsonl")
    assert [(g["id"], sorted(g)) for g in got] == [(w["id"], sorted(w)) for w in want]
    for g, w in zip(got, want, strict=True):
        for key, value in w.items():
            if isinstance(value, float):
                assert g[key] == pytest.approx(value, abs=1e-5), (w["id"], key)
            else:
                assert g[key] == value, (w["id"], key)
    run = json.loads((resumed / "run.json").read_text())
    assert len(run["history"]) == 2 and run["status"] == "finished"


def test_parquet_images_are_written_once_and_scored(tmp_path):
    path, _ = D.write_vlrb_parquet(tmp_path / "data")
    out = tmp_path / "out"
    assert main(["vl-rewardbench", str(path), *TINY, "--out", str(out), "--limit", "4"]) == 0
    doc = json.loads((out / "bench.json").read_text())
    assert doc["items"]["scored"] == 4 and len(list((out / "images").iterdir())) == 4
    assert main(["vl-rewardbench", str(path), *TINY, "--out", str(out), "--limit", "4"]) == 0  # resumes
    assert len(list((out / "images").iterdir())) == 4


def test_score_and_ranking_items_from_the_judge(tmp_path):
    path, _ = D.write_mllm_batch(tmp_path / "batch")
    out = tmp_path / "out"
    assert main(["mllm-as-a-judge", str(path), *TINY, "--out", str(out), "--limit", "3"]) == 0
    outputs = read_jsonl(out / "judge_outputs.jsonl")
    assert [o["id"] for o in outputs] == ["200", "201", "202"]
    for o in outputs:
        assert sorted(o["ranking"]) == list("ABCD")
        ranked = sorted(range(4), key=lambda i: (-o["scores"][i], i))
        assert o["ranking"] == "".join("ABCD"[i] for i in ranked)
    doc = json.loads((out / "bench.json").read_text())
    assert doc["data"]["items"] == 3 and doc["official"]["metrics"]["overall"]["num_samples"] == 3
    # What it wrote reads back as outputs (a ranking item's verdict key is "ranking").
    again = tmp_path / "again"
    assert main(["mllm-as-a-judge", str(path), "--judge-outputs", str(out / "judge_outputs.jsonl"),
                 "--bootstrap", "20", "--out", str(again)]) == 0  # fmt: skip
    back = json.loads((again / "bench.json").read_text())
    assert back["official"]["metrics"] == doc["official"]["metrics"] and back["items"]["total"] == 8


def test_score_items_without_a_verdict_read_back(tmp_path):
    path, _ = D.write_mllm_score(tmp_path / "score")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    (path.parent.parent / rows[0]["image_path"]).unlink()  # score_id 0, 1 and 2 share it: all unscorable
    out = tmp_path / "out"
    assert main(["mllm-as-a-judge", str(path), *TINY, "--out", str(out), "--limit", "6"]) == 0
    outputs = read_jsonl(out / "judge_outputs.jsonl")
    assert [o["score"] is None for o in outputs] == [True, True, True, False, False, False]
    assert outputs[0]["reason"].startswith("image:")
    again = tmp_path / "again"
    assert main(["mllm-as-a-judge", str(path), "--judge-outputs", str(out / "judge_outputs.jsonl"),
                 "--bootstrap", "20", "--out", str(again)]) == 0  # fmt: skip
    # All 26 rows of the file now: the 20 past --limit have no output, 3 are unscorable.
    assert json.loads((again / "bench.json").read_text())["items"]["unscorable"] == 26 - 3
