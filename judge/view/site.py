"""The viewer as a static site: HTML, JavaScript and CSS (package data, ``judge/view/assets/``, used as they
are: there is no build step) and the run's data as JavaScript files, loaded with ``<script>`` tags so that
the site works opened from disk (browsers refuse ``fetch`` of ``file://`` URLs).

Files, by path inside the site::

    index.html, app.js, style.css   the viewer
    data/index.js                   the summary page and the item list: one row per score record, in columns
    data/items-<k>.js               the items' detail (content, every record, humans, audit), CHUNK per file
    plots/<name>                    the report's, the leaderboard's and the audit's plots
    img/<root>/<path>.webp          each image, at most ``thumbnail`` pixels a side (written on export;
                                    served from the run's image roots by ``judge-view``)

:func:`site_files` builds everything but the images; :func:`export_site` writes it all to a folder.
"""

from __future__ import annotations

import io
import json
import logging
import math
import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from judge.core.atomic import atomic_write
from judge.core.errors import ConfigError, ImageError
from judge.core.images import open_image, resolve_image
from judge.view.load import KNOWN_FIELDS, ViewData, ViewItem

logger = logging.getLogger(__name__)

ASSETS = ("index.html", "app.js", "style.css")
#: items per detail file: an item page loads one file of this many items
CHUNK = 100
#: the image format of the site (lossless for small pictures, lossy beyond LOSSLESS_PIXELS)
IMAGE_SUFFIX = ".webp"
LOSSLESS_PIXELS = 256 * 256


def image_url(root: int, path: str) -> str:
    """The site's URL of image ``path`` in image root ``root`` (relative to the site's folder)."""
    return f"img/{root}/{quote(path)}{IMAGE_SUFFIX}"


def thumbnail(path: str, side: int) -> bytes:
    """Image ``path`` (opened with :func:`judge.core.images.open_image`: byte and pixel limits, full
    decode) scaled to at most ``side`` pixels a side, as WebP. Raises ``ImageError``."""
    img = open_image(path)
    try:
        img.thumbnail((side, side))
        buf = io.BytesIO()
        small = img.width * img.height <= LOSSLESS_PIXELS
        img.save(buf, format="WEBP", lossless=small, quality=85 if not small else 100)
        return buf.getvalue()
    finally:
        img.close()


# ----------------------------------------------------------------------------- the data


def _num(x: Any) -> float | None:
    """A number as it is (the page shows what scores.jsonl holds), or None when there is none."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def _judge_rows(item: ViewItem) -> list[dict[str, Any]]:
    return [r for r in item.records if r.get("metric") == "judge" and r.get("criterion")]


def _extra(r: dict[str, Any]) -> dict[str, Any]:
    """The record's fields this viewer does not know (shown as they are): scalars only."""
    return {k: v for k, v in r.items() if k not in KNOWN_FIELDS and isinstance(v, str | int | float | bool)}


def _content(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for seg in content:
        if seg["type"] == "image" and "root" in seg:
            out.append({"type": "image", "src": image_url(seg["root"], seg["path"]), "name": seg["path"]})
        else:
            out.append(seg)
    return out


def item_detail(i: int, item: ViewItem, criteria: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """What an item page shows (see the module doc); ``criteria``: each family's criteria in the rubric's
    order, the order of the judge scores shown."""
    judge: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    for r in item.records:
        details = r.get("details") or {}
        entry: dict[str, Any] = {
            "score": _num(r.get("score")),
            "status": r.get("status", "ok"),
            "reason": r.get("reason"),
            "extra": _extra(r),
        }
        if r.get("metric") == "judge" and r.get("criterion"):
            entry.update(
                criterion=r["criterion"],
                raw_score=_num(r.get("raw_score")),
                interval=[_num(x) for x in r["interval"]] if r.get("interval") else None,
                distribution=[_num(x) for x in r["distribution"]] if r.get("distribution") else None,
                argmax=r.get("argmax"),
                rationale=details.get("rationale"),
            )
            judge.append(entry)
        else:
            producer = r.get("producer") or {}
            entry.update(metric=r.get("metric"), mode=producer.get("mode"), criterion=r.get("criterion"))
            entry["details"] = {k: v for k, v in details.items() if isinstance(v, str | int | float | bool)}
            metrics.append(entry)
    order = {c: k for k, c in enumerate((criteria or {}).get(item.task, []))}
    judge.sort(key=lambda j: order.get(j["criterion"], len(order)))
    out: dict[str, Any] = {
        "i": i,
        "id": item.id,
        "benchmark": item.benchmark,
        "task": item.task,
        "model": item.model,
        "question_id": item.question_id,
        "content": None
        if item.content is None
        else {name: _content(segs) for name, segs in item.content.items()},
        "judge": judge,
        "metrics": metrics,
        "human": item.human,
        "human_mean": {c: _num(v) for c, v in (item.human_mean or {}).items()} or None,
        "rationale": item.rationale,
        "audit": [{**v, "response": _content(v["response"])} if "response" in v else v for v in item.audit],
    }
    return out


def _index(view: ViewData) -> dict[str, Any]:
    """The item list in columns (one row per score record), the strings they refer to, and the flags."""
    strings: dict[str, list[str]] = {k: [] for k in ("benchmark", "model", "task", "criterion", "reason")}
    where: dict[str, dict[str, int]] = {k: {} for k in strings}

    def code(kind: str, value: str) -> int:
        table = where[kind]
        if value not in table:
            table[value] = len(strings[kind])
            strings[kind].append(value)
        return table[value]

    from judge.scoring.summary import unscorable_kind

    items: dict[str, list[Any]] = {"id": [], "benchmark": [], "model": [], "task": []}
    rows: dict[str, list[Any]] = {
        k: [] for k in ("item", "criterion", "score", "human", "width", "reason", "judge")
    }
    flags: dict[str, list[Any]] = {}
    for i, item in enumerate(view.items):
        items["id"].append(item.id)
        items["benchmark"].append(code("benchmark", item.benchmark))
        items["model"].append(code("model", item.model))
        items["task"].append(code("task", item.task))
        for r in item.records:
            is_judge = r.get("metric") == "judge" and bool(r.get("criterion"))
            label = (
                str(r["criterion"])
                if is_judge
                else f"{r.get('metric')}"
                + (
                    f" ({(r.get('producer') or {}).get('mode')})"
                    if (r.get("producer") or {}).get("mode")
                    else ""
                )
            )
            interval = r.get("interval")
            human = (item.human_mean or {}).get(str(r.get("criterion"))) if is_judge else None
            rows["item"].append(i)
            rows["criterion"].append(code("criterion", label))
            rows["score"].append(_num(r.get("score")))
            rows["human"].append(_num(human))
            rows["width"].append(_num(interval[1] - interval[0]) if interval else None)
            rows["reason"].append(-1 if r.get("score") is not None else code("reason", unscorable_kind(r)))
            rows["judge"].append(1 if is_judge else 0)
            for k, v in _extra(r).items():
                if isinstance(v, bool):
                    flags.setdefault(k, [None] * (len(rows["item"]) - 1)).append(v)
        for col in flags.values():
            col.extend([None] * (len(rows["item"]) - len(col)))
    return {"strings": strings, "items": items, "rows": rows, "flags": flags, "chunk": CHUNK}


def _plots(view: ViewData) -> list[tuple[str, str, Path]]:
    """(site path, caption, file) of every plot: the leaderboard's, the report's, the audit's."""
    found: list[tuple[str, str, Path]] = []
    lb = view.run_dir / "leaderboard.png"
    if lb.is_file():
        found.append(("plots/leaderboard.png", "leaderboard (judge-score)", lb))
    if view.report is not None and view.report_dir is not None:
        for kind, name in (view.report.get("plots") or {}).items():
            found.append((f"plots/report-{kind}.png", f"{kind} (judge-report)", view.report_dir / str(name)))
    if view.audit_dir is not None and (view.audit_dir / "audit.png").is_file():
        found.append(
            (
                "plots/audit.png",
                "score change by perturbation and criterion (judge-audit)",
                view.audit_dir / "audit.png",
            )
        )
    return found


def _summary(view: ViewData, plots: list[tuple[str, str, Path]]) -> dict[str, Any]:
    """The first page: the verdicts (:mod:`judge.view.verdict`), the run (its calibration named by method),
    its leaderboard, the report's main table and its calibration, selective and PPI checks, the audit's
    headline."""
    from judge.view.verdict import calibration_name, judge_scorer, read_run_files, run_verdicts

    run, ident = view.run, view.run.get("identity") or {}
    # The verdicts read the report and audit already loaded, and the judge folder run.json names.
    files = read_run_files(score=view.run_dir)
    files.report, files.audit = view.report, view.audit
    files.paths = [
        str(d / f)
        for d, f in ((view.report_dir, "report.json"), (view.audit_dir, "audit.json"))
        if d is not None
    ] + files.paths
    records = [r for item in view.items for r in item.records]
    judged = [r for r in records if r.get("metric") == "judge"]
    facts = [
        ["judge", str(ident.get("judge") or "none (rule-based metrics only)")],
        ["rubric", f"{ident.get('rubric')} ({str(ident.get('rubric_hash') or '')[:12]})"],
        ["calibration", calibration_name(files) or "none (raw read-out)"],
        ["inputs", ", ".join(i.get("path", "") for i in run.get("inputs") or [])],
        ["items", str(len(view.items))],
        ["score records", f"{len(records)} ({len(judged)} judge scores)"],
        ["unscorable records", str(sum(1 for r in records if r.get("score") is None))],
        ["items with human scores", str(sum(1 for i in view.items if i.human_mean))],
        ["finished", str(run.get("finished") or run.get("status") or "-")],
    ]
    sections: list[dict[str, Any]] = []
    verdicts = run_verdicts(files)
    if verdicts:
        sections.append(_verdict_section(verdicts, files.paths))
    sections.append({"title": f"Run {view.run_dir}", "tables": [{"columns": ["", ""], "rows": facts}]})
    from judge.scoring.leaderboard_files import (
        BOUNDED,
        BOUNDED_LEGEND,
        board_table,
        board_title,
        ranked_by,
    )

    boards = ((view.summary or {}).get("leaderboard") or {}).get("boards") or []
    if boards:
        tables = []
        for board in boards:
            cols, body = board_table(board)
            # The caption says what the board is ranked by: the all-tasks board may follow PPI, a task's the judge.
            caption = f"{board_title(board)}: ranked by {ranked_by(board)}"
            if any(BOUNDED in str(x) for r in body for x in r):  # its mark explained where it shows
                caption += f". {BOUNDED_LEGEND}"
            tables.append({"caption": caption, "columns": cols, "rows": body})
        sections.append(
            {
                "title": "Leaderboard",
                "tables": tables,
                "plots": [p for p in plots if p[0] == "plots/leaderboard.png"],
            }
        )
    if view.report is not None:
        from judge.eval.report_agreement import main_table
        from judge.eval.report_data import ReportData

        data = ReportData.model_validate(view.report)
        cols, body = main_table(data)
        paired = [
            [f"{pc.a} - {pc.b}", f"{pc.spearman.diff:+.3f}" if pc.spearman.diff is not None else "-",
             f"[{pc.spearman.ci[0]:+.3f}, {pc.spearman.ci[1]:+.3f}]" if pc.spearman.ci else "-",
             f"{pc.spearman.p:.3f}" if pc.spearman.p is not None else "-"]
            for pc in data.paired
            if pc.slice == data.main and pc.spearman is not None
        ]  # fmt: skip
        caption = data.main_slice.title
        if any("†" in str(x) for row in body for x in row):  # the report's mark, explained where it shows
            from judge.eval.report_build import SMALL_LEGEND

            caption += f". {SMALL_LEGEND}"
        tables = [{"caption": caption, "columns": cols, "rows": body}]
        if paired:
            tables.append(
                {
                    "caption": "paired differences in Spearman (same resamples)",
                    "columns": ["A - B", "difference", "95% CI", "p"],
                    "rows": paired,
                }
            )
        sections.append(
            {
                "title": f"Agreement with humans: {data.title}",
                "notes": [x for x in [data.note, *data.warnings] if x],
                "tables": tables,
                "plots": [p for p in plots if p[0].startswith("plots/report-")],
            }
        )
        sections += _check_sections(view.report, judge_scorer(files))
    if view.audit is not None:
        from judge.audit.report import HEADLINE_HEADERS, AuditData, headline_rows

        audit = AuditData.model_validate(view.audit)
        sections.append(
            {
                "title": "Audit: does the judge see what humans see?",
                "tables": [
                    {
                        "caption": "the overall score",
                        "columns": HEADLINE_HEADERS,
                        "rows": headline_rows(audit, "judge"),
                    }
                ],
                "plots": [p for p in plots if p[0] == "plots/audit.png"],
            }
        )
    for s in sections:
        s["plots"] = [{"src": src, "caption": cap} for src, cap, _ in s.get("plots", [])]
    return {"sections": sections, "warnings": view.warnings}


def _verdict_section(verdicts: list[Any], paths: list[str]) -> dict[str, Any]:
    """The verdicts (:mod:`judge.view.verdict`, the demo's last screen): each headline, then the lines behind it."""
    return {
        "title": "Verdict",
        "notes": ["every figure read from " + ", ".join(paths)] if paths else [],
        "tables": [
            {
                "caption": "in brief",
                "columns": ["", "verdict"],
                "rows": [[v.topic, v.headline] for v in verdicts],
            },
            {
                "caption": "why",
                "columns": ["", "from the files"],
                "rows": [[v.topic, d] for v in verdicts for d in v.details],
            },
        ],
    }


def _check_sections(report: dict[str, Any], scorer: str | None) -> list[dict[str, Any]]:
    """The report's calibration, selective-evaluation and PPI checks of the run's judge, as the demo's recap
    prints them (:mod:`judge.view.recap`); a check the report has not is left out."""
    from judge.view.recap import calibration_lines, ppi_lines, selective_lines

    out = []
    for key, title, lines in (
        ("calibration", "Calibration on held-out items (judge-report)", calibration_lines),
        ("selective", "Selective evaluation on held-out items (judge-report)", selective_lines),
        ("ppi", "Prediction-powered inference check (judge-report)", ppi_lines),
    ):
        if scorer is not None and any(c.get("scorer") == scorer for c in report.get(key) or []):
            out.append({"title": f"{title}: {scorer}", "notes": lines(report, scorer)})
    return out


def _js(call: str, payload: Any, *args: Any) -> bytes:
    """``call(args..., payload);``: a data file. "</" is escaped, so no string in the data can close the
    script element that loads it."""
    text = json.dumps([*args, payload], ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return f"{call}({text[1:-1]});\n".encode()


def site_files(view: ViewData) -> dict[str, bytes]:
    """Every file of the site but the images, by path inside the site (see the module doc)."""
    files: dict[str, bytes] = {}
    assets = resources.files("judge.view") / "assets"
    for name in ASSETS:
        files[name] = (assets / name).read_bytes()
    plots = _plots(view)
    for site_path, _, path in plots:
        try:
            files[site_path] = _plot_png(path)
        except ImageError as e:
            view.warnings.append(f"plot {path} not shown: {e}")
    plots = [p for p in plots if p[0] in files]
    index = _index(view)
    index["title"] = f"judge-view: {view.run_dir}"
    index["summary"] = _summary(view, plots)
    files["data/index.js"] = _js("JV.index", index)
    for k, start in enumerate(range(0, len(view.items), CHUNK)):
        chunk = [
            item_detail(start + j, it, view.criteria)
            for j, it in enumerate(view.items[start : start + CHUNK])
        ]
        files[f"data/items-{k}.js"] = _js("JV.chunk", chunk, k)
    return files


def _plot_png(path: Path) -> bytes:
    """A plot file, checked to lie in its folder and to be an image (:mod:`judge.core.images`), as PNG."""
    img = open_image(resolve_image(path.name, path.parent))
    try:
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()
    finally:
        img.close()


def site_images(view: ViewData) -> Iterator[tuple[int, str]]:
    """Every image the site shows, once: (root, path inside it)."""
    seen: set[tuple[int, str]] = set()
    for item in view.items:
        parts = [*(item.content or {}).values(), *(v.get("response", []) for v in item.audit)]
        for segs in parts:
            for seg in segs:
                if seg["type"] == "image" and "root" in seg:
                    key = (seg["root"], seg["path"])
                    if key not in seen:
                        seen.add(key)
                        yield key


def export_site(view: ViewData, out_dir: str | Path, *, side: int, overwrite: bool = False) -> dict[str, int]:
    """Write the site into ``out_dir``: its files and a thumbnail of every image. Returns counts (files,
    images, images that could not be shown). A non-empty folder is refused unless ``overwrite``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"`export` {out} is a file; give a folder")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError(f"`export` {out} is not empty; pass `overwrite` to replace its files")
        for sub in ("data", "img", "plots"):
            shutil.rmtree(out / sub, ignore_errors=True)
    files = site_files(view)
    for rel, data in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "wb") as f:
            f.write(data)
    n_images = n_bad = 0
    for root, rel in site_images(view):
        try:
            data = thumbnail(view.roots.resolve(root, rel), side)
        except ImageError as e:
            n_bad += 1
            logger.warning(f"image {rel} not shown: {e}")
            continue
        path = out / "img" / str(root) / (rel + IMAGE_SUFFIX)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "wb") as f:
            f.write(data)
        n_images += 1
    return {"files": len(files), "images": n_images, "images_not_shown": n_bad}
