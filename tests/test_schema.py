import json

import pytest
from pydantic import ValidationError

from judge.core.io import from_mmie, load_annotations, load_predictions, mmie_family
from judge.core.schema import (
    AnnotationRecord,
    ImageSegment,
    PredictionRecord,
    ScoreRecord,
    TextSegment,
    normalize_content,
)

ANNOTATION = {
    "id": "sa-1-r0",
    "task": "SA",
    "question": [{"type": "text", "text": "Tell a story."}, {"type": "image", "image": "images/q.png"}],
    "response": [{"type": "text", "text": "Once"}, {"type": "image", "image": "images/r.png"}],
    "reference": None,
    "model": "m1",
    "question_id": "sa-1",
    "scores": {"a1": {"text_quality": 4, "overall": 5}, "a2": {"text_quality": 3, "overall": 4}},
    "rationale": {"a1": "fine"},
    "meta": {"source": "test"},
}


def test_annotation_round_trip():
    rec = AnnotationRecord.model_validate(ANNOTATION)
    again = AnnotationRecord.model_validate_json(rec.model_dump_json())
    assert again == rec
    assert again.model_dump() == rec.model_dump()
    assert rec.images == ["images/q.png", "images/r.png"]
    assert rec.annotators == ["a1", "a2"]


def test_prediction_round_trip():
    rec = PredictionRecord(
        id="p1",
        benchmark="milebench",
        task="ActionLocalization",
        question="Which?",
        response="B",
        choices=["a", "b"],
        answer="b",
        model="m",
    )
    assert rec.question == [TextSegment(text="Which?")]
    assert PredictionRecord.model_validate_json(rec.model_dump_json()) == rec
    assert PredictionRecord(id="p2", benchmark="b", task="t", question="q", response=None).response == []


def test_score_round_trip_and_null_rules():
    rec = ScoreRecord(
        id="x",
        benchmark="mmie",
        task="SA",
        model="m",
        metric="judge",
        criterion="overall",
        score=4.2,
        distribution=[0, 0, 0, 0.1, 0.6, 0.3, 0],
        argmax=4,
        producer={"judge": "ckpt", "rubric_hash": "abc"},
    )
    assert ScoreRecord.model_validate_json(rec.model_dump_json()) == rec
    null = ScoreRecord(
        id="y",
        benchmark="b",
        task="t",
        metric="judge",
        score=None,
        status="unscorable",
        reason="image missing",
    )
    assert ScoreRecord.model_validate(json.loads(null.model_dump_json())) == null
    with pytest.raises(ValidationError, match="null score needs"):
        ScoreRecord(id="y", benchmark="b", task="t", metric="judge", score=None)
    with pytest.raises(ValidationError, match="sums to"):
        ScoreRecord(id="z", benchmark="b", task="t", metric="judge", score=1.0, distribution=[0.5, 0.2])


def test_content_forms():
    assert normalize_content("hi") == [{"type": "text", "text": "hi"}]
    assert normalize_content(
        [{"text": "a", "image": "x.png"}, {"text": None, "image": "y.png"}, {"text": "b", "image": None}]
    ) == [
        {"type": "text", "text": "a"},
        {"type": "image", "image": "x.png"},
        {"type": "image", "image": "y.png"},
        {"type": "text", "text": "b"},
    ]
    rec = AnnotationRecord.model_validate({**ANNOTATION, "response": "just text"})
    assert rec.response == [TextSegment(text="just text")]


def test_single_annotator_shorthand_and_default_question_id():
    rec = AnnotationRecord.model_validate(
        {**ANNOTATION, "scores": {"overall": 3}, "rationale": "ok", "question_id": None}
    )
    assert rec.scores == {"annotator": {"overall": 3}}
    assert rec.rationale == {"annotator": "ok"}
    assert rec.question_id.startswith("q-")
    other = AnnotationRecord.model_validate({**ANNOTATION, "id": "other", "question_id": None})
    assert other.question_id == rec.question_id  # same question content, same group


def test_scores_are_integers():
    with pytest.raises(ValidationError) as e:
        AnnotationRecord.model_validate({**ANNOTATION, "scores": {"a1": {"overall": 4.5}}})
    assert e.value.errors()[0]["loc"] == ("scores", "a1", "overall")


def test_mmie_native_records(tmp_path):
    from PIL import Image

    Image.new("RGB", (8, 8), "red").save(tmp_path / "s1.png")
    native = [
        {
            "id": "MSR_12_0",
            "question": [{"text": "What is 2+3?", "image": None}],
            "answer": [{"text": "Adding gives", "image": "s1.png"}, {"text": "5", "image": None}],
            "model": "anole",
            "gt_answer": "5",
            "scores": {"overall": 6, "final_answer_accuracy": 6},
        },
        {
            "id": "SA_7",
            "question": "Continue the story.",
            "answer": "The end.",
            "model": "gill",
            "scores": {"overall": 2},
        },
    ]
    path = tmp_path / "mmie.json"
    path.write_text(json.dumps(native, indent=2))
    from judge.core.rubric import load_rubric

    res = load_annotations(path, rubric=load_rubric("mmie"))
    msr, sa = res.records
    assert msr.task == "MSR" and sa.task == "SA"
    assert [type(s) for s in msr.response] == [TextSegment, ImageSegment, TextSegment]
    assert msr.response[1].image == str((tmp_path / "s1.png").resolve())
    assert msr.reference == [TextSegment(text="5")]
    assert sa.reference is None and sa.response == [TextSegment(text="The end.")]
    preds = load_predictions(path)
    assert [p.benchmark for p in preds.records] == ["mmie", "mmie"]
    assert preds.records[0].reference == [TextSegment(text="5")]


def test_mmie_family_from_id():
    assert mmie_family("PBL_12_3") == "PBL"
    assert mmie_family("msr-1") is None  # MMIE writes categories in capitals
    assert mmie_family("xMSRx") is None
    assert from_mmie({"id": "SA_1", "question": "q", "answer": None}, "prediction")["task"] == "SA"
