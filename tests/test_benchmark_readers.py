"""Readers of the benchmarks' own files: MileBench pred.json + dataset file, MMRA rows, MMIE JSON.

Every test writes small real files under ``tmp_path``; bad input must name file, line and field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.benchmarks import detect_format, load_benchmark_predictions, score_predictions, summarize
from judge.benchmarks.milebench import read_milebench
from judge.benchmarks.mmra import read_mmra
from judge.core.errors import JudgeError
from judge.core.io import InvalidRecordsError

# ----------------------------------------------------------------------------- MileBench files


def ds_item(
    sid: int, n_images: int, label: str, choices: list[str] | None = None, response: str = "x"
) -> dict:
    ti = {
        "context": "{image#1} What happens?",
        "images_path": [f"img_{sid}_{i}.jpg" for i in range(n_images)],
    }
    if choices is not None:
        ti["choice_list"] = choices
    return {
        "sample_id": sid,
        "task_instruction_id": 0,
        "task_instance": ti,
        "response": response,
        "image_quantity_level": label,
    }


def write_dataset(path: Path, name: str, items: list[dict], qt: str = "multi-choice") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    obj = {"meta_data": {"dataset": name, "task_instruction": ["Look."], "question_type": qt}, "data": items}
    path.write_text(json.dumps(obj, indent=2))
    return path


def pred(sid, pred_response, gt, model="llava-x") -> dict:
    return {
        "sample_id": sid,
        "image": ["a.jpg"],
        "question": "<ImageHere>What happens?",
        "gt_response": gt,
        "gen_model_id": model,
        "pred_response": pred_response,
        "gen_kwargs": {},
    }


def write_preds(path: Path, preds: list[dict]) -> Path:
    """A JSON array with one record per line: record i (0-based) starts on line i + 2."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[\n" + ",\n".join(json.dumps(p) for p in preds) + "\n]\n")
    return path


CHOICES = ["cat", "dog", "cow"]


@pytest.fixture
def milebench(tmp_path):
    """outputs/llava-x/ActionLocalization/pred.json with ActionLocalization.json next to it.

    Labels in the dataset file deliberately disagree with the image counts (5, 6, 32 images).
    """
    ds_dir = tmp_path / "outputs" / "llava-x" / "ActionLocalization"
    items = [ds_item(1, 5, "Many", CHOICES), ds_item(2, 6, "Few", CHOICES), ds_item(3, 32, "Few", CHOICES)]
    write_dataset(ds_dir / "ActionLocalization.json", "ActionLocalization", items)
    p = write_preds(
        ds_dir / "pred.json", [pred(1, "B", "dog"), pred(2, "the answer is b", "dog"), pred(3, "", "cow")]
    )
    return p


def test_milebench_join_and_meta(milebench):
    assert detect_format(milebench) == "milebench"
    res = load_benchmark_predictions(milebench)
    assert res.errors == []
    r1, r2, r3 = res.records
    assert (r1.id, r1.benchmark, r1.task, r1.model) == (
        "ActionLocalization/1",
        "milebench",
        "ActionLocalization",
        "llava-x",
    )
    assert r1.choices == CHOICES and r1.answer == "dog"  # the ground truth is pred.json's gt_response
    assert r1.meta["n_images"] == 5 and "image_quantity_level_label" not in r1.meta
    assert r1.meta["question_type"] == "multi-choice"
    assert [s.type for s in r1.question] == ["image", "text"] and r1.question[0].image == "a.jpg"
    assert r1._source.file == str(milebench) and r1._source.line == 2


@pytest.mark.parametrize("mode", ["official", "strict"])
def test_milebench_image_quantity_levels_from_images_path_count(milebench, mode):
    # The dataset file's labels (Many, Few, Few) disagree with the image counts; the official head
    # (9583e1f) bins by len(images_path), as strict mode does.
    recs = load_benchmark_predictions(milebench).records
    out = score_predictions(recs, mode=mode)
    assert [s.details["n_images"] for s in out] == [5, 6, 32]
    assert [s.details["image_quantity_level"] for s in out] == ["Few", "Medium", "Many"]
    rows = summarize(out)
    levels = {r["group"]: r["n"] for r in rows if r["level"] == "image_quantity" and "/" not in r["group"]}
    assert levels == {"Few": 1, "Medium": 1, "Many": 1}
    per_ds = {
        r["group"]: (r["n"], r["source"])
        for r in rows
        if r["level"] == "image_quantity" and "/" in r["group"]
    }
    src = "official" if mode == "official" else "judge toolkit"
    assert per_ds == {f"ActionLocalization/{lvl}": (1, src) for lvl in ("Few", "Medium", "Many")}


def test_milebench_open_ended_levels_are_per_sample(tmp_path):
    # The first commit binned every open-ended sample under the LAST dataset item's label; the head counts
    # each sample's own images.
    ds_dir = tmp_path / "outputs" / "m" / "ALFRED"
    items = [ds_item(1, 2, "Few"), ds_item(2, 40, "Many"), ds_item(3, 8, "Medium")]
    write_dataset(ds_dir / "ALFRED.json", "ALFRED", items, qt="open-ended")
    p = write_preds(ds_dir / "pred.json", [pred(i, "a cat sat", "a cat sat") for i in (1, 2, 3)])
    out = score_predictions(load_benchmark_predictions(p).records, mode="official")
    assert [s.metric for s in out] == ["milebench.rouge_l"] * 3
    assert [s.details["image_quantity_level"] for s in out] == ["Few", "Many", "Medium"]


def test_milebench_official_scores_end_to_end(milebench):
    recs = load_benchmark_predictions(milebench).records
    # "B" -> B right; "the answer is b" -> "AB" wrong; "" -> "C", right since the gold is cow (C).
    assert [s.score for s in score_predictions(recs)] == [1.0, 0.0, 1.0]
    assert [s.score for s in score_predictions(recs, mode="strict")] == [1.0, 1.0, 0.0]


def test_milebench_dataset_file_in_subfolder_or_given(tmp_path):
    run = tmp_path / "run" / "TQA"
    write_dataset(run / "TQA" / "TQA.json", "TQA", [ds_item(7, 1, "Few", CHOICES)])
    p = write_preds(run / "pred.json", [pred("7", "A", "cat")])  # a string sample_id joins an int one
    assert load_benchmark_predictions(p).records[0].id == "TQA/7"
    # Given as a folder holding <ds>/<ds>.json ...
    other = write_preds(tmp_path / "elsewhere" / "TQA" / "pred.json", [pred(7, "A", "cat")])
    assert len(load_benchmark_predictions(other, dataset_file=run).records) == 1
    # ... or as the file itself (its stem names the dataset).
    loose = write_preds(tmp_path / "loose" / "pred.json", [pred(7, "A", "cat")])
    res = load_benchmark_predictions(loose, dataset_file=run / "TQA" / "TQA.json")
    assert res.records[0].task == "TQA"


def test_milebench_missing_dataset_file_is_an_error(tmp_path):
    p = write_preds(tmp_path / "x" / "pred.json", [pred(1, "A", "cat")])
    with pytest.raises(InvalidRecordsError, match="no MileBench dataset file") as e:
        load_benchmark_predictions(p)
    assert e.value.errors[0].file == str(p)


def test_milebench_unknown_sample_id_names_file_and_line(milebench):
    write_preds(milebench, [pred(1, "B", "dog"), pred(99, "B", "dog")])
    with pytest.raises(InvalidRecordsError) as e:
        load_benchmark_predictions(milebench)
    (err,) = e.value.errors
    assert (err.file, err.line, err.field) == (str(milebench), 3, "sample_id")
    assert "99" in err.message and "ActionLocalization.json" in err.message
    assert f"{milebench}:3, record 'ActionLocalization/99': field 'sample_id'" in str(e.value)


def test_milebench_missing_field_and_skip_invalid(milebench):
    bad = pred(2, "B", "dog")
    del bad["pred_response"]
    write_preds(milebench, [pred(1, "B", "dog"), bad])
    res = load_benchmark_predictions(milebench, skip_invalid=True)
    assert [r.id for r in res.records] == ["ActionLocalization/1"]
    (err,) = res.errors
    assert (err.line, err.field, err.message) == (3, "pred_response", "required field is missing")


def test_milebench_broken_json_names_line(milebench):
    milebench.write_text(
        '[\n  {"sample_id": 1, "gt_response": "dog", "pred_response": "B"},\n  {"sample_id": 2,,}\n]'
    )
    with pytest.raises(InvalidRecordsError) as e:
        load_benchmark_predictions(milebench, format="milebench")
    err = e.value.errors[0]
    assert err.file == str(milebench) and err.line == 3 and "not valid JSON" in err.message


def test_milebench_bad_dataset_item_names_dataset_file_line(tmp_path):
    d = tmp_path / "m" / "TQA"
    item = ds_item(2, 1, "Few", CHOICES)
    del item["task_instance"]["images_path"]
    ds = write_dataset(d / "TQA.json", "TQA", [ds_item(1, 1, "Few", CHOICES), item])
    write_preds(d / "pred.json", [pred(2, "A", "cat")])
    recs, errs = read_milebench(d / "pred.json")
    assert recs == []
    (err,) = errs
    assert err.file == str(ds) and err.field == "data[1].task_instance.images_path"
    line = ds.read_text().splitlines()[err.line - 1]
    assert line.strip() == "{" and '"sample_id": 2' in ds.read_text().splitlines()[err.line]


def test_milebench_null_prediction_marked_missing(milebench):
    write_preds(milebench, [pred(1, None, "dog")])
    (rec,) = load_benchmark_predictions(milebench).records
    assert rec.meta["response_missing"] is True
    assert score_predictions([rec])[0].status == "unscorable"


def test_dataset_file_refused_as_predictions(milebench):
    with pytest.raises(JudgeError, match="MileBench dataset file"):
        detect_format(milebench.parent / "ActionLocalization.json")


# ----------------------------------------------------------------------------- MMRA files


def mmra_row(i: int, response, qa_type="Choice QA", answer="B", task="SubEvent", **over) -> dict:
    row = {
        "Task": task,
        "QA_type": qa_type,
        "question": f"Q{i}?",
        "image1": f"i{i}a.jpg",
        "image2": f"i{i}b.jpg",
        "options": "{'A': 'cat', 'B': 'dog', 'C': 'cow', 'D': 'pig'}"
        if qa_type != "True or false QA"
        else None,
        "answer": answer,
        "option": response,
    }
    row.update(over)
    return row


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_mmra_jsonl(tmp_path):
    p = write_jsonl(
        tmp_path / "qwen.jsonl",
        [
            mmra_row(0, "B"),
            mmra_row(1, None),
            mmra_row(2, "Yes", "True or false QA", "Yes"),
            mmra_row(3, "(B)", "Chooice QA"),
        ],
    )
    assert detect_format(p) == "mmra"
    recs = load_benchmark_predictions(p).records
    assert [r.id for r in recs] == ["mmra-0", "mmra-1", "mmra-2", "mmra-3"]
    r0 = recs[0]
    assert (r0.benchmark, r0.task, r0.model, r0.answer) == ("mmra", "SubEvent", "qwen", "B")
    assert r0.choices == ["cat", "dog", "cow", "pig"] and r0.meta["option_keys"] == ["A", "B", "C", "D"]
    assert r0.meta["response_column"] == "option"
    assert [s.image for s in r0.question[1:]] == ["i0a.jpg", "i0b.jpg"]
    assert recs[1].meta["response_missing"] is True and recs[2].choices is None
    # Official: row 1 skipped, row 3 (Chooice QA) carries row 2's "Yes" -> 0.
    out = score_predictions(recs)
    assert [s.score for s in out] == [1.0, None, 1.0, 0.0]


def test_mmra_csv_with_other_response_column_and_model(tmp_path):
    import csv

    p = tmp_path / "rows.csv"
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(
            f,
            fieldnames=[
                "Task",
                "QA_type",
                "question",
                "image1",
                "image2",
                "options",
                "answer",
                "response",
                "model",
            ],
            extrasaction="ignore",
        )
        w.writeheader()
        w.writerow({**mmra_row(0, None), "response": "line one\nline two (B)", "model": "gpt"})
        w.writerow({**mmra_row(1, None), "response": "", "model": "gpt"})
        w.writerow({**mmra_row(2, None), "response": "C", "model": "gpt", "answer": ""})
    p.write_text(p.read_text().replace("\r\n", "\n"))
    recs, errs = read_mmra(p)
    assert [r.model for r in recs] == ["gpt", "gpt"] and recs[0].meta["response_column"] == "response"
    assert recs[0].response[0].text == "line one\nline two (B)"
    assert recs[1].meta["response_missing"] is True  # an empty CSV cell is a missing value
    (err,) = errs
    # The first row spans lines 2-3, so the third data row starts on line 5.
    assert (err.file, err.line, err.field, err.record_id) == (str(p), 5, "answer", "mmra-2")


def test_mmra_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [mmra_row(0, "B"), mmra_row(1, "No", "True or false QA", "No")]
    p = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)
    assert detect_format(p) == "mmra"
    recs = load_benchmark_predictions(p).records
    assert [s.score for s in score_predictions(recs)] == [1.0, 1.0]


def test_mmra_bad_rows_name_file_line_field(tmp_path):
    p = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            mmra_row(0, "B"),
            '{"Task": "SubEvent", "QA_type": ',
            {k: v for k, v in mmra_row(2, "B").items() if k != "answer"},
            mmra_row(3, "B", options="{'A': 'cat', 'B'"),
            mmra_row(4, "B", qa_type="Essay QA"),
            {k: v for k, v in mmra_row(5, "B").items() if k != "option"},
        ],
    )
    with pytest.raises(InvalidRecordsError) as e:
        load_benchmark_predictions(p)
    got = [(err.line, err.field) for err in e.value.errors]
    assert got == [(2, None), (3, "answer"), (4, "options"), (5, "QA_type"), (6, "option")]
    assert all(err.file == str(p) for err in e.value.errors)
    assert "not valid JSON" in e.value.errors[0].message
    assert "no response column" in e.value.errors[4].message
    assert f"{p}:3, record 'mmra-2': field 'answer'" in str(e.value)


def test_duplicate_ids_across_files_are_errors(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [mmra_row(0, "B", model="m", id="x1")])
    b = write_jsonl(tmp_path / "b.jsonl", [mmra_row(0, "C", model="m", id="x1")])
    res = load_benchmark_predictions([a, b], skip_invalid=True)
    assert len(res.records) == 1
    (err,) = res.errors
    assert err.file == str(b) and err.field == "id" and f"{a}:1" in err.message


# ----------------------------------------------------------------------------- MMIE and canonical


def test_mmie_json(tmp_path):
    p = tmp_path / "mmie.json"
    p.write_text(
        json.dumps(
            [
                {
                    "id": "SA_1",
                    "question": [{"text": "Tell a story.", "image": None}],
                    "answer": [{"text": "Once upon a time.", "image": None}],
                    "model": "anole",
                    "gt_answer": None,
                },
                {
                    "id": "MSR_2",
                    "question": [{"text": "2+2?", "image": None}],
                    "answer": [{"text": "B", "image": None}],
                    "model": "anole",
                    "gt_answer": "4",
                    "choices": ["3", "4"],
                },
            ],
            indent=1,
        )
    )
    assert detect_format(p) == "mmie"
    res = load_benchmark_predictions(p)
    sa, msr = res.records
    assert (sa.benchmark, sa.task, sa.model) == ("mmie", "SA", "anole")
    assert msr.choices == ["3", "4"]
    out = score_predictions(res.records, mode="strict")
    assert [(s.id, s.score) for s in out] == [("MSR_2", 1.0)]


def test_mmie_missing_field_names_line(tmp_path):
    p = tmp_path / "mmie.json"
    p.write_text(
        json.dumps(
            [
                {"id": "SA_1", "question": "q", "answer": "a", "model": "m"},
                {"id": "zz", "question": "q", "answer": "a", "model": "m"},
            ],
            indent=1,
        )
    )
    with pytest.raises(InvalidRecordsError) as e:
        load_benchmark_predictions(p)
    (err,) = e.value.errors
    assert (err.file, err.line, err.field) == (str(p), 8, "task")


def test_canonical_detected_and_format_checked(tmp_path):
    p = write_jsonl(
        tmp_path / "c.jsonl",
        [{"id": "1", "benchmark": "mmie", "task": "SA", "question": "q", "response": "r"}],
    )
    assert detect_format(p) == "canonical"
    assert load_benchmark_predictions(p).records[0].id == "1"
    with pytest.raises(ValueError, match="unknown prediction format"):
        load_benchmark_predictions(p, format="xml")


def test_canonical_record_with_bad_benchmark_metadata_is_named_at_load(tmp_path):
    # A MileBench record in the canonical format: its meta must fit MileBench's metadata model,
    # or the run stops before scoring, naming the file, line and field (it used to crash mid-scoring).
    base = {
        "benchmark": "milebench",
        "task": "ALFRED",
        "question": "q",
        "response": "a cat",
        "answer": "a cat",
    }
    p = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {**base, "id": "ALFRED/1", "meta": {"n_images": 3}},
            {**base, "id": "ALFRED/2", "meta": {"n_images": "many"}},
        ],
    )
    with pytest.raises(InvalidRecordsError) as e:
        load_benchmark_predictions(p)
    (err,) = e.value.errors
    assert (err.file, err.line, err.field, err.record_id) == (str(p), 2, "meta.n_images", "ALFRED/2")
    res = load_benchmark_predictions(p, skip_invalid=True)
    assert [r.id for r in res.records] == ["ALFRED/1"]
    assert score_predictions(res.records)[0].details["n_images"] == 3
