"""Judge benchmarks: each official metric equals what the benchmark's own code computes on the same verdicts.

The fixtures (tests/judge_bench_data.py) are built here in each benchmark's native format, with the
verdicts the tests give. The OFFICIAL numbers below were computed by running each benchmark's own code,
fetched outside this repository, on those verdicts (converted to the form that code reads: cal.py's
inference records, 2_get_accuracy.py's answers file, calculate_metrics.ipynb's prediction and ground-truth
files, the analysis notebooks' judge files), with scipy 1.17.1, scikit-learn 1.9.1 and Levenshtein 0.27.5:

* VL-RewardBench: vl-rewardbench/VL_RewardBench cal.py @ 9b10abdc91678bc5fb2bd7eea4d73d3af484db9f
  (``main``'s loop for k = 1, 3, 5, 7, 9, seed 1234; the same numbers for every k), printed with full
  precision;
* Multimodal RewardBench: facebookresearch/multimodal_rewardbench scripts/2_get_accuracy.py
  @ b4b92cdac0df81b2a134bcb1b91411d67b55f80f (``compute_acc``);
* MLLM-as-a-Judge: Dongping-Chen/MLLM-Judge scripts/calculate_metrics.ipynb @ 363cb98a1449cccc0aa7f47ac1f97cf61ad72a71
  (its three functions), scripts/Score_analysis.ipynb and scripts/pair_analysis.ipynb
  @ 7238d1a0d9e7524f0c781da2e2cc857641ce0ef1 (the judge cells).

The STRICT numbers are the toolkit's own; each is derived by hand in a comment.
"""

from __future__ import annotations

import json
from pathlib import Path

import judge_bench_data as D
import numpy as np
import pytest

from judge.benchmarks.judging import get_judge_benchmark, read_judge_outputs
from judge.core.io import InvalidRecordsError
from judge.scoring.bench import evaluate

EPS = 1e-12


def load(tmp_path: Path, name: str, writer):
    path, outs = writer(tmp_path / name)
    bm = get_judge_benchmark("mllm-as-a-judge" if name.startswith("mllm") else name)
    data = bm.read(path)
    outputs, order = read_judge_outputs(D.write_outputs(tmp_path / f"{name}_outputs.jsonl", outs), data)
    return bm, data, outputs, order


def metrics(bm, data, outputs, order, mode):
    ev = bm.evaluate(data, outputs, order, mode)
    # The bootstrap's statistic on every row is the headline number (to round-off where scipy is replaced).
    recomputed = ev.statistic(np.arange(len(ev.clusters)))
    for k, v in ev.headline.items():
        assert (v is None and recomputed[k] is None) or recomputed[k] == pytest.approx(v, abs=1e-12), k
    return ev


# ----------------------------------------------------------------------------- VL-RewardBench


def test_vl_rewardbench_official_equals_cal_py(tmp_path):
    bm, data, outputs, order = load(tmp_path, "vl-rewardbench", D.write_vlrb)
    ev = metrics(bm, data, outputs, order, "official")
    m = ev.metrics
    # cal.py prints: 60.00 57.14 50.00 / Overall Accuracy: 57.14 / Macro Average Acc: 55.71
    assert m["general"] == pytest.approx(60.0, abs=EPS)
    assert m["hallucination"] == pytest.approx(57.142857142857146, abs=EPS)
    assert m["reasoning"] == pytest.approx(49.99998750000312, abs=EPS)  # 2 / (4 + 1e-6)
    assert m["Overall Accuracy"] == pytest.approx(57.14285714285714, abs=EPS)
    assert m["Macro Average Acc"] == pytest.approx(55.71428571428571, abs=EPS)
    assert m["items"] == {"total": 25, "agree": 12, "reject": 9, "doesntMatch": 4}
    assert {
        d: (e["agree_number"], e["reject_number"], e["doesntMatch_number"], e["accept_rate"])
        for d, e in m["datasets"].items()
    } == {
        "povid": (1, 0, 1, 1.0),
        "reasoning_tasks": (2, 2, 1, 0.5),
        "rlaif-v": (2, 1, 0, 0.6667),
        "rlhf-v": (1, 2, 1, 0.3333),
        "vlfeedback": (4, 3, 1, 0.5714),
        "wildvision-battle": (2, 1, 0, 0.6667),
    }
    assert ev.counts == {"used": 21, "dropped_undecided": 4, "not_evaluated": 3}
    notes = " ".join(ev.notes)
    assert "4 undecided" in notes and "3 items without a verdict" in notes
    assert "Mathverse_9, RLAIFV_3, VLFeedback_2, povid_1" in notes


def test_vl_rewardbench_strict(tmp_path):
    bm, data, outputs, order = load(tmp_path, "vl-rewardbench", D.write_vlrb)
    m = metrics(bm, data, outputs, order, "strict").metrics
    # 28 items: 12 agree + 4 undecided x 1/2 = 14 -> 50; general 6 agree + 1/2 of 12; hallucination 4 + 2 x 1/2
    # of 10; reasoning 2 + 1/2 of 6; macro = their mean; no 1e-6 anywhere.
    assert m["Overall Accuracy"] == pytest.approx(50.0)
    assert m["general"] == pytest.approx(100 * 6.5 / 12)
    assert m["hallucination"] == pytest.approx(50.0)
    assert m["reasoning"] == pytest.approx(100 * 2.5 / 6)
    assert m["Macro Average Acc"] == pytest.approx((100 * 6.5 / 12 + 50 + 100 * 2.5 / 6) / 3)


def test_vl_rewardbench_parquet_with_embedded_images(tmp_path):
    bm = get_judge_benchmark("vl-rewardbench")
    path, outs = D.write_vlrb_parquet(tmp_path)
    from judge.benchmarks.judging import write_embedded

    jsonl = bm.read(tmp_path / "jsonl" / "vl_rewardbench.jsonl")
    written = bm.read(path)
    assert not any(Path(it.question[0]["image"]).exists() for it in written.items)  # reading writes nothing
    assert write_embedded(written.items[:3], tmp_path / "images") == 3
    assert write_embedded(written.items, tmp_path / "images") == len(written.items) - 3
    for a, c in zip(jsonl.items, written.items, strict=True):
        assert a.id == c.id and a.responses == c.responses and a.info == c.info
        assert Path(c.question[0]["image"]).read_bytes() == Path(a.question[0]["image"]).read_bytes()
    outputs, order = read_judge_outputs(D.write_outputs(tmp_path / "o.jsonl", outs), written)
    assert (
        bm.evaluate(written, outputs, order, "official").headline
        == bm.evaluate(jsonl, outputs, order, "official").headline
    )


def test_vl_rewardbench_prefix_rules():
    from judge.benchmarks.vl_rewardbench import dataset_of

    assert dataset_of("RLAIF-V_3") == "rlaif-v" and dataset_of("RLHF-V-x") == "rlhf-v"
    assert dataset_of("hallucination_pair-0") == "povid" and dataset_of("povid_1") == "vlfeedback"
    assert dataset_of("mmmu-pro_0") == "reasoning_tasks" and dataset_of("Mathverse_1") == "vlfeedback"
    assert dataset_of("wildvision") == "wildvision-battle" and dataset_of("x") == "vlfeedback"


def test_vl_rewardbench_group_without_items_is_null_not_a_crash(tmp_path):
    bm, data, outputs, order = load(tmp_path, "vl-rewardbench", D.write_vlrb)
    keep = {k: v for k, v in outputs.items() if not k.startswith(("mathverse", "mmmu"))}
    ev = bm.evaluate(data, keep, [k for k in order if k in keep], "official")
    assert ev.metrics["reasoning"] is None and ev.metrics["Macro Average Acc"] is None
    assert ev.metrics["Overall Accuracy"] is not None
    assert any("group reasoning" in n and "ZeroDivisionError" in n for n in ev.notes)


# ----------------------------------------------------------------------------- Multimodal RewardBench


def test_multimodal_rewardbench_official_equals_get_accuracy(tmp_path):
    bm, data, outputs, order = load(tmp_path, "multimodal-rewardbench", D.write_mmrb)
    ev = metrics(bm, data, outputs, order, "official")
    expected = {  # 2_get_accuracy.py's lines "acc <group>: correct / n = ratio", in its order
        "all": (10, 18),
        "vqa": (2, 3),
        "safety/toxicity": (0, 1),
        "safety/bias": (2, 2),
        "reasoning/coding": (1, 2),
        "reasoning/math": (1, 2),
        "knowledge": (2, 3),
        "open_generation/preference_task": (1, 3),
        "open_generation/correctness_task": (1, 2),
    }
    groups = [k for k in ev.metrics if k != "coin_flips"]
    assert groups == list(expected)
    for g, (c, n) in expected.items():
        assert (ev.metrics[g]["correct"], ev.metrics[g]["total"]) == (c, n)
        assert ev.metrics[g]["accuracy"] == c / n
    assert ev.metrics["all"]["accuracy"] == 0.5555555555555556
    # The flips random.seed(123) gives the undecided lines, in the outputs file's order (reversed dataset).
    assert ev.metrics["coin_flips"] == {
        "MMBench_20": "A",
        "SEED-Bench_15": "A",
        "pairs_10": "A",
        "mathvista_17": "A",
        "mmmu-v_6": "B",
        "visitbench_18": "A",
        "visitbench_4": "B",
    }
    assert ev.counts == {"used": 18, "coin_flips": 7, "not_evaluated": 2}


def test_multimodal_rewardbench_flips_follow_the_outputs_order(tmp_path):
    bm, data, outputs, order = load(tmp_path, "multimodal-rewardbench", D.write_mmrb)
    a = bm.evaluate(data, outputs, order, "official").metrics["coin_flips"]
    b = bm.evaluate(data, outputs, order[::-1], "official").metrics["coin_flips"]
    assert set(a) == set(b) and a != b  # the same lines, other draws: the script's order matters


def test_multimodal_rewardbench_strict(tmp_path):
    bm, data, outputs, order = load(tmp_path, "multimodal-rewardbench", D.write_mmrb)
    m = metrics(bm, data, outputs, order, "strict").metrics
    # 20 items: 7 decided and right + 7 undecided x 1/2 = 10.5; missing ones count 0.
    assert (m["all"]["credit"], m["all"]["total"], m["all"]["accuracy"]) == (10.5, 20, 0.525)
    assert m["vqa"]["accuracy"] == pytest.approx(2 / 4)  # 1 right, 2 undecided, 1 missing
    assert m["reasoning/math"]["accuracy"] == pytest.approx(1.5 / 2)


# ----------------------------------------------------------------------------- MLLM-as-a-Judge


def test_mllm_score_official_equals_calculate_metrics_and_analysis(tmp_path):
    bm, data, outputs, order = load(tmp_path, "mllm-score", D.write_mllm_score)
    assert data.mode == "score" and len(data.items) == 26
    ev = metrics(bm, data, outputs, order, "official")
    m = ev.metrics
    expected = {  # calculate_pearson_metrics: (correlation, p_value, num_samples)
        "coco": (0.9494140347984432, 0.013553636202182839, 5),
        "textVQA": (0.826033187630902, 0.38118465661668266, 3),
        "Concept Caption": (0.70926494947865, 0.29073505052134996, 4),
        "diffusiondb": (0.9819805060619655, 0.12103771832367739, 3),
        "mathvista": (0.4923622763214073, 0.5076377236785927, 4),
        "WIT": (0.8660254037844386, 0.33333333333333337, 3),
        "LLaVA": (None, None, 3),  # nan, nan: constant predictions
        "overall": (0.6224683335397059, 0.0008911332894324436, 25),
    }
    assert [k for k in m if k != "analysis"] == list(expected)
    for k, (r, p, n) in expected.items():
        got = m[k]
        assert got["num_samples"] == n
        assert got["correlation"] == (None if r is None else pytest.approx(r, abs=EPS)), k
        assert got["p_value"] == (None if p is None else pytest.approx(p, abs=EPS)), k
    analysis = {  # Score_analysis.ipynb (int() of both scores, ranges of score_id, sum / 10)
        "coco": (0.9716254134469434, 6),
        "Concept Caption": (0.31622776601683794, 4),
        "diffusiondb": (0.9819805060619655, 3),
        "mathvista": (0.8386278693775345, 3),
        "textVQA": (1.0, 2),
        "WIT": (0.9449111825230679, 3),
    }
    assert [k for k in m["analysis"] if k != "mean_over_10"] == list(analysis)
    for k, (r, n) in analysis.items():
        assert (m["analysis"][k]["correlation"], m["analysis"][k]["num_samples"]) == (
            pytest.approx(r, abs=EPS),
            n,
        )
    assert m["analysis"]["mean_over_10"] == pytest.approx(0.5053372737426349, abs=EPS)
    assert ev.counts == {"used": 25, "not_evaluated": 1, "no_score_markers_used": 1}


def test_mllm_score_strict(tmp_path):
    bm, data, outputs, order = load(tmp_path, "mllm-score", D.write_mllm_score)
    ev = metrics(bm, data, outputs, order, "strict")
    # The -1 row is no score here: mathvista on its 3 real scores; the mean over the 6 defined datasets.
    from scipy.stats import pearsonr

    assert ev.metrics["mathvista"]["correlation"] == pytest.approx(pearsonr([1.5, 4.4, 3.3], [1, 4, 5])[0])
    assert ev.metrics["overall"]["num_samples"] == 24
    per = [
        v["correlation"]
        for k, v in ev.metrics.items()
        if k not in ("overall", "dataset_mean") and v["correlation"] is not None
    ]
    assert len(per) == 6 and ev.metrics["dataset_mean"] == pytest.approx(sum(per) / 6)
    assert ev.counts["without_score"] == 2


def test_mllm_pair_official_equals_calculate_metrics_and_analysis(tmp_path):
    bm, data, outputs, order = load(tmp_path, "mllm-pair", D.write_mllm_pair)
    m = metrics(bm, data, outputs, order, "official").metrics
    without = {
        "coco": (2 / 3, 3),
        "Concept Caption": (0.5, 4),
        "mathvista": (1.0, 2),
        "LLaVA": (1.0, 1),
        "WIT": (0.5, 2),
        "overall": (2 / 3, 12),
    }
    with_ties = {
        "coco": (0.5, 6),
        "Concept Caption": (0.5, 4),
        "mathvista": (2 / 3, 3),
        "LLaVA": (1 / 3, 3),
        "WIT": (0.5, 2),
        "overall": (0.5, 18),
    }
    for got, want in ((m["without_ties"], without), (m["with_ties"], with_ties)):
        assert list(got) == list(want)
        for k, (acc, n) in want.items():
            assert (got[k]["accuracy"], got[k]["num_samples"]) == (pytest.approx(acc, abs=EPS), n), k
    analysis = {  # pair_analysis.ipynb: accuracy, macro recall, precision, F1 (scikit-learn), per pair_id range
        "coco": (0.5, 0.5, 0.611111111111111, 0.5222222222222223, 6),
        "Concept Caption": (0.6666666666666666, 0.75, 0.75, 0.6666666666666666, 3),
        "mathvista": (0.6666666666666666, 0.6666666666666666, 0.5, 0.5555555555555555, 3),
        "LLaVA": (1 / 3, 1 / 3, 1 / 3, 1 / 3, 3),
    }
    assert [k for k in m["analysis"] if k != "mean_accuracy_over_10"] == list(analysis)
    for k, (acc, rec, prec, f1, n) in analysis.items():
        got = m["analysis"][k]
        assert [got["accuracy"], got["recall"], got["precision"], got["f1"]] == pytest.approx(
            [acc, rec, prec, f1], abs=EPS
        )
        assert got["num_samples"] == n
    assert m["analysis"]["mean_accuracy_over_10"] == pytest.approx(0.21666666666666665, abs=EPS)


def test_mllm_pair_macro_scores_equal_scikit_learn():
    import warnings

    from sklearn.metrics import f1_score, precision_score, recall_score

    from judge.benchmarks.mllm_judge_pairs import macro_scores

    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(1, 12))
        t, p = rng.integers(1, 4, n).tolist(), rng.integers(1, 4, n).tolist()
        got = macro_scores(t, p)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn warns where it sets an undefined precision to 0
            want = [f(t, p, average="macro") for f in (recall_score, precision_score, f1_score)]
        assert [got["recall"], got["precision"], got["f1"]] == pytest.approx(want, abs=1e-12)
        assert got["accuracy"] == np.mean(np.array(t) == np.array(p))


def test_mllm_pair_strict(tmp_path):
    bm, data, outputs, order = load(tmp_path, "mllm-pair", D.write_mllm_pair)
    m = metrics(bm, data, outputs, order, "strict").metrics
    # The -1 row is left out (18 rows). Without ties: 14 rows with human A/B; right: pair ids 5, 29, 301, 302,
    # 1200, 1203, 3001, 5000 = 8, plus 22 and 3000 undecided x 1/2; wrong: 8, 300, 5001, and 1202 (missing):
    # 9 / 14.
    assert m["without_ties"]["overall"] == {"accuracy": pytest.approx(9 / 14), "num_samples": 14}
    assert m["with_ties"]["overall"]["num_samples"] == 18


def test_mllm_batch_official_equals_calculate_metrics(tmp_path):
    bm, data, outputs, order = load(tmp_path, "mllm-batch", D.write_mllm_batch)
    m = metrics(bm, data, outputs, order, "official").metrics
    assert m == {
        "coco": {"average_distance": 2.0, "num_samples": 3},
        "Concept Caption": {"average_distance": 2.5, "num_samples": 2},
        "mathvista": {"average_distance": 2.5, "num_samples": 2},
        "overall": {"average_distance": pytest.approx(2.2857142857142856, abs=EPS), "num_samples": 7},
    }
    s = metrics(bm, data, outputs, order, "strict").metrics
    # The missing row (DCBA, 4 letters) at distance 4: Concept Caption (3 + 4 + 2) / 3; overall (16 + 4) / 8.
    assert s["Concept Caption"]["average_distance"] == pytest.approx(3.0)
    assert s["overall"]["average_distance"] == pytest.approx(2.5)


def test_levenshtein_is_the_edit_distance():
    from judge.benchmarks.mllm_judge_pairs import levenshtein

    cases = {
        ("CDAB", "CDAB"): 0,
        ("ACBD", "DBCA"): 4,
        ("CBA", "BCA"): 2,
        ("", "ABCD"): 4,
        ("ABCD", "ABC"): 1,
        ("kitten", "sitting"): 3,
    }
    for (a, b), d in cases.items():
        assert levenshtein(a, b) == d == levenshtein(b, a)


def test_mllm_pearson_of_fewer_than_two_rows_is_null_with_a_note(tmp_path):
    bm, data, outputs, order = load(tmp_path, "mllm-score", D.write_mllm_score)
    keep = {k: v for k, v in outputs.items() if k != "1801" and k != "1800"}  # textVQA keeps one row (250)
    ev = bm.evaluate(data, keep, [k for k in order if k in keep], "official")
    assert ev.metrics["textVQA"] == {"correlation": None, "p_value": None, "num_samples": 1}
    assert any("textVQA" in n and "raises ValueError" in n for n in ev.notes)


# ----------------------------------------------------------------------------- readers and outputs


def test_readers_refuse_bad_rows_naming_file_line_and_field(tmp_path):
    path, _ = D.write_vlrb(tmp_path / "v")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[1]["human_ranking"] = [0, 0]
    rows[2]["id"] = rows[0]["id"]
    rows[3]["image_path"] = "../../outside.png"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InvalidRecordsError) as e:
        get_judge_benchmark("vl-rewardbench").read(path)
    text = str(e.value)
    assert f"{path}:2" in text and "human_ranking" in text
    assert f"{path}:3" in text and "duplicate id 'vlfeedback_0' (first at line 1)" in text
    assert f"{path}:4" in text and "leaves its root" in text


def test_mllm_mode_is_read_from_the_file_and_images_from_the_folder_above(tmp_path):
    bm = get_judge_benchmark("MLLM-as-a-Judge")
    for writer, mode in (
        (D.write_mllm_score, "score"),
        (D.write_mllm_pair, "pair"),
        (D.write_mllm_batch, "batch"),
    ):
        path, _ = writer(tmp_path / mode)
        data = bm.read(path)
        assert data.mode == mode
        image = data.items[0].question[0]["image"]
        assert Path(image).is_file() and Path(image).parent == (tmp_path / mode / "image").resolve()
    other = tmp_path / "x.jsonl"
    other.write_text('{"foo": 1}\n')
    with pytest.raises(Exception, match="not an MLLM-as-a-Judge file"):
        bm.read(other)


@pytest.mark.parametrize(
    "line, message",
    [
        ({"id": "nope", "p_first_better": 0.3}, "'nope' is not an item"),
        ({"id": "vlfeedback_0", "p_first_better": 1.5}, "outside [0.0, 1.0]"),
        ({"id": "vlfeedback_0", "score": 3}, "needs p_first_better"),
        ({"id": "vlfeedback_0", "score_a": 3}, "give both score_a and score_b"),
        ({"p_first_better": 0.3}, "field 'id': is missing"),
    ],
)
def test_outputs_file_errors_name_the_line(tmp_path, line, message):
    path, _ = D.write_vlrb(tmp_path / "v")
    data = get_judge_benchmark("vl-rewardbench").read(path)
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps({"id": "vlfeedback_1", "p_first_better": 0.2}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(InvalidRecordsError) as e:
        read_judge_outputs(out, data)
    assert message in str(e.value) and f"{out}:2" in str(e.value) and len(str(e.value).splitlines()) == 1


def test_outputs_given_twice_and_null_verdicts(tmp_path):
    path, _ = D.write_mllm_batch(tmp_path / "b")
    data = get_judge_benchmark("mllm-as-a-judge").read(path)
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": 200, "ranking": "ABCD"}\n{"id": "200", "ranking": "ABDC"}\n')
    with pytest.raises(InvalidRecordsError, match="given twice"):
        read_judge_outputs(out, data)
    out.write_text(
        '{"id": 200, "ranking": null, "reason": "image: missing"}\n{"id": 201, "ranking": "abcd"}\n'
    )
    with pytest.raises(InvalidRecordsError, match="capital letters"):
        read_judge_outputs(out, data)
    out.write_text('{"id": 200, "ranking": null, "reason": "image: missing"}\n')
    outputs, order = read_judge_outputs(out, data)
    assert not outputs["200"].has_verdict and order == ["200"]


# ----------------------------------------------------------------------------- intervals and the command


def test_intervals_are_seeded_and_cover_the_point(tmp_path):
    bm, data, outputs, order = load(tmp_path, "multimodal-rewardbench", D.write_mmrb)
    a = evaluate(bm, data, outputs, order, resamples=200, seed=3)
    b = evaluate(bm, data, outputs, order, resamples=200, seed=3)
    c = evaluate(bm, data, outputs, order, resamples=200, seed=4)
    assert a == b and a["official"]["intervals"] != c["official"]["intervals"]
    for mode in ("official", "strict"):
        lo, hi = a[mode]["intervals"]["all"]
        assert lo <= a[mode]["headline"]["all"] <= hi and lo < hi


@pytest.mark.parametrize("name, writer, bench", [
    ("vl", D.write_vlrb, "vl-rewardbench"),
    ("mm", D.write_mmrb, "multimodal-rewardbench"),
    ("score", D.write_mllm_score, "mllm-as-a-judge"),
    ("pair", D.write_mllm_pair, "mllm-as-a-judge"),
    ("batch", D.write_mllm_batch, "mllm-as-a-judge"),
])  # fmt: skip
def test_judge_bench_command_with_outputs_writes_the_official_names(tmp_path, name, writer, bench, capsys):
    from judge.cli.bench import main

    path, outs = writer(tmp_path / name)
    outputs = D.write_outputs(tmp_path / "outputs.jsonl", outs)
    out = tmp_path / "out"
    assert (
        main([bench, str(path), "--judge-outputs", str(outputs), "--out", str(out), "--bootstrap", "50"]) == 0
    )
    doc = json.loads((out / "bench.json").read_text())
    bm = get_judge_benchmark(bench)
    assert doc["official_code"][0]["commit"] == bm.official.commit
    assert doc["judge_outputs"]["path"] == str(outputs)
    data = bm.read(path)
    assert doc["items"]["total"] == len(data.items) and doc["items"]["scored"] == len(outs)
    direct = evaluate(bm, data, *read_judge_outputs(outputs, data), resamples=50, seed=0)
    assert doc["official"]["metrics"] == json.loads(json.dumps(direct["official"]["metrics"]))
    assert doc["strict"]["headline"] == json.loads(json.dumps(direct["strict"]["headline"]))
    printed = capsys.readouterr().out
    assert bm.title in printed and "official" in printed and (out / "bench.md").is_file()
