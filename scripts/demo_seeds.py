"""Do the demo's conclusions hold whatever path training takes? Runs ``scripts/demo.sh`` once per training
seed and prints, per seed, what the demo concludes and whether each conclusion holds:

    python scripts/demo_seeds.py [--seeds 0 1 2] [--steps N] [--out runs/demo-seeds] [--json FILE]
    python scripts/demo_seeds.py --table-only            # the table from runs already there

Seeds stand in for hosts: another CPU rounds the last bits of float32 differently and sends training down
another path, as another data order does. The conclusions checked on the held-out test split:

* the trained judge's overall Spearman with the annotators' mean is at least 0.5;
* the paired bootstrap interval of (trained - untrained) Spearman lies entirely above 0;
* the audit finds the trained judge *sensitive* to blank response images and to unrelated text (its
  overall score falls, by at least the audit's minimum effect, with an interval off 0).

Each seed's run goes to ``OUT/seed-N`` (its full demo log in ``OUT/seed-N.log``); the table and every
figure go to ``OUT/seeds.json`` (or ``--json``). Exit status 1 when a conclusion fails for some seed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_SPEARMAN = 0.5
AUDITED = ("blank-images", "unrelated-text")


def run_seed(seed: int, out: Path, steps: int | None) -> float:
    """Run the demo for one seed into ``out``; return its wall time. Its output goes to ``out``.log."""
    cmd = ["bash", str(ROOT / "scripts" / "demo.sh"), "--seed", str(seed), "--out", str(out)]
    if steps is not None:
        cmd += ["--steps", str(steps)]
    t0 = time.perf_counter()
    with open(f"{out}.log", "w", encoding="utf-8") as log:
        done = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: the demo for seed {seed} failed (exit {done.returncode}); see {out}.log")
    return time.perf_counter() - t0


def conclusions(out: Path) -> dict:
    """What one demo run concludes, read from its report.json and audit.json."""
    report = json.loads((out / "report" / "report.json").read_text(encoding="utf-8"))
    audit = json.loads((out / "audit" / "audit.json").read_text(encoding="utf-8"))
    main = next(s for s in report["slices"] if s["key"] == report["main"])
    trained = main["scorers"]["trained"]["spearman"]
    untrained = main["scorers"]["untrained"]["spearman"]
    paired = next(
        p
        for p in report["paired"]
        if p["slice"] == report["main"] and {p["a"], p["b"]} == {"trained", "untrained"}
    )
    diff = paired["spearman"]
    sign = 1 if paired["a"] == "trained" else -1
    diff_ci = sorted(sign * x for x in diff["ci"])
    row = {
        "trained_spearman": trained["value"],
        "trained_spearman_ci": trained["ci"],
        "untrained_spearman": untrained["value"],
        "diff_spearman": sign * diff["diff"],
        "diff_ci": diff_ci,
        "audit": {},
    }
    for name in ("blank-images", "off-topic", "unrelated-text"):
        cell = next(
            (
                c
                for c in audit["cells"]
                if c["scorer"] == "judge" and c["perturbation"] == name and c["criterion"] == "overall"
            ),
            None,
        )
        if cell is not None:
            row["audit"][name] = {"change": cell["change"], "ci": cell["ci"], "verdict": cell["verdict"]}
    row["holds"] = {
        "spearman": trained["value"] >= MIN_SPEARMAN,
        "paired": diff_ci[0] > 0,
        **{name: row["audit"].get(name, {}).get("verdict") == "sensitive" for name in AUDITED},
    }
    return row


def _ci(v: float, ci: list[float] | None, signed: bool = False) -> str:
    f = "{:+.2f}" if signed else "{:.3f}"
    return f.format(v) + (f" [{f.format(ci[0])}, {f.format(ci[1])}]" if ci else "")


def table(rows: dict[int, dict]) -> str:
    lines = [
        "| seed | trained Spearman | trained - untrained | blank images | off-topic | unrelated text | all hold |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for seed, r in rows.items():
        audit = {
            name: (
                _ci(a["change"], a["ci"], signed=True) + f" *{a['verdict']}*"
                if (a := r["audit"].get(name))
                else "-"
            )
            for name in ("blank-images", "off-topic", "unrelated-text")
        }
        lines.append(
            f"| {seed} | {_ci(r['trained_spearman'], r['trained_spearman_ci'])} | "
            f"{_ci(r['diff_spearman'], r['diff_ci'], signed=True)} | {audit['blank-images']} | "
            f"{audit['off-topic']} | {audit['unrelated-text']} | {'yes' if all(r['holds'].values()) else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="training seeds (default 0 1 2)")
    p.add_argument("--steps", type=int, help="training steps (default: the demo's own)")
    p.add_argument("--out", default="runs/demo-seeds", help="folder of the runs (default runs/demo-seeds)")
    p.add_argument("--json", help="where the figures go (default OUT/seeds.json)")
    p.add_argument("--table-only", action="store_true", help="read the runs already in OUT; run nothing")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[int, dict] = {}
    seconds: dict[int, float] = {}
    for seed in args.seeds:
        run = out / f"seed-{seed}"
        if not args.table_only:
            print(f"seed {seed}: running the demo into {run} (log: {run}.log)", flush=True)
            seconds[seed] = run_seed(seed, run, args.steps)
        try:
            rows[seed] = conclusions(run)
        except (OSError, KeyError, StopIteration, json.JSONDecodeError) as e:
            print(f"error: no complete demo run for seed {seed} in {run}: {e!r}", file=sys.stderr)
            return 2
        if seed in seconds:
            rows[seed]["wall_s"] = round(seconds[seed], 1)
    text = table(rows)
    print(text)
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    )
    doc = {
        "command": "python scripts/demo_seeds.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "git_commit": commit.stdout.strip() or None,
        "steps": args.steps,
        "host": {"machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count()},
        "criteria": {"min_spearman": MIN_SPEARMAN, "sensitive_to": list(AUDITED)},
        "seeds": rows,
        "table": text,
    }
    path = Path(args.json) if args.json else out / "seeds.json"
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0 if all(all(r["holds"].values()) for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
