"""``judge-bench``: argument parsing only; the work is :func:`judge.scoring.bench.run_bench`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from judge.cli._common import Parser, add_settings, print_written, run_job, settings_from

if TYPE_CHECKING:  # the bench module loads the scoring stack; the command imports it once parsing is done
    from judge.scoring.bench import BenchResult

EPILOG = """\
examples (from the repository root; examples/benchmarks/ holds a small sample of each benchmark):
  judge-bench vl-rewardbench examples/benchmarks/vl-rewardbench/test-00000-of-00001.parquet \\
              --judge tiny --rubric mmie --task SA --out runs/bench-vlrb
  judge-bench multimodal-rewardbench examples/benchmarks/multimodal-rewardbench/all_data.json \\
              --judge tiny --rubric mmie --task SA --out runs/bench-mmrb
  judge-bench mllm-as-a-judge examples/benchmarks/mllm-as-a-judge/Benchmark/pair.jsonl \\
              --judge tiny --rubric mmie --task SA --out runs/bench-mllm-pair
  judge-bench vl-rewardbench examples/benchmarks/vl-rewardbench/test-00000-of-00001.parquet \\
              --judge-outputs examples/benchmarks/vl-rewardbench/other_judge.jsonl \\
              --out runs/bench-other
                                      another judge's verdicts, with the same official metric
"""

GROUPS = {
    "verdicts": ["judge", "judge_outputs", "rubric", "task", "criterion", "force", "calibration"],
    "judge": ["device", "dtype", "quantization", "batch_tokens", "batch_size", "max_tokens"],
    "inputs and outputs": ["root", "limit", "out", "overwrite", "progress"],
    "intervals": ["bootstrap", "seed"],
}


def build_parser() -> argparse.ArgumentParser:
    from judge.benchmarks.judging import JUDGE_BENCHMARKS
    from judge.scoring.bench import BenchConfig

    names = list(JUDGE_BENCHMARKS)
    p = Parser(
        prog="judge-bench",
        description="Measure a judge on a judge benchmark ("
        + ", ".join(bm.title for bm in JUDGE_BENCHMARKS.values())
        + ") from the benchmark's own files: its official metric exactly as its code computes it, and a strict "
        "one where every item counts, each with a bootstrap interval. Verdicts come from a judge (resumable) or "
        "a file of per-item outputs. Writes bench.json, bench.md and judge_outputs.jsonl.",
        epilog=EPILOG,
    )
    p.add_argument("benchmark", metavar="BENCHMARK", help=f"the judge benchmark: {', '.join(names)}")
    p.add_argument("data", metavar="DATA", help=BenchConfig.model_fields["data"].description)
    add_settings(p, BenchConfig, groups=GROUPS)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``judge-bench``; returns the exit code (2 for a user error)."""

    def job(args: argparse.Namespace) -> BenchResult:
        from judge.scoring.bench import BenchConfig, run_bench

        return run_bench(settings_from(args, BenchConfig))

    return run_job(build_parser, argv, job, show, also={"benchmark": "BENCHMARK", "data": "DATA"})


def show(result: BenchResult) -> None:
    """The headline metrics, official and strict, and where the files went."""
    from judge.scoring.bench import headline_rows
    from judge.scoring.summary import md_table

    doc = result.data
    items = doc["items"]
    print(
        f"\n{doc['title']} ({doc['data']['mode']}): {items['total']} items, {items['scored']} with a verdict\n"
    )
    print(md_table(["metric", "official", "95% interval", "strict", "95% interval"], headline_rows(doc)))
    print()
    print_written(result.written, result.seconds, result.files)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
