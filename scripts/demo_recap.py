"""The demo's figures on calibration, intervals and prediction-powered means, read from a report.json:

    python scripts/demo_recap.py runs/demo/report/report.json [--scorer trained]

Prints the coverage of the calibrated judge's intervals on held-out items (with its bootstrap interval) and
their mean width, the MAE before and after calibration, one PPI run (its interval width beside the
human-only width at the same labels) and the share of PPI intervals over the random label draws that
cover each model's all-human mean. Reads the file only; computes nothing new.
"""

from __future__ import annotations

import argparse
import json
import sys


def _ci(x: dict, digits: int = 3) -> str:
    ci = x.get("ci")
    return f"{x['value']:.{digits}f}" + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def recap(report: dict, scorer: str) -> list[str]:
    lines = []
    cal = next((c for c in report.get("calibration") or [] if c["scorer"] == scorer), None)
    if cal is None:
        lines.append(f"{scorer}: no calibrated scores in the report")
    else:
        lines.append(
            f"coverage of the {cal['level']:.0%} intervals on {cal['n']} held-out items: {_ci(cal['coverage'])}; "
            f"mean width {cal['mean_width']['value']:.2f} on the 0-6 scale"
        )
        lines.append(
            f"MAE before calibration {_ci(cal['mae_before'])}, after {_ci(cal['mae_after'])} ({cal['method']}; "
            f"MSE {cal['mse_before']['value']:.3f} -> {cal['mse_after']['value']:.3f})"
        )
    ppi = next((p for p in report.get("ppi") or [] if p["scorer"] == scorer), None)
    if ppi is None:
        lines.append(f"{scorer}: no prediction-powered inference check in the report")
        return lines
    lines.append(
        f"one PPI run, {ppi['fraction']:.0%} of the {ppi['n_items']} responses labelled ({ppi['n_labelled']}):"
    )
    for m in ppi["models"]:
        d = m["first_draw"]
        if d["ppi_ci"] is None or d["human_ci"] is None:
            lines.append(f"  {m['model']}: {d['n_labelled']} labels, too few for an interval")
            continue
        pw, hw = d["ppi_ci"][1] - d["ppi_ci"][0], d["human_ci"][1] - d["human_ci"][0]
        lines.append(
            f"  {m['model']} ({d['n_labelled']} labels): PPI {d['ppi_mean']:.2f} [{d['ppi_ci'][0]:.2f}, "
            f"{d['ppi_ci'][1]:.2f}] width {pw:.2f}; human-only {d['human_mean']:.2f} [{d['human_ci'][0]:.2f}, "
            f"{d['human_ci'][1]:.2f}] width {hw:.2f}; all-human mean {m['all_human_mean']:.2f}"
        )
    lines.append(
        f"over {ppi['draws']} random label draws: {100 * ppi['ppi_coverage']:.1f}% of {ppi['n_intervals']} PPI "
        f"intervals cover the all-human model mean (human-only {100 * ppi['human_coverage']:.1f}%); mean width "
        f"{ppi['ppi_mean_width']:.2f} (human-only {ppi['human_mean_width']:.2f})"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", help="a report.json written by judge-report")
    p.add_argument("--scorer", default="trained", help="the scorer to recap (default: trained)")
    args = p.parse_args(argv)
    try:
        with open(args.report, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"error: {args.report}: {e}", file=sys.stderr)
        return 2
    print("\n".join(recap(report, args.scorer)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
