"""The demo's figures on calibration, intervals, selective evaluation and prediction-powered means, read from a
report.json (and the scoring run's summary.json for the leaderboard's win rates):

    python scripts/demo_recap.py runs/demo/report/report.json [--scorer trained] [--summary runs/demo/score/summary.json]

Prints, for the scorer: the coverage of the calibrated judge's intervals on held-out items (with its bootstrap
interval; per criterion too) and their mean width; MAE, NLL, Brier and the expected calibration errors before
and after calibration; selective evaluation's share of trusted scores and the agreement on them beside the
agreement on all; one PPI run (its interval width beside the human-only width at the same labels) and, over
the check's draws (their number printed), the share of PPI and human-only intervals that cover the truth, for
means and win rates (the report's own draws, not the leaderboard's labelled sample). With ``--summary``: the
leaderboard's win rates with their intervals. Reads the files only; computes nothing new
(:mod:`judge.view.recap`).
"""

from __future__ import annotations

import argparse
import json
import sys

# The lines themselves are judge.view.recap's: judge-view's first page shows the same.
from judge.view.recap import recap


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", help="a report.json written by judge-report")
    p.add_argument("--scorer", default="trained", help="the scorer to recap (default: trained)")
    p.add_argument("--summary", help="a summary.json written by judge-score (its leaderboard's win rates)")
    args = p.parse_args(argv)
    try:
        report = _load(args.report)
        summary = _load(args.summary) if args.summary else None
    except (OSError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(recap(report, args.scorer, summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
