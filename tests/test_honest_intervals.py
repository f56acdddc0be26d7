"""Issue 38, "zero-width intervals": no interval from sampled data has width 0, bounded means keep their
level when labels tie at a few labels, and every interval is printed with its n."""

from __future__ import annotations

import json

import judge_bench_data as D
import numpy as np
import pytest

from judge.cli.bench import main as bench_main
from judge.eval.ppi import classical_mean, ppi_mean
from judge.scoring.labelled import Labels
from judge.scoring.leaderboard import build_leaderboard
from judge.scoring.leaderboard_files import leaderboard_markdown

SCALE = (1.0, 6.0)


def rec(model: str, qid: str, score: float) -> dict:
    return {"id": qid, "benchmark": "mmie", "task": "SA", "model": model, "metric": "judge",
            "criterion": "overall", "score": score, "status": "ok"}  # fmt: skip


def test_equal_labels_give_no_zero_width_mean_interval_on_the_board():
    # The case: 12 labelled responses per model, every one rated 3, while the judge's scores (and
    # the true means, about 3.7, 3.0 and 2.2) differ. Base: "3.0 [3.0, 3.0]" for each model.
    rng = np.random.default_rng(3)
    records, labels = [], {}
    for q in range(60):
        for model, centre in (("m1", 3.7), ("m2", 3.0), ("m3", 2.2)):
            records.append(rec(model, f"q{q}", float(np.clip(centre + rng.normal(0, 0.8), 1, 6))))
            if q < 12:
                labels[(model, f"q{q}")] = {"overall": 3.0}
    lb = build_leaderboard(records, resamples=200, scale=(1, 6), labels=Labels(labels, ["l.jsonl"]))
    board = lb["boards"][0]
    for m in board["models"]:
        for kind in ("human", "ppi"):
            est = m[kind]
            assert est["mean"] is not None and est["ci"][1] - est["ci"][0] > 0.2, (m["model"], kind, est)
            assert est["ci"][0] <= est["mean"] <= est["ci"][1]
    md = "\n".join(leaderboard_markdown(lb))
    assert "[3.000, 3.000]" not in md
    # n beside the PPI interval too (it was printed only beside the human-only one).
    assert md.count("(n=12)") >= 6


def _coverage(vals, probs, n, draws=1000, seed=0):
    """Share of ``draws`` seeded label samples (n labelled of 80 responses) whose human-only and PPI
    intervals on the scale hold the true mean; the judge is the label plus noise, clipped to the scale."""
    rng = np.random.default_rng(seed)
    truth = float(np.dot(vals, probs))
    hum, ppi = [], []
    for _ in range(draws):
        h = rng.choice(vals, size=80, p=probs).astype(float)
        s = np.clip(h + rng.normal(0, 1.0, h.size), *SCALE)
        a = classical_mean(h[:n], bounds=SCALE)
        b = ppi_mean(h[:n], s[:n], s[n:], bounds=SCALE)
        hum.append(a.ci[0] <= truth <= a.ci[1])
        ppi.append(b.ci[0] <= truth <= b.ci[1])
    return float(np.mean(hum)), float(np.mean(ppi))


@pytest.mark.parametrize(
    "vals, probs, n",
    [
        ([3, 4, 6], [0.8, 0.15, 0.05], 12),  # 80% of responses tie at 3: Student's covered 80% here
        ([1, 2], [0.8, 0.2], 12),  # 80% at the scale's end: Student's covered 93% (PPI 91%)
        ([1, 2, 3, 4, 5, 6], [0.05, 0.15, 0.3, 0.3, 0.15, 0.05], 10),  # no ties to speak of
    ],
)
def test_bounded_intervals_keep_their_level_when_labels_tie(vals, probs, n):
    # 1,000 seeded draws: nominal 95%, tolerance 1.5 points (Monte Carlo error about 0.7).
    hum, ppi = _coverage(vals, probs, n)
    assert hum >= 0.935 and ppi >= 0.935, (hum, ppi)


def test_a_one_question_board_prints_no_zero_width_interval():
    # judge-score on one question printed "2.120 [2.120, 2.120]": a bootstrap of one question cannot vary.
    records = [rec("a", "q1", 2.12), rec("b", "q1", 3.5)]
    lb = build_leaderboard(records, resamples=200)
    board = lb["boards"][0]
    assert [m["ci"] for m in board["models"]] == [None, None]
    assert all(w["ci"] is None for w in board["win_rates"])
    md = "\n".join(leaderboard_markdown(lb))
    assert "[2.120, 2.120]" not in md and "2.120 [no interval]" in md and "[1.00, 1.00]" not in md


def test_judge_bench_prints_n_and_no_zero_width_interval(tmp_path, capsys):
    # Every verdict right: each category's accuracy is 100% in every resample. Base: [100.0000, 100.0000].
    path, _ = D.write_mmrb(tmp_path / "data")
    rows = json.loads(path.read_text())
    outputs = [{"id": r["ID"], "p_first_better": 0.9 if r["Better"] == "Output1" else 0.1} for r in rows]
    D.write_outputs(tmp_path / "outputs.jsonl", outputs)
    out = tmp_path / "out"
    args = ["multimodal-rewardbench", str(path), "--judge-outputs", str(tmp_path / "outputs.jsonl")]
    assert bench_main([*args, "--bootstrap", "50", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads((out / "bench.json").read_text())
    for mode in ("official", "strict"):
        ivs = doc[mode]["intervals"]
        assert all(iv is None or iv[1] > iv[0] for iv in ivs.values()), ivs
        assert doc[mode]["n_units"] == len(rows)
    for text in (printed, (out / "bench.md").read_text()):
        assert "[100.0000, 100.0000]" not in text and "[0.0000, 0.0000]" not in text
        assert f"(n={len(rows)}: no interval)" in text


def test_every_board_says_what_it_is_ranked_by(tmp_path):
    # Two tasks of 8 questions, 6 labelled each: the all-tasks board has 12 labelled questions per model
    # (ranked by PPI), each task's board 6 (too few: ranked by the judge), so model b can lead with the
    # lower judge mean on one and not the other. Base: neither the console, summary.md nor judge-view said so.
    from judge.scoring.summary import build_summary, render_console, render_markdown

    rng = np.random.default_rng(0)
    records, labels = [], {}
    for task in ("SA", "PBL"):
        for q in range(8):
            for model, human, bias in (("a", 4.0, 1.5), ("b", 5.0, 0.0)):
                h = float(np.clip(human + rng.integers(-1, 2), 1, 6))
                records.append({**rec(model, f"{task}{q}", float(np.clip(h + bias, 1, 6))), "task": task})
                if q < 6:
                    labels[(model, f"{task}{q}")] = {"overall": h}
    summary = build_summary(records, scale=(1, 6), run={}, labels=Labels(labels, ["l.jsonl"]))
    boards = {b["group"]: b for b in summary["leaderboard"]["boards"]}
    assert boards["all"]["ranked_by"] == "ppi" and boards["SA"]["ranked_by"] == "judge"
    console = render_console(summary)
    assert "leaderboard, mmie, all tasks, ranked by the prediction-powered (PPI) mean:" in console
    md = render_markdown(summary)
    md = md[md.index("## Leaderboard") :]
    sa = md[md.index("### mmie, task SA") :]
    assert sa.index("Ranked by the judge-only mean.") < sa.index("| rank |")
    every = md[md.index("### mmie, all tasks") :]
    assert every.index("Ranked by the prediction-powered (PPI) mean.") < every.index("| rank |")
