"""What an out folder's scores belong to: resume never mixes two judges or two sets of inputs, the summary
covers exactly the run that wrote it, and a QLoRA judge is scored on the quantized base it was trained on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from judge.cli.score import main
from judge.models.card import CARD_NAME, judge_fingerprint
from judge.models.loading import save_tiny_scorer
from judge.scoring import ScoreConfig, score_files

pytestmark = pytest.mark.usefixtures("one_thread")


def write_judge(folder: Path, rubric, seed: int) -> Path:
    """A judge folder as judge-train lays it out (card + merged/ + processor/), weights of the tiny model ``seed``."""
    shutil.rmtree(folder, ignore_errors=True)
    save_tiny_scorer(folder / "merged", seed=seed)
    shutil.copytree(
        folder / "merged",
        folder / "processor",
        ignore=lambda d, names: [n for n in names if n.endswith(".safetensors") or n == "config.json"],
    )
    card = {
        "base_model": "tiny:seed=0",
        "finetune": "full",
        "quantization": "none",
        "target_format": "score",
        "rubric": {"name": rubric.name, "version": rubric.version, "hash": rubric.hash},
        "scale": [0, 6],
    }
    (folder / CARD_NAME).write_text(json.dumps(card))
    return folder


@pytest.fixture
def inputs(small_demo, tmp_path) -> Path:
    """Three demo responses (annotation records) with their images, in a folder of the test's own."""
    folder = tmp_path / "data"
    shutil.copytree(small_demo.parent / "images", folder / "images")
    p = folder / "three.jsonl"
    p.write_text("".join(x + "\n" for x in small_demo.read_text().splitlines()[:3]))
    return p


def run(*args: str) -> int:
    return main([*args, "--no-progress"])


def judge_scores(out: Path) -> dict[tuple[str, str], float]:
    recs = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return {(r["id"], r["criterion"]): r["score"] for r in recs if r["metric"] == "judge"}


def test_fingerprint_follows_the_weights_not_the_path(tmp_path, rubric):
    a = write_judge(tmp_path / "a", rubric, seed=0)
    fp = judge_fingerprint(a)
    moved = tmp_path / "moved"
    shutil.copytree(a, moved)
    assert judge_fingerprint(moved) == fp
    write_judge(a, rubric, seed=1)  # retrained into the same folder
    assert judge_fingerprint(a) != fp
    assert judge_fingerprint("tiny") == judge_fingerprint("tiny:seed=0") != judge_fingerprint("tiny:seed=1")


def test_a_retrained_judge_is_refused_and_a_moved_one_resumes(tmp_path, rubric, inputs, capsys):
    judge, out = write_judge(tmp_path / "judge", rubric, seed=0), tmp_path / "out"
    assert run(str(inputs), "--judge", str(judge), "--out", str(out)) == 0
    first = judge_scores(out)
    assert len(first) == 3 * 7
    recs = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert {r["producer"]["fingerprint"] for r in recs} == {judge_fingerprint(judge)[:16]}

    # The same weights in another folder are the same judge: nothing to do.
    moved = tmp_path / "elsewhere"
    shutil.copytree(judge, moved)
    capsys.readouterr()
    assert run(str(inputs), "--judge", str(moved), "--out", str(out)) == 0
    assert "wrote 0 new score records" in capsys.readouterr().out

    # Retrained into the same folder: the old scores must not be kept as if they were the new judge's.
    write_judge(judge, rubric, seed=1)
    before = (out / "scores.jsonl").read_bytes()
    assert run(str(inputs), "--judge", str(judge), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "judge weights" in err and "--overwrite" in err and "another --out" in err
    assert "Traceback" not in err
    assert (out / "scores.jsonl").read_bytes() == before
    assert run(str(inputs), "--judge", str(judge), "--out", str(out), "--overwrite") == 0
    second = judge_scores(out)
    assert second.keys() == first.keys()
    assert max(abs(second[k] - first[k]) for k in first) > 1e-3


def test_an_edited_input_is_refused_naming_the_file(tmp_path, inputs, capsys):
    out = tmp_path / "out"
    args = ["--judge", "tiny", "--rubric", "mmie", "--out", str(out)]
    assert run(str(inputs), *args) == 0
    first = judge_scores(out)
    # Same ids, a different response: its scores would never be recomputed on resume.
    lines = inputs.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["response"] = [{"type": "text", "text": "Completely different words about nothing at all."}]
    lines[0] = json.dumps(rec)
    inputs.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert run(str(inputs), *args) == 2
    err = capsys.readouterr().err
    assert f"input {inputs} changed since the earlier run" in err and "--overwrite" in err
    assert run(str(inputs), *args, "--overwrite") == 0
    edited = judge_scores(out)
    rid = rec["id"]
    assert any(abs(edited[(rid, c)] - first[(rid, c)]) > 1e-6 for c in ("overall",))
    # A file moved elsewhere with the same content is the same input.
    moved = inputs.with_name("moved.jsonl")
    shutil.copy(inputs, moved)
    assert run(str(moved), *args) == 0


def test_summary_covers_exactly_the_items_of_its_run(tmp_path, inputs):
    out = tmp_path / "out"
    base = ScoreConfig(inputs=[str(inputs)], judge="tiny", rubric="mmie", out=str(out), progress=False)
    full = score_files(base)

    def items(summary):  # the three responses come from three models: one "all" row each
        return sum(r["n"] for r in summary["judge"] if r["group"] == "all" and r["metric"] == "judge.overall")

    assert items(full.summary) == 3
    # A later run of the first item only (--limit 1) resumes (nothing new) and summarises that item alone,
    # though scores.jsonl keeps all three.
    base.limit = 1
    one = score_files(base)
    assert one.written == 0
    assert items(one.summary) == 1
    assert len(judge_scores(out)) == 3 * 7
    md = (out / "summary.md").read_text()
    assert "covers exactly the 1 items of these inputs" in md and str(inputs) in md
    assert one.summary["run"]["inputs"][0]["sha256"] == full.summary["run"]["inputs"][0]["sha256"]


@pytest.fixture(scope="module")
def qlora_judge(qlora_run) -> Path:
    return (
        qlora_run[0] / "judge"
    )  # trained once per test run (conftest.py), as test_train_run's QLoRA test reads it


def test_a_qlora_judge_is_scored_on_its_4bit_base(qlora_judge, inputs, tmp_path, capsys):
    from judge.models.card import load_judge
    from judge.scoring import JudgeEngine, resolve_judge

    card = json.loads((qlora_judge / CARD_NAME).read_text())
    assert card["quantization"] == "4bit"
    as_trained = score_files(
        ScoreConfig(inputs=[str(inputs)], judge=str(qlora_judge), out=str(tmp_path / "a"), progress=False)
    )
    recs = [json.loads(x) for x in (tmp_path / "a" / "scores.jsonl").read_text().splitlines()]
    assert {r["producer"].get("quantization") for r in recs} == {"4bit"}
    assert as_trained.summary["run"]["identity"]["quantization"] == "4bit"
    got = judge_scores(tmp_path / "a")

    # The same scores as the 4-bit base + adapter loaded by hand, and not those of the full-precision base.
    model, processor, _ = load_judge(qlora_judge, quantization="4bit")
    assert any(type(m).__name__ == "Linear4bit" for m in model.modules())
    from judge.core.io import load_annotations
    from judge.scoring.inputs import annotation_as_prediction

    preds = [
        annotation_as_prediction(r, "mmie") for r in load_annotations(inputs, check_images=False).records
    ]
    spec = resolve_judge(str(qlora_judge))
    want = {(s.id, s.criterion): s.score for s in JudgeEngine(model, processor, spec).score_records(preds)}
    assert max(abs(got[k] - want[k]) for k in want) < 1e-4

    capsys.readouterr()
    score_files(
        ScoreConfig(
            inputs=[str(inputs)],
            judge=str(qlora_judge),
            out=str(tmp_path / "b"),
            progress=False,
            quantization="none",
        )
    )
    assert "trained and validated with quantization 4bit; scoring with none" in capsys.readouterr().err
    unquantized = judge_scores(tmp_path / "b")
    assert max(abs(unquantized[k] - got[k]) for k in got) > 1e-4
