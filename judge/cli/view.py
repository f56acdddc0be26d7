"""``judge-view``: argument parsing only; the work is :func:`judge.view.view_run`."""

from __future__ import annotations

import argparse
import sys

from judge.cli._common import Parser, add_settings, run_job, settings_from
from judge.view.config import ViewConfig

EPILOG = """\
examples (from the repository root, after scripts/demo.sh):
  judge-view runs/demo/score --report runs/demo/report --audit runs/demo/audit
                          the demo's test split, report and audit, on http://127.0.0.1:8765/
  judge-view runs/demo/score --report runs/demo/report --export runs/demo/view
                          a static site: open runs/demo/view/index.html
  judge-view runs/demo/score --human runs/demo/data/splits/test.jsonl --port 0
                          any free port
"""

GROUPS = {
    "what to show": ["human", "report", "audit", "thumbnail"],
    "where": ["export", "overwrite", "host", "port", "allowed_host"],
}


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="judge-view",
        description="Look at what a judge did: each scored item's question and response (text and images in\n"
        "order) beside its judge scores (distribution, expected score, interval) and each annotator's,\n"
        "sortable and filterable, disagreements first; the run's summary, leaderboard, report and audit.\n"
        "Serves it on this machine (loopback) until Ctrl-C, or writes a static site with --export.",
        epilog=EPILOG,
    )
    add_settings(p, ViewConfig, positional=["run"], groups=GROUPS)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``judge-view``; returns the exit code (2 for a user error)."""
    from judge.view.run import ViewResult, view_run

    def ready(url: str) -> None:
        print(f"judge-view: serving {url} on this machine only; Ctrl-C stops it", flush=True)

    def job(args: argparse.Namespace) -> ViewResult:
        return view_run(settings_from(args, ViewConfig), on_ready=ready)

    def show(result: ViewResult) -> None:
        for w in result.view.warnings:
            print(f"warning: {w}", file=sys.stderr)
        v = result.view
        if v.labels is not None and not v.labels["unmatched"]:  # (unmatched ones: among the warnings)
            print(
                f"human labels: {v.labels['matched']} of {v.labels['labels']} labelled responses matched an item"
            )
        n_records = sum(len(i.records) for i in v.items)
        if result.export_dir is not None:
            c = result.counts
            bad = f", {c['images_not_shown']} not shown" if c["images_not_shown"] else ""
            print(
                f"wrote {result.export_dir}/ ({len(v.items)} items, {n_records} score records, {c['images']} "
                f"images{bad}) in {result.seconds:.1f} s; open {result.export_dir}/index.html"
            )

    return run_job(build_parser, argv, job, show)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
