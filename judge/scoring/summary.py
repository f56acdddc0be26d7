"""The summary of a scoring run: judge means per benchmark, task and model, the metrics' rows, the gaps.

A pairs input's preferences (:mod:`judge.scoring.pairs`) are ``preferences`` rows: per benchmark, pair of
models, task and criterion, the mean preference of model A and its wins, ties and losses.

Built from the merged ``scores.jsonl``, restricted to the items of the run that writes it (a resumed
run summarises everything of its inputs, not only what it scored itself), and written atomically as
``summary.json``, ``summary.csv`` and ``summary.md``; each names the input files it covers.

Judge rows (one per benchmark, model, task family and criterion, plus ``group="all"`` over
the benchmark's tasks): ``value`` is the mean expected score on the rubric's scale (MMIE: 0..6)
over the scored items, ``percent`` is ``(mean - min) / (max - min) x 100`` (MMIE's benchmark
percentage, mean / 6 x 100), ``n``/``n_scored``/``n_unscorable`` count items, and ``reasons``
counts the unscorable ones by reason code. Metric rows are
:func:`judge.benchmarks.summarize`'s, unchanged (their values are x100 as in the official tables).

The leaderboard (:mod:`judge.scoring.leaderboard`: models ranked per benchmark and task by their
judge scores, bootstrap intervals, pairwise win rates) is ``summary.json``'s ``leaderboard`` and a
section of ``summary.md``, and is written beside them as ``leaderboard.csv``, ``win_rates.csv`` and
``leaderboard.png`` when the run has judge scores.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from judge.benchmarks import summarize
from judge.core.atomic import atomic_write, write_json
from judge.core.rubric import OVERALL
from judge.core.schema import ScoreRecord
from judge.core.tables import cell, md_table, text_table
from judge.eval.ppi import MIN_LABELS
from judge.scoring import leaderboard as lb
from judge.scoring import leaderboard_files as lbf
from judge.scoring.labelled import Labels
from judge.scoring.pairs import METRIC as PREFERENCE
from judge.scoring.pairs import preference_rows, trust_counts

JUDGE_SOURCE = "judge toolkit"
CSV_COLUMNS = [
    "benchmark",
    "model",
    "mode",
    "level",
    "group",
    "metric",
    "value",
    "percent",
    "n",
    "n_scored",
    "n_unscorable",
    "source",
    "reasons",
]


def _mean(vals: list[float]) -> float | None:
    return math.fsum(vals) / len(vals) if vals else None


def judge_rows(
    records: list[dict[str, Any]], scale: tuple[int, int], criteria: dict[str, list[str]] | None = None
) -> list[dict[str, Any]]:
    """Summary rows of the judge records (``metric == "judge"``); see the module doc.

    ``criteria`` (family -> criterion ids, as the rubric lists them) orders each task's rows;
    ``group="all"`` rows (a benchmark's tasks together) are for ``overall`` only, since
    families have different criteria.
    """
    lo, hi = scale
    rank = {(fam, c): i for fam, cs in (criteria or {}).items() for i, c in enumerate(cs)}
    # (benchmark, model, group) -> criterion -> list of records; group is a task or "all".
    groups: dict[tuple[str, str, str], dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    order: dict[tuple[str, str, str], list[str]] = {}
    for r in records:
        if r.get("metric") != "judge":
            continue
        crit = r.get("criterion") or OVERALL
        for group in (r["task"], "all") if crit == OVERALL else (r["task"],):
            key = (r["benchmark"], r["model"], group)
            groups[key][crit].append(r)
            seen = order.setdefault(key, [])
            if crit not in seen:
                seen.append(crit)
    rows = []
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2] == "all", k[2])):
        benchmark, model, group = key
        # "overall" first: it is the headline number; the criteria follow in rubric order.
        crits = sorted(order[key], key=lambda c: (c != OVERALL, rank.get((group, c), len(rank)), c))
        for crit in crits:
            recs = groups[key][crit]
            vals = [float(r["score"]) for r in recs if r.get("score") is not None]
            mean = _mean(vals)
            reasons = Counter(
                ((r.get("details") or {}).get("reason_code") or "other")
                for r in recs
                if r.get("score") is None
            )
            rows.append(
                {
                    "benchmark": benchmark,
                    "model": model,
                    "mode": "judge",
                    "level": "overall" if group == "all" else "task",
                    "group": group,
                    "metric": f"judge.{crit}",
                    "value": mean,
                    "percent": None if mean is None else (mean - lo) / (hi - lo) * 100,
                    "n": len(recs),
                    "n_scored": len(vals),
                    "n_unscorable": len(recs) - len(vals),
                    "source": JUDGE_SOURCE,
                    "reasons": dict(sorted(reasons.items())),
                    **trust_counts(recs),
                }
            )
    return rows


def unscorable_kind(record: dict[str, Any]) -> str:
    """The kind of reason an unscorable record gives: its ``details.reason_code``, else the reason's start."""
    return (record.get("details") or {}).get("reason_code") or (record.get("reason") or "no reason")[:80]


def unscorable_table(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Unscorable records counted by (benchmark, model, metric, reason kind), with one example reason each."""
    counts: dict[tuple, list] = {}
    for r in records:
        if r.get("score") is not None:
            continue
        key = (r.get("benchmark"), r.get("model"), r.get("metric"), unscorable_kind(r))
        entry = counts.setdefault(key, [0, r.get("reason"), r.get("id")])
        entry[0] += 1
    return [
        {
            "benchmark": b,
            "model": m,
            "metric": met,
            "reason": code,
            "count": n,
            "example_id": rid,
            "example": ex,
        }
        for (b, m, met, code), (n, ex, rid) in sorted(counts.items(), key=lambda kv: str(kv[0]))
    ]


def metric_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`judge.benchmarks.summarize` over the records (a pairs input's preferences aside)."""
    return summarize([ScoreRecord.model_validate(r) for r in records if r.get("metric") != PREFERENCE])


#: Baseline metrics summarised here (mean per benchmark, model and task, on their own scale).
BASELINE_METRICS = ("clipscore", "refclipscore")


def baseline_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean CLIPScore / RefCLIPScore per benchmark, model and task, and over all tasks (``group="all"``)."""
    groups: dict[tuple[str, str, str, str], list[dict]] = defaultdict(list)
    for r in records:
        if r.get("metric") in BASELINE_METRICS:
            for group in (r["task"], "all"):
                groups[(r["benchmark"], r["model"], r["metric"], group)].append(r)
    rows = []
    for (benchmark, model, metric, group), recs in sorted(
        groups.items(), key=lambda kv: (kv[0][:3], kv[0][3] == "all", kv[0][3])
    ):
        vals = [float(r["score"]) for r in recs if r.get("score") is not None]
        rows.append(
            {
                "benchmark": benchmark,
                "model": model,
                "mode": "baseline",
                "level": "overall" if group == "all" else "task",
                "group": group,
                "metric": metric,
                "value": _mean(vals),
                "n": len(recs),
                "n_scored": len(vals),
                "n_unscorable": len(recs) - len(vals),
                "source": JUDGE_SOURCE,
            }
        )
    return rows


def build_summary(
    records: list[dict[str, Any]],
    *,
    scale: tuple[int, int],
    run: dict[str, Any],
    criteria: dict[str, list[str]] | None = None,
    skipped_invalid: list[dict] | None = None,
    not_scored: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
    leaderboard_resamples: int = lb.RESAMPLES,
    leaderboard_seed: int = lb.SEED,
    questions: dict[tuple[str, str, str], str] | None = None,
    labels: Labels | None = None,
    min_labels: int = MIN_LABELS,
) -> dict[str, Any]:
    """Everything ``summary.json`` holds; ``leaderboard_*``: the leaderboard's bootstrap resamples and seed;
    ``questions``: the question of each item whose id is not it (see :func:`judge.scoring.leaderboard.build_leaderboard`);
    ``labels``: human labels of some responses, for the leaderboard's prediction-powered means."""
    by_metric = Counter(r["metric"] for r in records)
    return {
        "run": run,
        "counts": {
            "records": len(records),
            "by_metric": dict(sorted(by_metric.items())),
            "unscorable": sum(1 for r in records if r.get("score") is None),
            **{k.removeprefix("n_"): v for k, v in trust_counts(records).items()},
        },
        "judge": judge_rows(records, scale, criteria),
        "metrics": metric_rows(records),
        "baselines": baseline_rows(records),
        "preferences": preference_rows(records),
        "leaderboard": lb.build_leaderboard(
            records,
            resamples=leaderboard_resamples,
            seed=leaderboard_seed,
            scale=scale,
            question_map=questions,
            labels=labels,
            min_labels=min_labels,
        ),
        "unscorable": unscorable_table(records),
        "skipped_invalid": skipped_invalid or [],
        "not_scored": not_scored or {},
        "files": files or {},
    }


# ----------------------------------------------------------------------------- writing


def judge_tables(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown tables of the judge rows: per benchmark and task, a row per model, a column per criterion."""
    out = []
    tables: dict[tuple[str, str], dict[str, dict[str, dict]]] = defaultdict(lambda: defaultdict(dict))
    crit_order: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in rows:
        key = (r["benchmark"], r["group"])
        crit = r["metric"].removeprefix("judge.")
        tables[key][r["model"]][crit] = r
        if crit not in crit_order[key]:
            crit_order[key].append(crit)
    for (benchmark, group), models in sorted(
        tables.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])
    ):
        crits = [c for c in crit_order[(benchmark, group)] if c != OVERALL]
        title = "all tasks" if group == "all" else f"task {group}"
        headers = ["model", "items", "scored", "unscorable", "overall", "%"] + crits
        body = []
        for model, by_crit in sorted(models.items()):
            ov = by_crit.get(OVERALL) or next(iter(by_crit.values()))
            body.append(
                [
                    model,
                    ov["n"],
                    ov["n_scored"],
                    ov["n_unscorable"],
                    ov["value"] if OVERALL in by_crit else None,
                    ov["percent"] if OVERALL in by_crit else None,
                ]
                + [by_crit[c]["value"] if c in by_crit else None for c in crits]
            )
        out.append(f"### {benchmark}, {title}\n\n" + md_table(headers, body))
    return out


def metric_table(rows: list[dict[str, Any]], levels: tuple[str, ...] | None = None) -> str:
    headers = [
        "benchmark",
        "model",
        "mode",
        "level",
        "group",
        "metric",
        "value",
        "n",
        "scored",
        "unscorable",
        "source",
    ]
    body = [
        [
            r.get("benchmark"),
            r.get("model"),
            r.get("mode"),
            r.get("level"),
            r.get("group"),
            r.get("metric"),
            r.get("value"),
            r.get("n"),
            r.get("n_scored"),
            r.get("n_unscorable"),
            r.get("source"),
        ]
        for r in rows
        if levels is None or r.get("level") in levels
    ]
    return md_table(headers, body)


def render_markdown(summary: dict[str, Any], *, compact: bool = False) -> str:
    """``summary.md`` (``compact``: the console version, metric rows cut to the coarse levels when many)."""
    run = summary.get("run") or {}
    ident = run.get("identity") or {}
    parts = ["# judge-score summary", ""]
    if ident.get("judge"):
        parts.append(
            f"Judge: `{ident['judge']}`; rubric {ident.get('rubric')} "
            f"(hash {str(ident.get('rubric_hash'))[:12]}); "
            f"prompt format {ident.get('target_format')}."
        )
    else:
        parts.append("No judge: rule-based metrics only.")
    inputs = run.get("inputs") or []
    if inputs:
        parts += [
            "",
            f"This summary covers exactly the {run.get('items', '?')} items of these inputs: "
            + "; ".join(
                f"`{i['path']}` ({i['format']}, {i['n_records']} records, sha256 {i['sha256'][:12]})"
                for i in inputs
            )
            + ".",
        ]
    c = summary.get("counts") or {}
    parts += [
        "",
        f"{c.get('records', 0)} score records ({cell(c.get('by_metric') or {})}); "
        f"{c.get('unscorable', 0)} unscorable.",
    ]
    if "trusted" in c:
        sel = (run.get("identity") or {}).get("selective")
        # Escalated: confidence below the criterion's threshold, or no threshold certified at all (then
        # nothing is trusted). The summary cannot tell the two apart per score; with none trusted it says both.
        why = (
            "either no threshold passed when judge-calibrate --selective fitted them (its table says 'none'; "
            "label more items: judge-calibrate --selective --plan says how many, or lower --agreement) or "
            "every score's confidence fell below its criterion's threshold"
            if not c["trusted"]
            else "the judge's confidence below its criterion's threshold, or no threshold passed for that "
            "criterion"
        )
        parts += [
            "",
            f"Selective evaluation: {c['trusted']} scores trusted, {c['escalated']} escalated to a human ({why}; "
            "judge-calibrate --selective"
            + (f", thresholds {str(sel)[:12]}" if sel else "")
            + "). Trusted and escalated per model and criterion in summary.csv (n_trusted, n_escalated).",
        ]
    if summary.get("judge"):
        parts += [
            "",
            "## Judge scores",
            "",
            "Mean expected score on the rubric's scale over the scored items; % = mean on a 0..100 scale "
            "(MMIE: mean / 6 x 100).",
            "",
        ]
        parts += ["\n\n".join(judge_tables(summary["judge"]))]
    parts += lbf.leaderboard_markdown(summary.get("leaderboard") or {}, compact=compact)
    mrows = summary.get("metrics") or []
    if mrows:
        parts += [
            "",
            "## Benchmark metrics",
            "",
            "Rows of judge.benchmarks: rule-based metrics x100 (accuracy, ROUGE-L F) as in the official tables, "
            "and MMIE's judge percentage; 'source' says whether the benchmark's own tools report the number "
            "(official) or the toolkit adds it.",
            "",
        ]
        if compact and len(mrows) > 40:
            parts += [metric_table(mrows, ("overall", "category")), "", "(finer rows in summary.md)"]
        else:
            parts.append(metric_table(mrows))
    if summary.get("baselines"):
        parts += [
            "",
            "## Baselines",
            "",
            "Mean CLIPScore (2.5 x max(cos, 0), averaged over image-text pairs).",
            "",
        ]
        parts.append(metric_table(summary["baselines"]))
    if summary.get("preferences"):
        parts += [
            "",
            "## Preferences (pairs input)",
            "",
            "Mean preference of model A over model B: P(A better) + P(tie) / 2 from the two responses' score "
            "distributions; wins / ties / losses count the pairs whose preference is above / at / below 0.5.",
            "",
            md_table(
                [
                    "benchmark",
                    "A vs B",
                    "group",
                    "metric",
                    "mean",
                    "wins",
                    "ties",
                    "losses",
                    "n",
                    "unscorable",
                ],
                [
                    [
                        r["benchmark"],
                        r["model"],
                        r["group"],
                        r["metric"],
                        r["value"],
                        r["wins"],
                        r["ties"],
                        r["losses"],
                        r["n"],
                        r["n_unscorable"],
                    ]
                    for r in summary["preferences"]
                ],
            ),
        ]
    if summary.get("unscorable"):
        parts += ["", "## Unscorable", ""]
        parts.append(
            md_table(
                ["benchmark", "model", "metric", "reason", "count", "example"],
                [
                    [
                        u["benchmark"],
                        u["model"],
                        u["metric"],
                        u["reason"],
                        u["count"],
                        f"{u['example_id']}: {u['example']}",
                    ]
                    for u in summary["unscorable"]
                ],
            )
        )
    ns = summary.get("not_scored") or {}
    if ns.get("needs_judge"):
        parts += [
            "",
            f"Not scored: {ns['needs_judge']} items need the learned judge (run without --no-judge).",
        ]
    skipped = summary.get("skipped_invalid") or []
    if skipped:
        parts += ["", f"## Skipped invalid records ({len(skipped)})", ""]
        shown = skipped if not compact else skipped[:10]
        parts += [
            f"- {e.get('file')}:{e.get('line')}: field '{e.get('field')}': {e.get('message')}" for e in shown
        ]
        if len(shown) < len(skipped):
            parts.append(f"- ... and {len(skipped) - len(shown)} more (summary.json)")
    return "\n".join(parts) + "\n"


def render_console(summary: dict[str, Any]) -> str:
    """What ``judge-score`` prints at the end, as plain text: one line of counts, the leaderboard of all
    tasks of each benchmark, the rule-based metrics at their overall level, and where the rest is
    (``summary.md`` holds every table)."""
    run = summary.get("run") or {}
    ident = run.get("identity") or {}
    c = summary.get("counts") or {}
    who = f"judge {ident['judge']}, rubric {ident.get('rubric')}" if ident.get("judge") else "no judge"
    parts = [
        f"{who}: {run.get('items', '?')} items, {c.get('records', 0)} score records "
        f"({cell(c.get('by_metric') or {})}), {c.get('unscorable', 0)} unscorable"
    ]
    for board in (summary.get("leaderboard") or {}).get("boards") or []:
        if board["group"] == "all":
            header, rows = lbf.board_table(board)
            parts += [
                "",
                f"leaderboard, {lbf.board_title(board)}, ranked by {lbf.ranked_by(board)}:",
                text_table(header, [[cell(x) for x in r] for r in rows]),
            ]
            if any(lbf.BOUNDED in str(x) for r in rows for x in r):  # the mark explained where it shows
                parts.append(lbf.BOUNDED_LEGEND)
    overall = [r for r in summary.get("metrics") or [] if r["level"] == "overall" and r["mode"] != "judge"]
    if overall:
        rows = [
            [r["benchmark"], r["model"], r["mode"], r["metric"], cell(r["value"]), str(r["n"])]
            for r in overall
        ]
        parts += [
            "",
            "rule-based metrics, overall:",
            text_table(["benchmark", "model", "mode", "metric", "value", "n"], rows),
        ]
    prefs = [
        r
        for r in summary.get("preferences") or []
        if r["group"] == "all" and r["metric"] == f"{PREFERENCE}.{OVERALL}"
    ]
    if prefs:
        rows = [
            [
                r["benchmark"],
                r["model"],
                cell(r["value"]),
                str(r["wins"]),
                str(r["ties"]),
                str(r["losses"]),
                str(r["n"]),
            ]
            for r in prefs
        ]
        parts += [
            "",
            "preference of model A over model B (pairs), overall:",
            text_table(["benchmark", "A vs B", "mean", "wins", "ties", "losses", "n"], rows),
        ]
    skipped = summary.get("skipped_invalid") or []
    if skipped:
        parts += ["", f"{len(skipped)} invalid records skipped (listed in summary.md)"]
    ns = summary.get("not_scored") or {}
    if ns.get("needs_judge"):
        parts += [
            "",
            f"not scored: {ns['needs_judge']} items need the learned judge (run without --no-judge)",
        ]
    return "\n".join(parts)


def write_summary(out_dir: str | Path, summary: dict[str, Any]) -> dict[str, str]:
    """Write ``summary.json``, ``summary.csv`` and ``summary.md`` atomically, and the leaderboard's files
    when it has boards (:func:`judge.scoring.leaderboard_files.write_leaderboard`); returns their paths by key
    (``json``, ``csv``, ``md``, then ``leaderboard_csv``, ``win_rates_csv``, ``leaderboard_png``)."""
    out_dir = Path(out_dir)
    paths = {k: str(out_dir / f"summary.{k}") for k in ("json", "csv", "md")}
    paths.update(lbf.write_leaderboard(out_dir, summary.get("leaderboard") or {}))
    files = summary.setdefault("files", {})
    for key in lbf.FILES:  # a rewritten summary names only the files it wrote
        files.pop(key, None)
    files.update(paths)
    write_json(paths["json"], summary)
    buf = io.StringIO()
    rows = [
        *summary["judge"],
        *summary["metrics"],
        *summary.get("baselines", []),
        *summary.get("preferences", []),
    ]
    extra = sorted({k for r in rows for k in r} - set(CSV_COLUMNS))
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS + extra, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()})
    with atomic_write(paths["csv"]) as f:
        f.write(buf.getvalue())
    with atomic_write(paths["md"]) as f:
        f.write(render_markdown(summary))
    return paths
