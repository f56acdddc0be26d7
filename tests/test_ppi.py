"""Prediction-powered means: the estimator against ppi-python, the leaderboard with human labels (judge-only,
human-only and PPI side by side; ranks and win rates by PPI), and judge-data sample."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from judge.eval.bootstrap import ClusterBootstrap, seeded_rng
from judge.eval.ppi import classical_mean, power_tuning, ppi_mean
from judge.scoring.labelled import Labels, load_labels
from judge.scoring.leaderboard import LEADERBOARD_COLUMNS, WIN_RATE_COLUMNS, _resampled_ppi, build_leaderboard
from judge.scoring.summary import build_summary, render_markdown, write_summary


@pytest.mark.parametrize("seed", range(6))
def test_ppi_mean_and_interval_equal_ppi_python(seed):
    from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

    rng = np.random.default_rng(seed)
    n, big_n = int(rng.integers(3, 60)), int(rng.integers(5, 400))
    y = rng.integers(0, 7, n).astype(float)
    yhat = np.clip(y + rng.normal(0.5, 1.2, n), 0, 6)
    yhat_u = np.clip(rng.normal(3, 1.5, big_n), 0, 6)
    for lam in (None, 1.0, 0.0, 0.37):
        for level in (0.95, 0.9):
            ours = ppi_mean(y, yhat, yhat_u, level=level, lam=lam)
            lo, hi = ppi_mean_ci(y, yhat, yhat_u, alpha=1 - level, lam=lam)
            point = float(np.squeeze(ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam)))
            assert ours.mean == pytest.approx(point, abs=1e-9)
            assert ours.ci[0] == pytest.approx(float(lo[0]), abs=1e-9)
            assert ours.ci[1] == pytest.approx(float(hi[0]), abs=1e-9)
    lo, hi = classical_mean_ci(y, alpha=0.05)
    c = classical_mean(y)
    assert c.ci == pytest.approx([lo, hi], abs=1e-9) and c.mean == pytest.approx(y.mean(), abs=1e-12)


def test_power_tuning_by_hand_and_edge_cases():
    y = np.array([1.0, 3.0, 5.0, 6.0])
    yhat = np.array([2.0, 3.0, 4.0, 6.0])
    yu = np.array([1.0, 2.0, 5.0])
    # lam = cov(y, yhat) / ((1 + n/N) var(all predictions)): ddof 0 over the labelled items, ddof 1 over
    # all predictions (ppi-python centres both at the plain PPI estimate first, which cancels).
    cov = np.mean((y - y.mean()) * (yhat - yhat.mean()))
    var = np.var(np.r_[yhat, yu], ddof=1)
    assert power_tuning(y, yhat, yu) == pytest.approx(min(1.0, cov / ((1 + 4 / 3) * var)))
    # Constant predictions carry no information: lam 0, the human mean and its interval.
    flat = ppi_mean(y, np.full(4, 3.0), np.full(3, 3.0))
    assert flat.lam == 0.0 and flat.mean == pytest.approx(y.mean()) and flat.ci == classical_mean(y).ci
    assert ppi_mean([2.0], [2.0], [1.0, 2.0]).mean is None  # one label: undefined, never a number
    every = ppi_mean(y, yhat, [])  # every item labelled: the human mean
    assert every.mean == pytest.approx(y.mean()) and every.lam == 0.0


def rec(model: str, qid: str, score: float, criterion: str = "overall") -> dict:
    return {"id": qid, "benchmark": "mmie", "task": "SA", "model": model, "metric": "judge",
            "criterion": criterion, "score": score, "status": "ok"}  # fmt: skip


def board_data(seed: int = 0, n: int = 60):
    """Two models on n questions: the judge over-scores model b by 3, so it ranks b first; humans put a
    first. Half of the questions labelled (both models' responses)."""
    rng = np.random.default_rng(seed)
    records, labels = [], {}
    for q in range(n):
        ha, hb = float(rng.integers(3, 6)), float(rng.integers(1, 4))
        for model, h, bias in (("a", ha, 0.0), ("b", hb, 3.0)):
            records.append(rec(model, f"q{q}", float(np.clip(h + bias + rng.normal(0, 0.8), 0, 6))))
            if q % 2 == 0:
                labels[(model, f"q{q}")] = {"overall": h}
    return records, Labels(labels, ["labels.jsonl"])


def test_labels_give_human_only_and_ppi_means_and_ranks_follow_ppi():
    records, labels = board_data()
    plain = build_leaderboard(records, resamples=200)
    lb = build_leaderboard(records, resamples=200, labels=labels)
    judge_only = {m["model"]: m for m in plain["boards"][0]["models"]}
    assert judge_only["b"]["rank"] == 1  # fooled by its bias
    board = lb["boards"][0]
    assert board["ranked_by"] == "ppi"
    rows = {m["model"]: m for m in board["models"]}
    assert rows["a"]["rank"] == 1 and rows["b"]["rank"] == 2  # PPI removes the judge's bias
    for model in ("a", "b"):
        s = {r["id"]: r["score"] for r in records if r["model"] == model}
        lab = [q for q in s if (model, q) in labels.values]
        unl = [q for q in s if (model, q) not in labels.values]
        y = [labels.values[(model, q)]["overall"] for q in lab]
        want = ppi_mean(y, [s[q] for q in lab], [s[q] for q in unl])
        assert rows[model]["ppi"]["mean"] == pytest.approx(want.mean, abs=1e-12)
        assert rows[model]["ppi"]["ci"] == pytest.approx(want.ci, abs=1e-12)
        assert rows[model]["human"]["ci"] == pytest.approx(classical_mean(y).ci, abs=1e-12)
        assert rows[model]["human"]["n_labelled"] == 30
        # The judge-only mean stays what it was (the summary's judge row).
        assert rows[model]["mean"] == judge_only[model]["mean"]
        # PPI is narrower than the human labels alone (the judge correlates with them).
        assert want.width < classical_mean(y).width
    # The win rate of a over b is the PPI mean of the win points, b over a its complement.
    w = {(x["model"], x["opponent"]): x for x in board["win_rates"]}
    sa = {r["id"]: r["score"] for r in records if r["model"] == "a"}
    sb = {r["id"]: r["score"] for r in records if r["model"] == "b"}
    lab = [q for q in sa if ("a", q) in labels.values]
    pts = {q: 0.5 if sa[q] == sb[q] else float(sa[q] > sb[q]) for q in sa}
    hv = {q: labels.values[("a", q)]["overall"] - labels.values[("b", q)]["overall"] for q in lab}
    y = [0.5 if hv[q] == 0 else float(hv[q] > 0) for q in lab]
    want = ppi_mean(y, [pts[q] for q in lab], [pts[q] for q in sa if q not in lab])
    assert w[("a", "b")]["win_rate"] == pytest.approx(want.mean, abs=1e-12)
    assert w[("b", "a")]["win_rate"] == pytest.approx(1 - want.mean, abs=1e-12)
    assert w[("a", "b")]["judge_win_rate"] < 0.5 < w[("a", "b")]["win_rate"]
    assert lb["labels"] == {"files": ["labels.jsonl"], "responses": 60, "matched": 60, "unmatched": 0,
                            "unmatched_examples": []}  # fmt: skip


def test_resampled_ppi_equals_the_estimate_on_the_expanded_resample():
    records, labels = board_data(seed=1, n=20)
    lb = build_leaderboard(records, resamples=50, labels=labels)
    rows = {m["model"]: m for m in lb["boards"][0]["models"]}
    ranked = ["a", "b"]
    plan = ClusterBootstrap([("SA", f"q{q}") for q in range(20)], 30, seeded_rng(3, "x"))
    questions = plan.labels  # the plan's column order
    scores = np.zeros((2, 20))
    for r in records:
        scores[ranked.index(r["model"]), plan.index[("SA", r["id"])]] = r["score"]
    human_q = {
        m: {("SA", i): v["overall"] for (mm, i), v in labels.values.items() if mm == m} for m in ranked
    }
    boot = _resampled_ppi(plan, ranked, scores, np.ones((2, 20)), human_q, rows)
    for b in range(5):
        counts = plan.counts[b]
        for i, m in enumerate(ranked):
            lam = rows[m]["ppi"]["lam"]
            lab = [(j, c) for j, c in enumerate(counts) for _ in range(c) if questions[j] in human_q[m]]
            unl = [(j, c) for j, c in enumerate(counts) for _ in range(c) if questions[j] not in human_q[m]]
            y = [human_q[m][questions[j]] for j, _ in lab]
            est = ppi_mean(y, [scores[i, j] for j, _ in lab], [scores[i, j] for j, _ in unl], lam=lam)
            assert boot[b, i] == pytest.approx(est.mean, abs=1e-9)


def test_too_few_labels_keep_the_judge_ranking_and_say_so():
    records, _ = board_data(n=10)
    labels = Labels({("a", "q0"): {"overall": 5.0}, ("zz", "q0"): {"overall": 1.0}}, ["l.jsonl"])
    lb = build_leaderboard(records, resamples=50, labels=labels)
    board = lb["boards"][0]
    assert board["ranked_by"] == "judge" and {m["model"]: m["ppi"]["mean"] for m in board["models"]} == {
        "a": None,
        "b": None,
    }
    assert lb["labels"]["unmatched"] == 1 and lb["labels"]["unmatched_examples"] == ["zz/q0"]
    md = "\n".join(
        render_markdown(
            build_summary(records, scale=(0, 6), run={}, leaderboard_resamples=50, labels=labels)
        ).splitlines()
    )
    assert "Too few labelled questions for a prediction-powered mean: ranked by the judge." in md


def test_summary_files_carry_the_three_estimates(tmp_path):
    records, labels = board_data()
    summary = build_summary(records, scale=(0, 6), run={}, leaderboard_resamples=100, labels=labels)
    write_summary(tmp_path, summary)
    with open(tmp_path / "leaderboard.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == LEADERBOARD_COLUMNS
    by = {r["model"]: r for r in rows if r["group"] == "all"}
    assert by["a"]["ranked_by"] == "ppi" and by["a"]["rank"] == "1" and float(by["a"]["n_labelled"]) == 30
    assert float(by["a"]["ppi_ci_low"]) < float(by["a"]["ppi_mean"]) < float(by["a"]["ppi_ci_high"])
    with open(tmp_path / "win_rates.csv") as f:
        wins = list(csv.DictReader(f))
    assert list(wins[0]) == WIN_RATE_COLUMNS and wins[0]["judge_win_rate"]
    md = (tmp_path / "summary.md").read_text()
    assert "human-only [95% CI] (labelled)" in md and "PPI [95% CI]" in md
    assert "Prediction-powered win rate of the row model" in md
    assert json.loads((tmp_path / "summary.json").read_text())["leaderboard"]["labels"]["matched"] == 60


def test_labels_load_from_annotation_files_and_a_response_labelled_twice_is_refused(
    small_demo, tmp_path, rubric
):
    labels = load_labels([small_demo], rubric)
    recs = [json.loads(x) for x in small_demo.read_text().splitlines()]
    first = recs[0]
    want = float(np.mean([s["overall"] for s in first["scores"].values()]))
    assert labels.values[(first["model"], first["id"])]["overall"] == pytest.approx(want)
    twice = tmp_path / "twice.jsonl"
    twice.write_text(small_demo.read_text().splitlines()[0] + "\n")
    with pytest.raises(Exception, match="labelled in .* too"):
        load_labels([small_demo, twice], rubric)


def test_judge_data_sample_draws_a_seeded_share_of_the_lines(small_demo, capsys):
    from judge.cli.data import data_main

    lines = small_demo.read_text().splitlines()
    assert data_main(["sample", str(small_demo), "--fraction", "0.2", "--seed", "3"]) == 0
    out = small_demo.with_name("annotations-sample20.jsonl")
    got = out.read_text().splitlines()
    assert len(got) == round(0.2 * len(lines)) and set(got) <= set(lines)
    assert got == [x for x in lines if x in set(got)]  # file order kept
    assert f"{len(got)} of {len(lines)} records (seed 3)" in capsys.readouterr().out
    again = small_demo.with_name("again.jsonl")
    data_main(["sample", str(small_demo), "--fraction", "0.2", "--seed", "3", "--out", str(again)])
    assert again.read_text().splitlines() == got
    data_main(["sample", str(small_demo), "--fraction", "0.2", "--seed", "4", "--out", str(again)])
    assert again.read_text().splitlines() != got
    with pytest.raises(SystemExit):
        data_main(["sample", str(small_demo), "--fraction", "1.5"])
    assert "is not in (0, 1]" in capsys.readouterr().err
    assert data_main(["sample", str(small_demo), "--fraction", "0.5", "--out", str(small_demo)]) == 2
    assert "is the input file" in capsys.readouterr().err
