"""Every misuse of the commands is a one-line error naming the option or file: non-zero exit, no
traceback, and nothing already written is lost (each case points its outputs at a folder a good run filled)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import judge_bench_data as D
import pytest

from judge.cli import data_main
from judge.cli.bench import main as bench_main
from judge.cli.report import main as report_main
from judge.cli.score import main as score_main
from judge.cli.train import main as train_main

MAINS = {
    "judge-score": score_main,
    "judge-data": data_main,
    "judge-train": train_main,
    "judge-report": report_main,
    "judge-bench": bench_main,
}
pytestmark = pytest.mark.usefixtures("one_thread")


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def ws(small_demo, tmp_path_factory) -> dict[str, Path]:
    """A workspace with inputs, an empty file, and output folders that earlier good runs filled."""
    root = tmp_path_factory.mktemp("misuse")
    data = root / "data"
    shutil.copytree(small_demo.parent / "images", data / "images")
    human = data / "human.jsonl"
    human.write_text("".join(x + "\n" for x in small_demo.read_text().splitlines()[:6]))
    (data / "empty.jsonl").write_text("\n\n")
    score_out, report_out = root / "score_out", root / "report_out"
    assert (
        score_main(
            [str(human), "--judge", "tiny", "--rubric", "mmie", "--out", str(score_out), "--no-progress"]
        )
        == 0
    )
    assert (
        report_main(
            [
                "--human",
                str(human),
                "--scores",
                f"tiny={score_out / 'scores.jsonl'}",
                "--bootstrap",
                "20",
                "--out",
                str(report_out),
            ]
        )
        == 0
    )
    demo_out = root / "demo_out"
    assert data_main(["demo", "--out", str(demo_out), "--n-questions", "3"]) == 0
    train_out = root / "train_out"
    (train_out / "data").mkdir(parents=True)
    (train_out / "data" / "keep.txt").write_text("earlier work")
    vlrb, outs = D.write_vlrb(root / "vlrb")
    vlrb_outputs = D.write_outputs(root / "vlrb" / "outputs.jsonl", outs)
    (root / "vlrb" / "bad_outputs.jsonl").write_text(
        '{"id": "vlfeedback_0", "p_first_better": 0.4}\n{"id": "x"}\n'
    )
    bench_out = root / "bench_out"
    assert (
        bench_main(
            [
                "vl-rewardbench",
                str(vlrb),
                "--judge-outputs",
                str(vlrb_outputs),
                "--out",
                str(bench_out),
                "--bootstrap",
                "10",
            ]
        )
        == 0
    )
    mmrb, _ = D.write_mmrb(root / "mmrb")
    return {
        "vlrb": vlrb,
        "vlrb_outputs": vlrb_outputs,
        "mmrb": mmrb,
        "bench_out": bench_out,
        "root": root,
        "human": human,
        "empty": data / "empty.jsonl",
        "score_out": score_out,
        "report_out": report_out,
        "demo_out": demo_out,
        "train_out": train_out,
    }


# (command, arguments with {placeholders} from the workspace, what the message must name)
CASES = [
    ("judge-score", "{human} --judge tiny --rubric mmie --out {score_out} --limit -1", "--limit"),
    ("judge-score", "{human} --judge tiny --rubric mmie --out {score_out} --limit 0", "--limit"),
    ("judge-score", "{human} --judge tiny --rubric mmie --out {score_out} --max-tokens -5", "--max-tokens"),
    (
        "judge-score",
        "{human} --judge tiny --rubric mmie --out {score_out} --rationale --max-new-tokens -1",
        "--max-new-tokens",
    ),
    ("judge-score", "{human} --judge tiny --rubric mmie --out {score_out} --batch-size 0", "--batch-size"),
    (
        "judge-score",
        "{human} --judge tiny --rubric mmie --out {score_out} --batch-tokens lots",
        "--batch-tokens",
    ),
    ("judge-score", "{human} --judge tiny --rubric mmie --out {score_out} --device cuda", "device 'cuda'"),
    ("judge-score", "{human} --judge tiny --rubric mmie --out {score_out} --device tpu", "device 'tpu'"),
    ("judge-score", "{human} --judge tiny --rubric mmie --out {score_out} --format xml", "--format"),
    (
        "judge-score",
        "{human} --judge tiny --rubric mmie --out {score_out} --quantization 3bit",
        "--quantization",
    ),
    ("judge-score", "{root}/missing.jsonl --judge tiny --rubric mmie --out {score_out}", "missing.jsonl"),
    ("judge-score", "{empty} --judge tiny --rubric mmie --out {score_out}", "empty.jsonl"),
    ("judge-score", "{human} --judge {root}/no_such_judge --out {score_out}", "no_such_judge"),
    ("judge-score", "{human} --judge tiny --out {score_out}", "--rubric"),
    ("judge-score", "{human} --judge tiny --rubric nosuchrubric --out {score_out}", "nosuchrubric"),
    ("judge-score", "{human} --judge tiny --rubric mmie --no-judge --out {score_out}", "--no-judge"),
    ("judge-score", "{human} --no-judge --baseline clipscore --out {score_out}", "--clip-model"),
    ("judge-data", "demo --out {demo_out} --n-questions 0", "--n-questions"),
    ("judge-data", "demo --out {demo_out} --seed -3", "--seed"),
    ("judge-data", "validate {empty}", "empty.jsonl"),
    ("judge-data", "validate {root}/missing.jsonl", "missing.jsonl"),
    ("judge-data", "validate {human} --max-pixels 0", "--max-pixels"),
    ("judge-data", "validate {root}", "is a folder"),
    ("judge-data", "build --config no_such_config", "no_such_config"),
    ("judge-data", "rubric show no_such_rubric", "no_such_rubric"),
    ("judge-data", "tiny-model --seed 1", "--out"),
    ("judge-train", "--config no_such_config", "no_such_config"),
    (
        "judge-train",
        "--config rubric6 --set output_dir={train_out} --set train.learnig_rate=1",
        "learnig_rate",
    ),
    (
        "judge-train",
        "--config rubric6 --set output_dir={train_out} --set train.max_steps=0",
        "train.max_steps",
    ),
    ("judge-train", "--config rubric6 --set output_dir={train_out} --set seed=-1", "seed"),
    ("judge-train", "--config demo --set output_dir={train_out} --resume", "--resume"),
    (
        "judge-train",
        "--config rubric6 --set output_dir={train_out} --set model.path={root}/no_model",
        "no_model",
    ),
    # The real recipe's base is a hub checkpoint: not in the cache and no hub here, it fails at once, naming the
    # model and pointing to the demo config.
    ("judge-train", "--config rubric6 --set output_dir={train_out}", "OpenGVLab/InternVL3-2B-hf"),
    ("judge-train", "--config rubric6 --set output_dir={train_out}", "--config demo"),
    ("judge-train", "--config rubric6 --set output_dir={train_out}", "--set model.path=DIR"),
    ("judge-train", "--config rubric6 --set output_dir={train_out}", "hf download OpenGVLab/InternVL3-2B-hf"),
    (
        "judge-train",
        "--config demo --set output_dir={train_out} --set data.annotations=[{root}]",
        "is a folder",
    ),
    (
        "judge-train",
        "--config demo --set output_dir={train_out} --set data.annotations=[{empty}]",
        "empty.jsonl",
    ),
    (
        "judge-report",
        "--human {human} --scores tiny={score_out}/scores.jsonl --out {report_out} --bootstrap 0",
        "--bootstrap",
    ),
    (
        "judge-report",
        "--human {root}/missing.jsonl --scores x={score_out}/scores.jsonl --out {report_out}",
        "missing.jsonl",
    ),
    ("judge-report", "--human {human} --scores no_equals_sign --out {report_out}", "no_equals_sign"),
    ("judge-report", "--human {human} --scores =x.jsonl --out {report_out}", "NAME=FILE"),
    (
        "judge-report",
        "--human {empty} --scores tiny={score_out}/scores.jsonl --out {report_out}",
        "empty.jsonl",
    ),
    ("judge-report", "--human {human} --clip-model tiny --device cuda --out {report_out}", "device 'cuda'"),
    ("judge-report", "--scores tiny={score_out}/scores.jsonl --out {report_out}", "--human"),
    ("judge-bench", "no-such-bench {vlrb} --judge-outputs {vlrb_outputs} --out {bench_out}", "no-such-bench"),
    ("judge-bench", "vl-rewardbench {vlrb} --out {bench_out}", "--judge-outputs"),
    (
        "judge-bench",
        "vl-rewardbench {vlrb} --judge tiny --judge-outputs {vlrb_outputs} --out {bench_out}",
        "--judge",
    ),
    (
        "judge-bench",
        "vl-rewardbench {root}/missing.jsonl --judge-outputs {vlrb_outputs} --out {bench_out}",
        "missing.jsonl",
    ),
    (
        "judge-bench",
        "vl-rewardbench {vlrb} --judge-outputs {root}/vlrb/bad_outputs.jsonl --out {bench_out}",
        "bad_outputs.jsonl:2",
    ),
    (
        "judge-bench",
        "vl-rewardbench {mmrb} --judge-outputs {vlrb_outputs} --out {bench_out}",
        "all_data.json:",
    ),
    (
        "judge-bench",
        "vl-rewardbench {vlrb} --judge-outputs {vlrb_outputs} --bootstrap 5 --out {bench_out}",
        "--bootstrap",
    ),
    ("judge-bench", "vl-rewardbench {vlrb} --judge tiny --rubric mmie --out {bench_out}", "--task"),
    ("judge-bench", "vl-rewardbench {vlrb} --judge tiny --rubric mmie --task XX --out {bench_out}", "--task"),
    (
        "judge-bench",
        "vl-rewardbench {vlrb} --judge tiny --rubric mmie --task SA --criterion nope --out {bench_out}",
        "--criterion",
    ),
    (
        "judge-bench",
        "vl-rewardbench {vlrb} --judge tiny --rubric mmie --task SA --root {root} --out {bench_out}",
        "--root",
    ),
]


@pytest.mark.parametrize(
    "command, args, names", CASES, ids=[f"{c} {a.split(' --out')[0][:40]}" for c, a, _ in CASES]
)
def test_misuse_is_one_clear_line_and_loses_nothing(ws, command, args, names, capsys):
    argv = args.format(**ws).split()
    guarded = [ws[k] for k in ("score_out", "report_out", "demo_out", "train_out", "bench_out")]
    before = [snapshot(f) for f in guarded]
    try:
        code = MAINS[command](argv)
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    out, err = capsys.readouterr()
    assert code not in (0, None), (command, args)
    assert "Traceback" not in out + err
    message = err.strip() or out.strip()
    if command == "judge-data" and argv[0] == "validate" and not err.strip():
        message = next(
            line for line in out.splitlines() if names in line
        )  # validate reports problems on stdout
    assert len(message.splitlines()) == 1, message
    assert names in message, message
    assert [snapshot(f) for f in guarded] == before, "a bad invocation changed files an earlier run wrote"


@pytest.mark.parametrize(
    "argv", [["judge-score", "x.jsonl", "--limit", "-1"], ["judge-data", "demo", "--n-questions", "0"]]
)
def test_console_scripts_exit_2_with_one_line(argv, tmp_path):
    exe = Path(sys.executable).with_name(argv[0])
    proc = subprocess.run([str(exe), *argv[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and argv[-2] in proc.stderr


def test_empty_annotation_file_is_a_problem_not_a_pass(ws, capsys):
    assert data_main(["validate", str(ws["empty"])]) == 1
    out = capsys.readouterr().out
    assert "No problems found" not in out and "holds no records" in out
    assert json.loads((ws["score_out"] / "run.json").read_text())["status"] == "finished"
