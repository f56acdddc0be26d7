"""judge-report end to end on the small demo set, with fake score files of known properties."""

import json
import subprocess
import sys

import numpy as np
import pytest

from judge.cli.report import main
from judge.core.errors import JudgeError
from judge.core.io import load_annotations
from judge.data.aggregate import aggregate_record
from judge.eval.report_data import load_report


@pytest.fixture(scope="module")
def demo_records(small_demo):
    return load_annotations(small_demo, check_images=False).records


def _dist(mu: float) -> list[float]:
    p = np.exp(-0.5 * ((np.arange(7) - mu) / 0.8) ** 2)
    return (p / p.sum()).tolist()


def write_scores(
    path, records, *, noise: float, seed: int, criteria=True, drop=(), null=(), extra_ids=(), metric="judge"
):
    """A fake judge: the human mean plus noise, clipped to 0..6; ``drop`` ids missing, ``null`` ids unscorable."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in records:
        for crit, a in aggregate_record(r).items():
            if not criteria and crit != "overall":
                continue
            base = dict(
                id=r.id,
                benchmark="demo",
                task=r.task,
                model=r.model,
                metric=metric,
                criterion=crit if criteria else None,
            )
            if r.id in drop:
                continue
            if r.id in null:
                rows.append({**base, "score": None, "status": "unscorable", "reason": "image missing"})
                continue
            mu = float(np.clip(a.value + rng.normal(0, noise), 0, 6))
            row = {**base, "score": mu}
            if metric == "judge":
                row.update(score=float(np.dot(_dist(mu), np.arange(7))), distribution=_dist(mu))
            rows.append(row)
    for i in extra_ids:
        rows.append(dict(id=i, benchmark="demo", task="SA", metric=metric, criterion="overall", score=3.0))
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    return path


def test_end_to_end_report(tmp_path, small_demo, demo_records, capsys):
    ids = [r.id for r in demo_records]
    good = write_scores(
        tmp_path / "good.jsonl", demo_records, noise=0.4, seed=1, extra_ids=["nobody-1", "nobody-2"]
    )
    bad = write_scores(tmp_path / "bad.jsonl", demo_records, noise=3.0, seed=2, drop=ids[:2], null=ids[2:5])
    out = tmp_path / "report"
    code = main(
        [
            "--human",
            str(small_demo),
            "--scores",
            f"judge={good}",
            "--scores",
            f"untrained={bad}",
            "--clip-model",
            "tiny",
            "--bootstrap",
            "200",
            "--out",
            str(out),
            "--note",
            "A demonstration on synthetic data.",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "Main table" in printed and "humans (leave one annotator out)" in printed and str(out) in printed
    for name in (
        "report.md",
        "report.json",
        "report.html",
        "scatter.png",
        "criteria.png",
        "confusion.png",
        "calibration.png",
        "bias.png",
        "clipscore.jsonl",
    ):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name

    data = json.loads((out / "report.json").read_text())
    sc = {s["name"]: s for s in data["scorers"]}
    assert list(sc) == ["judge", "untrained", "clipscore", "clipscore:refclipscore"]
    n_items = sum(len(aggregate_record(r)) for r in demo_records)  # 36 responses x 7
    assert (sc["judge"]["coverage"]["expected"], sc["judge"]["coverage"]["scored"]) == (n_items, n_items)
    assert sc["judge"]["coverage"]["unknown_ids"] == 2
    assert sc["judge"]["coverage"]["unknown_id_examples"] == ["nobody-1", "nobody-2"]
    cov = sc["untrained"]["coverage"]
    assert (cov["missing"], cov["unscorable"], cov["scored"]) == (2 * 7, 3 * 7, n_items - 5 * 7)
    assert sc["judge"]["on_scale"] and not sc["clipscore"]["on_scale"]
    assert sc["clipscore"]["coverage"]["criteria_scored"] == ["overall"]
    assert sc["clipscore"]["coverage"]["expected"] == len(demo_records)
    assert any("nobody-1" in w for w in data["warnings"])  # unknown ids are warned about, with examples
    ref = sc["clipscore:refclipscore"]["coverage"]  # RefCLIPScore: the family with reference answers only
    assert ref["families_scored"] == ["MSR"] and ref["expected"] == sum(r.task == "MSR" for r in demo_records)

    main_slice = data["slices"][0]
    assert main_slice["key"] == data["main"] == "criterion:overall"
    j, u, c = (main_slice["scorers"][n] for n in ("judge", "untrained", "clipscore"))
    assert j["pearson"]["value"] > 0.8 > u["pearson"]["value"]
    assert j["mae"] is not None and c["mae"] is None and c["qwk"] is None  # CLIPScore: not on the scale
    assert c["pearson"]["ci"] is not None and c["pairwise"]["n_pairs"] > 0
    assert j["small_n"] and any("n = 36" in w for w in data["warnings"])  # 12 questions: flagged
    kinds = {s["kind"] for s in data["slices"]}
    assert kinds == {"criterion", "family", "model", "pooled"}
    pair = next(
        p for p in data["paired"] if (p["a"], p["b"], p["slice"]) == ("judge", "untrained", data["main"])
    )
    assert pair["pearson"]["diff"] > 0 and pair["pearson"]["p"] <= 0.05
    # report.json reads back into the typed report data, unchanged.
    typed = load_report(out / "report.json")
    assert typed.to_json() == data and typed.main_slice.key == "criterion:overall"
    assert typed.main_slice.scorers["judge"].stat("pearson").value == j["pearson"]["value"]
    assert typed.slice(pair["slice"]).title == main_slice["title"]

    md = (out / "report.md").read_text()
    assert md.startswith("# Judge agreement") and "A demonstration on synthetic data." in md.split("\n## ")[0]
    assert "](scatter.png)" in md and "†" in md
    html = (out / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 5
    assert "<script" not in html and "<link" not in html and 'src="http' not in html


def test_report_without_clip_and_per_response_scores(tmp_path, small_demo, demo_records):
    overall_only = write_scores(
        tmp_path / "o.jsonl", demo_records, noise=0.5, seed=3, criteria=False, metric="gpt-judge"
    )
    out = tmp_path / "r"
    assert (
        main(
            [
                "--human",
                str(small_demo),
                "--scores",
                f"gpt={overall_only}",
                "--bootstrap",
                "50",
                "--out",
                str(out),
                "--on-scale",
                "gpt",
                "--criterion",
                "overall",
            ]
        )
        == 0
    )
    data = json.loads((out / "report.json").read_text())
    s = data["scorers"][0]
    assert s["on_scale"] and s["coverage"]["expected"] == len(demo_records)
    assert [x["key"] for x in data["slices"]][0] == "criterion:overall"
    assert data["slices"][0]["scorers"]["gpt"]["qwk"] is not None
    assert any("bootstrap" in w for w in data["warnings"])  # 50 resamples: warned


def test_wrong_shape_is_an_error_with_file_line_and_field(tmp_path, small_demo, demo_records, capsys):
    f = write_scores(tmp_path / "s.jsonl", demo_records[:3], noise=0.5, seed=0)
    lines = f.read_text().splitlines()
    row = json.loads(lines[2])
    row["score"] = "high"
    lines[2] = json.dumps(row)
    row = json.loads(lines[4])
    del row["metric"]
    lines[4] = json.dumps(row)
    f.write_text("\n".join(lines) + "\n")
    assert main(["--human", str(small_demo), "--scores", f"judge={f}", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: ")
        and f"{f}:3" in err
        and "'score'" in err
        and f"{f}:5" in err
        and "'metric'" in err
    )
    assert not (tmp_path / "r" / "report.json").exists()

    # an annotation file given as a score file
    assert (
        main(["--human", str(small_demo), "--scores", f"x={small_demo}", "--out", str(tmp_path / "r")]) == 2
    )
    assert "annotation record" in capsys.readouterr().err


def test_scale_that_does_not_match_the_rubric(tmp_path, small_demo, demo_records, capsys):
    f = write_scores(tmp_path / "s.jsonl", demo_records[:6], noise=0.5, seed=0)
    rows = [json.loads(x) for x in f.read_text().splitlines()]
    rows[3]["score"] = 9.5
    rows[3]["distribution"] = None
    f.write_text("".join(json.dumps(x) + "\n" for x in rows))
    assert main(["--human", str(small_demo), "--scores", f"judge={f}", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{f}:4" in err and "outside the rubric scale 0..6" in err and "--rubric" in err


def test_single_items_and_bad_arguments(tmp_path, small_demo, demo_records, capsys):
    one = tmp_path / "one.jsonl"
    one.write_text(small_demo.read_text().splitlines()[0] + "\n")
    f = write_scores(tmp_path / "s.jsonl", demo_records[:1], noise=0.5, seed=0)
    assert main(["--human", str(one), "--scores", f"judge={f}", "--out", str(tmp_path / "r")]) == 2
    assert "at least 2" in capsys.readouterr().err

    # a scorer that matches a single response: a report, with a warning that says what to do
    single = write_scores(tmp_path / "single.jsonl", demo_records[:1], noise=0.5, seed=0, criteria=False)
    good = write_scores(tmp_path / "good.jsonl", demo_records, noise=0.5, seed=0)
    out = tmp_path / "r2"
    assert (
        main(
            [
                "--human",
                str(small_demo),
                "--scores",
                f"judge={good}",
                "--scores",
                f"one={single}",
                "--bootstrap",
                "50",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    data = json.loads((out / "report.json").read_text())
    assert any("one: one scored only 1 item(s)" in w and "score more items" in w for w in data["warnings"])
    m = data["slices"][0]["scorers"]["one"]
    assert m["n"] == 1 and m["pearson"]["value"] is None and m["pearson"]["ci"] is None

    nothing = write_scores(tmp_path / "n.jsonl", [], noise=0, seed=0, extra_ids=["zz"])
    assert main(["--human", str(small_demo), "--scores", f"judge={nothing}", "--out", str(out)]) == 2
    assert "no score record matches a human item" in capsys.readouterr().err
    assert main(["--human", str(small_demo), "--out", str(out)]) == 2
    assert "--scores" in capsys.readouterr().err
    assert main(["--human", str(small_demo), "--scores", f"a={good}", "--scores", f"a={good}"]) == 2
    assert "used twice" in capsys.readouterr().err
    assert main(["--human", str(small_demo), "--scores", f"a={tmp_path / 'none.jsonl'}"]) == 2
    assert "file not found" in capsys.readouterr().err


def test_module_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "judge.cli.report", "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "--clip-model" in proc.stdout and "NAME=FILE" in proc.stdout


def test_human_files_from_several_files_must_not_overlap(small_demo, rubric):
    from judge.eval.report import load_human

    with pytest.raises(JudgeError, match="also in"):
        load_human([small_demo, small_demo], rubric)


def test_a_damaged_report_json_names_the_field(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"title": "t", "main": 3}))
    with pytest.raises(JudgeError) as e:
        load_report(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: not a report.json:") and "\n  main: Input should be a valid string" in msg
    assert "\n  created: required, missing" in msg
