"""judge-score on a pairs input: both sides scored, and the judge's preference between them per criterion."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from judge.cli.score import main
from judge.models.preference import preference

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]


def pairs_from_demo(small_demo, n: int = 3, swap: bool = False) -> list[dict]:
    """Pairs of the first two responses to each of the first ``n`` questions of the demo set."""
    by_q: dict[str, list[dict]] = defaultdict(list)
    for line in small_demo.read_text().splitlines():
        rec = json.loads(line)
        by_q[rec["question_id"]].append(rec)
    pairs = []
    for qid, recs in list(by_q.items())[:n]:
        a, b = recs[0], recs[1]
        if swap:
            a, b = b, a
        pairs.append(
            {
                "id": qid,
                "task": a["task"],
                "question": a["question"],
                "response_a": a["response"],
                "response_b": b["response"],
                "reference": a.get("reference"),
                "model_a": a["model"],
                "model_b": b["model"],
            }
        )
    return pairs


def run(small_demo, tmp_path, name, pairs):
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    out = tmp_path / name
    args = [str(src), "--judge", "tiny", "--rubric", "mmie", "--root", str(small_demo.parent)]
    assert main([*args, "--out", str(out), "--no-progress"]) == 0
    return [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()], out


def test_pairs_input_writes_the_preference_of_each_pair(small_demo, tmp_path):
    pairs = pairs_from_demo(small_demo)
    rows, out = run(small_demo, tmp_path, "pairs", pairs)
    judge = {(r["model"], r["id"], r["criterion"]): r for r in rows if r["metric"] == "judge"}
    prefs = [r for r in rows if r["metric"] == "preference"]
    n_crit = {p["id"]: sum(1 for k in judge if k[1] == p["id"] and k[0] == p["model_a"]) for p in pairs}
    assert len(prefs) == sum(n_crit.values()) and all(n > 1 for n in n_crit.values())
    for r in prefs:
        pair = next(p for p in pairs if p["id"] == r["id"])
        assert r["model"] == f"{pair['model_a']} vs {pair['model_b']}"
        a, b = (
            judge[(pair["model_a"], r["id"], r["criterion"])],
            judge[(pair["model_b"], r["id"], r["criterion"])],
        )
        want = preference(
            a["distribution"], b["distribution"], list(range(7)), expected=(a["score"], b["score"])
        )
        assert r["score"] == want.p_first_better
        assert r["details"]["score_diff"] == a["score"] - b["score"]
        assert r["details"]["p_a_better"] + r["details"]["p_tie"] + r["details"][
            "p_b_better"
        ] == pytest.approx(1)
    summary = json.loads((out / "summary.json").read_text())
    overall = [
        x for x in summary["preferences"] if x["metric"] == "preference.overall" and x["group"] == "all"
    ]
    assert len(overall) == len({(p["model_a"], p["model_b"]) for p in pairs})
    assert sum(x["wins"] + x["ties"] + x["losses"] for x in overall) == len(pairs)
    assert "## Preferences (pairs input)" in (out / "summary.md").read_text()
    # The two sides are the two models answering one question: the leaderboard compares them.
    assert summary["leaderboard"]["boards"], summary["leaderboard"]


def test_swapped_pairs_give_one_minus_p(small_demo, tmp_path):
    rows, _ = run(small_demo, tmp_path, "ab", pairs_from_demo(small_demo, n=2))
    rows_ba, _ = run(small_demo, tmp_path, "ba", pairs_from_demo(small_demo, n=2, swap=True))
    ab = {(r["id"], r["criterion"]): r["score"] for r in rows if r["metric"] == "preference"}
    ba = {(r["id"], r["criterion"]): r["score"] for r in rows_ba if r["metric"] == "preference"}
    assert ab.keys() == ba.keys()
    for k, p in ab.items():
        # The same sides scored in another run: equal to float round-off of the read-out.
        assert ba[k] == pytest.approx(1 - p, abs=1e-6)


@pytest.mark.parametrize(
    "change, names",
    [
        ({"model_a": "same", "model_b": "same"}, ["model_b", "both 'same'"]),
        ({"response_b": 7}, ["response_b"]),
        ({"colour": "red"}, ["colour", "unknown key"]),
    ],
)
def test_bad_pairs_are_one_clear_line(small_demo, tmp_path, capsys, change, names):
    pairs = pairs_from_demo(small_demo, n=2)
    pairs[1].update(change)
    src = tmp_path / "bad.jsonl"
    src.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    code = main(
        [str(src), "--judge", "tiny", "--rubric", "mmie", "--out", str(tmp_path / "o"), "--no-progress"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{src}:2" in err and all(n in err for n in names), err
