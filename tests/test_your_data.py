"""The user's own path, run as docs/your-data.md writes it, in a folder outside the checkout: predictions of
three models sharing question ids -> judge-score -> judge-data sample -> a label file in each of the two styles
(judge.core.identity) -> judge-report and the PPI leaderboard (judge-score --labels) and judge-view, every label
matched. Also the identity rule itself, and a run config's missing path refused before any model loads."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from judge.cli import data_main
from judge.cli.report import main as report_main
from judge.cli.score import main as score_main
from judge.core.errors import JudgeError
from judge.core.io import InvalidRecordsError

pytestmark = pytest.mark.usefixtures("one_thread")

MODELS = ["model-a", "model-b", "model-c"]
REPO = Path(__file__).resolve().parents[1]


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _predictions(n_questions: int = 6) -> list[dict]:
    """Every model's response to each question, the question's id shared across models (as the README's)."""
    return [
        {
            "id": f"q{q}",
            "benchmark": "mmie",
            "task": "SA",
            "model": m,
            "question": [{"type": "text", "text": f"Continue story {q}: a red circle sat in the meadow."}],
            "response": [{"type": "text", "text": f"{m}: the circle rolled away {q + k} times."}],
        }
        for q in range(n_questions)
        for k, m in enumerate(MODELS)
    ]


def _labels(sample: list[dict], style: str) -> list[dict]:
    """The drawn responses with a human score: prediction style (the prediction's id and model) or own ids
    (a unique id, question_id = the prediction's id, model). A label record has no `benchmark`."""
    out = []
    for i, r in enumerate(sample):
        lab = {k: v for k, v in r.items() if k != "benchmark"}
        lab["scores"] = {"overall": (i * 5) % 7}
        if style == "own":
            lab.update(id=f"label-{i:03d}", question_id=r["id"])
        out.append(lab)
    return out


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    """Predictions scored once with the tiny judge, and the sample to label, in a folder outside the checkout."""
    folder = tmp_path_factory.mktemp("my-project")
    assert REPO not in folder.parents
    _write(folder / "predictions.jsonl", _predictions())
    return folder


@pytest.mark.parametrize("style", ["prediction", "own"])
def test_the_users_path_outside_the_checkout(workflow, style, monkeypatch, capsys):
    monkeypatch.chdir(workflow)
    score = ["predictions.jsonl", "--judge", "tiny", "--rubric", "mmie", "--criteria", "overall",
             "--out", "scored", "--no-progress"]  # fmt: skip
    assert score_main(score) == 0, capsys.readouterr().err
    # judge-data sample draws whole questions: every model's response to each drawn question.
    assert data_main(["sample", "predictions.jsonl", "--fraction", "0.5", "--by", "question",
                      "--out", "to_label.jsonl"]) == 0  # fmt: skip
    sample = [json.loads(x) for x in Path("to_label.jsonl").read_text().splitlines()]
    drawn = {r["id"] for r in sample}
    assert len(drawn) == 3 and len(sample) == 9 and {r["model"] for r in sample} == set(MODELS)
    labels = _write(Path(f"labels-{style}.jsonl"), _labels(sample, style))
    capsys.readouterr()

    # judge-report: every label matched, the agreement numbers exist.
    assert report_main(["--human", str(labels), "--scores", "judge=scored/scores.jsonl",
                        "--out", f"report-{style}", "--bootstrap", "200", "--ppi-draws", "200"]) == 0, capsys.readouterr().err  # fmt: skip
    printed = capsys.readouterr().out
    assert "judge: 9 of 9 labelled responses matched a record" in printed
    report = json.loads(Path(f"report-{style}/report.json").read_text())
    (judge,) = report["scorers"]
    assert judge["coverage"]["labels"] == {
        "labels": 9,
        "matched": 9,
        "unmatched": 0,
        "unmatched_examples": [],
    }
    assert judge["coverage"]["scored"] == 9 and judge["coverage"]["missing"] == 0
    main = report["slices"][0]["scorers"]["judge"]
    assert main["n"] == 9 and main["spearman"]["value"] is not None

    # The PPI leaderboard: judge-score --labels on the same run (its scores are kept, not recomputed).
    assert score_main([*score, "--labels", str(labels), "--min-labels", "2"]) == 0, capsys.readouterr().err
    assert "9 of 9 labelled responses matched a judge score" in capsys.readouterr().out
    summary = json.loads(Path("scored/summary.json").read_text())
    lb = summary["leaderboard"]
    assert (lb["labels"]["matched"], lb["labels"]["unmatched"]) == (9, 0)
    board = next(b for b in lb["boards"] if b["group"] == "all")
    for m in board["models"]:
        assert m["human"]["n_labelled"] == 3 and m["human"]["mean"] is not None, m
        assert m["ppi"]["mean"] is not None and m["ppi"]["ci"] is not None, m

    # judge-view shows each labelled item's human scores.
    from judge.view.config import ViewConfig
    from judge.view.load import load_view

    view = load_view(ViewConfig(run="scored", human=[str(labels)]))
    assert view.labels == {"labels": 9, "matched": 9, "unmatched": 0, "unmatched_examples": []}
    labelled = {(i.model, i.id) for i in view.items if i.human_mean}
    assert labelled == {(r["model"], r["id"]) for r in sample}


# ----------------------------------------------------------------------------- the identity rule


def test_a_label_file_in_prediction_style_may_repeat_an_id_across_models_not_within_one(tmp_path, rubric):
    from judge.core.io import load_annotations

    sample = [r for r in _predictions(2)]
    ok = _write(tmp_path / "ok.jsonl", _labels(sample, "prediction"))
    assert len(load_annotations(ok, rubric=rubric, check_images=False).records) == 6
    twice = _labels(sample, "prediction")
    twice.append(dict(twice[0]))  # model-a's q0 labelled again
    bad = _write(tmp_path / "bad.jsonl", twice)
    with pytest.raises(InvalidRecordsError, match="duplicate id 'q0' for model 'model-a'"):
        load_annotations(bad, rubric=rubric, check_images=False)


def test_labels_match_scores_by_model_and_id_or_question_id_and_say_which_did_not(tmp_path, rubric):
    from judge.core.io import load_annotations
    from judge.eval.matching import human_items, load_score_file, match_scorer

    preds = _predictions(3)
    scores = _write(
        tmp_path / "scores.jsonl",
        [
            {
                "id": p["id"],
                "benchmark": "mmie",
                "task": "SA",
                "model": p["model"],
                "metric": "judge",
                "criterion": "overall",
                "score": 1.0 + i % 5,
            }
            for i, p in enumerate(preds)
        ],  # fmt: skip
    )
    sf = load_score_file(scores, "judge")
    for style in ("prediction", "own"):
        labels = _labels(preds[:4], style)
        labels.append({**labels[0], "id": "stray", "question_id": "nowhere", "model": "model-z"})
        path = _write(tmp_path / f"{style}.jsonl", labels)
        items = human_items(load_annotations(path, rubric=rubric, check_images=False).records)
        sc = match_scorer(sf, items, rubric)
        assert sc.coverage["labels"] == {
            "labels": 5, "matched": 4, "unmatched": 1, "unmatched_examples": ["model-z/stray (question nowhere)"]
        }  # fmt: skip
        got = {(m.item.model, m.record.id): m.score for m in sc.matches}
        want = {(p["model"], p["id"]): 1.0 + i % 5 for i, p in enumerate(preds[:4])}
        assert got == want
        assert any("4 of 5 labelled responses matched" in w for w in sc.warnings)


def test_scores_of_criteria_the_humans_did_not_label_are_said_to_be_left_out_and_how_to_avoid_them(
    tmp_path, rubric, capsys
):
    """Humans labelled overall only; the judge scored overall and a rubric criterion (judge-score's default):
    the warning says those records are left out and names judge-score --criteria, not a rubric problem. A
    criterion the rubric does not have keeps its own rubric-mismatch warning."""
    from judge.core.io import load_annotations
    from judge.eval.matching import human_items, load_score_file, match_scorer

    preds = _predictions(3)
    rows = [
        {"id": p["id"], "benchmark": "mmie", "task": "SA", "model": p["model"], "metric": "judge",
         "criterion": crit, "score": 1.0 + i % 5}
        for i, p in enumerate(preds)
        for crit in ("overall", "text_quality")
    ]  # fmt: skip
    path = _write(tmp_path / "labels.jsonl", _labels(preds, "prediction"))
    items = human_items(load_annotations(path, rubric=rubric, check_images=False).records)

    sc = match_scorer(load_score_file(_write(tmp_path / "s.jsonl", rows), "judge"), items, rubric)
    assert len(sc.matches) == len(preds)  # overall compared
    (warning,) = [w for w in sc.warnings if "did not label" in w]
    assert warning.startswith(f"{len(preds)} record(s)") and "left out of the comparison" in warning
    assert "judge-score --criteria overall" in warning, warning
    assert not any("rubric" in w for w in sc.warnings), sc.warnings
    assert sc.coverage["unknown_criterion"] == len(preds) and sc.coverage["criterion_not_in_rubric"] == 0
    # judge-report prints it and writes the count to report.json.
    out = tmp_path / "report"
    argv = ["--human", str(path), "--scores", f"judge={tmp_path / 's.jsonl'}", "--bootstrap", "20", "--out",
            str(out), "--ppi-draws", "0"]  # fmt: skip
    assert report_main(argv) == 0
    assert "judge-score --criteria overall" in capsys.readouterr().out
    (info,) = json.loads((out / "report.json").read_text())["scorers"]
    cov = info["coverage"]
    assert cov["unknown_criterion"] == len(preds) and cov["criterion_not_in_rubric"] == 0

    odd = [{**r, "criterion": "charm"} for r in rows if r["criterion"] == "text_quality"]
    rows2 = [r for r in rows if r["criterion"] == "overall"] + odd
    sc = match_scorer(load_score_file(_write(tmp_path / "s2.jsonl", rows2), "judge"), items, rubric)
    (mismatch,) = [w for w in sc.warnings if "does not have" in w]
    assert "rubric 'mmie'" in mismatch and "same rubric" in mismatch and "charm" in mismatch, mismatch
    assert not any("did not label" in w for w in sc.warnings), sc.warnings
    assert sc.coverage["criterion_not_in_rubric"] == len(preds)


def test_a_label_that_names_two_responses_is_refused():
    from judge.core.identity import LabelMatcher

    matcher = LabelMatcher([("m", "q1"), ("m", "q2")])
    assert matcher.resolve("m", "x", "q2") == ("m", "q2")
    assert matcher.resolve("unknown", "q1") == ("m", "q1")  # no model: an id scored for one model only
    with pytest.raises(JudgeError, match="matches two scored responses"):
        matcher.resolve("m", "q1", "q2")
    with pytest.raises(JudgeError, match="both label the scored response m/q1"):
        matcher.match([("m", "q1", None), ("m", "lab-1", "q1")])


def test_ppi_labels_in_own_id_style_reach_the_leaderboard():
    from judge.scoring.labelled import Labels

    labels = Labels({("m", "lab-1"): {"overall": 3.0}}, ["l.jsonl"], {("m", "lab-1"): "q1"})
    assert labels.matched_to({("m", "q1")}).values == {("m", "q1"): {"overall": 3.0}}
    assert labels.describe({("m", "q1")})["matched"] == 1


# ----------------------------------------------------------------------------- a run config's paths


def test_a_missing_config_path_is_refused_at_once_naming_its_key(tmp_path, monkeypatch, capsys):
    from judge.cli.train import main as train_main

    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    code = train_main(["--config", "rubric6", "--set", f"model.path={tmp_path / 'no-model'}"])
    seconds = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert code == 2
    assert "`data.annotations` annotations/demo/annotations.jsonl: file not found" in err
    assert "--set data.annotations=PATH" in err and "working directory" in err
    assert seconds < 10, seconds  # before any model or processor loads
    assert data_main(["build", "--config", "rubric6", "--no-tokens"]) == 2
    assert "`data.annotations`" in capsys.readouterr().err


def test_the_readme_section_commands_parse():
    import importlib
    import re
    import shlex

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Your own data, step by step", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    lines = [ln.split("  #")[0].strip() for ln in block.replace("\\\n", " ").splitlines()]
    modules = {"judge-train": "judge.cli.train", "judge-score": "judge.cli.score",
               "judge-data": "judge.cli.data", "judge-report": "judge.cli.report"}  # fmt: skip
    commands = [shlex.split(ln) for ln in lines if ln and not ln.startswith("#")]
    assert [c[0] for c in commands] == [
        "judge-train",
        "judge-score",
        "judge-data",
        "judge-report",
        "judge-score",
    ]
    for cmd in commands:
        importlib.import_module(modules[cmd[0]]).build_parser().parse_args(cmd[1:])  # a bad flag exits


# ----------------------------------------------------------------------------- label files as users write them


def _hand_scores(path: Path, preds: list[dict]) -> Path:
    """A judge's score file for ``preds`` written by hand (the score varies with the response)."""
    rows = [
        {"id": p["id"], "benchmark": "mmie", "task": p["task"], "model": p["model"], "metric": "judge",
         "criterion": "overall", "score": float((i * 3) % 7)}
        for i, p in enumerate(preds)
    ]  # fmt: skip
    return _write(path, rows)


def test_the_samples_own_lines_with_scores_added_are_labels(tmp_path, capsys):
    """judge-data sample writes `benchmark`; a label file that keeps it (only `scores` added) is accepted."""
    preds = _predictions(4)
    scores = _hand_scores(tmp_path / "scores.jsonl", preds)
    labels = _write(
        tmp_path / "labels.jsonl", [dict(p, scores={"overall": i % 7}) for i, p in enumerate(preds)]
    )
    code = report_main(["--human", str(labels), "--scores", f"judge={scores}", "--out", str(tmp_path / "rep"),
                        "--bootstrap", "50", "--ppi-draws", "0"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert "judge: 12 of 12 labelled responses matched a record" in capsys.readouterr().out


def test_an_invalid_label_is_refused_with_a_fix_the_command_has(tmp_path, capsys):
    """judge-report (and judge-score --labels) never skip a label: the error names file, line, field and the
    fix, and advises no `skip_invalid` setting (judge-report has no such flag)."""
    from judge.scoring.labelled import load_labels

    preds = _predictions(2)
    scores = _hand_scores(tmp_path / "scores.jsonl", preds)
    rows = _labels(preds, "prediction")
    rows[1]["scores"] = {"overall": "high"}
    rows[4]["rater"] = "ann1"
    labels = _write(tmp_path / "labels.jsonl", rows)
    code = report_main(
        ["--human", str(labels), "--scores", f"judge={scores}", "--out", str(tmp_path / "rep")]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "2 invalid label records" in err
    assert f"{labels}:2, record 'q0': field 'scores.annotator.overall'" in err
    assert (
        f"{labels}:5, record 'q1': field 'rater': unknown field" in err
        and "put extra data under 'meta'" in err
    )
    assert "skip" not in err, err
    assert "Fix them in the file: every label counts, none is left out." in err
    with pytest.raises(InvalidRecordsError) as exc:
        load_labels([labels])
    assert "skip_invalid" not in str(exc.value)


def test_the_ppi_check_with_too_few_labels_says_why_on_the_console(tmp_path, capsys):
    """With 4 labelled questions a draw of 20% labels 1, fewer than the 10 `min_labels` asks: the console line
    says so and how many labelled questions the check needs, naming the flags (not dashes of 0 intervals)."""
    preds = _predictions(4)
    scores = _hand_scores(tmp_path / "scores.jsonl", preds)
    labels = _write(tmp_path / "labels.jsonl", _labels(preds, "prediction"))
    code = report_main(["--human", str(labels), "--scores", f"judge={scores}", "--out", str(tmp_path / "rep"),
                        "--bootstrap", "50", "--ppi-draws", "20"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "PPI with" in ln]
    assert "of 0 PPI intervals" not in line, line
    assert "no estimate: a draw labels 1 of the 4 labelled questions, fewer than the 10 an estimate needs " \
           "(--min-labels); the check needs 50 labelled questions at this --ppi-fraction" in line, line  # fmt: skip


def test_the_reports_small_sample_mark_has_its_legend_and_one_meaning(tmp_path, capsys):
    """judge-report's console main table marks values on fewer than 30 items with † and prints what † means
    under it; in report.md the PPI check marks an estimate moved into its range with ‡, not † (which means
    'fewer than 30' in a report)."""
    from judge.eval.report_build import SMALL_LEGEND

    preds = _predictions(4)
    scores = _hand_scores(tmp_path / "scores.jsonl", preds)
    labels = _write(tmp_path / "labels.jsonl", _labels(preds, "prediction"))
    code = report_main(["--human", str(labels), "--scores", f"judge={scores}", "--out", str(tmp_path / "rep"),
                        "--bootstrap", "50", "--ppi-draws", "20", "--min-labels", "2"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    table = out.split("Main table", 1)[1].split("\n\n", 2)[1]
    assert "†" in table
    assert SMALL_LEGEND in out and SMALL_LEGEND.startswith("† marks a value computed on fewer than 30")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "moved into their range (marked ‡; † in this report marks fewer than 30 items or questions)" in md
    assert "(†)" not in md


def test_both_label_styles_give_the_same_report(tmp_path, capsys):
    """The same labels in the two documented styles resample the same questions under the same keys, so
    judge-report's intervals are identical (they differed: a hash of the question text against question_id).
    The questions carry an image by a relative path, as the user's did (the reader resolves it)."""
    from PIL import Image

    (tmp_path / "images").mkdir()
    preds = _predictions(8)
    for p in preds:
        Image.new("RGB", (8, 8), (10 * int(p["id"][1:]), 0, 0)).save(tmp_path / "images" / f"{p['id']}.png")
        p["question"] = [*p["question"], {"type": "image", "image": f"images/{p['id']}.png"}]
    scores = _hand_scores(tmp_path / "scores.jsonl", preds)
    got = {}
    for style in ("prediction", "own"):
        labels = _write(tmp_path / f"labels-{style}.jsonl", _labels(preds, style))
        out = tmp_path / f"rep-{style}"
        code = report_main(["--human", str(labels), "--scores", f"judge={scores}", "--out", str(out),
                            "--bootstrap", "200", "--ppi-draws", "0"])  # fmt: skip
        assert code == 0, capsys.readouterr().err
        report = json.loads((out / "report.json").read_text())
        got[style] = report["slices"][0]["scorers"]["judge"]
    assert got["prediction"]["spearman"]["ci"] is not None
    for stat in ("spearman", "pearson", "kendall"):
        assert got["prediction"][stat] == got["own"][stat], stat
