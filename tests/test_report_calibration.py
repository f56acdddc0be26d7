"""judge-report's new measures: MMIE's four beside Spearman and Kendall (with the same resamples), the
calibration section on held-out items, and the prediction-powered inference check."""

from __future__ import annotations

import json

import numpy as np
import pytest

from judge.cli.report import main
from judge.core.io import load_annotations
from judge.data.aggregate import aggregate_record
from judge.eval.bootstrap import (
    ClusterBootstrap,
    bootstrap_scale_stats,
    seeded_rng,
    weighted_cosine,
    weighted_mae,
    weighted_mse,
)
from judge.eval.ppi import GUARD_BELOW
from judge.eval.report_data import load_report
from judge.eval.stats import cosine_similarity


def test_weighted_measures_equal_them_on_the_expanded_resamples():
    from scipy.spatial.distance import cosine

    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 6, 25), rng.integers(0, 7, 25).astype(float)
    clusters = [i // 3 for i in range(25)]
    plan = ClusterBootstrap(clusters, 40, seeded_rng(1, "t"))
    w = plan.weights(clusters)
    for b in range(40):
        k = w[b].astype(int)
        xe, ye = np.repeat(x, k), np.repeat(y, k)
        assert weighted_cosine(x, y, w)[b] == pytest.approx(1 - cosine(xe, ye), abs=1e-12)
        assert weighted_mae(x, y, w)[b] == pytest.approx(np.mean(np.abs(xe - ye)), abs=1e-12)
        assert weighted_mse(x, y, w)[b] == pytest.approx(np.mean((xe - ye) ** 2), abs=1e-12)
    got = bootstrap_scale_stats(x, y, clusters, plan)
    assert got["cosine"]["value"] == pytest.approx(1 - cosine(x, y))
    assert got["cosine"]["ci"] == pytest.approx(np.percentile(weighted_cosine(x, y, w), [2.5, 97.5]).tolist())
    assert got["mae"]["value"] == pytest.approx(np.mean(np.abs(x - y)))
    assert cosine_similarity([0, 0], [1, 2]) is None  # an all-zero vector has no direction


def _dist(mu: float) -> list[float]:
    p = np.exp(-0.5 * ((np.arange(7) - mu) / 0.8) ** 2)
    return (p / p.sum()).tolist()


@pytest.fixture()
def calibrated(tmp_path, small_demo):
    """A calibrated judge's score file on the small demo set (raw = human + 1.5 + noise, calibrated = raw -
    1.5, interval -/+ 1.2), and a judge folder whose calibration.json says it was fitted on 6 of the ids."""
    from judge.models.calibration import Calibration, CalibrationData, CriterionCalibration, write_calibration

    records = load_annotations(small_demo, check_images=False).records
    fitted_on = sorted({r.id for r in records})[:6]
    judge = tmp_path / "judge"
    judge.mkdir()
    cal = Calibration(
        method="isotonic", level=0.9, scale=list(range(7)), min_items=30, criteria={},
        pooled=CriterionCalibration(n_fit=1, n_conformal=1, x=[0.0, 6.0], y=[0.0, 6.0], halfwidth=1.2),
        data=CalibrationData(fingerprint="0" * 64, human_files=[], n_items=6, n_questions=2, ids=fitted_on,
                             conformal_fraction=0.5, seed=0),
    )  # fmt: skip
    write_calibration(judge, cal)
    producer = {"judge": str(judge), "calibration": cal.producer()}
    rng = np.random.default_rng(5)
    rows = []
    for r in records:
        for crit, a in aggregate_record(r).items():
            raw = float(np.clip(a.value + 1.5 + rng.normal(0, 0.6), 0, 6))
            score = float(np.clip(raw - 1.5, 0, 6))
            dist = _dist(score)
            rows.append(
                dict(
                    id=r.id,
                    benchmark="demo",
                    task=r.task,
                    model=r.model,
                    metric="judge",
                    criterion=crit,
                    score=float(np.dot(dist, np.arange(7))),  # the calibrated view: its distribution's mean
                    raw_score=float(np.dot(_dist(raw), np.arange(7))),
                    interval=[max(0.0, score - 1.2), min(6.0, score + 1.2)],
                    distribution=dist,
                    raw_distribution=_dist(raw),
                    producer=producer,
                )  # fmt: skip
            )
    path = tmp_path / "calibrated.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    return path, rows, set(fitted_on), records


def test_report_checks_calibration_on_held_out_items_only(tmp_path, small_demo, calibrated, capsys):
    path, rows, fitted_on, records = calibrated
    out = tmp_path / "report"
    code = main(["--human", str(small_demo), "--scores", f"cal={path}", "--bootstrap", "200", "--out", str(out),
                 "--ppi-draws", "50"])  # fmt: skip
    assert code == 0
    data = load_report(out / "report.json")
    (check,) = data.calibration
    human = {(r.id, c): a.value for r in records for c, a in aggregate_record(r).items()}
    held = [x for x in rows if x["id"] not in fitted_on]
    assert check.n == len(held) and check.n_excluded == len(rows) - len(held)
    h = np.asarray([human[(x["id"], x["criterion"])] for x in held])
    raw, score = np.asarray([x["raw_score"] for x in held]), np.asarray([x["score"] for x in held])
    lo, hi = np.asarray([x["interval"] for x in held]).T
    assert check.mae_before.value == pytest.approx(np.mean(np.abs(raw - h)))
    assert check.mae_after.value == pytest.approx(np.mean(np.abs(score - h)))
    assert check.mse_after.value == pytest.approx(np.mean((score - h) ** 2))
    assert check.coverage.value == pytest.approx(np.mean((lo <= h) & (h <= hi)))
    assert check.mean_width.value == pytest.approx(np.mean(hi - lo))
    assert check.coverage.ci[0] <= check.coverage.value <= check.coverage.ci[1]
    # NLL and Brier of the annotators' ratings, raw and calibrated: scikit-learn's log loss, one row a rating.
    from sklearn.metrics import log_loss

    ratings = {(r.id, c): list(a.values) for r in records for c, a in aggregate_record(r).items()}
    ys = [v for x in held for v in ratings[(x["id"], x["criterion"])]]
    for key, name in (("raw_distribution", "nll_before"), ("distribution", "nll_after")):
        rows_p = [x[key] for x in held for _ in ratings[(x["id"], x["criterion"])]]
        assert getattr(check, name).value == pytest.approx(
            log_loss(ys, rows_p, labels=list(range(7))), rel=1e-9
        )
    assert (
        check.nll_after.value < check.nll_before.value and check.brier_after.value < check.brier_before.value
    )
    for k in check.per_criterion:
        assert k.coverage_ci[0] <= k.coverage <= k.coverage_ci[1]
    assert (out / "reliability_top.png").is_file() and data.plots["reliability_top"] == "reliability_top.png"
    assert check.method == "isotonic" and check.level == 0.9 and "left out" in check.held_out
    assert (out / "reliability.png").is_file() and data.plots["reliability"] == "reliability.png"
    md = (out / "report.md").read_text()
    assert "## Calibration and intervals (held-out items)" in md and "## MMIE's agreement measures" in md
    printed = capsys.readouterr().out
    assert f"coverage of the 90% intervals {check.coverage.value:.3f}" in printed
    assert f"MAE {check.mae_before.value:.3f} before, {check.mae_after.value:.3f} after" in printed
    assert f"NLL {check.nll_before.value:.4f} -> {check.nll_after.value:.4f}" in printed
    assert any("left out of the calibration section" in w for w in data.warnings)
    # MMIE's measures on the main slice, with the same resamples' intervals.
    m = data.main_slice.scorers["cal"]
    assert m.cosine is not None and m.cosine.ci is not None and m.mae_ci.value == pytest.approx(m.mae)


def test_without_the_calibration_file_nothing_can_be_left_out_and_a_warning_says_so(
    tmp_path, small_demo, calibrated
):
    path, rows, _, _ = calibrated
    (tmp_path / "judge" / "calibration.json").unlink()
    out = tmp_path / "r2"
    assert main(["--human", str(small_demo), "--scores", f"cal={path}", "--bootstrap", "50", "--out", str(out),
                 "--ppi-draws", "0"]) == 0  # fmt: skip
    data = load_report(out / "report.json")
    assert data.calibration[0].n == len(rows) and data.calibration[0].n_excluded == 0
    assert any("cannot tell which items the calibration was fitted on" in w for w in data.warnings)
    assert data.ppi == []


@pytest.mark.slow
def test_ppi_checks_one_run_is_ppi_python_and_students_t_on_the_questions_it_labelled(
    tmp_path, small_demo, calibrated
):
    from ppi_py import ppi_mean_pointestimate
    from scipy import stats

    path, rows, _, records = calibrated
    out = tmp_path / "r3"
    assert main(["--human", str(small_demo), "--scores", f"cal={path}", "--bootstrap", "50", "--out", str(out),
                 "--ppi-fraction", "0.5", "--ppi-draws", "40", "--seed", "2", "--min-labels", "3"]) == 0  # fmt: skip
    (p,) = load_report(out / "report.json").ppi
    qid = {r.id: r.question_id for r in records}
    human = {r.id: aggregate_record(r)["overall"].value for r in records}
    assert p.n_questions == 12 and p.n_labelled == 6 == len(p.first_questions) and p.draws == 40
    assert p.by == "question" and p.draw == "bootstrap" and p.min_labels == 3
    labelled = set(p.first_questions)
    for m in p.models:
        mine = [x for x in rows if x["criterion"] == "overall" and x["model"] == m.model]
        lab = [x for x in mine if qid[x["id"]] in labelled]
        unl = [x for x in mine if qid[x["id"]] not in labelled]
        y = np.asarray([human[x["id"]] for x in lab])
        point = ppi_mean_pointestimate(
            y, np.asarray([x["score"] for x in lab]), np.asarray([x["score"] for x in unl])
        )
        assert m.first_draw.n_labelled == len(lab) and m.first_draw.ppi_mean == pytest.approx(
            float(np.squeeze(point))
        )
        # Below GUARD_BELOW (30) labels a bounded mean is guarded (issue 38's statistics review): Student's
        # interval on the labels, united with Student's on the labels plus one pseudo-label at each end of
        # the scale, clipped to it.
        assert len(y) < GUARD_BELOW
        ci = stats.ttest_1samp(y, 0.0).confidence_interval(0.95)
        padded = stats.ttest_1samp(np.append(y, [0.0, 6.0]), 0.0).confidence_interval(0.95)
        assert m.first_draw.human_ci == pytest.approx(
            [max(0.0, min(ci.low, padded.low)), min(6.0, max(ci.high, padded.high))]
        )
        assert m.all_human_mean == pytest.approx(np.mean([human[x["id"]] for x in mine]))
    assert p.n_intervals == sum(m.n_draws for m in p.models) and p.win_rates


def _scorer(n_questions: int, seed: int):
    """A judge-like scorer matched onto synthetic human items: three models per question, scores a noisy
    biased function of the human mean."""
    from judge.core.schema import ScoreRecord
    from judge.eval.matching import HumanItem, Match, Scorer

    rng = np.random.default_rng(seed)
    matches = []
    for q in range(n_questions):
        for model, mu in (("a", 4.0), ("b", 3.2), ("c", 2.4)):
            ratings = tuple((f"h{k}", int(np.clip(round(rng.normal(mu, 1.3)), 0, 6))) for k in range(3))
            value = float(np.mean([r for _, r in ratings]))
            score = float(np.clip(0.7 * value + 1.2 + rng.normal(0, 0.8), 0, 6))
            item = HumanItem(f"q{q}-{model}", "overall", f"q{q}", "SA", model, value, ratings)
            rec = ScoreRecord(id=item.id, benchmark="demo", task="SA", model=model, metric="judge",
                              criterion="overall", score=score)  # fmt: skip
            matches.append(Match(item, score, rec))
    return Scorer("judge", "x.jsonl", "judge", True, "", matches)


@pytest.mark.slow
def test_ppi_check_intervals_cover_at_their_level_over_2000_draws():
    # The check: the audit's normal intervals with ddof 0 covered 92.8% and 93.6% at 95% over such
    # draws; Student's t (PPI's variance by the jackknife), guarded at few labels, must keep the level.
    from judge.eval.ppi_check import ppi_checks

    (p,) = ppi_checks([_scorer(60, 1)], 0.2, 2000, seed=0, scale=(0, 6), min_labels=10)
    assert p.n_labelled == 12 and p.n_intervals == 3 * 2000
    # 12 labels are below GUARD_BELOW: the means are guarded (issue 38's statistics review: unguarded, skewed
    # labels covered 70-80% at 95%), so at least the level, and conservative rather than wide open.
    assert p.n_labelled < GUARD_BELOW
    assert p.ppi_coverage >= 0.94 and p.human_coverage >= 0.94, (p.ppi_coverage, p.human_coverage)
    # At 30 labels (no guard for spread labels) Student's t is within a point and a half of the level.
    (at30,) = ppi_checks([_scorer(60, 1)], 0.5, 2000, seed=0, scale=(0, 6), min_labels=10)
    assert at30.n_labelled == GUARD_BELOW
    assert abs(at30.ppi_coverage - 0.95) <= 0.015 and abs(at30.human_coverage - 0.95) <= 0.015, (
        at30.ppi_coverage,
        at30.human_coverage,
    )
    # The error over draws (a draw's three intervals share its labels: tests/test_ppi_check_se.py checks the
    # formula): near the binomial figure of independent intervals, never below half of it.
    binomial = np.sqrt(p.ppi_coverage * (1 - p.ppi_coverage) / 6000)
    assert 0.5 * binomial <= p.ppi_coverage_se <= 3 * binomial
    assert p.ppi_mean_width < p.human_mean_width  # the scorer carries information
    # Win rates (with a pseudo-label at each end): at or above the level, never below it by more than the
    # Monte Carlo error; without them, 80 to 92% here.
    assert len(p.win_rates) == 3 and 0.94 <= p.win_ppi_coverage <= 0.99, p.win_ppi_coverage
    assert 0.94 <= p.win_human_coverage <= 0.995
    for w in p.win_rates:
        assert 0.0 <= w.all_human_win_rate <= 1.0 and w.ppi_coverage >= 0.94


def test_demo_recap_prints_the_report_figures(tmp_path, small_demo, calibrated, capsys):
    import importlib.util
    from pathlib import Path

    path, *_ = calibrated
    out = tmp_path / "r4"
    assert main(["--human", str(small_demo), "--scores", f"cal={path}", "--bootstrap", "50", "--out", str(out),
                 "--ppi-draws", "20", "--ppi-fraction", "0.5", "--min-labels", "3"]) == 0  # fmt: skip
    script = Path(__file__).resolve().parents[1] / "scripts" / "demo_recap.py"
    spec = importlib.util.spec_from_file_location("demo_recap", script)
    recap = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recap)
    capsys.readouterr()
    assert recap.main([str(out / "report.json"), "--scorer", "cal"]) == 0
    printed = capsys.readouterr().out
    data = json.loads((out / "report.json").read_text())
    c, p = data["calibration"][0], data["ppi"][0]
    assert (
        f"coverage of the 90% intervals on {c['n']} held-out items: {c['coverage']['value']:.3f}" in printed
    )
    assert f"MAE before calibration {c['mae_before']['value']:.3f}" in printed
    assert f"over 20 random draws: {100 * p['ppi_coverage']:.1f}% ± " in printed
    assert f"of {p['n_intervals']} PPI intervals cover the model's all-human mean" in printed
    assert f"NLL {c['nll_before']['value']:.4f} -> {c['nll_after']['value']:.4f}" in printed
    assert "win rates over the same draws" in printed and "no selective evaluation in the report" in printed
    assert recap.main([str(tmp_path / "missing.json")]) == 2


@pytest.mark.slow
def test_report_gives_selective_evaluation_on_held_out_items(tmp_path, small_demo, calibrated):
    from judge.models.selective import Selective, SelectiveRule, write_selective

    path, rows, fitted_on, records = calibrated
    judge = tmp_path / "judge"
    rule = SelectiveRule(threshold=0.6, n=10, n_trusted=5, agreement=1.0, p_value=0.01)
    sel = Selective(agreement=0.9, delta=0.1, tolerance=1.0, confidence="mass", scale=list(range(7)),
                    calibration="c", pointwise={"*": rule}, pairwise={"*": rule})  # fmt: skip
    write_selective(judge, sel)
    rng = np.random.default_rng(3)
    for x in rows:
        x["trusted"] = bool(rng.uniform() < 0.6)
        x["producer"] = {**x["producer"], "selective": sel.producer()}
    marked = tmp_path / "marked.jsonl"
    marked.write_text("".join(json.dumps(x) + "\n" for x in rows))
    out = tmp_path / "r5"
    assert main(["--human", str(small_demo), "--scores", f"cal={marked}", "--bootstrap", "100", "--out", str(out),
                 "--ppi-draws", "0"]) == 0  # fmt: skip
    (check,) = load_report(out / "report.json").selective
    human = {(r.id, c): a.value for r in records for c, a in aggregate_record(r).items()}
    held = [x for x in rows if x["id"] not in fitted_on]
    trusted = np.asarray([x["trusted"] for x in held])
    agree = np.asarray([abs(x["score"] - human[(x["id"], x["criterion"])]) <= 1.0 for x in held])
    assert check.n == len(held) and check.n_trusted == trusted.sum()
    assert check.share_trusted.value == pytest.approx(trusted.mean())
    assert check.agreement_trusted.value == pytest.approx(agree[trusted].mean())
    assert check.agreement_all.value == pytest.approx(agree.mean())
    assert check.agreement_trusted.ci[0] <= check.agreement_trusted.value <= check.agreement_trusted.ci[1]
    assert (
        check.agreement == 0.9
        and check.tolerance == 1.0
        and {k.criterion for k in check.per_criterion} == {x["criterion"] for x in held}
    )
    # Pairwise, by the thresholds in the judge folder: pairs of held-out responses to one question.
    assert check.pairwise is not None and check.pairwise.n > 0
    md = (out / "report.md").read_text()
    assert "## Selective evaluation (held-out items)" in md


def test_nothing_trusted_prints_no_interval_and_says_there_is_no_threshold(
    tmp_path, small_demo, calibrated, capsys
):
    """Issue 38 (review 6): a share of 0 trusted from sampled items is not exactly 0 on new items: no [0, 0]
    interval in report.json, report.md or the recap, but "none trusted (no threshold)"."""
    import importlib.util
    from pathlib import Path

    from judge.models.selective import Selective, SelectiveRule, write_selective

    path, rows, _, _ = calibrated
    none = SelectiveRule(threshold=None, n=10, n_trusted=0, agreement=None, p_value=None)
    sel = Selective(agreement=0.9, delta=0.1, tolerance=1.0, confidence="mass", scale=list(range(7)),
                    calibration="c", pointwise={"*": none}, pairwise={"*": none})  # fmt: skip
    write_selective(tmp_path / "judge", sel)
    for x in rows:
        x["trusted"] = False
        x["producer"] = {**x["producer"], "selective": sel.producer()}
    marked = tmp_path / "marked.jsonl"
    marked.write_text("".join(json.dumps(x) + "\n" for x in rows))
    out = tmp_path / "r6"
    assert main(["--human", str(small_demo), "--scores", f"cal={marked}", "--bootstrap", "50", "--out", str(out),
                 "--ppi-draws", "0"]) == 0  # fmt: skip
    data = json.loads((out / "report.json").read_text())
    (check,) = data["selective"]
    assert check["n_trusted"] == 0 and check["share_trusted"]["value"] == 0.0
    assert check["share_trusted"]["ci"] is None and check["no_threshold"] is True
    assert check["pairwise"]["share_trusted"]["ci"] is None and check["pairwise"]["no_threshold"] is True
    md = (out / "report.md").read_text()
    assert "0: none trusted (no threshold)" in md and "[0.00, 0.00]" not in md and "[0.000, 0.000]" not in md
    script = Path(__file__).resolve().parents[1] / "scripts" / "demo_recap.py"
    spec = importlib.util.spec_from_file_location("demo_recap", script)
    recap = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recap)
    capsys.readouterr()
    assert recap.main([str(out / "report.json"), "--scorer", "cal"]) == 0
    printed = capsys.readouterr().out
    assert "none trusted (no threshold)" in printed and "[0.000, 0.000]" not in printed


def test_the_two_pairwise_agreements_state_their_tie_rule_and_count(tmp_path, small_demo, calibrated, capsys):
    """A judge that ties every pair: the main table's pairwise accuracy counts each tie half (50%, its ties
    said in the cell); selective evaluation's agreement on all pairs counts each as a disagreement (0%), and
    report.md and judge-view's verdict say so with the count."""
    from judge.models.selective import Selective, SelectiveRule, write_selective
    from judge.view.verdict import RunFiles, selective_verdict

    path, rows, fitted_on, records = calibrated
    judge = tmp_path / "judge"
    rule = SelectiveRule(threshold=0.6, n=10, n_trusted=5, agreement=1.0, p_value=0.01)
    sel = Selective(agreement=0.9, delta=0.1, tolerance=1.0, confidence="mass", scale=list(range(7)),
                    calibration="c", pointwise={"*": rule}, pairwise={"*": rule})  # fmt: skip
    write_selective(judge, sel)
    for x in rows:  # one distribution for every response: every pair is a tie for the judge
        x.update(distribution=_dist(3.0), score=float(np.dot(_dist(3.0), np.arange(7))), trusted=False)
        x["producer"] = {**x["producer"], "selective": sel.producer()}
    marked = tmp_path / "tied.jsonl"
    marked.write_text("".join(json.dumps(x) + "\n" for x in rows))
    out = tmp_path / "rt"
    assert main(["--human", str(small_demo), "--scores", f"cal={marked}", "--bootstrap", "50", "--out", str(out),
                 "--ppi-draws", "0"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    report = load_report(out / "report.json")
    pw_main = report.main_slice.scorers["cal"].pairwise
    assert pw_main.accuracy == 0.5 and pw_main.n_scorer_ties == pw_main.n_pairs > 0
    assert f"50% of {pw_main.n_pairs} ({pw_main.n_pairs} tied, half each)" in printed
    (check,) = report.selective
    pw = check.pairwise
    assert pw is not None and pw.n_judge_ties == pw.n > 0 and pw.agreement_all.value == 0.0
    md = (out / "report.md").read_text()
    assert (
        f"The judge ties {pw.n} of the {pw.n} pairs (no preference): each counts as a disagreement here, and "
        "as half in the main table's pairwise accuracy." in md
    )
    files = RunFiles(report=json.loads((out / "report.json").read_text()))
    verdict = selective_verdict(files, "cal")
    assert verdict is not None
    said = verdict.headline + " " + " ".join(verdict.details)
    assert f"the judge ties {pw.n} of the {pw.n} pairs, each counted as a disagreement" in said


def test_a_coverage_whose_interval_lies_below_the_promise_is_warned_about(
    tmp_path, small_demo, calibrated, capsys
):
    """90% intervals that miss the human scores (each moved 3 points off its score): the coverage's interval
    lies below 0.9 and the report's warnings say so, with the fix; the fixture's own intervals (which keep the
    promise) give no such warning."""
    path, rows, fitted_on, records = calibrated
    broken = tmp_path / "broken.jsonl"
    moved = [dict(x, interval=[min(6.0, x["score"] + 3.0)] * 2) for x in rows]
    broken.write_text("".join(json.dumps(x) + "\n" for x in moved))
    warned = {}
    for name, scores in (("kept", path), ("broken", broken)):
        out = tmp_path / name
        assert main(["--human", str(small_demo), "--scores", f"cal={scores}", "--bootstrap", "100", "--out", str(out),
                     "--ppi-draws", "0"]) == 0  # fmt: skip
        data = load_report(out / "report.json")
        warned[name] = [w for w in data.warnings if "promised" in w]
    (check,) = data.calibration
    assert check.coverage.ci[1] < 0.9 and load_report(tmp_path / "kept" / "report.json").calibration
    assert warned["kept"] == []
    assert warned["broken"] == [
        f"cal: its 90% intervals contain {check.coverage.value:.3f} [{check.coverage.ci[0]:.3f}, "
        f"{check.coverage.ci[1]:.3f}] of the {check.n} held-out human scores, the whole interval below the 90% "
        "promised: the calibration does not keep its promise on these labels (refit it with judge-calibrate "
        "--human on labelled items like these)"
    ]
    assert warned["broken"][0] in capsys.readouterr().out
