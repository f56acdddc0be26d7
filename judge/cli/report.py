"""``judge-report``: scorers against human scores (and each other), with the human ceiling and plots."""

from __future__ import annotations

import argparse
import sys
import time

from judge.cli._common import (
    Parser,
    add_settings,
    fail,
    flag_names,
    flags_in_warnings,
    settings_from,
    with_flags,
)
from judge.cli._logging import setup_logging
from judge.core.errors import JudgeError
from judge.eval.config import ReportConfig

EPILOG = """\
example (from the repository root, after scripts/demo.sh):
  judge-report --human runs/demo/data/splits/test.jsonl \\
               --scores judge=runs/demo/score/scores.jsonl --clip-model tiny --out runs/report-demo
"""


def build_parser() -> argparse.ArgumentParser:
    """The options, generated from :class:`~judge.eval.config.ReportConfig` in its field order."""
    p = Parser(
        prog="judge-report",
        description="Compare named score files (judge-score output, CLIPScore, ...) with human annotations: "
        "correlations with bootstrap intervals, error and agreement statistics, the human ceiling, "
        "paired comparisons; writes report.md, report.json, report.html and PNG plots.",
        epilog=EPILOG,
    )
    add_settings(p, ReportConfig)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``judge-report``; returns the exit code (2 for a user error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging()
    t0 = time.perf_counter()
    try:
        from judge.eval.report import format_main_table, run_report
        from judge.eval.report_build import SMALL_LEGEND
        from judge.eval.report_calibration import format_calibration_summary, format_mmie_table

        with flags_in_warnings(parser):
            result = run_report(settings_from(args, ReportConfig))
    except JudgeError as e:
        return fail(e, parser)
    data = result.data
    print(
        f"\nMain table ({data.main_slice.title}; 95% intervals from {data.settings.bootstrap} resamples "
        "of questions):\n"
    )
    table = format_main_table(data)
    print(table)
    if "†" in table:  # the mark explained where it shows
        print(SMALL_LEGEND)
    for sc in data.scorers:
        if (lab := sc.coverage.labels) is not None:
            print(
                f"  {sc.name}: {lab['matched']} of {lab['labels']} labelled responses matched a record",
                end="",
            )
            print(
                f"; {lab['unmatched']} did not (e.g. {', '.join(lab['unmatched_examples'])})"
                if lab["unmatched"]
                else ""
            )
    paired = [pc for pc in data.paired if pc.slice == data.main and pc.spearman is not None]
    if paired:
        print("\nPaired differences in Spearman on the same resamples (A - B [95% CI], p):")
        for pc in paired:
            st = pc.spearman
            assert st is not None
            ci = f"[{st.ci[0]:+.3f}, {st.ci[1]:+.3f}]" if st.ci else "[-]"
            p = f"p = {st.p:.3f}" if st.p is not None else "p = -"
            diff = "-" if st.diff is None else f"{st.diff:+.3f}"
            print(f"  {pc.a} - {pc.b}: {diff} {ci}, {p} ({pc.n} items, {pc.n_questions} questions)")
    mmie = format_mmie_table(data)
    if mmie:
        print("\nMMIE's agreement measures (main table's items; 95% intervals):\n")
        print(mmie)
    checks = format_calibration_summary(data.calibration, data.ppi, data.selective)
    if checks:
        print("\nCalibration on held-out items, and prediction-powered means:")
        print(with_flags("\n".join(checks), flag_names(parser)))
    if data.warnings:
        print("\nwarnings:")
        for w in data.warnings:
            print(f"  - {w}")
    print(
        f"\nwrote {result.files['md']}, report.json, report.html and {len(data.plots)} plot(s) "
        f"to {result.out_dir}/"
    )
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
