"""``judge-score`` end to end through its CLI (in process): formats, bad input, metrics, resume rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.cli.score import main
from judge.core.errors import ConfigError
from judge.core.rubric import load_rubric
from judge.scoring import ScoreConfig, score_files

pytestmark = pytest.mark.usefixtures("one_thread")


def write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def read_scores(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]


def pred(i: int, **over) -> dict:
    row = {
        "id": f"p{i}",
        "benchmark": "mmie",
        "task": "SA",
        "model": "m1",
        "question": [{"type": "text", "text": "Tell a story about a red circle."}],
        "response": [{"type": "text", "text": f"The red circle rolled away, {i} times."}],
    }
    row.update(over)
    return row


# ----------------------------------------------------------------------------- benchmark files, metrics only


def milebench_files(root: Path) -> tuple[Path, Path]:
    ds = root / "outputs" / "llava" / "ActionLocalization"
    ds.mkdir(parents=True)
    items = [
        {
            "sample_id": i,
            "task_instruction_id": 0,
            "task_instance": {
                "context": "{image#1} What happens?",
                "images_path": [f"img_{i}.jpg"],
                "choice_list": ["cat", "dog", "cow"],
            },
            "response": "dog",
            "image_quantity_level": "Few",
        }
        for i in (1, 2, 3)
    ]
    dataset = root / "ActionLocalization.json"
    dataset.write_text(
        json.dumps(
            {
                "meta_data": {
                    "dataset": "ActionLocalization",
                    "task_instruction": ["Look."],
                    "question_type": "multi-choice",
                },
                "data": items,
            }
        )
    )
    preds = [
        {
            "sample_id": i,
            "image": ["a.jpg"],
            "question": "<ImageHere>What happens?",
            "gt_response": "dog",
            "gen_model_id": "llava",
            "pred_response": r,
            "gen_kwargs": {},
        }
        for i, r in zip((1, 2, 3), ["B", "the answer is b", ""], strict=True)
    ]
    p = ds / "pred.json"
    p.write_text("[\n" + ",\n".join(json.dumps(x) for x in preds) + "\n]\n")
    return p, dataset


def mmra_row(i: int, response, qa_type="Choice QA", answer="B") -> dict:
    return {
        "Task": "SubEvent",
        "QA_type": qa_type,
        "question": f"Q{i}?",
        "image1": "a.jpg",
        "image2": "b.jpg",
        "options": "{'A': 'cat', 'B': 'dog', 'C': 'cow', 'D': 'pig'}"
        if qa_type != "True or false QA"
        else None,
        "answer": answer,
        "option": response,
    }


def test_milebench_and_mmra_score_with_no_judge(tmp_path, capsys):
    pred_json, dataset = milebench_files(tmp_path)
    mmra = write_jsonl(
        tmp_path / "qwen.jsonl",
        [
            mmra_row(0, "B"),
            mmra_row(1, "A good choice is C", answer="C"),
            mmra_row(2, "Yes", "True or false QA", "Yes"),
            mmra_row(3, "(B)", "Chooice QA"),
        ],
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                str(pred_json),
                str(mmra),
                "--no-judge",
                "--dataset-file",
                str(dataset),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    recs = read_scores(out)
    metrics = {(r["benchmark"], r["metric"], r["producer"]["mode"]) for r in recs}
    assert metrics == {
        ("milebench", "milebench.accuracy", "official"),
        ("milebench", "milebench.accuracy", "strict"),
        ("mmra", "mmra.accuracy", "official"),
        ("mmra", "mmra.accuracy", "strict"),
    }
    assert len(recs) == 2 * 3 + 2 * 4 and not any(r["metric"] == "judge" for r in recs)
    summary = json.loads((out / "summary.json").read_text())
    overall = {
        (r["benchmark"], r["mode"]): r["value"]
        for r in summary["metrics"]
        if r["level"] == "overall" and r["group"] == "all"
    }
    assert overall[("mmra", "official")] == pytest.approx(75.0) and overall[
        ("mmra", "strict")
    ] == pytest.approx(100.0)
    assert overall[("milebench", "official")] == pytest.approx(100 / 3)
    assert (out / "summary.md").read_text().count("| milebench |") >= 5
    assert "summary.csv" in capsys.readouterr().out
    # A rerun of the same inputs adds nothing; the official mode alone into a new folder gives the official rows only.
    same = [
        str(pred_json),
        str(mmra),
        "--no-judge",
        "--dataset-file",
        str(dataset),
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(same) == 0
    assert len(read_scores(out)) == len(recs)
    capsys.readouterr()
    # Other inputs into the same folder are refused, naming what changed; nothing written is lost.
    before = (out / "scores.jsonl").read_bytes()
    assert main([str(mmra), "--no-judge", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"input {pred_json} of the earlier run is not among this run's inputs" in err
    assert "--overwrite" in err and "another --out" in err
    assert (out / "scores.jsonl").read_bytes() == before
    out2 = tmp_path / "official"
    assert (
        main([str(mmra), "--no-judge", "--metric-mode", "official", "--out", str(out2), "--no-progress"]) == 0
    )
    assert {r["producer"]["mode"] for r in read_scores(out2)} == {"official"}


def test_skip_invalid_lists_bad_rows(tmp_path):
    bad = {k: v for k, v in mmra_row(1, "B").items() if k != "answer"}
    mmra = write_jsonl(tmp_path / "qwen.jsonl", [mmra_row(0, "B"), bad])
    out = tmp_path / "out"
    assert main([str(mmra), "--no-judge", "--out", str(out), "--no-progress"]) == 2
    assert main([str(mmra), "--no-judge", "--skip-invalid", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [(e["line"], e["field"]) for e in summary["skipped_invalid"]] == [(2, "answer")]
    assert "Skipped invalid records (1)" in (out / "summary.md").read_text()


def test_malformed_line_names_file_line_and_field(tmp_path, capsys):
    p = write_jsonl(
        tmp_path / "preds.jsonl",
        [pred(0), {k: v for k, v in pred(1).items() if k != "task"}, '{"id": "p2", '],
    )
    assert (
        main([str(p), "--judge", "tiny", "--rubric", "mmie", "--out", str(tmp_path / "o"), "--no-progress"])
        == 2
    )
    err = capsys.readouterr().err
    assert f"{p}:2" in err and "'task'" in err and f"{p}:3" in err and "not valid JSON" in err
    assert not (tmp_path / "o" / "scores.jsonl").exists()


def test_items_needing_a_judge_without_one_are_refused(tmp_path, capsys):
    p = write_jsonl(tmp_path / "preds.jsonl", [pred(0)])
    assert main([str(p), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "pass --judge DIR|MODEL|tiny, or --no-judge to compute the rule-based metrics only" in err
    assert main([str(p), "--no-judge", "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    # the library's warning names the setting; the command shows its flag
    assert (
        "warning: 1 records need the learned judge and are not scored (--no-judge)" in capsys.readouterr().err
    )
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["not_scored"] == {"needs_judge": 1} and summary["counts"]["records"] == 0
    # A library user reads the settings by their field names.
    with pytest.raises(ConfigError, match=r"pass `judge` DIR\|MODEL\|tiny, or `no_judge` to compute"):
        score_files(ScoreConfig(inputs=[p], out=tmp_path / "lib", progress=False))


# ----------------------------------------------------------------------------- with the tiny judge


def test_canonical_mmie_and_annotations_with_unscorable_and_resume_rules(tmp_path, small_demo, capsys):
    demo = [json.loads(x) for x in small_demo.read_text().splitlines()]
    canonical = write_jsonl(
        small_demo.parent / "serve_cli_preds.jsonl",
        [
            pred(0),
            pred(
                1, response=[{"type": "text", "text": "look"}, {"type": "image", "image": "images/gone.png"}]
            ),
            pred(2, task="NOPE"),
        ],
    )
    mmie = tmp_path / "mmie.json"
    mmie.write_text(
        json.dumps(
            [
                {
                    "id": "PBL_7",
                    "model": "m2",
                    "question": [{"text": "How to fold a boat?", "image": None}],
                    "answer": [{"text": "Fold the paper twice.", "image": None}],
                }
            ]
        )
    )
    annotations = write_jsonl(
        small_demo.parent / "serve_cli_ann.jsonl", [demo[24]]
    )  # an MSR record with scores
    out = tmp_path / "out"
    args = [
        str(canonical),
        str(mmie),
        str(annotations),
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(args) == 0
    recs = read_scores(out)
    by = {}
    for r in recs:
        by.setdefault(r["id"], []).append(r)
    assert {r["criterion"] for r in by["p0"]} == {
        "text_quality",
        "image_quality",
        "text_image_coherence",
        "context_consistency",
        "innovation",
        "stylistic_consistency",
        "overall",
    }
    assert all(r["score"] is not None and r["status"] == "ok" for r in by["p0"])
    assert (
        all(r["score"] is None and r["details"]["reason_code"] == "image" for r in by["p1"])
        and len(by["p1"]) == 7
    )
    assert [(r["criterion"], r["details"]["reason_code"]) for r in by["p2"]] == [
        ("overall", "unknown_family")
    ]
    assert {r["task"] for r in by["PBL_7"]} == {"PBL"} and len(by["PBL_7"]) == 7
    ann = by[demo[24]["id"]]
    assert {r["benchmark"] for r in ann} == {"mmie"} and {r["task"] for r in ann} == {"MSR"}
    run = json.loads((out / "run.json").read_text())
    assert [i["format"] for i in run["inputs"]] == ["canonical", "mmie", "annotations"]
    assert run["identity"]["rubric_hash"] and run["status"] == "finished"
    md = (out / "summary.md").read_text()
    assert "## Unscorable" in md and "unknown_family" in md and "image" in md
    summary = json.loads((out / "summary.json").read_text())
    sa = [r for r in summary["judge"] if r["group"] == "SA" and r["metric"] == "judge.overall"][0]
    assert (sa["n"], sa["n_scored"], sa["n_unscorable"], sa["reasons"]) == (2, 1, 1, {"image": 1})
    assert sa["percent"] == pytest.approx(sa["value"] / 6 * 100)
    capsys.readouterr()

    # Another judge may not add to this folder; --overwrite starts afresh.
    other = [*args[:3], "--judge", "tiny:seed=1", *args[5:]]
    assert main(other) == 2
    assert "different run" in capsys.readouterr().err
    assert main([*other, "--overwrite", "--limit", "1"]) == 0
    assert {r["id"] for r in read_scores(out)} == {"p0"}
    assert json.loads((out / "run.json").read_text())["identity"]["judge"] == "tiny:seed=1"


def test_damaged_middle_line_is_an_error(tmp_path, capsys):
    p = write_jsonl(tmp_path / "q.jsonl", [mmra_row(0, "B"), mmra_row(1, "C")])
    out = tmp_path / "out"
    assert main([str(p), "--no-judge", "--out", str(out), "--no-progress"]) == 0
    lines = (out / "scores.jsonl").read_text().splitlines()
    (out / "scores.jsonl").write_text("\n".join([lines[0], "{garbage", *lines[1:]]) + "\n")
    assert main([str(p), "--no-judge", "--out", str(out), "--no-progress"]) == 2
    assert "scores.jsonl:2: damaged score line" in capsys.readouterr().err


def test_clipscore_baseline_beside_the_metrics(tmp_path, small_demo):
    demo = small_demo.read_text().splitlines()
    ann = write_jsonl(small_demo.parent / "serve_cli_clip.jsonl", [json.loads(x) for x in demo[:2]])
    out = tmp_path / "out"
    assert (
        main(
            [
                str(ann),
                "--no-judge",
                "--baseline",
                "clipscore",
                "--clip-model",
                "tiny",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    recs = read_scores(out)
    assert {r["metric"] for r in recs} == {"clipscore"} and len(recs) == 2
    assert all(r["score"] is not None and r["benchmark"] == "mmie" for r in recs)
    summary = json.loads((out / "summary.json").read_text())
    assert {(r["group"], r["n"]) for r in summary["baselines"]} == {("SA", 1), ("all", 1)}  # two models
    assert summary["not_scored"] == {"needs_judge": 2}


def test_split_files_of_judge_data_build_work_from_any_folder(tmp_path, small_demo, monkeypatch):
    """judge-data build keeps the split files' images beside them (splits/images, paths relative to the file),
    so the build folder can be read from anywhere and moved; a manifest cannot widen the image root."""
    from judge.cli import data_main
    from judge.core.io import InvalidRecordsError
    from judge.eval.report import load_human
    from judge.scoring.inputs import load_inputs

    monkeypatch.chdir(tmp_path)
    build = tmp_path / "proj" / "runs" / "data"
    assert (
        data_main(
            [
                "build",
                "--config",
                "rubric6",
                "--no-tokens",
                "--set",
                f"data.annotations=[{small_demo}]",
                "--out",
                str(build),
            ]
        )
        == 0
    )
    split = build / "splits" / "test.jsonl"
    raw = [json.loads(x) for x in split.read_text().splitlines()]
    images = [s["image"] for r in raw for s in r["question"] + r["response"] if s["type"] == "image"]
    assert images and all(p.startswith("images/") for p in images)  # relative to the split file
    assert all((split.parent / p).is_file() for p in images)

    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    moved = tmp_path / "moved"
    build.rename(moved)
    split = moved / "splits" / "test.jsonl"
    records = load_inputs([split]).records
    assert len(records) == len(raw) and records[0].benchmark == "mmie"
    assert len(load_human([split], load_rubric("mmie"), check_images=True)) == len(raw)

    # A split record pointing outside its folder is refused, whatever a manifest says.
    rec = raw[0]
    rec["response"][1]["image"] = str(small_demo.parent / "images" / Path(rec["response"][1]["image"]).name)
    bad = write_jsonl(moved / "splits" / "bad.jsonl", [rec])
    manifest = json.loads((moved / "manifest.json").read_text())
    manifest["data_config"]["image_root"] = "/"
    (moved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InvalidRecordsError, match=r"bad.jsonl:1.*response\[1\]\.image.*leaves its root"):
        load_inputs([bad])
