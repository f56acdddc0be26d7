"""``judge-audit``: argument parsing only; the work is :func:`judge.audit.run_audit`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from judge.cli._common import Parser, add_settings, print_written, run_job, settings_from

if TYPE_CHECKING:  # the run module loads torch; the command imports it only once parsing is done
    from judge.audit.run import AuditResult

EPILOG = """\
examples (from the repository root, after scripts/demo.sh):
  judge-audit runs/demo/data/splits/test.jsonl --judge runs/demo/judge --limit 30 \\
              --out runs/audit-30
                                      the demo judge on 30 test responses, every perturbation
  judge-audit examples/predictions/canonical.jsonl --judge tiny --rubric mmie \\
              --perturb blank-images --out runs/audit-blank          one perturbation
  judge-audit examples/predictions/mmie.json --judge runs/demo/judge --clip-model tiny \\
              --out runs/audit-clip   CLIPScore (a tiny random CLIP) audited beside the judge
"""

GROUPS = {
    "judge": ["judge", "rubric", "force", "device", "dtype", "batch_tokens", "max_tokens", "clip_model"],
    "audit": ["perturb", "criteria", "bootstrap", "seed"],
    "inputs and outputs": ["format", "root", "skip_invalid", "limit", "out", "overwrite", "progress"],
}


def build_parser() -> argparse.ArgumentParser:
    from judge.audit.config import AuditConfig
    from judge.audit.perturb import PERTURBATIONS
    from judge.scoring.inputs import input_formats

    p = Parser(
        prog="judge-audit",
        description="Does the judge see what humans see? Score each response as it is and after one\n"
        "controlled change at a time (images blanked or swapped, an off-topic response, shuffled or\n"
        "unrelated text, truncated, padded, images reordered) and report the score changes with\n"
        "bootstrap intervals and a verdict per perturbation and criterion: sensitive, blind or\n"
        "rewarded. Writes audit.md, audit.json, audit.png and the per-item scores (resumable).",
        epilog=EPILOG,
    )
    add_settings(
        p,
        AuditConfig,
        positional=["inputs"],
        groups=GROUPS,
        choices={"format": input_formats(), "perturb": list(PERTURBATIONS)},
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``judge-audit``; returns the exit code (2 for a user error)."""

    def job(args: argparse.Namespace) -> AuditResult:
        from judge.audit.config import AuditConfig
        from judge.audit.run import run_audit

        return run_audit(settings_from(args, AuditConfig))

    return run_job(build_parser, argv, job, show)


def show(result: AuditResult) -> None:
    """The headline table of each scorer, and where the files went."""
    from judge.audit.report import HEADLINE_HEADERS, headline_rows
    from judge.core.tables import text_table

    data = result.data
    print(
        f"\nAudit of {data.judge['source']} on {data.n_items} responses ({data.n_questions} questions), overall score:\n"
    )
    for scorer, crit in (("judge", "overall"), ("clipscore", "clipscore")):
        if scorer not in data.scorers:
            continue
        if scorer == "clipscore":
            print("\nCLIPScore:\n")
        print(text_table(HEADLINE_HEADERS, headline_rows(data, scorer, crit)))
    if data.unscorable:
        print(f"\nunscorable originals (left out): {data.unscorable}")
    print()
    print_written(result.written, result.seconds, result.files)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
