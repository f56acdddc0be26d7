"""An estimate and its interval are printed at the same number of decimals: at fewer for the bounds, a
Spearman of 0.956 printed [0.96, 0.96] and looked below its own lower bound (a new user's review)."""

from __future__ import annotations

import json
import re

from judge.eval.document import fmt_ci, fmt_signed
from judge.eval.report_data import Interval
from judge.view.verdict import _iv

#: A number followed by its bracketed interval, as every report line prints one.
VALUE_CI = re.compile(r"([-+]?\d+\.(\d+)) \[([-+]?\d+\.(\d+)), ([-+]?\d+\.(\d+))\]")


def test_the_formatters_give_the_bounds_the_estimate_s_decimals():
    iv = Interval(value=0.9564, ci=[0.9555, 0.9621], n_valid=100)
    assert fmt_ci(iv) == "0.956 [0.956, 0.962]"
    assert fmt_signed(Interval(value=0.2371, ci=[0.1094, 0.3512], n_valid=100)) == "+0.237 [+0.109, +0.351]"
    assert _iv({"value": 0.9564, "ci": [0.9555, 0.9621]}) == "0.956 [0.956, 0.962]"
    assert _iv({"value": 2.0381, "ci": [1.9712, 2.1093]}, 4) == "2.0381 [1.9712, 2.1093]"


def test_judge_report_prints_every_estimate_at_its_interval_s_decimals(small_demo, tmp_path, capsys):
    from judge.cli.report import main

    # A scorer near the humans: each response's overall score, the annotators' mean moved a little.
    recs = [json.loads(x) for x in small_demo.read_text().splitlines()]
    rows = []
    for i, r in enumerate(recs):
        mean = sum(s["overall"] for s in r["scores"].values()) / len(r["scores"])
        rows.append({"id": r["id"], "benchmark": "mmie", "task": r["task"], "model": r["model"],
                     "metric": "judge", "criterion": "overall", "score": min(6.0, mean + (i % 3) * 0.4)})  # fmt: skip
    other = [{**x, "score": float((i * 7) % 7)} for i, x in enumerate(rows)]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(x) + "\n" for x in rows))
    b.write_text("".join(json.dumps(x) + "\n" for x in other))
    out = tmp_path / "r"
    argv = ["--human", str(small_demo), "--scores", f"near={a}", "--scores", f"far={b}", "--bootstrap", "50",
            "--out", str(out), "--ppi-draws", "0"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out + (out / "report.md").read_text()
    found = VALUE_CI.findall(printed)
    assert len(found) > 10, printed[:2000]
    uneven = [
        m[0] + " [" + m[2] + ", " + m[4] + "]" for m in found if not len(m[1]) == len(m[3]) == len(m[5])
    ]
    assert not uneven, uneven[:10]
