"""How fast judge-view opens and filters a large run, in a real browser (Debian's chromium, driven by
Playwright), printed as a table and written as JSON.

    python scripts/bench_view.py                      # 3,750 responses x 7 criteria = 26,250 score records
    python scripts/bench_view.py --questions 100      # a smaller run
    python scripts/bench_view.py --chromium /usr/bin/chromium --repeats 5

The run is made of real files: the demo generator's annotation set with ``--questions`` questions (three
responses each; its pictures and simulated annotators), and a ``scores.jsonl`` of judge records for every
criterion of every response (a seeded score distribution near the annotators' mean, calibrated scores with
intervals, 1% unscorable), with the ``run.json`` judge-score writes. It is exported with ``judge-view
--export`` (timed) and opened from disk:

* **open**: from the start of navigation to the item list drawn (``index.html#items``: the data file loaded
  and parsed, every row's |judge - human| computed, the rows sorted disagreements first, the visible ones
  drawn), and to the summary page drawn (``index.html``); the median of ``--repeats`` fresh pages;
* **filter**: each change of a filter or of the sort order, from the change to the next frame painted,
  with no page load (the page's navigation count is checked to stay 1).

The JSON goes to ``benchmarks/results/bench_view_cpu_<time>.json`` (or ``--json``) with the machine's facts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from judge.testing.browser import CHROMIUM, CHROMIUM_ARGS, wait_for  # noqa: E402


def make_run(out: Path, n_questions: int, seed: int = 0) -> tuple[Path, int]:
    """A judge-score folder over a generated annotation set (see the module doc); returns it and its record count."""
    import numpy as np

    from judge.core.io import file_sha256, load_annotations
    from judge.core.rubric import load_rubric
    from judge.data.aggregate import aggregate_record
    from judge.scoring.output import RunEvent, RunIdentity, RunInfo, RunInput, timestamp, write_run
    from judge.testing.demo import generate_demo

    data = out / "data"
    jsonl = data / "annotations.jsonl"
    if not jsonl.is_file() or sum(1 for _ in jsonl.open()) != 3 * n_questions:
        generate_demo(data, n_questions=n_questions, seed=seed)
    rubric = load_rubric("mmie")
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    run_dir = out / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    n = 0
    values = np.arange(7)
    with open(run_dir / "scores.jsonl", "w", encoding="utf-8") as f:
        for rec in load_annotations(jsonl, check_images=False).records:
            means = aggregate_record(rec, "mean")
            for crit in rubric.families[rec.task].criterion_ids:
                base = {"id": rec.id, "benchmark": rubric.name, "task": rec.task, "model": rec.model}
                base |= {"metric": "judge", "criterion": crit, "producer": {"judge": "synthetic"}}
                if pick.random() < 0.01:
                    reason = {
                        "status": "unscorable",
                        "reason": "image cannot be used: synthetic",
                        "details": {"reason_code": "image"},
                    }
                    f.write(json.dumps({**base, "score": None, **reason}) + "\n")
                    n += 1
                    continue
                centre = means[crit].value + rng.normal(0, 1.2)
                logits = -((values - centre) ** 2) / (2 * rng.uniform(0.6, 2.0))
                dist = np.exp(logits - logits.max())
                dist /= dist.sum()
                raw = float(dist @ values)
                score = float(np.clip(raw + rng.normal(0, 0.1), 0, 6))
                half = float(rng.uniform(0.8, 2.5))
                f.write(
                    json.dumps(
                        {
                            **base,
                            "score": score,
                            "distribution": [float(p) for p in dist],
                            "argmax": int(dist.argmax()),
                            "raw_score": raw,
                            "interval": [max(0.0, score - half), min(6.0, score + half)],
                        }
                    )
                    + "\n"
                )
                n += 1
    rel = os.path.relpath(jsonl)
    info = RunInfo(
        identity=RunIdentity(
            judge="synthetic", rubric=rubric.name, rubric_hash=rubric.hash, calibration="synthetic"
        ),
        inputs=[
            RunInput(path=rel, format="annotations", sha256=file_sha256(jsonl), n_records=3 * n_questions)
        ],
        options={"format": "auto", "root": None},
        history=[
            RunEvent(started=timestamp(), host="bench", argv=["bench_view"], world_size=1, inputs=[rel])
        ],
        status="finished",
        finished=timestamp(),
        records=n,
        items=3 * n_questions,
    )
    write_run(run_dir, info)
    return run_dir, n


FILTERS = [
    # (what, JavaScript that changes the filter or the sort)
    ("criterion = overall", "setSelect('criterion', 'overall')"),
    ("and model = model-a", "setSelect('model', 'model-a')"),
    ("and judge >= 4", "setInput('scoreMin', '4')"),
    ("and |judge - human| >= 1", "setInput('diffMin', '1')"),
    ("sort by human score", "document.querySelector('#list-head [data-key=human]').click()"),
    ("id contains 'sa-01'", "setInput('id', 'sa-01')"),
    ("clear all filters", "document.querySelector('#filters button[type=reset]').click()"),
]

HELPERS = """
window.setSelect = (name, label) => {
  const s = document.querySelector(`#filters [name=${name}]`);
  s.value = [...s.options].find(o => o.text === label).value;
  s.dispatchEvent(new Event('input', {bubbles: true}));
};
window.setInput = (name, value) => {
  const i = document.querySelector(`#filters [name=${name}]`);
  i.value = value;
  i.dispatchEvent(new Event('input', {bubbles: true}));
};
window.timed = async (code) => {
  const t0 = performance.now();
  (0, eval)(code);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return {ms: performance.now() - t0, compute_ms: JV.state.timing.lastFilterMs, shown: JV.state.order.length};
};
"""


def measure(site: Path, chromium: str, repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    url = (site / "index.html").resolve().as_uri()
    out: dict = {"open_list_ms": [], "open_summary_ms": [], "filters": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            for _ in range(repeats):
                for route, key, mark in (
                    ("#items", "open_list_ms", "listRendered"),
                    ("", "open_summary_ms", "summaryRendered"),
                ):
                    page = browser.new_page(viewport={"width": 1400, "height": 900})
                    page.goto(url + route)
                    wait_for(page, f"window.JV && JV.state.timing.{mark}", timeout_s=60)
                    out[key].append(page.evaluate(f"JV.state.timing.{mark}"))
                    if route:
                        out["rows"] = page.evaluate("JV.state.index.rows.item.length")
                        page.evaluate(HELPERS)
                        runs = []
                        for what, code in FILTERS:
                            got = page.evaluate("c => timed(c)", code)
                            runs.append({"filter": what, **got})
                        navigations = page.evaluate("performance.getEntriesByType('navigation').length")
                        if navigations != 1 or page.evaluate("JV.state.timing.filters") < len(FILTERS):
                            raise SystemExit("error: the page reloaded while filtering")
                        out["filters"].append(runs)
                    page.close()
        finally:
            browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--questions", type=int, default=1250, help="questions (3 responses x 7 criteria each; default 1250)"
    )
    p.add_argument(
        "--repeats", type=int, default=5, help="fresh page loads (default 5; the median is reported)"
    )
    p.add_argument("--chromium", default=str(CHROMIUM), help=f"the browser (default {CHROMIUM})")
    p.add_argument("--out", default="runs/bench-view", help="working folder (default runs/bench-view)")
    p.add_argument(
        "--json", help="where the result goes (default benchmarks/results/bench_view_cpu_<time>.json)"
    )
    args = p.parse_args(argv)
    if not Path(args.chromium).is_file():
        print(
            f"error: no browser at {args.chromium}: apt-get install -y chromium (or pass --chromium)",
            file=sys.stderr,
        )
        return 2
    from judge.view import ViewConfig, view_run

    out = Path(args.out)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    run_dir, n_records = make_run(out, args.questions)
    t_make = time.perf_counter() - t0
    site = out / "site"
    t0 = time.perf_counter()
    result = view_run(ViewConfig(run=str(run_dir), export=str(site), overwrite=True))
    t_export = time.perf_counter() - t0
    got = measure(site, args.chromium, args.repeats)
    load_after = os.getloadavg()
    filters = [
        {
            "filter": runs[0]["filter"],
            "shown": runs[0]["shown"],
            "median_ms": round(statistics.median(r["ms"] for r in runs), 1),
            "median_compute_ms": round(statistics.median(r["compute_ms"] for r in runs), 1),
        }
        for runs in zip(*got["filters"], strict=True)
    ]
    summary = {
        "records": n_records,
        "rows_in_page": got["rows"],
        "items": len(result.view.items),
        "make_run_s": round(t_make, 1),
        "export_s": round(t_export, 1),
        "site_bytes": sum(f.stat().st_size for f in site.rglob("*") if f.is_file()),
        "index_bytes": (site / "data" / "index.js").stat().st_size,
        "open_list_ms_median": round(statistics.median(got["open_list_ms"]), 1),
        "open_list_ms": [round(x, 1) for x in got["open_list_ms"]],
        "open_summary_ms_median": round(statistics.median(got["open_summary_ms"]), 1),
        "open_summary_ms": [round(x, 1) for x in got["open_summary_ms"]],
        "filters": filters,
    }
    print(
        f"judge-view on {n_records:,} score records ({summary['items']:,} items); median of {args.repeats} page loads"
    )
    print(
        f"  export (judge-view --export)          {summary['export_s']:8.1f} s   site {summary['site_bytes'] / 1e6:.1f} MB"
    )
    print(f"  open, item list drawn                 {summary['open_list_ms_median']:8.0f} ms")
    print(f"  open, summary page drawn              {summary['open_summary_ms_median']:8.0f} ms")
    for f in filters:
        print(f"  filter: {f['filter']:28s} {f['median_ms']:8.0f} ms  ({f['shown']:,} rows shown)")
    import subprocess

    version = subprocess.run(
        [args.chromium, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    doc = {
        "command": "python scripts/bench_view.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "browser": version,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_before": load_before,
            "load_after": load_after,
        },
        **summary,
    }
    path = (
        Path(args.json)
        if args.json
        else REPO / "benchmarks" / "results" / f"bench_view_cpu_{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
