"""Benchmarks are plugins: a module registering a Benchmark is all `judge-score` needs.

A toy spelling benchmark, written to a temporary module file, brings its own file format, metric
and summary rows; registered by importing it (or through the ``judge.benchmarks`` entry point
group), it is read, scored and summarised by the real ``judge-score``. Every metric the built-in
benchmarks emit has its metadata.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge.benchmarks import (
    FORMATS,
    REGISTRY,
    Benchmark,
    MetricInfo,
    get_benchmark,
    load_benchmark_predictions,
    metric_info,
    score_predictions,
    summarize,
    unregister_benchmark,
)
from judge.benchmarks.base import register_benchmark
from judge.cli.score import main
from judge.core.errors import ConfigError
from judge.core.io import InvalidRecordsError
from judge.core.schema import ScoreRecord

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "predictions"

#: The whole toy benchmark: what a new benchmark module looks like.
TOY_MODULE = '''
"""Toy: a spelling quiz. Official scoring (its score.py) is exact match; strict ignores case and spaces."""

from pathlib import Path

from judge.benchmarks import Benchmark, Format, MetricInfo, ReadContext, RecordMeta, register_benchmark
from judge.benchmarks.common import (
    OFFICIAL, SOURCE_OFFICIAL, SOURCE_TOOLKIT, build_record, iter_rows, make_score, mean_row, record_mode,
    response_text,
)
from judge.core.errors import RecordError

OFFICIAL_REF = "toy score.py@0123abc"


class ToyMeta(RecordMeta):
    level: int
    response_missing: bool = False


def read_toy(path: Path, ctx: ReadContext):
    records, errors = [], []
    for line, row in iter_rows(path):
        if isinstance(row, RecordError):
            errors.append(row)
            continue
        meta = ToyMeta(level=row["level"], response_missing=row["spelled"] is None)
        obj = {
            "id": row["toy_id"], "benchmark": "toy", "task": row["topic"], "model": row["who"],
            "question": f"spell {row['word']}", "response": row["spelled"] or "", "answer": row["word"],
            "meta": meta.to_meta(),
        }
        rec, errs = build_record(obj, path, line, row["toy_id"])
        errors += errs
        records += [rec] if rec else []
    return records, errors


@register_benchmark
class Toy(Benchmark):
    name = "toy"
    title = "Toy"
    tasks = ("animals", "colours")
    meta = ToyMeta
    formats = (Format(name="toy", detect=lambda path, first: "toy_id" in first, read=read_toy),)
    metrics = (
        MetricInfo(name="toy.exact", higher_is_better=True, scale=(0, 100), record_scale=(0, 1),
                   official=OFFICIAL_REF, description="1 when the spelling is the word"),
    )

    def score(self, records, mode):
        out = []
        for rec in records:
            meta = ToyMeta.of(rec)
            if meta.response_missing:
                out.append(make_score(rec, benchmark="toy", metric="toy.exact", mode=mode, score=None,
                                      reason="no response"))
                continue
            said, word = response_text(rec), rec.answer
            if mode != OFFICIAL:
                said, word = said.strip().lower(), word.strip().lower()
            out.append(make_score(rec, benchmark="toy", metric="toy.exact", mode=mode, score=float(said == word),
                                  details={"level": meta.level}))
        return out

    def metric_for(self, record):
        return "toy.exact"

    def summarize(self, score_records):
        rows = []
        groups = {}
        for s in score_records:
            groups.setdefault((s.model, record_mode(s)), []).append(s)
        for (model, mode), recs in groups.items():
            base = dict(benchmark="toy", model=model, mode=mode, metric="toy.exact")
            for task in sorted({s.task for s in recs}):
                part = [s for s in recs if s.task == task]
                src = SOURCE_OFFICIAL if mode == OFFICIAL else SOURCE_TOOLKIT
                rows.append(mean_row(part, level="task", group=task, source=src, **base))
            rows.append(mean_row(recs, level="overall", group="all", source=SOURCE_TOOLKIT, **base))
        return rows
'''

TOY_ROWS = [
    {"toy_id": "t1", "topic": "animals", "word": "cat", "spelled": "cat", "who": "m", "level": 1},
    {"toy_id": "t2", "topic": "animals", "word": "horse", "spelled": "Horse ", "who": "m", "level": 2},
    {"toy_id": "t3", "topic": "colours", "word": "red", "spelled": "rde", "who": "m", "level": 1},
    {"toy_id": "t4", "topic": "colours", "word": "blue", "spelled": None, "who": "m", "level": 3},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def toy(tmp_path):
    """The toy module, written to a file and imported (which registers it); unregistered afterwards."""
    src = tmp_path / "toy_benchmark.py"
    src.write_text(TOY_MODULE)
    spec = importlib.util.spec_from_file_location("toy_benchmark", src)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["toy_benchmark"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        unregister_benchmark("toy")
        sys.modules.pop("toy_benchmark", None)


def run_score(out: Path, *argv: str | Path) -> tuple[list[dict], dict]:
    assert main([*map(str, argv), "--no-judge", "--out", str(out), "--no-progress"]) == 0
    records = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return records, json.loads((out / "summary.json").read_text())


def check_toy_run(records: list[dict], summary: dict) -> None:
    toy = {(r["id"], r["producer"]["mode"]): r["score"] for r in records if r["benchmark"] == "toy"}
    assert toy == {
        ("t1", "official"): 1.0,
        ("t1", "strict"): 1.0,
        ("t2", "official"): 0.0,  # "Horse " is not "horse" to the official exact match
        ("t2", "strict"): 1.0,
        ("t3", "official"): 0.0,
        ("t3", "strict"): 0.0,
        ("t4", "official"): None,  # no response: unscorable, out of the means
        ("t4", "strict"): None,
    }
    rows = {
        (r["mode"], r["level"], r["group"]): (r["value"], r["n"], r["n_scored"], r["source"])
        for r in summary["metrics"]
        if r["benchmark"] == "toy"
    }
    assert rows == {
        ("official", "task", "animals"): (50.0, 2, 2, "official"),
        ("official", "task", "colours"): (0.0, 2, 1, "official"),
        ("official", "overall", "all"): (pytest.approx(100 / 3), 4, 3, "judge toolkit"),
        ("strict", "task", "animals"): (100.0, 2, 2, "judge toolkit"),
        ("strict", "task", "colours"): (0.0, 2, 1, "judge toolkit"),
        ("strict", "overall", "all"): (pytest.approx(200 / 3), 4, 3, "judge toolkit"),
        # added by the registry for every benchmark with an official scorer
        ("official vs strict", "overall", "disagreements"): (1, 4, 3, "judge toolkit"),
    }


def test_toy_benchmark_module_is_read_scored_and_summarised_by_judge_score(toy, tmp_path, capsys):
    preds = write_jsonl(tmp_path / "spelling.jsonl", TOY_ROWS)
    records, summary = run_score(tmp_path / "auto", preds, EXAMPLES / "mmra" / "predictions.jsonl")
    assert [(f["format"], f["n_records"]) for f in summary["run"]["inputs"]] == [("toy", 4), ("mmra", 8)]
    check_toy_run(records, summary)
    toy_records = [r for r in records if r["benchmark"] == "toy"]
    assert {r["details"]["level"] for r in toy_records if r["score"] is not None} == {1, 2}
    # The built-in benchmark beside it is scored as before.
    mmra = [r for r in summary["metrics"] if r["metric"] == "mmra.disagreements"]
    assert [r["value"] for r in mmra] == [2]
    # A plugin's rows are summary rows like the built-in ones: every level in summary.md, the overall ones
    # on the console.
    assert (
        "| toy | m | official | task | animals | toy.exact | 50.000 |"
        in (tmp_path / "auto" / "summary.md").read_text()
    )
    console = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert any(row[:4] == ["toy", "m", "official", "toy.exact"] for row in console), console

    # Named explicitly, the plugin's format is a --format choice like the built-in ones.
    assert "toy" in FORMATS
    check_toy_run(*run_score(tmp_path / "named", preds, "--format", "toy"))


def test_toy_records_with_bad_metadata_name_file_line_and_field(toy, tmp_path):
    # The same benchmark in the canonical format: its meta is checked against the benchmark's model.
    rec = {"id": "c1", "benchmark": "toy", "task": "animals", "question": "q", "response": "r"}
    p = write_jsonl(tmp_path / "canonical.jsonl", [{**rec, "meta": {"level": 1}}, {**rec, "id": "c2"}])
    with pytest.raises(InvalidRecordsError) as e:
        load_benchmark_predictions(p)
    (err,) = e.value.errors
    assert (err.file, err.line, err.field, err.record_id) == (str(p), 2, "meta.level", "c2")
    assert "required field is missing" in str(err) and "ToyMeta" in str(err)


def test_the_format_is_gone_when_the_benchmark_is(toy, tmp_path):
    unregister_benchmark("toy")
    assert get_benchmark("toy") is None and "toy" not in FORMATS
    p = write_jsonl(tmp_path / "spelling.jsonl", TOY_ROWS)
    with pytest.raises(SystemExit) as e:
        main([str(p), "--format", "toy", "--no-judge", "--out", str(tmp_path / "o")])
    assert e.value.code == 2  # an unknown --format is a usage error


def test_entry_point_plugin_runs_with_the_installed_command(tmp_path):
    # A package outside this one: its module and a dist-info declaring the entry point, on PYTHONPATH.
    site = tmp_path / "site"
    site.mkdir()
    (site / "toy_plugin.py").write_text(TOY_MODULE)
    info = site / "toy_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[judge.benchmarks]\ntoy = toy_plugin\n")
    preds = write_jsonl(tmp_path / "spelling.jsonl", TOY_ROWS)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    cmd = [
        sys.executable,
        "-m",
        "judge.cli.score",
        str(preds),
        "--no-judge",
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    check_toy_run(records, json.loads((out / "summary.json").read_text()))

    # A plugin that fails to import stops every command, naming itself.
    (site / "toy_plugin.py").write_text("raise ImportError('no module named toy_dependency')\n")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: benchmark plugin 'toy' (toy_plugin of toy-plugin")
    assert "no module named toy_dependency" in proc.stderr


# ----------------------------------------------------------------------------- registration checks


def _definition(**attrs) -> type[Benchmark]:
    base = dict(
        name="toy2",
        title="Toy2",
        metrics=(
            MetricInfo(
                name="toy2.exact",
                higher_is_better=True,
                scale=(0, 100),
                official="toy2 score.py@abc1234",
                description="exact match",
            ),
        ),
        score=lambda self, records, mode: [None] * len(records),
        metric_for=lambda self, record: "toy2.exact",
        summarize=lambda self, score_records: [],
    )
    return type("Toy2", (Benchmark,), {**base, **attrs})


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"metrics": ()}, "list the metrics it emits"),
        (
            {"metrics": (MetricInfo(name="toy2.x", higher_is_better=True, scale=(0, 100), description="x"),)},
            "no metric names the official code",
        ),
        (
            {"metrics": (MetricInfo(name="x", higher_is_better=True, scale=(0, 1), description="x"),)},
            "must be named 'toy2.<metric>'",
        ),
        ({"name": "mmra"}, "already registered by judge.benchmarks.mmra.MMRA"),
        ({"name": "Toy2"}, "lower-case 'name'"),
    ],
)
def test_registration_refuses_incomplete_definitions(attrs, message):
    before = dict(REGISTRY)
    with pytest.raises(ConfigError, match=message):
        register_benchmark(_definition(**attrs))
    assert REGISTRY == before


# ----------------------------------------------------------------------------- metric metadata


def _builtin_scores() -> tuple[list[ScoreRecord], list[dict]]:
    """Every built-in benchmark's example files scored in both modes, with judge records for MMIE."""
    files = [
        EXAMPLES / "canonical.jsonl",
        EXAMPLES / "milebench" / "ActionSequence" / "pred.json",
        EXAMPLES / "milebench" / "DocVQA" / "pred.json",
        EXAMPLES / "mmra" / "predictions.jsonl",
    ]
    records = load_benchmark_predictions(files, dataset_file=EXAMPLES / "milebench").records
    scores = score_predictions(records, mode="both")
    judged = [r for r in records if r.benchmark == "mmie" and r.task == "SA"]
    scores += [
        ScoreRecord(
            id=r.id,
            benchmark="mmie",
            task=r.task,
            model=r.model,
            metric="judge",
            criterion="overall",
            score=4.5,
        )
        for r in judged
    ]
    return scores, summarize(scores)


def test_every_metric_has_its_metadata():
    assert set(REGISTRY) >= {"milebench", "mmra", "mmie"}
    for bm in REGISTRY.values():
        for m in bm.all_metrics():
            assert m.name.startswith(f"{bm.name}.") and m.description
            assert isinstance(m.higher_is_better, bool)
            assert m.scale[0] < m.scale[1]
            if not bm.has_official:
                assert m.official is None  # nothing is called official where no official scorer exists
        refs = {m.official for m in bm.all_metrics() if m.official}
        if bm.has_official:
            # the official code and the commit followed, e.g. "MMRA evaluate/evaluate_demo.py@92e8db2"
            assert refs and all(ref.split("@")[-1].isalnum() and "@" in ref for ref in refs)

    scores, rows = _builtin_scores()
    emitted = {s.metric for s in scores if s.metric != "judge"} | {r["metric"] for r in rows}
    assert emitted >= {"milebench.accuracy", "milebench.rouge_l", "mmra.accuracy", "mmie.mc_accuracy"}
    assert {"mmie.judge_score", "milebench.score", "milebench.disagreements"} <= emitted
    for s in scores:
        if s.metric == "judge":  # the learned judge's, not a benchmark's metric
            continue
        info = metric_info(s.metric)
        assert info is not None and info.record_scale is not None, s.metric
        assert s.score is None or info.record_scale[0] <= s.score <= info.record_scale[1]
        if s.producer["mode"] == "official":
            assert info.official, s.metric  # what official mode computes names the code it follows
    for r in rows:
        info = metric_info(r["metric"])
        assert info is not None, r["metric"]
        assert r["value"] is None or info.scale[0] <= r["value"] <= info.scale[1], r
    assert metric_info("milebench.disagreements").higher_is_better is False
    assert metric_info("milebench.disagreements").scale == (0, math.inf)
    assert metric_info("nope.metric") is None


def test_official_references_are_the_ones_records_carry():
    # The metadata names the same code and commit as the producer of the records (ROUGE-L's name rouge's version).
    scores, _ = _builtin_scores()
    official = [s for s in scores if s.producer.get("mode") == "official" and s.metric != "milebench.rouge_l"]
    assert {s.benchmark for s in official} == {"milebench", "mmra"}
    for s in official:
        assert f"({metric_info(s.metric).official})" in s.producer["version"]
