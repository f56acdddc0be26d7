import random

import pytest

from judge.core.io import load_annotations
from judge.core.schema import AnnotationRecord
from judge.data.split import SPLITS, split_questions, split_records


@pytest.fixture(scope="module")
def demo_records():
    return load_annotations("annotations/demo/annotations.jsonl", check_images=False).records


def test_no_question_in_two_splits(demo_records):
    parts = split_records(demo_records, seed=3)
    qsets = {s: {r.question_id for r in parts[s]} for s in SPLITS}
    assert not (qsets["train"] & qsets["validation"]) and not (qsets["train"] & qsets["test"])
    assert not (qsets["validation"] & qsets["test"])
    assert sum(len(v) for v in parts.values()) == len(demo_records)


def test_same_seed_same_split_any_order(demo_records):
    a = split_questions(demo_records, seed=7)
    shuffled = list(demo_records)
    random.Random(1).shuffle(shuffled)
    assert split_questions(shuffled, seed=7) == a
    assert split_questions(demo_records, seed=8) != a


def test_stratified_fractions(demo_records):
    parts = split_records(demo_records, (0.7, 0.15, 0.15), seed=0)
    for fam in ("SA", "PBL", "MSR"):
        n_q = {s: len({r.question_id for r in parts[s] if r.task == fam}) for s in SPLITS}
        total = sum(n_q.values())
        assert n_q["train"] == pytest.approx(0.7 * total, abs=1)
        assert n_q["validation"] >= 1 and n_q["test"] >= 1


def test_tiny_family_still_gets_every_split():
    recs = [
        AnnotationRecord(
            id=f"r{i}", question_id=f"q{i}", task="SA", question="q", response="r", scores={"overall": 3}
        )
        for i in range(3)
    ]
    assert sorted(split_questions(recs).values()) == ["test", "train", "validation"]


def test_question_in_two_families_is_an_error():
    recs = [
        AnnotationRecord(
            id=f"r{i}", question_id="q", task=t, question="q", response="r", scores={"overall": 3}
        )
        for i, t in enumerate(["SA", "PBL"])
    ]
    with pytest.raises(ValueError, match="two task families"):
        split_questions(recs)
