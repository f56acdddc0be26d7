"""The verdict of a run (judge.view.verdict): the demo's last screen and judge-view's first page. Every figure
in it comes from the run's files: the same figures as report.json and audit.json, and another file gives
another verdict. Built on the view_run fixture (the tiny judge's score folder, its report and audit on the
small demo set); a calibrated judge folder is fitted by judge-calibrate on that run's own scores. The demo's
own verdict block is checked in test_help_examples.py, on the run it already makes."""

from __future__ import annotations

import json
import shutil

import pytest

from judge.view import ViewConfig, load_view, site_files
from judge.view.verdict import calibration_name, read_run_files, run_verdicts, verdict_block

pytestmark = pytest.mark.usefixtures("one_thread")


def _copy(view_run, tmp_path):
    """A copy of the run's three folders, to change."""
    out = []
    for folder in view_run:
        shutil.copytree(folder, tmp_path / folder.name)
        out.append(tmp_path / folder.name)
    return out


def _page(score, report, audit) -> dict:
    files = site_files(load_view(ViewConfig(run=str(score), report=str(report), audit=str(audit))))
    text = files["data/index.js"].decode()
    return json.loads(text[len("JV.index(") : -3])["summary"]


def _main(report: dict) -> dict:
    return next(s for s in report["slices"] if s["key"] == report["main"])


def test_the_verdict_says_what_the_report_and_the_audit_say(view_run):
    score, rep, audit = view_run
    files = read_run_files(score=score, report=rep, audit=audit)
    verdicts = {v.topic: v for v in run_verdicts(files)}
    report = json.loads((rep / "report.json").read_text())
    main = _main(report)
    sp, ceiling = main["scorers"]["tiny"]["spearman"], main["ceiling"]["loao"]["spearman"]
    agreement = verdicts["Agreement"]
    assert agreement.headline.startswith(
        f"tiny: Spearman {sp['value']:.3f} [{sp['ci'][0]:.3f}, {sp['ci'][1]:.3f}]"
    )
    assert f"of the annotators' {ceiling['value']:.3f}" in agreement.headline
    assert any(
        "annotators (leave one out: the ceiling)" in d and f"{ceiling['value']:.3f}" in d
        for d in agreement.details
    )
    cells = json.loads((audit / "audit.json").read_text())["cells"]
    for c in cells:
        if c["scorer"] == "judge" and c["criterion"] == "overall":
            line = next(d for d in verdicts["Audit"].details if d.strip().startswith(c["perturbation"]))
            assert f"{c['change']:+.2f} [{c['ci'][0]:+.2f}, {c['ci'][1]:+.2f}]  {c['verdict']}:" in line
            assert f"{c['verdict']} to " in verdicts["Audit"].headline
    # The built-in tiny judge is not calibrated and has no thresholds: nothing is said of them.
    assert set(verdicts) == {"Agreement", "Audit"} and calibration_name(files) is None
    block = verdict_block(list(verdicts.values()), files).splitlines()
    assert block[0] == block[-1] == "=" * 78 and block[1].startswith("VERDICT")
    assert f"  {rep / 'report.json'}" in block and f"  {audit / 'audit.json'}" in block


def test_another_report_or_audit_gives_another_verdict(view_run, tmp_path):
    score, rep, audit = _copy(view_run, tmp_path)
    report = json.loads((rep / "report.json").read_text())
    _main(report)["scorers"]["tiny"]["spearman"] |= {"value": 0.777, "ci": [0.701, 0.852]}
    (rep / "report.json").write_text(json.dumps(report))
    data = json.loads((audit / "audit.json").read_text())
    for c in data["cells"]:
        if c["perturbation"] == "blank-images":
            c["verdict"] = "blind"
        elif c["perturbation"] == "off-topic":
            c["verdict"] = "sensitive"
    (audit / "audit.json").write_text(json.dumps(data))
    verdicts = {v.topic: v for v in run_verdicts(read_run_files(score=score, report=rep, audit=audit))}
    assert verdicts["Agreement"].headline.startswith("tiny: Spearman 0.777 [0.701, 0.852]")
    assert "blind to blank-images (a known limit)" in verdicts["Audit"].headline
    assert "sensitive to off-topic" in verdicts["Audit"].headline
    blank = next(d for d in verdicts["Audit"].details if "blank-images" in d)
    assert "a known limit" in blank and "response images replaced by white images" in blank
    # judge-view's first page opens with the same verdicts.
    (first, *_) = _page(score, rep, audit)["sections"]
    assert first["title"] == "Verdict"
    assert first["tables"][0]["rows"] == [[v.topic, v.headline] for v in verdicts.values()]


def test_an_agreement_whose_interval_reaches_0_gets_no_share_of_the_ceiling(view_run, tmp_path):
    """A Spearman of -0.038 [-0.43, 0.26] is no agreement shown, not '-4% of the annotators' 0.935'; one whose
    interval lies above 0 keeps its share."""
    score, rep, audit = _copy(view_run, tmp_path)
    report = json.loads((rep / "report.json").read_text())
    ceiling = _main(report)["ceiling"]["loao"]["spearman"]["value"]
    got = {}
    for value, ci in ((-0.038, [-0.43, 0.26]), (-0.3, [-0.5, -0.1]), (0.5, [0.3, 0.7])):
        _main(report)["scorers"]["tiny"]["spearman"] |= {"value": value, "ci": ci}
        (rep / "report.json").write_text(json.dumps(report))
        verdicts = {v.topic: v for v in run_verdicts(read_run_files(score=score, report=rep, audit=audit))}
        got[value] = verdicts["Agreement"].headline
    assert got[-0.038].startswith(
        "tiny: Spearman -0.038 [-0.430, 0.260], no agreement shown (the interval contains 0), against the ceiling "
        f"of the annotators' {ceiling:.3f}"
    )
    assert "an inverse agreement (the interval lies below 0)" in got[-0.3]
    assert not any("-" in h.split("% of the")[0][-5:] for h in got.values() if "% of the" in h)
    assert f", {0.5 / ceiling:.0%} of the annotators' {ceiling:.3f}" in got[0.5]


@pytest.fixture(scope="module")
def calibrated_run(view_run, tmp_path_factory, rubric, small_demo):
    """The run's score folder, its run.json naming a judge folder that judge-calibrate --selective calibrated
    (the seeded tiny model is the folder's weights, as judge-score scored with). judge-calibrate scores the
    labels with the folder itself: the run's scores name the judge `tiny`, another judge by its fingerprint,
    and a calibration is fitted only on the judge's own scores."""
    from judge.cli.calibrate import main as calibrate_main
    from judge.models.card import CardRubric, JudgeCard, read_card, write_card
    from judge.models.loading import save_tiny_scorer

    root = tmp_path_factory.mktemp("calibrated-run")
    judge = root / "judge"
    save_tiny_scorer(judge / "merged", seed=0)
    card = JudgeCard(
        base_model="tiny:seed=0", finetune="full", target_format="score", scale=rubric.scale.values,
        rubric=CardRubric(name=rubric.name, version=rubric.version, hash=rubric.hash),
    )  # fmt: skip
    write_card(judge, card)
    score, rep, audit = view_run
    code = calibrate_main(["--judge", str(judge), "--human", str(small_demo), "--min-items", "20", "--selective",
                           "--no-progress", "--device", "cpu"])  # fmt: skip
    assert code == 0
    copy = root / "score"
    shutil.copytree(score, copy)
    run = json.loads((copy / "run.json").read_text())
    card = read_card(judge)
    run["identity"] |= {
        "judge": str(judge),
        "calibration": card.calibration.fingerprint,
        "selective": card.selective.fingerprint,
    }
    (copy / "run.json").write_text(json.dumps(run))
    return copy, rep, audit, judge


def test_calibration_and_selective_verdicts_come_from_the_judge_folder(calibrated_run):
    score, rep, audit, judge = calibrated_run
    cal = json.loads((judge / "calibration.json").read_text())
    sel = json.loads((judge / "selective.json").read_text())
    verdicts = {v.topic: v for v in run_verdicts(read_run_files(score=score, report=rep, audit=audit))}
    choice = cal["comparison"]["choice"]["overall" if "overall" in cal["comparison"]["choice"] else "*"]
    head = verdicts["Calibration"].headline
    assert head.startswith(f"auto {'kept' if choice['method'] == 'none' else 'chose'} ")
    assert f"cross-validated NLL {choice['nll'][choice['method']]:.4f}" in head
    assert f"{choice['folds']}-fold cross-validation over {choice['n_fit']} labelled scores" in head
    assert f"why: {choice['reason']}" in verdicts["Calibration"].details
    rule = sel["pointwise"].get("overall") or sel["pointwise"]["*"]
    details = " ".join(verdicts["Selective evaluation"].details)
    if rule["threshold"] is None:
        assert "pointwise: nothing trusted (no threshold passed)" in verdicts["Selective evaluation"].headline
        assert (
            f"no threshold passed on the {rule['n']} labelled scores" in details and "what to do" in details
        )
    else:
        assert f"at least {rule['threshold']:.3f}: on the {rule['n']} labelled scores" in details
    # judge-view names the calibration by its method and map, not by its fingerprint.
    page = _page(score, rep, audit)
    facts = dict(next(s for s in page["sections"] if s["title"].startswith("Run "))["tables"][0]["rows"])
    assert facts["calibration"].startswith("auto: ") and cal["comparison"]["choice"]
    assert json.loads((score / "run.json").read_text())["identity"]["calibration"] not in json.dumps(page)


def test_a_calibration_the_scores_did_not_use_is_not_taken_for_theirs(calibrated_run, tmp_path):
    """calibration.json refitted after the run (another fingerprint): its choice is not the run's verdict;
    written back as the run used it, another choice in it gives another verdict."""
    score, rep, audit, judge = calibrated_run
    other = tmp_path / "judge"
    shutil.copytree(judge, other, ignore=shutil.ignore_patterns("merged"))
    cal = json.loads((other / "calibration.json").read_text())
    for c in cal["comparison"]["choice"].values():
        c |= {"method": "temperature", "reason": "lowest held-out NLL (test)"}
        c["nll"] |= {"temperature": 1.2345}
    cal["pooled"] |= {"temperature": 1.5, "x": None, "y": None}
    for c in cal["criteria"].values():
        c |= {"temperature": 1.5, "x": None, "y": None}
    (other / "calibration.json").write_text(json.dumps(cal))
    files = read_run_files(score=score, report=rep, judge=other)
    verdict = next(v for v in run_verdicts(files) if v.topic == "Calibration")
    assert "not the one these scores used" in " ".join(verdict.details)
    from judge.models.calibration import read_calibration

    files.used["calibration"] = read_calibration(other / "calibration.json").fingerprint()
    verdict = next(v for v in run_verdicts(files) if v.topic == "Calibration")
    assert verdict.headline.startswith("auto chose a temperature (T = 1.500) for ")
    assert "cross-validated NLL 1.2345 against the read-out's" in verdict.headline
    assert calibration_name(files).startswith("auto: a temperature (T = 1.500) for ")
