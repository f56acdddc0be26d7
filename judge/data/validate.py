"""``judge-data validate``: every problem in a set of annotation files, and a summary of what is there."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.core.errors import RecordError
from judge.core.images import DEFAULT_LIMITS, ImageLimits
from judge.core.io import load_annotations
from judge.core.rubric import OVERALL, Rubric
from judge.data.aggregate import agreement


@dataclass
class ValidationReport:
    files: list[str]
    rubric: str | None
    records: int
    problems: list[RecordError]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "rubric": self.rubric,
            "records": self.records,
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
            "summary": self.summary,
        }


def validate_annotations(
    paths: list[str | Path],
    rubric: Rubric | None,
    *,
    root: str | Path | None = None,
    allow_urls: bool = False,
    image_limits: ImageLimits = DEFAULT_LIMITS,
) -> ValidationReport:
    """Load with every check on, collecting (not raising) problems; summarise the valid records."""
    res = load_annotations(
        paths,
        rubric=rubric,
        root=root,
        allow_urls=allow_urls,
        check_images=True,
        image_limits=image_limits,
        collect=True,
    )
    recs = res.records
    summary: dict[str, Any] = {
        "families": dict(sorted(Counter(r.task for r in recs).items())),
        "questions": len({r.question_id for r in recs}),
        "models": dict(sorted(Counter(r.model for r in recs).items())),
        "annotators": dict(sorted(Counter(a for r in recs for a in r.scores).items())),
        "annotators_per_record": _dist([len(r.scores) for r in recs]),
    }
    imgs_per_rec = [len(r.images) for r in recs]
    sizes = list(res.images.values())
    summary["images"] = {
        "referenced": sum(imgs_per_rec),
        "unique_files": len(res.images),
        "per_record": _dist(imgs_per_rec),
        "width": _dist([i.width for i in sizes]),
        "height": _dist([i.height for i in sizes]),
    }
    if rubric is not None:
        agree: dict[str, dict[str, Any]] = {}
        for fam_id, fam in rubric.families.items():
            fam_recs = [r for r in recs if r.task == fam_id]
            if not fam_recs:
                continue
            agree[fam_id] = {
                c: agreement(fam_recs, c, rubric.scale.values).as_dict() for c in fam.criterion_ids
            }
        summary["agreement"] = agree
    return ValidationReport(
        files=res.files,
        rubric=rubric.name if rubric else None,
        records=len(recs),
        problems=res.errors,
        summary=summary,
    )


def _dist(xs: Sequence[float]) -> dict[str, float] | None:
    if not xs:
        return None
    return {"min": min(xs), "mean": round(statistics.fmean(xs), 2), "max": max(xs)}


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def format_report(report: ValidationReport, max_problems: int = 50) -> str:
    """The text `judge-data validate` prints."""
    s = report.summary
    lines = [
        f"Files: {', '.join(report.files)}",
        f"Valid records: {report.records}   questions: {s.get('questions', 0)}   "
        f"problems: {len(report.problems)}",
        "Families: " + ", ".join(f"{k}={v}" for k, v in s.get("families", {}).items()),
        "Models: " + ", ".join(f"{k}={v}" for k, v in s.get("models", {}).items()),
        "Annotators: " + ", ".join(f"{k}={v}" for k, v in s.get("annotators", {}).items()),
    ]
    im = s.get("images", {})
    if im:
        per = im.get("per_record") or {}
        lines.append(
            f"Images: {im['referenced']} referenced, {im['unique_files']} files; per record "
            f"min {per.get('min', 0)} / mean {per.get('mean', 0)} / max {per.get('max', 0)}"
            + (
                f"; width {im['width']['min']}-{im['width']['max']}, height {im['height']['min']}-{im['height']['max']}"
                if im.get("width")
                else ""
            )
        )
    if s.get("agreement"):
        lines += [
            "",
            "Annotator agreement (the human ceiling):",
            f"  {'family':<6} {'criterion':<28} {'n':>4} {'alpha_int':>9} {'alpha_ord':>9} {'spearman':>8} {'spread':>6}",
        ]
        for fam, crits in s["agreement"].items():
            for crit, a in crits.items():
                name = crit if crit != OVERALL else "OVERALL"
                lines.append(
                    f"  {fam:<6} {name:<28} {a['n_items']:>4} {_fmt(a['alpha_interval']):>9} "
                    f"{_fmt(a['alpha_ordinal']):>9} {_fmt(a['mean_pairwise_spearman']):>8} "
                    f"{_fmt(a['mean_spread']):>6}"
                )
    if report.problems:
        lines += ["", f"Problems ({len(report.problems)}):"]
        lines += [f"  {p}" for p in report.problems[:max_problems]]
        if len(report.problems) > max_problems:
            lines.append(f"  ... and {len(report.problems) - max_problems} more (use --json for all)")
    else:
        lines += ["", "No problems found."]
    return "\n".join(lines)
