"""The committed example prediction files (``examples/predictions/``) through ``judge-score``, in process.

The numbers asserted here are the ones ``examples/predictions/README.md`` quotes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.cli.score import main
from judge.core.rubric import load_rubric

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "predictions"
MILEBENCH = EXAMPLES / "milebench"


pytestmark = pytest.mark.usefixtures("one_thread")


def score(out: Path, *argv: str | Path) -> tuple[list[dict], dict]:
    """Run judge-score into ``out``; its score records and summary.json."""
    assert main([*map(str, argv), "--out", str(out), "--no-progress"]) == 0
    records = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return records, json.loads((out / "summary.json").read_text())


def metric_row(summary: dict, **match) -> dict:
    rows = [r for r in summary["metrics"] if all(r.get(k) == v for k, v in match.items())]
    assert len(rows) == 1, (match, rows)
    return rows[0]


def by_item(records: list[dict]) -> dict[tuple[str, str], dict]:
    """Rule-based records keyed by (id, mode)."""
    return {(r["id"], r["producer"]["mode"]): r for r in records if r["metric"] != "judge"}


def test_example_folder_is_small_and_complete():
    images = sorted((EXAMPLES / "images").iterdir())
    assert 0 < len(images) < 30
    assert all(p.suffix == ".png" and p.stat().st_size < 4096 for p in images)
    used = set()
    for name in ("canonical.jsonl", "mmie.json"):
        text = (EXAMPLES / name).read_text()
        used |= {w.split('"')[0] for w in text.split('"images/')[1:]}
    assert used == {p.name for p in images}  # every picture referenced exists, and none lies unused


# ----------------------------------------------------------------------------- MMIE: canonical and native


@pytest.fixture(scope="module")
def canonical_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("canonical")
    return score(out, EXAMPLES / "canonical.jsonl", "--judge", "tiny", "--rubric", "mmie")


def test_canonical_one_judge_record_per_criterion_and_mc_metrics(canonical_run, capsys):
    records, summary = canonical_run
    judge = [r for r in records if r["metric"] == "judge"]
    rubric = load_rubric("mmie")
    open_items = {
        ("model-a", "SA_007", "SA"),
        ("model-c", "SA_007", "SA"),
        ("model-a", "PBL_013", "PBL"),
        ("model-c", "PBL_013", "PBL"),
        ("model-a", "MSR_001", "MSR"),
        ("model-c", "MSR_001", "MSR"),
    }
    expected = {(m, i, c) for m, i, fam in open_items for c in rubric.families[fam].criterion_ids}
    assert len(expected) == 42
    assert sorted((r["model"], r["id"], r["criterion"]) for r in judge) == sorted(expected)
    assert all(r["status"] == "ok" and 0 <= r["score"] <= 6 for r in judge)

    mc = by_item(records)
    # MMIE has no official multiple-choice scorer: one toolkit record per item, never "official".
    assert {k: r["score"] for k, r in mc.items()} == {
        ("MSR_mc_001", "toolkit"): 1.0,
        ("MSR_mc_002", "toolkit"): 0.0,
    }
    assert mc[("MSR_mc_002", "toolkit")]["details"]["extracted"] == "C"
    assert len(records) == 44 and summary["counts"]["unscorable"] == 0
    assert metric_row(summary, metric="mmie.mc_accuracy", mode="toolkit", level="overall")["value"] == 50.0
    assert {r["mode"] for r in summary["metrics"] if r["benchmark"] == "mmie"} == {"toolkit", "judge"}
    overall = [r for r in summary["judge"] if r["group"] == "all"]
    assert {(r["model"], r["n"], r["n_scored"]) for r in overall} == {("model-a", 3, 3), ("model-c", 3, 3)}


def test_mmie_native_file_scores_like_the_canonical_one(canonical_run, tmp_path):
    records, summary = score(tmp_path / "mmie", EXAMPLES / "mmie.json", "--judge", "tiny", "--rubric", "mmie")
    assert summary["run"]["inputs"][0]["format"] == "mmie"

    def keyed(rows):
        return {
            (r["model"], r["id"], r["metric"], r["criterion"], r["producer"].get("mode")): r["score"]
            for r in rows
        }

    got, want = keyed(records), keyed(canonical_run[0])
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(want[k], abs=1e-5) for k in want)
    assert {r["task"] for r in records} == {"SA", "PBL", "MSR"}  # from the ids


# ----------------------------------------------------------------------------- MileBench


def test_milebench_action_sequence_official_vs_strict(tmp_path):
    ds = MILEBENCH / "ActionSequence"
    records, summary = score(
        tmp_path / "mb", ds / "pred.json", "--dataset-file", ds / "ActionSequence.json", "--no-judge"
    )
    dataset = {
        m: metric_row(summary, mode=m, level="dataset", group="ActionSequence")
        for m in ("official", "strict")
    }
    assert dataset["official"]["value"] == pytest.approx(400 / 7)
    assert dataset["strict"]["value"] == pytest.approx(500 / 7)
    assert dataset["official"]["source"] == "official"
    assert metric_row(summary, metric="milebench.disagreements")["value"] == 3
    assert (
        metric_row(summary, mode="official", level="image_quantity", group="ActionSequence/Medium")["value"]
        == 50.0
    )

    item = by_item(records)
    # The empty answer: official reads "C" (right here), strict gives no answer.
    empty = item[("ActionSequence/3", "official")]
    assert (empty["score"], empty["details"]["extracted"]) == (1.0, "C")
    assert item[("ActionSequence/3", "strict")]["score"] == 0.0
    # "The answer is B": official concatenates every option letter.
    assert item[("ActionSequence/4", "official")]["details"]["extracted"] == "AB"
    assert item[("ActionSequence/4", "strict")]["details"]["extracted"] == "B"


def test_milebench_several_pred_files_with_a_dataset_folder(tmp_path):
    _, summary = score(
        tmp_path / "mb",
        MILEBENCH / "ActionSequence" / "pred.json",
        MILEBENCH / "DocVQA" / "pred.json",
        "--dataset-file",
        MILEBENCH,
        "--no-judge",
    )
    for mode in ("official", "strict"):
        doc = metric_row(summary, mode=mode, level="dataset", group="DocVQA")
        assert doc["metric"] == "milebench.rouge_l" and doc["value"] == pytest.approx(45.0, abs=1e-4)
    assert metric_row(summary, mode="official", level="overall")["value"] == pytest.approx(
        (400 / 7 + 45) / 2, abs=1e-4
    )
    assert metric_row(summary, mode="strict", level="overall")["value"] == pytest.approx(
        (500 / 7 + 45) / 2, abs=1e-4
    )
    assert metric_row(summary, metric="milebench.disagreements")["n"] == 11


# ----------------------------------------------------------------------------- MMRA


def test_mmra_per_task_official_vs_strict(tmp_path):
    records, summary = score(tmp_path / "mmra", EXAMPLES / "mmra" / "predictions.jsonl", "--no-judge")
    want = {
        "official": {"Similar Material": 200 / 3, "Sub-Event": 200 / 3, "Relative Position": 50.0},
        "strict": {"Similar Material": 100.0, "Sub-Event": 100.0, "Relative Position": 50.0},
    }
    for mode, tasks in want.items():
        got = {
            r["group"]: r["value"] for r in summary["metrics"] if r["mode"] == mode and r["level"] == "task"
        }
        assert got == pytest.approx(tasks)
    assert metric_row(summary, mode="official", level="overall")["value"] == 62.5
    assert metric_row(summary, mode="strict", level="overall")["value"] == 87.5
    assert metric_row(summary, metric="mmra.disagreements")["value"] == 2

    item = by_item(records)
    # The misspelt "Chooice QA" row keeps the previous row's answer in official mode.
    official = item[("mmra-2", "official")]
    assert official["score"] == 0.0
    assert (official["details"]["carried_over_from"], official["details"]["extracted"]) == ("mmra-1", "C")
    assert item[("mmra-2", "strict")]["score"] == 1.0
    assert item[("mmra-5", "official")]["details"]["extracted"] == "B"
