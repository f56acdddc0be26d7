"""What ``judge-calibrate`` shows of a fitted calibration: the held-out comparison of the read-out and the
maps (MAE, MSE, NLL, Brier, both expected calibration errors), each map's choice and its spread across
folds, the conformal groups, and the reliability diagram of the held-out items."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from judge.core.tables import text_table
from judge.eval.calibration import MARGIN, METHODS, SE_MULTIPLE, LabelledScore, conformal_part
from judge.eval.calibration_metrics import MEASURES, reliability_points
from judge.models.calibration import POOLED, Calibration

#: Column headers of the measures.
HEADERS = {
    "mae": "MAE",
    "mse": "MSE",
    "nll": "NLL",
    "brier": "Brier",
    "ece_top": "ECE (top label)",
    "ece_score": "ECE (score)",
}
RELIABILITY = "reliability.png"


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _spread(values: Sequence[float], digits: int = 3) -> str:
    return "-" if not values else f"{min(values):.{digits}f} to {max(values):.{digits}f}"


def format_calibration(cal: Calibration) -> str:
    """What ``judge-calibrate`` prints (see the module doc)."""
    cmp = cal.comparison
    rows = []
    for name, label in (
        ("raw", "raw read-out"),
        *((m, m) for m in METHODS),
        ("calibrated", f"calibrated ({cal.method}, stored)"),
    ):
        if name in cmp:
            rows.append([label, *(_num(cmp[name].get(k), 4 if k == "nll" else 3) for k in MEASURES)])
    lines = [
        f"Held-out comparison ({cmp.get('n_items')} items of the conformal part, which neither the maps nor "
        "their choice saw; lower is better):",
        text_table(["scores", *(HEADERS[k] for k in MEASURES)], rows),
    ]
    choice = cmp.get("choice") or {}
    if choice:
        body = []
        notes = []
        for key, c in choice.items():
            nll = c.get("nll") or {}
            change = c.get("fold_nll_change") or {}
            folds = c.get("folds") or 0
            improved = {m: sum(1 for d in change.get(m, []) if d < 0) for m in METHODS}
            body.append(
                [
                    key,
                    str(c.get("n_fit")),
                    str(folds),
                    _num(nll.get("none"), 4),
                    _num(nll.get("temperature"), 4),
                    _num(nll.get("isotonic"), 4),
                    _spread(c.get("fold_temperatures") or []),
                    ", ".join(f"{m} {improved[m]}/{folds}" for m in METHODS) if folds else "-",
                    str(c.get("method")),
                ]
            )
            for m, why in (c.get("refused") or {}).items():
                notes.append(f"  {key}: {m} refused: {why}")
            if c.get("warning"):
                notes.append(f"  {key}: WARNING: {c['warning']}")
            if c.get("verdict") and cal.method == "auto":
                notes.append(f"  {key}: {c['verdict']}")
                if c.get("method") == "none":
                    notes.append(f"  {key}: the read-out is kept: {c.get('reason')}")
            elif c.get("method") == "none" and cal.method == "auto":
                notes.append(f"  {key}: the read-out is kept: {c.get('reason')}")
        lines += [
            "",
            "Choice of map (NLL of the annotators' ratings, cross-validated over the fit part's questions, the "
            "mean over repeated partitions; a map is chosen only if it gains more than the margin "
            f"{MARGIN} nats per rating and {SE_MULTIPLE:g} standard errors across folds; T per fold and the "
            "folds where each map lowered the NLL, of the first partition: the fit's spread):",
            text_table(
                [
                    "map",
                    "fit items",
                    "folds",
                    "NLL read-out",
                    "NLL temperature",
                    "NLL isotonic",
                    "T across folds",
                    "folds improved",
                    "chosen",
                ],
                body,
            ),  # fmt: skip
            *notes,
        ]
    lines += [
        "",
        f"Stored: {cal.method}; {cal.level:.0%} intervals (split conformal, Mondrian by criterion: a criterion "
        f"with enough held-out items has its own; the others take the pooled one, {POOLED}, valid on average "
        "over them):",
    ]
    conformal = cmp.get("conformal") or {}
    body = []
    for key, cc in [*cal.criteria.items(), (POOLED, cal.pooled)]:
        fitted = {
            "temperature": f"T = {cc.temperature or 0:.3f}",
            "isotonic": f"{len(cc.x or [])} knots",
        }.get(cc.method, "none (read-out)")
        if cc.map_from:
            fitted += " (pooled map)"
        half = "whole scale" if cc.halfwidth is None else f"±{cc.halfwidth:.3f}"
        bounds = (conformal.get(key) or {}).get("coverage_bounds")
        cover = "-" if not bounds else f"{bounds[0]:.0%} to {bounds[1]:.1%}"
        own = (conformal.get(key) or {}).get("coverage_range")
        body.append(
            [key, str(cc.n_fit), str(cc.n_conformal), fitted, half, cover,
             "-" if not own else f"{own[0]:.0%} to {own[1]:.0%}"]
        )  # fmt: skip
    lines.append(
        text_table(
            [
                "criterion",
                "fit items",
                "conformal items",
                "map",
                "interval",
                "coverage (promised, averaged over calibration draws)",
                "this interval's own coverage (90% range)",
            ],
            body,
        )  # fmt: skip
    )
    lines.append(
        "The promised coverage is an average over draws of the conformal items: the coverage of these fitted "
        "intervals on new items varies with the draw (Beta-distributed; its 90% range at this many items "
        "in the last column)."
    )
    return "\n".join(lines)


def write_reliability(path: str | Path, cal: Calibration, scores: Sequence[LabelledScore]) -> Path:
    """The top-label reliability diagram of the conformal part's items, raw and calibrated."""
    from judge.eval.plots import reliability_diagram

    part = conformal_part(cal, scores)
    raw = [list(s.distribution) for s in part]
    calibrated = [cal.apply(s.criterion, s.raw, s.distribution).distribution for s in part]
    ratings = [s.ratings for s in part]
    return reliability_diagram(
        path,
        {
            "raw read-out": reliability_points(raw, ratings, cal.scale),
            f"calibrated ({cal.method})": reliability_points(calibrated, ratings, cal.scale),
        },
        f"Reliability on {len(part)} held-out items (the calibration's conformal part)",
    )


__all__ = ["HEADERS", "RELIABILITY", "format_calibration", "write_reliability"]
