"""A report's calibration, selective-evaluation and prediction-powered-inference sections in a few lines each,
read from ``report.json`` (and a scoring run's ``summary.json`` for the leaderboard's win rates): what the
demo's recap prints (``scripts/demo_recap.py``) and judge-view's first page shows. Reads; computes nothing new.

The PPI lines are the report's *check* (``judge-report --ppi-draws``): its own random draws of labelled
questions, not the labelled sample the leaderboard's PPI means use (``judge-score --labels``); the lines say
so, since the two give different figures for the same model.
"""

from __future__ import annotations

from typing import Any

from judge.eval.report_data import trusted_share_text


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


def _of(report: dict[str, Any], section: str, scorer: str) -> dict[str, Any] | None:
    return next((c for c in report.get(section) or [] if c.get("scorer") == scorer), None)


def calibration_lines(report: dict[str, Any], scorer: str) -> list[str]:
    cal = _of(report, "calibration", scorer)
    if cal is None:
        return [f"{scorer}: no calibrated scores in the report"]
    lines = [
        f"coverage of the {cal['level']:.0%} intervals on {cal['n']} held-out items: {_ci(cal['coverage'])}; "
        f"mean width {cal['mean_width']['value']:.2f} on the rubric's scale",
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


def selective_lines(report: dict[str, Any], scorer: str) -> list[str]:
    sel = _of(report, "selective", scorer)
    if sel is None:
        return [f"{scorer}: no selective evaluation in the report"]
    lines = [
        f"selective evaluation (promise: agreement >= {sel['agreement']:.0%} with probability >= "
        f"{1 - sel['delta']:.0%}, within {sel['tolerance']:g} of the human mean): {sel['n_trusted']} of "
        f"{sel['n']} held-out scores trusted ({trusted_share_text(sel['share_trusted'], sel.get('no_threshold'))}); "
        "agreement on them "
        f"{_ci(sel['agreement_trusted'])}, on all scores {_ci(sel['agreement_all'])}"
    ]
    pw = sel.get("pairwise")
    if pw:
        lines.append(
            f"  pairwise, {pw['n']} held-out pairs: "
            f"{trusted_share_text(pw['share_trusted'], pw.get('no_threshold'), suffix=' trusted')}, agreement "
            f"{_ci(pw['agreement_trusted'])} on them, {_ci(pw['agreement_all'])} on all"
        )
    return lines


def ppi_lines(report: dict[str, Any], scorer: str) -> list[str]:
    ppi = _of(report, "ppi", scorer)
    if ppi is None:
        return [f"{scorer}: no prediction-powered inference check in the report"]
    lines = [
        f"one PPI run of the report's check: its own random draw (seed {ppi.get('seed', '?')}) of "
        f"{ppi['fraction']:.0%} of the {ppi.get('n_questions') or '?'} questions ({ppi['n_labelled']} questions, "
        "every model's response), not the labelled sample of the leaderboard's PPI column, so its figures "
        "differ from the leaderboard's:"
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


def win_rate_lines(summary: dict[str, Any]) -> list[str]:
    boards = [b for b in (summary.get("leaderboard") or {}).get("boards") or [] if b["group"] == "all"]
    lines = []
    for b in boards:
        lines.append(
            f"the leaderboard's win rates, {b['benchmark']} (all tasks; ranked by {b.get('ranked_by', 'judge')}; "
            "from judge-score's labelled sample, not the report's draws):"
        )
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


def recap(report: dict[str, Any], scorer: str, summary: dict[str, Any] | None = None) -> list[str]:
    """Every line of the recap: calibration, selective evaluation, the PPI check (and the leaderboard's win
    rates, given ``summary``)."""
    lines = [*calibration_lines(report, scorer), *selective_lines(report, scorer), *ppi_lines(report, scorer)]
    if summary is not None:
        lines += win_rate_lines(summary)
    return lines


__all__ = ["calibration_lines", "ppi_lines", "recap", "selective_lines", "win_rate_lines"]
