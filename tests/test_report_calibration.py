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
from judge.eval.ppi import classical_mean, ppi_mean
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
            rows.append(
                dict(
                    id=r.id,
                    benchmark="demo",
                    task=r.task,
                    model=r.model,
                    metric="judge",
                    criterion=crit,
                    score=score,
                    raw_score=raw,
                    interval=[max(0.0, score - 1.2), min(6.0, score + 1.2)],
                    distribution=_dist(raw),
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
    assert check.method == "isotonic" and check.level == 0.9 and "left out" in check.held_out
    assert (out / "reliability.png").is_file() and data.plots["reliability"] == "reliability.png"
    md = (out / "report.md").read_text()
    assert "## Calibration and intervals (held-out items)" in md and "## MMIE's agreement measures" in md
    printed = capsys.readouterr().out
    assert f"coverage of the 90% intervals {check.coverage.value:.3f}" in printed
    assert f"MAE {check.mae_before.value:.3f} before, {check.mae_after.value:.3f} after" in printed
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


def test_ppi_check_is_the_estimator_on_seeded_label_draws(tmp_path, small_demo, calibrated):
    path, rows, _, records = calibrated
    out = tmp_path / "r3"
    assert main(["--human", str(small_demo), "--scores", f"cal={path}", "--bootstrap", "50", "--out", str(out),
                 "--ppi-fraction", "0.3", "--ppi-draws", "40", "--seed", "2"]) == 0  # fmt: skip
    (p,) = load_report(out / "report.json").ppi
    human = {r.id: aggregate_record(r)["overall"].value for r in records}
    items = [
        x for x in rows if x["criterion"] == "overall"
    ]  # the score file's order, as the matching keeps it
    score = np.asarray([x["score"] for x in items])
    hum = np.asarray([human[x["id"]] for x in items])
    k = round(0.3 * len(items))
    assert p.n_labelled == k and p.n_items == len(items) and p.draws == 40
    cover = []
    for d in range(40):
        labelled = np.zeros(len(items), dtype=bool)
        labelled[seeded_rng(2, "ppi", "cal", str(d)).choice(len(items), size=k, replace=False)] = True
        for m in p.models:
            ix = np.asarray([i for i, x in enumerate(items) if x["model"] == m.model])
            lab, unl = ix[labelled[ix]], ix[~labelled[ix]]
            est = ppi_mean(hum[lab], score[lab], score[unl])
            if d == 0:
                assert m.first_draw.ppi_ci == pytest.approx(est.ci)
                assert m.first_draw.human_ci == pytest.approx(classical_mean(hum[lab]).ci)
                assert m.all_human_mean == pytest.approx(hum[ix].mean())
            if est.ci is not None:
                cover.append(est.ci[0] <= hum[ix].mean() <= est.ci[1])
    assert p.n_intervals == len(cover) and p.ppi_coverage == pytest.approx(np.mean(cover))


def test_demo_recap_prints_the_report_figures(tmp_path, small_demo, calibrated, capsys):
    import importlib.util
    from pathlib import Path

    path, *_ = calibrated
    out = tmp_path / "r4"
    assert main(["--human", str(small_demo), "--scores", f"cal={path}", "--bootstrap", "50", "--out", str(out),
                 "--ppi-draws", "20"]) == 0  # fmt: skip
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
    assert f"{100 * p['ppi_coverage']:.1f}% of {p['n_intervals']} PPI intervals cover" in printed
    assert recap.main([str(tmp_path / "missing.json")]) == 2
