"""load_test's judge-score side: the items the server answered, scored with ``judge.api.score_files`` in this
process, its judge loop timed, and the agreement of both sides' scores."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _load_workload import Workload


@contextmanager
def timed_judge_loop(times: list[float]) -> Iterator[None]:
    """Time each run of ``JudgeEngine.iter_batches`` inside ``score_files``: from its first item encoded
    to its exhaustion, which includes the caller appending each batch to the output (instrumentation
    only; the engine runs unchanged)."""
    from judge.scoring.engine import JudgeEngine

    original = JudgeEngine.iter_batches

    def iter_batches(self, *a, **k):
        t0 = time.perf_counter()
        try:
            yield from original(self, *a, **k)
        finally:
            times.append(time.perf_counter() - t0)

    JudgeEngine.iter_batches = iter_batches  # type: ignore[method-assign]
    try:
        yield
    finally:
        JudgeEngine.iter_batches = original  # type: ignore[method-assign]


class BatchPath:
    """judge-score on the items the server answered, through ``judge.api.score_files`` in this process
    (what the command runs, without its process start); see the module doc for what is timed.
    ``benchmark``: the rubric's name, which the server gives items that do not name one (files must)."""

    def __init__(self, args: argparse.Namespace, wl: Workload, benchmark: str, work: Path):
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        self.args, self.wl, self.benchmark, self.work = args, wl, benchmark, work
        self.path = wl.demo_dir / "load_items.jsonl"
        self.items = 0
        self.runs: list[dict[str, Any]] = []
        self.options = dict(
            judge=args.judge,
            rubric=args.rubric,
            device=args.device,
            dtype=args.dtype,
            batch_tokens=args.max_batch_tokens,
            batch_size=args.batch_size,
            overwrite=True,
            progress=False,
        )

    def prepare(self, ids: set[str]) -> None:
        """Write the items (same ids and content; images as files) and score 8 of them once, untimed."""
        from judge.api import score_files

        items = [{**it, "benchmark": self.benchmark} for it in self.wl.items_path if it["id"] in ids]
        self.path.write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
        warm = self.wl.demo_dir / "warmup_items.jsonl"
        warm.write_text("".join(json.dumps(it) + "\n" for it in items[:8]), encoding="utf-8")
        score_files(inputs=[str(warm)], out=str(self.work / "warmup"), **self.options)
        self.items = len(items)

    def run(self) -> dict[str, Any]:
        from judge.api import score_files

        times: list[float] = []
        load0 = os.getloadavg()[0]
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        with timed_judge_loop(times):
            res = score_files(inputs=[str(self.path)], out=str(self.work / "score"), **self.options)
        total = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        if res.items_scored != self.items or len(times) != 1:
            raise RuntimeError(f"judge-score scored {res.items_scored} of {self.items} items")
        run = {
            "items": self.items,
            "judge_seconds": times[0],
            "call_seconds": total,
            "items_per_s": self.items / times[0],
            "cpu_seconds": cpu,
            "load_average_before": load0,
            "load_average_after": os.getloadavg()[0],
        }
        self.runs.append(run)
        print(
            f"judge-score run {len(self.runs)}: {self.items} items, judge loop {times[0]:.2f} s",
            file=sys.stderr,
        )
        return run

    def scores(self) -> dict[tuple[str, str], float | None]:
        """The last run's judge scores by (id, criterion)."""
        out: dict[tuple[str, str], float | None] = {}
        for line in (self.work / "score" / "scores.jsonl").read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec.get("metric") == "judge":
                out[(rec["id"], rec.get("criterion") or "")] = rec.get("score")
        return out

    def summary(self) -> dict[str, Any]:
        judge_s = statistics.median(r["judge_seconds"] for r in self.runs)
        call_s = statistics.median(r["call_seconds"] for r in self.runs)
        cpu_s = statistics.median(r["cpu_seconds"] for r in self.runs)
        return {
            "items": self.items,
            "judge_seconds": judge_s,
            "call_seconds": call_s,
            "items_per_s": self.items / judge_s,
            "items_per_s_whole_call": self.items / call_s,
            "cpu_seconds_per_item": cpu_s / self.items,
            "runs": self.runs,
            "timed": "judge_seconds: the judge loop of judge.api.score_files (JudgeEngine.iter_batches from the "
            "first item encoded to the last batch appended to scores.jsonl and fsync-ed: images opened, prompts "
            "encoded, forward passes, records built and written); not timed: process start, imports, a warm-up "
            "call on 8 items, loading the model, reading the JSONL, the summary. call_seconds: the whole "
            "score_files call (model load included). Medians over runs",
        }


def agreement(server: list[tuple[tuple[str, str], float | None]], batch: dict) -> dict[str, Any]:
    """How far the server's scores (every answer of every phase) are from judge-score's."""
    diffs = [abs(v - batch[k]) for k, v in server if k in batch and v is not None and batch[k] is not None]
    return {
        "pairs": sum(1 for k, _ in server if k in batch),
        "missing_in_judge_score": sum(1 for k, _ in server if k not in batch),
        "null_mismatch": sum(1 for k, v in server if k in batch and (v is None) != (batch[k] is None)),
        "max_abs_diff": max(diffs) if diffs else None,
    }
