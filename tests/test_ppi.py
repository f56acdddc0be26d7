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
from judge.scoring.leaderboard import _resampled_ppi, build_leaderboard
from judge.scoring.leaderboard_files import LEADERBOARD_COLUMNS, WIN_RATE_COLUMNS
from judge.scoring.summary import build_summary, render_markdown, write_summary


@pytest.mark.parametrize("seed", range(6))
def test_ppi_point_estimate_and_lambda_equal_ppi_python(seed):
    from ppi_py import ppi_mean_pointestimate

    rng = np.random.default_rng(seed)
    n, big_n = int(rng.integers(3, 60)), int(rng.integers(5, 400))
    y = rng.integers(0, 7, n).astype(float)
    yhat = np.clip(y + rng.normal(0.5, 1.2, n), 0, 6)
    yhat_u = np.clip(rng.normal(3, 1.5, big_n), 0, 6)
    for lam in (None, 1.0, 0.0, 0.37):
        ours = ppi_mean(y, yhat, yhat_u, lam=lam)
        point = float(np.squeeze(ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam)))
        assert ours.mean == pytest.approx(point, abs=1e-9)
    # The estimate is linear in lam: ppi-python's tuned lam, read back from its point estimate.
    tuned = float(np.squeeze(ppi_mean_pointestimate(y, yhat, yhat_u)))
    if abs(yhat_u.mean() - yhat.mean()) > 1e-6:
        assert power_tuning(y, yhat, yhat_u) == pytest.approx(
            (tuned - y.mean()) / (yhat_u.mean() - yhat.mean()), abs=1e-9
        )


@pytest.mark.parametrize("seed", range(4))
def test_intervals_are_student_t_the_tuned_one_with_the_brute_force_jackknife(seed):
    from ppi_py import ppi_mean_pointestimate
    from scipy import stats

    rng = np.random.default_rng(seed)
    n, big_n = int(rng.integers(8, 40)), int(rng.integers(20, 300))
    y = rng.integers(0, 7, n).astype(float)
    yhat = np.clip(y + rng.normal(0.3, 1.0, n), 0, 6)
    yhat_u = np.clip(rng.normal(3, 1.5, big_n), 0, 6)
    # Human-only: scipy's one-sample t interval.
    want = stats.ttest_1samp(y, 0.0).confidence_interval(0.95)
    assert classical_mean(y).ci == pytest.approx([want.low, want.high], abs=1e-9)
    # lam given: Student's t(n - 1) with the two sample variances (scipy's sem, ddof 1).
    lam = 0.6
    est = ppi_mean(y, yhat, yhat_u, lam=lam)
    se = np.hypot(stats.sem(lam * yhat_u), stats.sem(y - lam * yhat))
    assert est.ci == pytest.approx(list(stats.t.interval(0.95, n - 1, loc=est.mean, scale=se)), abs=1e-9)
    # lam tuned: the labelled term's variance is the jackknife's over leave-one-out re-tuned estimates,
    # each ppi-python's own point estimate.
    loo = np.asarray(
        [
            float(np.squeeze(ppi_mean_pointestimate(np.delete(y, i), np.delete(yhat, i), yhat_u)))
            for i in range(n)
        ]
    )
    jack = (n - 1) / n * np.sum((loo - loo.mean()) ** 2)
    tuned = ppi_mean(y, yhat, yhat_u)
    se = np.sqrt(jack + stats.sem(tuned.lam * yhat_u) ** 2)
    assert tuned.ci == pytest.approx(list(stats.t.interval(0.95, n - 1, loc=tuned.mean, scale=se)), abs=1e-9)


def _labels_world(n_draw: int, rng):
    """Human scores on the 0-6 scale and a noisy, biased judge, drawn i.i.d.; the human scores' exact mean."""
    from scipy.stats import norm

    def draw(size: int):
        h = np.clip(np.round(rng.normal(3.5, 1.6, size)), 0, 6)
        return h, np.clip(0.6 * h + 1.5 + rng.normal(0, 1.0, size), 0, 6)

    edges = norm.cdf((np.arange(0.5, 6.0, 1.0) - 3.5) / 1.6)
    probs = np.diff(np.r_[0.0, edges, 1.0])
    return draw, float(np.dot(probs, np.arange(7)))


@pytest.mark.parametrize("n_labels", [10, 20])
def test_intervals_reach_their_level_at_small_label_counts(n_labels):
    # 3,000 leaderboards of 175 responses, n_labels of them labelled at random: both intervals cover the
    # mean at 95% to within 1.2 points (Monte Carlo error 0.4). The normal intervals with ddof 0 that
    # ppi-python gives covered 89% (PPI) and 91% (human-only) at 10 labels here.
    rng = np.random.default_rng(n_labels)
    draw, truth = _labels_world(175, rng)
    ppi_cover, human_cover, narrower = [], [], []
    for _ in range(3000):
        h, s = draw(175)
        est = ppi_mean(h[:n_labels], s[:n_labels], s[n_labels:], min_labels=n_labels)
        hum = classical_mean(h[:n_labels], min_labels=n_labels)
        ppi_cover.append(est.ci[0] <= truth <= est.ci[1])
        human_cover.append(hum.ci[0] <= truth <= hum.ci[1])
        narrower.append(est.width < hum.width)
    assert abs(np.mean(ppi_cover) - 0.95) <= 0.012, np.mean(ppi_cover)
    assert abs(np.mean(human_cover) - 0.95) <= 0.012, np.mean(human_cover)
    assert np.mean(narrower) > 0.7  # and PPI is usually the narrower


def test_estimates_stay_in_their_range_and_say_what_a_bound_moved():
    y = np.array([6.0, 6.0, 5.0, 6.0, 6.0, 5.0, 6.0, 6.0, 6.0, 5.0])
    yhat = y - 3.0  # the judge scores labelled responses 3 points low...
    yhat_u = np.full(40, 6.0)  # ...and the rest at the top: plain PPI's mean is about 9
    free = ppi_mean(y, yhat, yhat_u, lam=1.0)
    assert free.mean > 8.5 and free.ci[0] > 6.0 and not free.bounded
    est = ppi_mean(y, yhat, yhat_u, lam=1.0, bounds=(0.0, 6.0))
    assert est.mean == 6.0 and est.ci == [6.0, 6.0] and est.bounded == ["mean", "ci_low", "ci_high"]
    assert est.to_dict()["bounded"] == ["mean", "ci_low", "ci_high"]
    # An interval that pokes out on one side is cut there, its other end and the mean kept.
    hum = classical_mean(y, bounds=(0.0, 6.0), ends=False)  # the bound alone (the tie guard widens more)
    plain = classical_mean(y)
    assert plain.ci[1] > 6.0 and hum.ci == [plain.ci[0], 6.0] and hum.mean == plain.mean
    assert hum.bounded == ["ci_high"]
    # Inside the range nothing moves, and nothing is said.
    mid = ppi_mean(y - 2, yhat, yhat_u - 3, bounds=(0.0, 6.0))
    assert not mid.bounded and "bounded" not in mid.to_dict()


def test_too_few_labels_give_no_estimate_and_say_why():
    y, yhat = [1.0, 2.0, 3.0], [1.5, 2.5, 2.0]
    est = ppi_mean(y, yhat, [2.0] * 20, min_labels=10)
    assert est.mean is None and est.ci is None and "3 labelled, fewer than the 10" in est.reason
    assert classical_mean(y, min_labels=10).mean is None
    assert ppi_mean(y, yhat, [2.0] * 20, min_labels=3).mean is not None


def test_power_tuning_by_hand_and_edge_cases():
    y = np.array([1.0, 3.0, 5.0, 6.0])
    yhat = np.array([2.0, 3.0, 4.0, 6.0])
    yu = np.array([1.0, 2.0, 5.0])
    # lam = cov(y, yhat) / ((1 + n/N) var(all predictions)): ddof 0 over the labelled items, ddof 1 over
    # all predictions (ppi-python centres both at the plain PPI estimate first, which cancels).
    cov = np.mean((y - y.mean()) * (yhat - yhat.mean()))
    var = np.var(np.r_[yhat, yu], ddof=1)
    assert power_tuning(y, yhat, yu) == pytest.approx(min(1.0, cov / ((1 + 4 / 3) * var)))
    # Constant predictions carry no information: lam 0, the human mean (its interval: the jackknife of the
    # labels' mean is their sample variance over n, Student's interval).
    flat = ppi_mean(y, np.full(4, 3.0), np.full(3, 3.0))
    assert (
        flat.lam == 0.0
        and flat.mean == pytest.approx(y.mean())
        and flat.ci == pytest.approx(classical_mean(y).ci)
    )
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


def test_too_few_labels_keep_the_judge_ranking_and_say_so(tmp_path):
    records, _ = board_data(n=10)
    labels = Labels({("a", "q0"): {"overall": 5.0}, ("zz", "q0"): {"overall": 1.0}}, ["l.jsonl"])
    lb = build_leaderboard(records, resamples=50, labels=labels)
    board = lb["boards"][0]
    assert board["ranked_by"] == "judge" and {m["model"]: m["ppi"]["mean"] for m in board["models"]} == {
        "a": None,
        "b": None,
    }
    assert "a (1 labelled, fewer than the 10" in board["ppi_reason"]
    assert lb["labels"]["unmatched"] == 1 and lb["labels"]["unmatched_examples"] == ["zz/q0"]
    summary = build_summary(records, scale=(0, 6), run={}, leaderboard_resamples=50, labels=labels)
    md = render_markdown(summary)
    assert (
        "Too few labelled questions for a prediction-powered mean of every model: ranked by the judge" in md
    )
    assert "- (1 labelled, fewer than the 10 an estimate needs (min_labels))" in md  # the empty PPI cell
    write_summary(tmp_path, summary)
    with open(tmp_path / "leaderboard.csv") as f:
        rows = {r["model"]: r for r in csv.DictReader(f) if r["group"] == "all"}
    assert rows["a"]["ppi_mean"] == "" and "fewer than the 10" in rows["a"]["ppi_note"]


def test_a_board_is_never_ranked_by_ppi_unless_every_model_has_it():
    records, full = board_data(n=40)  # half the questions labelled for both models
    # b keeps only 5 of its labels: below min_labels, so b has no PPI mean while a has one.
    kept = {k: v for k, v in full.values.items() if k[0] == "a" or int(k[1][1:]) < 10}
    lb = build_leaderboard(records, resamples=50, labels=Labels(kept, ["l.jsonl"]))
    board = lb["boards"][0]
    rows = {m["model"]: m for m in board["models"]}
    assert rows["a"]["ppi"]["mean"] is not None and rows["b"]["ppi"]["mean"] is None
    assert board["ranked_by"] == "judge" and "b (5 labelled" in board["ppi_reason"]
    assert all("judge_win_rate" not in w for w in board["win_rates"])  # judge-only win rates, said so
    # With min_labels 5 both have one, and the board follows PPI.
    lb5 = build_leaderboard(records, resamples=50, labels=Labels(kept, ["l.jsonl"]), min_labels=5)
    assert lb5["boards"][0]["ranked_by"] == "ppi" and lb5["min_labels"] == 5


def three_model_board(seed: int, n: int = 30, labelled: int = 6):
    """Three models whose judge scores sit near the top of the scale on n questions, the first `labelled`
    questions labelled for every model (as judge-data sample --by question draws them)."""
    rng = np.random.default_rng(seed)
    records, labels = [], {}
    for q in range(n):
        for model, mu in (("a", 5.2), ("b", 4.0), ("c", 2.5)):
            h = float(np.clip(np.round(rng.normal(mu, 1.0)), 0, 6))
            records.append(rec(model, f"q{q}", float(np.clip(h + rng.normal(0.8, 1.0), 0, 6))))
            if q < labelled:
                labels[(model, f"q{q}")] = {"overall": h}
    return records, Labels(labels, ["l.jsonl"])


def test_means_and_win_rates_stay_in_their_range_and_the_outputs_say_when_a_bound_moved(tmp_path):
    # Few labels (min_labels 2, to attack it): PPI corrections push estimates past the scale and past [0, 1],
    # as the demo's 1.25 win rate did; every number stays in its range, and what was moved is marked.
    moved = 0
    for seed in range(25):
        records, labels = three_model_board(seed)
        lb = build_leaderboard(records, resamples=30, labels=labels, scale=(0, 6), min_labels=2)
        for board in lb["boards"]:
            for m in board["models"]:
                for est in (m["human"], m["ppi"]):
                    if est["mean"] is not None:
                        assert 0.0 <= est["ci"][0] <= est["mean"] <= est["ci"][1] <= 6.0, est
                        moved += bool(est.get("bounded"))
            for w in board["win_rates"]:
                if w["win_rate"] is not None:
                    assert 0.0 <= w["ci"][0] <= w["win_rate"] <= w["ci"][1] <= 1.0, w
                    moved += bool(w.get("bounded"))
            pairs = {(w["model"], w["opponent"]): w for w in board["win_rates"]}
            for (x, y), w in pairs.items():
                if w["win_rate"] is not None:
                    assert pairs[(y, x)]["win_rate"] == pytest.approx(1.0 - w["win_rate"])
    assert moved > 0  # the bounds were needed, so the test attacked them
    records, labels = next(
        (r, lab) for seed in range(25) for r, lab in [three_model_board(seed)]
        if any(w.get("bounded") for b in build_leaderboard(r, resamples=30, labels=lab, scale=(0, 6),
                                                            min_labels=2)["boards"] for w in b["win_rates"])
    )  # fmt: skip
    summary = build_summary(
        records, scale=(0, 6), run={}, leaderboard_resamples=30, labels=labels, min_labels=2
    )
    write_summary(tmp_path, summary)
    md = (tmp_path / "summary.md").read_text()
    assert "†" in md and "set to the range's end: the interval keeps its coverage" in md
    with open(tmp_path / "win_rates.csv") as f:
        assert any(r["note"].startswith("bounded to its range") for r in csv.DictReader(f))


def test_the_consoles_bounded_mark_has_its_legend_beside_it():
    """judge-score's console leaderboard prints the mark of a bounded estimate with what it means (the legend
    was only in summary.md); judge-view's board caption carries the same legend."""
    from judge.scoring.leaderboard_files import BOUNDED_LEGEND, board_table
    from judge.scoring.summary import render_console

    def marked(board):
        return any("†" in str(x) for row in board_table(board)[1] for x in row)

    records, labels = next(
        (r, lab) for seed in range(25) for r, lab in [three_model_board(seed)]
        if any(marked(b) for b in build_leaderboard(r, resamples=30, labels=lab, scale=(0, 6),
                                                     min_labels=2)["boards"] if b["group"] == "all")
    )  # fmt: skip
    summary = build_summary(
        records, scale=(0, 6), run={}, leaderboard_resamples=30, labels=labels, min_labels=2
    )
    console = render_console(summary)
    assert "†" in console
    assert BOUNDED_LEGEND in console and BOUNDED_LEGEND.startswith("† an end of the interval")


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


def test_judge_data_sample_by_question_labels_every_response_to_a_drawn_question(
    small_demo, tmp_path, capsys
):
    from collections import Counter

    from judge.cli.data import data_main

    recs = [json.loads(x) for x in small_demo.read_text().splitlines()]
    per_q = Counter(r["question_id"] for r in recs)
    out = tmp_path / "by-question.jsonl"
    assert data_main(["sample", str(small_demo), "--fraction", "0.25", "--by", "question", "--seed", "1",
                      "--out", str(out)]) == 0  # fmt: skip
    got = [json.loads(x) for x in out.read_text().splitlines()]
    drawn = Counter(r["question_id"] for r in got)
    assert len(drawn) == round(0.25 * len(per_q))
    assert all(drawn[q] == per_q[q] for q in drawn)  # every response of each drawn question
    assert f"{len(got)} of {len(recs)} records ({len(drawn)} of {len(per_q)} questions) (seed 1)" in (
        capsys.readouterr().out
    )
    # Predictions: candidate models' records for one item share its id; the item is the question.
    preds = tmp_path / "preds.jsonl"
    rows = [{"id": f"i{i}", "benchmark": "b", "task": "SA", "model": m, "question": "q", "response": "r"}
            for i in range(20) for m in ("x", "y", "z")]  # fmt: skip
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data_main(
        ["sample", str(preds), "--fraction", "0.3", "--by", "question", "--out", str(tmp_path / "p.jsonl")]
    )
    ids = Counter(json.loads(x)["id"] for x in (tmp_path / "p.jsonl").read_text().splitlines())
    assert len(ids) == 6 and set(ids.values()) == {3}
    # A record that is not JSON is an error naming the file and line.
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[0]) + "\n\n{oops\n")
    assert data_main(["sample", str(bad), "--fraction", "0.5", "--by", "question", "--out", str(out)]) == 2
    assert "bad.jsonl, line 3: not JSON" in capsys.readouterr().err


def test_judge_data_sample_draws_the_same_questions_across_one_file_per_model(tmp_path, capsys):
    """One prediction file per model (as judge-score takes them): `sample a b c --by question` draws whole
    questions across them, every model's response to each, the draw of the files put together."""
    from collections import Counter

    from judge.cli.data import data_main

    files, rows = [], []
    for m in ("x", "y", "z"):
        mine = [{"id": f"i{i}", "benchmark": "b", "task": "SA", "model": m, "question": "q", "response": m}
                for i in range(20)]  # fmt: skip
        files.append(tmp_path / f"preds-{m}.jsonl")
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in mine))
        rows += mine
    together = tmp_path / "all.jsonl"
    together.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, ref = tmp_path / "to_label.jsonl", tmp_path / "ref.jsonl"
    assert data_main(["sample", *map(str, files), "--fraction", "0.3", "--by", "question",
                      "--out", str(out)]) == 0, capsys.readouterr().err  # fmt: skip
    assert "18 of 60 records (6 of 20 questions)" in capsys.readouterr().out
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert Counter(r["id"] for r in got) == Counter({i: 3 for i in {r["id"] for r in got}})
    assert {r["model"] for r in got} == {"x", "y", "z"} and len(got) == 18
    assert (
        data_main(["sample", str(together), "--fraction", "0.3", "--by", "question", "--out", str(ref)]) == 0
    )
    assert out.read_text() == ref.read_text()
    # Several files and no --out: where the one sample goes is asked for, not guessed.
    assert data_main(["sample", *map(str, files), "--fraction", "0.3", "--by", "question"]) == 2
    assert "3 input files: name the one sample file with --out" in capsys.readouterr().err
