"""The leaderboard of ``judge-score``'s summary: means, ranks, bootstrap intervals, win rates, its files."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from judge.cli.score import main
from judge.core.errors import ConfigError
from judge.eval.bootstrap import ClusterBootstrap, seeded_rng
from judge.scoring import ScoreConfig
from judge.scoring.leaderboard import build_leaderboard
from judge.scoring.leaderboard_files import LEADERBOARD_COLUMNS, WIN_RATE_COLUMNS
from judge.scoring.summary import build_summary, render_markdown, write_summary

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "predictions"


def rec(model: str, qid: str, score: float | None, task: str = "SA", criterion: str = "overall") -> dict:
    """A judge score record as scores.jsonl holds it (unscorable: null score with a reason)."""
    r = {
        "id": qid,
        "benchmark": "mmie",
        "task": task,
        "model": model,
        "metric": "judge",
        "criterion": criterion,
        "score": score,
        "status": "ok",
    }
    if score is None:
        r.update(status="unscorable", reason="image missing", details={"reason_code": "image"})
    return r


#: Task SA: a answers q1..q3, b q1, q2 (q3 unscorable), c q1, q3. PBL: a alone (d unscorable). MSR: nothing scored.
RECORDS = [
    rec("a", "q1", 4.0),
    rec("b", "q1", 3.0),
    rec("c", "q1", 4.0),  # ties with a
    rec("a", "q2", 2.0),
    rec("b", "q2", 5.0),
    rec("a", "q3", 5.0),
    rec("b", "q3", None),
    rec("c", "q3", 1.0),
    rec("a", "p1", 3.0, task="PBL"),
    rec("d", "p1", None, task="PBL"),
    rec("a", "x1", None, task="MSR"),
    # Rule-based metrics and criterion scores take no part in the ranking.
    {**rec("c", "q2", 1.0), "metric": "mmie.mc_accuracy", "criterion": None},
    rec("c", "q1", 6.0, criterion="text_quality"),
]


def boards(lb: dict) -> dict[str, dict]:
    return {b["group"]: b for b in lb["boards"]}


def models(board: dict) -> dict[str, dict]:
    return {m["model"]: m for m in board["models"]}


def wins(board: dict) -> dict[tuple[str, str], dict]:
    return {(w["model"], w["opponent"]): w for w in board["win_rates"]}


def test_means_ranks_and_win_rates_by_hand():
    lb = build_leaderboard(RECORDS, resamples=300, seed=3)
    by = boards(lb)
    assert list(by) == ["PBL", "SA", "all"]  # tasks in order, "all" last; MSR has no score
    assert lb["skipped"] == [
        {
            "benchmark": "mmie",
            "group": "MSR",
            "level": "task",
            "basis": "overall",
            "reason": "no scored judge records",
            "n_unscorable": 1,
        }
    ]
    sa = by["SA"]
    assert sa["basis"] == "overall" and sa["n_questions"] == 3
    # Means over each model's own scored questions: b 8/2, a 11/3, c 5/2; ranked best first.
    assert [(m["rank"], m["model"]) for m in sa["models"]] == [(1, "b"), (2, "a"), (3, "c")]
    ms = models(sa)
    assert ms["b"]["mean"] == 4.0 and ms["a"]["mean"] == pytest.approx(11 / 3) and ms["c"]["mean"] == 2.5
    assert [(ms[k]["n"], ms[k]["n_unscorable"]) for k in "abc"] == [(3, 0), (2, 1), (2, 0)]
    w = wins(sa)
    # a-c share q1 (tie, counted half) and q3 (a wins): 1.5 / 2; c-a the rest.
    assert (w[("a", "c")]["win_rate"], w[("a", "c")]["ties"], w[("a", "c")]["n_shared"]) == (0.75, 1, 2)
    assert w[("c", "a")]["win_rate"] == 0.25 and (w[("c", "a")]["wins"], w[("c", "a")]["losses"]) == (0, 1)
    # b-c share only q1 (b's q3 is unscorable): c wins it.
    assert (w[("b", "c")]["win_rate"], w[("b", "c")]["n_shared"]) == (0.0, 1)
    assert w[("b", "a")]["win_rate"] == 0.5 and w[("b", "a")]["n_shared"] == 2
    assert len(w) == 6 and all(w[(x, y)]["win_rate"] + w[(y, x)]["win_rate"] == 1.0 for x, y in w)
    # "all": a's PBL question joins its SA ones; d answered but has no score: listed, not ranked.
    every = by["all"]
    assert every["n_questions"] == 4 and models(every)["a"]["mean"] == 3.5 and models(every)["a"]["n"] == 4
    assert models(every)["a"]["n_unscorable"] == 1  # MSR x1
    assert every["models"][-1] == {
        "rank": None,
        "model": "d",
        "mean": None,
        "ci": None,
        "rank_ci": None,
        "n": 0,
        "n_unscorable": 1,
    }
    assert [m["model"] for m in every["models"]] == ["b", "a", "c", "d"]
    # A single ranked model: rank 1 for certain, no matrix; one question gives no interval (not [3, 3]).
    pbl = by["PBL"]
    assert models(pbl)["a"] == {
        "rank": 1,
        "model": "a",
        "mean": 3.0,
        "ci": None,
        "rank_ci": [1, 1],
        "n": 1,
        "n_unscorable": 0,
    }
    assert pbl["win_rates"] == []
    json.dumps(lb, allow_nan=False)  # never NaN


def test_equal_means_share_a_rank():
    lb = build_leaderboard([rec("a", "q1", 2.0), rec("b", "q1", 2.0), rec("c", "q1", 1.0)], resamples=50)
    sa = boards(lb)["SA"]
    assert [(m["rank"], m["model"]) for m in sa["models"]] == [(1, "a"), (1, "b"), (3, "c")]
    assert wins(sa)[("a", "b")]["win_rate"] == 0.5 and wins(sa)[("a", "b")]["ties"] == 1


def random_records(seed: int = 0, n_questions: int = 30) -> list[dict]:
    """Three models of different strength; m3 answered only every other question."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_questions):
        for k, model in enumerate(["m1", "m2", "m3"]):
            if model == "m3" and q % 2:
                continue
            out.append(rec(model, f"q{q}", float(np.clip(rng.normal(2.5 + 0.4 * k, 1.2), 0, 6))))
    return out


def test_intervals_are_the_resampled_statistics_and_reproducible():
    records = random_records()
    lb = build_leaderboard(records, resamples=400, seed=7)
    board = boards(lb)["SA"]
    # The same plan, expanded explicitly: every drawn question counted as often as drawn.
    plan = ClusterBootstrap(
        sorted({("SA", r["id"]) for r in records}), 400, seeded_rng(7, "leaderboard", "mmie", "SA")
    )
    score = {(r["model"], ("SA", r["id"])): r["score"] for r in records}
    names = ["m1", "m2", "m3"]
    boot = np.full((400, 3), np.nan)
    for b in range(400):
        drawn = [q for q, c in zip(plan.labels, plan.counts[b], strict=True) for _ in range(int(c))]
        for i, m in enumerate(names):
            vals = [score[(m, q)] for q in drawn if (m, q) in score]
            boot[b, i] = sum(vals) / len(vals)
    ranks = 1 + (boot[:, None, :] > boot[:, :, None]).sum(axis=2)
    for i, m in enumerate(names):
        row = models(board)[m]
        mine = [v for (mm, _), v in score.items() if mm == m]
        assert row["mean"] == pytest.approx(math.fsum(mine) / len(mine), abs=1e-12)
        assert row["ci"] == pytest.approx(list(np.percentile(boot[:, i], [2.5, 97.5])), abs=1e-9)
        assert row["ci"][0] <= row["mean"] <= row["ci"][1]
        assert row["rank_ci"] == [
            int(np.percentile(ranks[:, i], 2.5, method="lower")),
            int(np.percentile(ranks[:, i], 97.5, method="higher")),
        ]
    assert models(board)["m3"]["n"] == 15
    # Win rate intervals: resampled on the same plan.
    wr = wins(board)[("m3", "m1")]
    shared = [q for q in plan.labels if ("m3", q) in score]
    pts = {
        q: 1.0
        if score[("m3", q)] > score[("m1", q)]
        else 0.5
        if score[("m3", q)] == score[("m1", q)]
        else 0.0
        for q in shared
    }
    reps = [
        sum(pts[q] * c for q, c in zip(plan.labels, plan.counts[b], strict=True) if q in pts)
        / sum(c for q, c in zip(plan.labels, plan.counts[b], strict=True) if q in pts)
        for b in range(400)
    ]
    assert wr["win_rate"] == pytest.approx(sum(pts.values()) / len(pts))
    assert wr["ci"] == pytest.approx(list(np.percentile(reps, [2.5, 97.5])))
    # Reproducible with the seed; another seed moves the intervals, never the means.
    assert build_leaderboard(records, resamples=400, seed=7) == lb
    other = boards(build_leaderboard(records, resamples=400, seed=8))["SA"]
    assert [m["mean"] for m in other["models"]] == [m["mean"] for m in board["models"]]
    assert [m["ci"] for m in other["models"]] != [m["ci"] for m in board["models"]]


def test_criteria_mean_when_there_is_no_overall_score():
    records = [
        rec("a", "q1", 2.0, criterion="text_quality"),
        rec("a", "q1", 4.0, criterion="image_quality"),
        rec("a", "q2", None, criterion="text_quality"),
        rec("a", "q2", 5.0, criterion="image_quality"),
        rec("b", "q1", None, criterion="text_quality"),
        rec("b", "q1", None, criterion="image_quality"),
        rec("b", "q2", 1.0, criterion="text_quality"),
    ]
    lb = build_leaderboard(records, resamples=100)
    sa = boards(lb)["SA"]
    assert sa["basis"] == "criteria_mean"
    # a: q1 (2 + 4) / 2 = 3, q2 5 (its unscorable criterion left out) -> 4; b: q2 only -> 1, q1 unscorable.
    assert [(m["model"], m["mean"], m["n"], m["n_unscorable"]) for m in sa["models"]] == [
        ("a", 4.0, 2, 0),
        ("b", 1.0, 1, 1),
    ]
    assert wins(sa)[("a", "b")]["win_rate"] == 1.0 and wins(sa)[("a", "b")]["n_shared"] == 1
    md = render_markdown(build_summary(records, scale=(0, 6), run={}, leaderboard_resamples=100))
    assert "Ranked on the per-question mean of the scored criteria" in md


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="`leaderboard_resamples`.*greater than or equal to 1"):
        ScoreConfig(inputs=["x.jsonl"], leaderboard_resamples=0)
    with pytest.raises(ConfigError, match="`leaderboard_seed`.*greater than or equal to 0"):
        ScoreConfig(inputs=["x.jsonl"], leaderboard_seed=-1)
    cfg = ScoreConfig(inputs=["x.jsonl"])
    assert (cfg.leaderboard_resamples, cfg.leaderboard_seed) == (1000, 0)


def read_csv(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def num(cell: str) -> float | None:
    return None if cell == "" else float(cell)


def test_summary_files_hold_the_leaderboard_and_stale_ones_go(tmp_path):
    summary = build_summary(RECORDS, scale=(0, 6), run={}, leaderboard_resamples=200, leaderboard_seed=1)
    paths = write_summary(tmp_path, summary)
    assert list(paths) == ["json", "csv", "md", "leaderboard_csv", "win_rates_csv", "leaderboard_png"]
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["files"] == paths and written["leaderboard"] == summary["leaderboard"]
    header, rows = read_csv(tmp_path / "leaderboard.csv")
    assert header == LEADERBOARD_COLUMNS
    expect = [
        (b["group"], m["model"], m["rank"], m["mean"], m["ci"], m["n"], m["n_unscorable"])
        for b in summary["leaderboard"]["boards"]
        for m in b["models"]
    ]
    got = [
        (
            r["group"],
            r["model"],
            int(r["rank"]) if r["rank"] else None,
            num(r["mean"]),
            None if r["ci_low"] == "" else [float(r["ci_low"]), float(r["ci_high"])],
            int(r["n"]),
            int(r["n_unscorable"]),
        )
        for r in rows
    ]
    assert got == expect and ("SA", "a", 2, 11 / 3) == got[3][:4]
    header, rows = read_csv(tmp_path / "win_rates.csv")
    assert header == WIN_RATE_COLUMNS
    sa_ac = [r for r in rows if (r["group"], r["model"], r["opponent"]) == ("SA", "a", "c")]
    assert [(float(r["win_rate"]), int(r["ties"]), int(r["n_shared"])) for r in sa_ac] == [(0.75, 1, 2)]
    assert len(rows) == 12  # 6 ordered pairs on SA and on all; PBL has one ranked model
    assert (tmp_path / "leaderboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "summary.md").read_text()
    section = md[md.index("## Leaderboard") :]
    assert "### mmie, task SA" in section and "| 2 | a | 3.667 [" in section
    # The judge-only win rates print their intervals (and n), and each board says what ranks it.
    sa_md = section[section.index("### mmie, task SA") :]
    assert "Ranked by the judge-only mean." in sa_md
    row_a = next(line for line in sa_md.splitlines() if line.startswith("| a | 0.50 ["))
    assert row_a.count("] (n=2)") == 2 and "| - |" in row_a
    assert "No scored judge records, not ranked: mmie, task MSR (1 unscorable)." in section
    # Rewritten without judge scores: no leaderboard, and the earlier run's files are not left behind.
    metrics_only = [r for r in RECORDS if r["metric"] != "judge"]
    summary = build_summary(metrics_only, scale=(0, 6), run={}, files=written["files"])
    assert list(write_summary(tmp_path, summary)) == ["json", "csv", "md"]
    assert not any((tmp_path / n).exists() for n in ("leaderboard.csv", "win_rates.csv", "leaderboard.png"))
    assert "leaderboard_csv" not in json.loads((tmp_path / "summary.json").read_text())["files"]
    assert "## Leaderboard" not in (tmp_path / "summary.md").read_text()


def test_a_no_judge_run_has_no_leaderboard(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(EXAMPLES / "canonical.jsonl"), "--no-judge", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["records"] > 0 and summary["leaderboard"]["boards"] == []
    assert sorted(p.name for p in out.iterdir()) == [
        "run.json",
        "scores.jsonl",
        "summary.csv",
        "summary.json",
        "summary.md",
    ]
    assert (
        "Leaderboard" not in (out / "summary.md").read_text() and "leaderboard" not in capsys.readouterr().out
    )


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_judge_score_writes_the_leaderboard_of_its_records(tmp_path, capsys):
    out = tmp_path / "out"
    args = [
        str(EXAMPLES / "canonical.jsonl"),
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--out",
        str(out),
        "--no-progress",
        "--leaderboard-resamples",
        "300",
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert (
        "leaderboard, mmie, all tasks, ranked by the judge-only mean:" in printed
        and "leaderboard_png" in printed
        and "win_rates_csv" in printed
    )
    # The console gets a short plain-text summary (every table is in summary.md), without Markdown marks.
    assert "#" not in printed and "| ---" not in printed and len(printed.splitlines()) < 30, printed
    assert "## Leaderboard" in (out / "summary.md").read_text()
    scores = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    overall = {
        (r["task"], r["id"], r["model"]): r["score"]
        for r in scores
        if r["metric"] == "judge" and r["criterion"] == "overall"
    }
    assert overall and all(v is not None for v in overall.values())
    summary = json.loads((out / "summary.json").read_text())
    lb = summary["leaderboard"]
    assert lb["resamples"] == 300 and lb["seed"] == 0
    assert [b["group"] for b in lb["boards"]] == ["MSR", "PBL", "SA", "all"]
    header, csv_rows = read_csv(out / "leaderboard.csv")
    by_csv = {(r["group"], r["model"]): r for r in csv_rows}
    _, win_rows = read_csv(out / "win_rates.csv")
    by_win = {(r["group"], r["model"], r["opponent"]): r for r in win_rows}
    judge_rows = {
        (r["group"], r["model"]): r["value"] for r in summary["judge"] if r["metric"] == "judge.overall"
    }
    for board in lb["boards"]:
        g = board["group"]
        mine = {k: v for k, v in overall.items() if g in ("all", k[0])}
        names = sorted({m for _, _, m in mine})
        means = {
            m: math.fsum(v for k, v in mine.items() if k[2] == m) / sum(k[2] == m for k in mine)
            for m in names
        }
        assert {m["model"]: m["mean"] for m in board["models"]} == pytest.approx(means, abs=1e-12)
        for m in board["models"]:
            assert m["mean"] == pytest.approx(judge_rows[(g, m["model"])], abs=1e-12)  # the summary's number
            assert m["rank"] == 1 + sum(v > means[m["model"]] for v in means.values())
            row = by_csv[(g, m["model"])]
            assert (float(row["mean"]), int(row["rank"]), int(row["n"])) == (m["mean"], m["rank"], m["n"])
            if m["ci"] is None:  # no interval only where the resamples cannot vary: one distinct score
                assert len({v for k, v in mine.items() if k[2] == m["model"]}) == 1 and row["ci_low"] == ""
                continue
            assert m["ci"][0] < m["ci"][1] and m["ci"][0] <= m["mean"] <= m["ci"][1]
            assert [float(row["ci_low"]), float(row["ci_high"])] == m["ci"]
        for a in names:
            for b in names:
                if a == b:
                    continue
                qs = [(t, i) for t, i, m in mine if m == a and (t, i, b) in mine]
                pts = [
                    1.0 if mine[(*q, a)] > mine[(*q, b)] else 0.5 if mine[(*q, a)] == mine[(*q, b)] else 0.0
                    for q in qs
                ]
                w = wins(board)[(a, b)]
                assert (w["win_rate"], w["n_shared"]) == (sum(pts) / len(pts), len(qs))
                assert float(by_win[(g, a, b)]["win_rate"]) == w["win_rate"]
    assert (out / "leaderboard.png").read_bytes()[:4] == b"\x89PNG"
    assert summary["files"]["leaderboard_csv"] == str(out / "leaderboard.csv")
    md = (out / "summary.md").read_text()
    assert "## Leaderboard" in md and "### mmie, task MSR" in md[md.index("## Leaderboard") :]
    # A rerun (nothing left to score: the summary is rebuilt from scores.jsonl) gives the same leaderboard.
    before = (out / "leaderboard.csv").read_bytes()
    assert main(args) == 0
    assert json.loads((out / "summary.json").read_text())["leaderboard"] == lb
    assert (out / "leaderboard.csv").read_bytes() == before


def test_annotation_inputs_rank_models_by_question_id(small_demo, tmp_path):
    """In an annotation file every response has its own id; the leaderboard pairs the models' responses
    by their question_id (else no two models would share a question and the win rates would be empty)."""
    out = tmp_path / "ann"
    argv = [str(small_demo), "--judge", "tiny", "--rubric", "mmie", "--limit", "9", "--out", str(out)]
    assert main([*argv, "--no-progress", "--leaderboard-resamples", "50"]) == 0
    board = boards(json.loads((out / "summary.json").read_text())["leaderboard"])["all"]
    assert board["n_questions"] == 3
    assert {m["n"] for m in board["models"]} == {3}
    assert all(w["n_shared"] == 3 and w["win_rate"] is not None for w in board["win_rates"])
