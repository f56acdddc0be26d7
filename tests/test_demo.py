"""Tests of the synthetic demo-data generator (judge.testing.demo)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from PIL import Image

from judge.testing.demo import CRITERIA, MODELS, generate_demo

KEY_ORDER = ["id", "question_id", "task", "question", "response", "reference", "model", "scores", "rationale"]
FINAL_RE = re.compile(r"Final answer: (-?\d+)\.")
REFERENCE_RE = re.compile(r"^The answer is (-?\d+)\.$")
GARBLED = ("zzq", "qxv", "blorf", "xqj", "vrrk")


def _load(jsonl: Path) -> list[dict]:
    return [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]


def _text(content: list[dict]) -> str:
    return " ".join(seg["text"] for seg in content if seg["type"] == "text")


def _images(rec: dict) -> list[str]:
    return [seg["image"] for part in ("question", "response") for seg in rec[part] if seg["type"] == "image"]


def _image_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / "images").glob("*.png"))}


def _off_prompt(rec: dict) -> bool:
    """A response whose text is only the generator's rambling sentences (the off-prompt failure)."""
    from judge.testing.demo import RAMBLE

    return all(s.strip() in RAMBLE for s in re.findall(r"[^.]+\.", _text(rec["response"])))


def _mean_score(rec: dict, criterion: str) -> float:
    return statistics.fmean(s[criterion] for s in rec["scores"].values())


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, list[dict]]:
    jsonl = generate_demo(tmp_path_factory.mktemp("small"), n_questions=12, seed=3)
    return jsonl, _load(jsonl)


@pytest.fixture(scope="module")
def default_set(tmp_path_factory) -> tuple[Path, list[dict]]:
    jsonl = generate_demo(tmp_path_factory.mktemp("default"))
    return jsonl, _load(jsonl)


def test_constants():
    from judge.core.rubric import load_rubric

    # The demo scores exactly the rubric's criteria, in rubric order (one source of truth: the rubric).
    rubric = load_rubric("mmie")
    assert CRITERIA == {f: [c.id for c in fam.criteria] for f, fam in rubric.families.items()}
    assert len(MODELS) == len(set(MODELS)) >= 2


def test_writes_expected_files(small):
    jsonl, records = small
    assert jsonl.name == "annotations.jsonl"
    assert (jsonl.parent / "README.md").is_file()
    assert len(records) == 12 * 3
    assert jsonl.read_bytes().endswith(b"\n")


def test_deterministic_for_a_seed(tmp_path):
    a = generate_demo(tmp_path / "a", n_questions=12, seed=7)
    b = generate_demo(tmp_path / "b", n_questions=12, seed=7)
    c = generate_demo(tmp_path / "c", n_questions=12, seed=8)
    assert a.read_bytes() == b.read_bytes()
    assert (a.parent / "README.md").read_bytes() == (b.parent / "README.md").read_bytes()
    imgs_a, imgs_b = _image_bytes(a.parent), _image_bytes(b.parent)
    assert imgs_a and imgs_a == imgs_b
    assert a.read_bytes() != c.read_bytes()
    assert imgs_a != _image_bytes(c.parent)


def test_regeneration_replaces_previous_set(tmp_path):
    generate_demo(tmp_path, n_questions=12, seed=1)
    foreign = tmp_path / "images" / "my-own-picture.png"
    Image.new("RGB", (4, 4)).save(foreign)
    jsonl = generate_demo(tmp_path, n_questions=6, seed=2)
    records = _load(jsonl)
    assert len(records) == 6 * 3
    referenced = {Path(p).name for rec in records for p in _images(rec)}
    on_disk = {p.name for p in (tmp_path / "images").glob("*.png")}
    assert on_disk == referenced | {foreign.name}
    assert not list(tmp_path.rglob("*.tmp"))
    # same bytes as a fresh generation
    fresh = generate_demo(tmp_path / "fresh", n_questions=6, seed=2)
    assert jsonl.read_bytes() == fresh.read_bytes()


def test_record_key_order_and_ids(small):
    _, records = small
    for rec in records:
        assert list(rec) == KEY_ORDER
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids))
    by_question: dict[str, list[dict]] = {}
    for rec in records:
        assert rec["id"].startswith(rec["question_id"] + "-r")
        assert rec["question_id"].startswith(rec["task"].lower() + "-")
        assert rec["model"] in MODELS
        by_question.setdefault(rec["question_id"], []).append(rec)
    assert len(by_question) == 12
    for recs in by_question.values():
        assert len(recs) == 3
        assert all(r["question"] == recs[0]["question"] and r["task"] == recs[0]["task"] for r in recs)
        assert sorted(r["model"] for r in recs) == sorted(MODELS)


def test_families_split_evenly(small):
    _, records = small
    tasks = [r["task"] for r in records]
    assert {t: tasks.count(t) for t in CRITERIA} == {"SA": 12, "PBL": 12, "MSR": 12}


def test_every_image_exists_and_opens(small):
    jsonl, records = small
    root = jsonl.parent
    for rec in records:
        for part in ("question", "response"):
            assert rec[part], f"{rec['id']}: empty {part}"
            for seg in rec[part]:
                assert set(seg) in ({"type", "text"}, {"type", "image"})
                if seg["type"] == "text":
                    assert seg["text"].strip()
        n_response_images = sum(seg["type"] == "image" for seg in rec["response"])
        assert 1 <= n_response_images <= 2
        assert any(seg["type"] == "image" for seg in rec["question"])
        for path in _images(rec):
            assert path.startswith("images/") and ".." not in path
            full = root / path
            assert full.is_file(), path
            with Image.open(full) as im:
                im.load()
                assert im.format == "PNG" and im.mode == "RGB"
                assert im.size[0] <= 160 and im.size[1] <= 160


def test_scores_complete_and_in_range(small):
    _, records = small
    for rec in records:
        assert list(rec["scores"]) == ["ann1", "ann2", "ann3"]
        assert list(rec["rationale"]) == ["ann1", "ann2", "ann3"]
        for ann, scores in rec["scores"].items():
            assert list(scores) == [*CRITERIA[rec["task"]], "overall"], (rec["id"], ann)
            for crit, value in scores.items():
                assert type(value) is int and 0 <= value <= 6, (rec["id"], ann, crit, value)
            assert isinstance(rec["rationale"][ann], str) and rec["rationale"][ann].strip()


def test_n_annotators_and_responses(tmp_path):
    records = _load(generate_demo(tmp_path, n_questions=4, responses_per_question=2, n_annotators=5))
    assert len(records) == 8
    assert all(list(r["scores"]) == [f"ann{i}" for i in range(1, 6)] for r in records)


def test_reference_only_for_msr(small):
    _, records = small
    for rec in records:
        if rec["task"] == "MSR":
            ref = rec["reference"]
            assert isinstance(ref, list) and len(ref) == 1 and ref[0]["type"] == "text"
            assert REFERENCE_RE.match(ref[0]["text"]), ref
            assert bool(FINAL_RE.search(_text(rec["response"]))) != _off_prompt(rec)  # off-prompt: no answer
        else:
            assert rec["reference"] is None


def test_records_match_the_project_schema(small):
    from judge.core.schema import AnnotationRecord

    _, records = small
    for rec in records:
        AnnotationRecord.model_validate(rec)


def test_readme_is_computed_and_says_synthetic(small):
    jsonl, records = small
    readme = (jsonl.parent / "README.md").read_text(encoding="utf-8")
    assert "synthetic" in readme.lower()
    assert "judge.testing.demo" in readme and "generate_demo" in readme and "seed=3" in readme
    n_images = len({p for rec in records for p in _images(rec)})
    assert f"| all | | 12 | {len(records)} |" in readme
    assert f"{n_images} PNG pictures" in readme
    for family, crits in CRITERIA.items():
        assert f"| {family} |" in readme
        for crit in crits:
            assert f"`{crit}`" in readme


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError):
        generate_demo(tmp_path, n_questions=0)
    with pytest.raises(ValueError):
        generate_demo(tmp_path, n_annotators=0)


def test_default_set_is_small_on_disk(default_set):
    jsonl, records = default_set
    assert len(records) == 750
    total = sum(p.stat().st_size for p in jsonl.parent.rglob("*") if p.is_file())
    assert total < 7_000_000, total


def test_the_shipped_set_is_the_default_generation(default_set):
    """annotations/demo is what generate_demo() writes by default, byte for byte (regenerate it after
    changing the generator: judge-data demo)."""
    jsonl, _ = default_set
    shipped = Path(__file__).resolve().parents[1] / "annotations" / "demo"
    assert (shipped / "annotations.jsonl").read_bytes() == jsonl.read_bytes()
    assert (shipped / "README.md").read_bytes() == (jsonl.parent / "README.md").read_bytes()
    assert _image_bytes(shipped) == _image_bytes(jsonl.parent)


def test_final_answer_drives_final_answer_accuracy(default_set):
    _, records = default_set
    right, wrong = [], []
    for rec in records:
        if rec["task"] != "MSR" or _off_prompt(rec):
            continue
        stated = FINAL_RE.search(_text(rec["response"])).group(1)
        reference = REFERENCE_RE.match(rec["reference"][0]["text"]).group(1)
        (right if stated == reference else wrong).append(rec)
    assert len(right) >= 10 and len(wrong) >= 10
    acc_right = statistics.fmean(_mean_score(r, "final_answer_accuracy") for r in right)
    acc_wrong = statistics.fmean(_mean_score(r, "final_answer_accuracy") for r in wrong)
    assert acc_right - acc_wrong > 2, (acc_right, acc_wrong)
    ov_right = statistics.fmean(_mean_score(r, "overall") for r in right)
    ov_wrong = statistics.fmean(_mean_score(r, "overall") for r in wrong)
    assert ov_right - ov_wrong > 1.5, (ov_right, ov_wrong)


def test_visible_text_defects_lower_text_quality(default_set):
    _, records = default_set
    garbled, clean = [], []
    for rec in records:
        if rec["task"] == "MSR":
            continue
        words = set(_text(rec["response"]).split())
        (garbled if words & set(GARBLED) else clean).append(_mean_score(rec, "text_quality"))
    assert len(garbled) >= 10 and len(clean) >= 10
    assert statistics.fmean(clean) - statistics.fmean(garbled) > 1


def test_models_are_ordered_and_overall_spreads(default_set):
    _, records = default_set
    by_model = {m: [_mean_score(r, "overall") for r in records if r["model"] == m] for m in MODELS}
    means = [statistics.fmean(by_model[m]) for m in MODELS]
    assert means == sorted(means, reverse=True) and means[0] - means[-1] > 1
    overall = [s["overall"] for r in records for s in r["scores"].values()]
    assert set(overall) == set(range(7))
    assert statistics.pstdev(overall) > 1.2


def test_annotators_agree_but_not_perfectly(default_set):
    from scipy import stats

    _, records = default_set
    ann1 = [r["scores"]["ann1"]["overall"] for r in records]
    ann2 = [r["scores"]["ann2"]["overall"] for r in records]
    rho = stats.spearmanr(ann1, ann2).statistic
    assert 0.5 < rho < 0.95, rho
    assert sum(a != b for a, b in zip(ann1, ann2, strict=True)) > len(records) // 4


def _blank(path: Path) -> bool:
    with Image.open(path) as im:
        return im.convert("L").getextrema() == (255, 255)


def test_blank_pictures_fail_the_response_whoever_wrote_it(default_set):
    """Blank (all-white) pictures are a visible failure the annotators punish on every criterion, and nothing
    but the pictures tells them apart: they are as frequent for every model, so a judge that learns these
    scores must look at the pictures (the demo's audit checks that the trained judge does)."""
    jsonl, records = default_set
    with_blank, without = [], []
    for rec in records:
        if rec["task"] == "MSR":
            continue
        pics = [seg["image"] for seg in rec["response"] if seg["type"] == "image"]
        blank = [_blank(jsonl.parent / p) for p in pics]
        assert all(blank) or not any(blank), rec["id"]  # all of a response's pictures, or none
        (with_blank if all(blank) else without).append(rec)
    assert len(with_blank) >= 60 and len(without) >= 60
    for crit in ("image_quality", "text_image_coherence", "overall"):
        gap = statistics.fmean(_mean_score(r, crit) for r in without) - statistics.fmean(
            _mean_score(r, crit) for r in with_blank
        )
        assert gap > 1.5, (crit, gap)
    # Capped at 2 (annotators add their bias and noise to it).
    assert statistics.fmean(_mean_score(r, "overall") for r in with_blank) < 2.2
    share = {
        m: sum(r["model"] == m for r in with_blank) / sum(r["model"] == m for r in with_blank + without)
        for m in MODELS
    }
    assert max(share.values()) - min(share.values()) < 0.12, share
    # The scenes are far from white: a blank picture is plain to see at a small model's resolution.
    from PIL import ImageStat

    for rec in without[:20]:
        for seg in rec["response"]:
            if seg["type"] == "image":
                with Image.open(jsonl.parent / seg["image"]) as im:
                    assert sum(ImageStat.Stat(im.convert("RGB")).mean) / 3 < 200, seg["image"]
    # No question picture is ever blank: the failure is the responding model's.
    assert not any(
        _blank(jsonl.parent / s["image"]) for r in records for s in r["question"] if s["type"] == "image"
    )


def test_off_prompt_responses_talk_of_other_things_and_score_low(default_set):
    from judge.testing.demo import RAMBLE

    _, records = default_set
    off = [
        r for r in records if all(s.strip() in RAMBLE for s in re.findall(r"[^.]+\.", _text(r["response"])))
    ]
    on = [r for r in records if r not in off]
    assert len(off) >= 10
    assert all("ramble" in next(iter(r["rationale"].values())) for r in off)
    gap = statistics.fmean(_mean_score(r, "overall") for r in on) - statistics.fmean(
        _mean_score(r, "overall") for r in off
    )
    assert gap > 1.2, gap
    # Weaker models wander off the prompt more often.
    share = {m: sum(r["model"] == m for r in off) / sum(r["model"] == m for r in records) for m in MODELS}
    assert share["model-c"] > share["model-a"], share
