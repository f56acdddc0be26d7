"""The demo's figures on calibration, intervals, selective evaluation and prediction-powered means, read from a
report.json (and the scoring run's summary.json for the leaderboard's win rates):

    python scripts/demo_recap.py runs/demo/report/report.json [--scorer trained] [--summary runs/demo/score/summary.json]

Prints, for the scorer: the coverage of the calibrated judge's intervals on held-out items (with its bootstrap
interval; per criterion too) and their mean width; MAE, NLL, Brier and the expected calibration errors before
and after calibration; selective evaluation's share of trusted scores and the agreement on them beside the
agreement on all; one PPI run (its interval width beside the human-only width at the same labels) and, over
the check's draws (their number printed), the share of PPI and human-only intervals that cover the truth, for
means and win rates. With ``--summary``: the leaderboard's win rates with their intervals. Reads the files
only; computes nothing new.
"""

from __future__ import annotations

import argparse
import json
import sys


def _ci(x: dict | None, digits: int = 3) -> str:
    if not x or x.get("value") is None:
        return "-"
    ci = x.get("ci")
    return f"{x['value']:.{digits}f}" + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def _v(x: dict | None, digits: int = 3) -> str:
    return "-" if not x or x.get("value") is None else f"{x['value']:.{digits}f}"


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pct(x: float | None, se: float | None = None) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" + (f" ± {100 * se:.1f}" if se is not None else "")


def calibration_lines(report: dict, scorer: str) -> list[str]:
    cal = next((c for c in report.get("calibration") or [] if c["scorer"] == scorer), None)
    if cal is None:
        return [f"{scorer}: no calibrated scores in the report"]
    lines = [
        f"coverage of the {cal['level']:.0%} intervals on {cal['n']} held-out items: {_ci(cal['coverage'])}; "
        f"mean width {cal['mean_width']['value']:.2f} on the 0-6 scale",
        "  per criterion: "
        + "; ".join(
            f"{k['criterion']} {100 * k['coverage']:.0f}%"
            + (
                f" [{100 * k['coverage_ci'][0]:.0f}, {100 * k['coverage_ci'][1]:.0f}]"
                if k.get("coverage_ci")
                else ""
            )
            for k in cal["per_criterion"]
        ),
        f"MAE before calibration {_ci(cal['mae_before'])}, after {_ci(cal['mae_after'])} ({cal['method']}; "
        f"MSE {cal['mse_before']['value']:.3f} -> {cal['mse_after']['value']:.3f})",
    ]
    if cal.get("nll_before"):
        lines.append(
            f"raw -> calibrated: NLL {_v(cal['nll_before'], 4)} -> {_v(cal['nll_after'], 4)}, Brier "
            f"{_v(cal['brier_before'])} -> {_v(cal['brier_after'])}, ECE (top label) {_v(cal['ece_top_before'])} -> "
            f"{_v(cal['ece_top_after'])}, ECE (score) {_v(cal['ece_score_before'])} -> {_v(cal['ece_score_after'])}"
        )
    return lines


def selective_lines(report: dict, scorer: str) -> list[str]:
    sel = next((c for c in report.get("selective") or [] if c["scorer"] == scorer), None)
    if sel is None:
        return [f"{scorer}: no selective evaluation in the report"]
    lines = [
        f"selective evaluation (promise: agreement >= {sel['agreement']:.0%} with probability >= "
        f"{1 - sel['delta']:.0%}, within {sel['tolerance']:g} of the human mean): {sel['n_trusted']} of "
        f"{sel['n']} held-out scores trusted ({_ci(sel['share_trusted'])}); agreement on them "
        f"{_ci(sel['agreement_trusted'])}, on all scores {_ci(sel['agreement_all'])}"
    ]
    pw = sel.get("pairwise")
    if pw:
        lines.append(
            f"  pairwise, {pw['n']} held-out pairs: {_ci(pw['share_trusted'])} trusted, agreement "
            f"{_ci(pw['agreement_trusted'])} on them, {_ci(pw['agreement_all'])} on all"
        )
    return lines


def ppi_lines(report: dict, scorer: str) -> list[str]:
    ppi = next((p for p in report.get("ppi") or [] if p["scorer"] == scorer), None)
    if ppi is None:
        return [f"{scorer}: no prediction-powered inference check in the report"]
    lines = [
        f"one PPI run, {ppi['fraction']:.0%} of the {ppi.get('n_questions') or '?'} questions labelled "
        f"({ppi['n_labelled']} questions, every model's response):"
    ]
    for m in ppi["models"]:
        d = m["first_draw"]
        if d["ppi_ci"] is None or d["human_ci"] is None:
            lines.append(
                f"  {m['model']}: {d['n_labelled']} labels, {d.get('reason') or 'too few for an interval'}"
            )
            continue
        pw, hw = d["ppi_ci"][1] - d["ppi_ci"][0], d["human_ci"][1] - d["human_ci"][0]
        lines.append(
            f"  {m['model']} ({d['n_labelled']} labels): PPI {d['ppi_mean']:.2f} [{d['ppi_ci'][0]:.2f}, "
            f"{d['ppi_ci'][1]:.2f}] width {pw:.2f}; human-only {d['human_mean']:.2f} [{d['human_ci'][0]:.2f}, "
            f"{d['human_ci'][1]:.2f}] width {hw:.2f}; all-human mean {m['all_human_mean']:.2f}"
        )
    lines.append(
        f"over {ppi['draws']} random draws: {_pct(ppi['ppi_coverage'], ppi.get('ppi_coverage_se'))} of "
        f"{ppi['n_intervals']} PPI intervals cover the model's all-human mean (human-only "
        f"{_pct(ppi['human_coverage'], ppi.get('human_coverage_se'))}; nominal {ppi['level']:.0%}); mean width "
        f"{_num(ppi['ppi_mean_width'])} (human-only {_num(ppi['human_mean_width'])})"
    )
    if ppi.get("win_rates"):
        lines.append(
            f"win rates over the same draws: {_pct(ppi['win_ppi_coverage'], ppi.get('win_ppi_coverage_se'))} of "
            f"{ppi['win_n_intervals']} PPI intervals cover the pair's all-human win rate (human-only "
            f"{_pct(ppi['win_human_coverage'])}); {ppi.get('n_bounded', 0)} PPI estimates moved into their range"
        )
    return lines


def win_rate_lines(summary: dict) -> list[str]:
    boards = [b for b in (summary.get("leaderboard") or {}).get("boards") or [] if b["group"] == "all"]
    lines = []
    for b in boards:
        lines.append(f"win rates, {b['benchmark']} (all tasks; ranked by {b.get('ranked_by', 'judge')}):")
        for w in b["win_rates"]:
            rate, ci = w.get("win_rate"), w.get("ci")
            if rate is None:
                lines.append(f"  {w['model']} over {w['opponent']}: - ({w.get('reason') or 'none'})")
                continue
            extra = f", {w['n_labelled']} labelled" if w.get("n_labelled") is not None else ""
            mark = " (bounded)" if w.get("bounded") else ""
            lines.append(
                f"  {w['model']} over {w['opponent']}: {rate:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]{mark} "
                f"(n={w['n_shared']}{extra})"
            )
    return lines


def recap(report: dict, scorer: str, summary: dict | None = None) -> list[str]:
    lines = [*calibration_lines(report, scorer), *selective_lines(report, scorer), *ppi_lines(report, scorer)]
    if summary is not None:
        lines += win_rate_lines(summary)
    return lines


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
