"""Preference pairs (judge.data.pairs): the toolkit's own layout, chosen/rejected, VL-RewardBench's
human_ranking, and every malformed input with the file, line and field its error names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from judge.core.io import InvalidRecordsError
from judge.data.pairs import load_pairs, pair_layout


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "images").mkdir()
    for name in ("q.png", "a.png", "b.png"):
        Image.new("RGB", (8, 8), (10, 20, 30)).save(tmp_path / "images" / name)
    return tmp_path


def _own(**over):
    rec = {
        "id": "p1",
        "task": "SA",
        "question": [{"type": "text", "text": "Tell a story."}, {"type": "image", "image": "images/q.png"}],
        "response_a": [{"type": "text", "text": "Once."}, {"type": "image", "image": "images/a.png"}],
        "response_b": "Twice.",
        "preferred": "a",
        "criteria": {"text_quality": "tie", "image_quality": "b"},
    }
    rec.update(over)
    return rec


def _write(folder: Path, rows, name="pairs.jsonl") -> Path:
    path = folder / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_own_layout_loads_with_images_resolved(folder, rubric):
    path = _write(folder, [_own(), _own(id="p2", preferred="tie", criteria={}, question_id="q7")])
    res = load_pairs(path, rubric=rubric)
    assert [r.id for r in res.records] == ["p1", "p2"]
    p1 = res.records[0]
    assert p1.preferences() == {"overall": "a", "text_quality": "tie", "image_quality": "b"}
    assert p1.images == [str(folder / "images" / "q.png"), str(folder / "images" / "a.png")]
    assert p1.question_id.startswith("q-")  # filled from the question, as annotations fill theirs
    assert res.records[1].question_id == "q7" and res.records[1].preferred == "tie"


def test_chosen_rejected_layout(folder, rubric):
    row = {"question": "What is shown?", "image": "images/q.png", "chosen": "A cat.", "rejected": "A dog.",
           "source": "rlaif"}  # fmt: skip
    path = _write(folder, [row, {**row, "id": 42, "images": ["images/a.png", "images/b.png"], "image": None}])
    res = load_pairs(path, rubric=rubric, default_task="SA")
    first, second = res.records
    assert pair_layout(row) == "chosen_rejected"
    assert first.id == "pairs:1" and first.task == "SA" and first.preferred == "a"
    assert [s.model_dump() for s in first.question] == [
        {"type": "image", "image": str(folder / "images" / "q.png")},
        {"type": "text", "text": "What is shown?"},
    ]
    assert first.response_a[0].text == "A cat." and first.response_b[0].text == "A dog."
    assert first.meta == {"source": "rlaif"}
    assert second.id == "42" and len(second.images) == 2


def test_vl_rewardbench_layout(folder, rubric):
    row = {"id": "RLAIF_1", "query": "Describe.", "response": ["one", "two"], "human_ranking": [1, 0],
           "image_path": "images/q.png", "models": ["x", "y"]}  # fmt: skip
    res = load_pairs(_write(folder, [row, {**row, "id": "RLAIF_2", "human_ranking": [0, 1]}]), rubric=rubric,
                     default_task="SA")  # fmt: skip
    assert [r.preferred for r in res.records] == ["b", "a"]
    assert res.records[0].response_a[0].text == "one" and res.records[0].meta == {"models": ["x", "y"]}


#: Each malformed record, and what its error must say: (line content, field, words of the message).
BAD = [
    ("{not json", None, "not valid JSON"),
    ("[1, 2]", None, "expected a JSON object"),
    (_own(id="x1", response_b=None), "response_b", "valid list"),
    (
        {k: v for k, v in _own(id="x2").items() if k != "response_b"},
        "response_b",
        "required field is missing",
    ),
    (_own(id="x3", preferred="A"), "preferred", "'a', 'b' or 'tie'"),
    (_own(id="p1"), "id", "duplicate id 'p1'; first seen at"),
    (
        _own(id="x4", response_b=[{"type": "image", "image": "images/none.png"}]),
        "response_b[0].image",
        "does not exist",
    ),
    (_own(id="x5", question=[{"type": "image", "image": "../outside.png"}]), "question[0].image", "outside"),
    (_own(id="x6", criteria={"wit": "a"}), "criteria.wit", "unknown criterion 'wit' for family SA"),
    (_own(id="x7", criteria={"overall": "a"}), "criteria", "`preferred`"),
    (_own(id="x8", task="XX"), "task", "unknown task family 'XX'"),
    (_own(id="x9", task="MSR"), "reference", "shows the reference answer"),
    (_own(id="x10", extra=1), "extra", "unknown field"),
    ({"id": "c1", "question": "Q", "chosen": "a", "rejected": "b", "task": "SA"}, None, None),  # valid
    ({"id": "c2", "question": "Q", "chosen": "a", "task": "SA"}, "rejected", "required field is missing"),
    ({"id": "c3", "prompt": "Q", "chosen": "a", "rejected": "b"}, "task", "data.pairs_task"),
    (
        {"id": "c4", "query": "Q", "chosen": "a", "rejected": "b", "task": "SA", "image": 3},
        "image",
        "valid list",
    ),
    (
        {"id": "v1", "query": "Q", "response": ["a"], "human_ranking": [0, 1], "task": "SA"},
        "response",
        "two response texts",
    ),  # fmt: skip
    (
        {"id": "v2", "query": "Q", "response": ["a", "b"], "human_ranking": [1, 1], "task": "SA"},
        "human_ranking",
        "expected [0, 1]",
    ),  # fmt: skip
]


def test_every_malformed_record_named_by_file_line_and_field(folder, rubric):
    path = _write(folder, [_own()] + [row for row, _, _ in BAD])
    res = load_pairs(path, rubric=rubric, collect=True)
    assert [r.id for r in res.records] == ["p1", "c1"]
    by_line = {}
    for e in res.errors:
        assert e.file == str(path)
        by_line.setdefault(e.line, []).append(e)
    expected = {i + 2: (fld, words) for i, (_, fld, words) in enumerate(BAD) if words is not None}
    assert sorted(by_line) == sorted(expected)
    for line, (fld, words) in expected.items():
        errs = by_line[line]
        assert any(e.field == fld and words in e.message for e in errs), (line, [str(e) for e in errs])


def test_raises_with_every_problem_unless_collected(folder, rubric):
    path = _write(folder, [_own(), _own(id="p1"), _own(id="y", preferred="maybe")])
    with pytest.raises(InvalidRecordsError) as e:
        load_pairs(path, rubric=rubric)
    text = str(e.value)
    assert "2 invalid pair records" in text
    assert f"{path}:2, record 'p1': field 'id': duplicate id 'p1'" in text
    assert f"{path}:3, record 'y': field 'preferred'" in text
    assert [r.id for r in load_pairs(path, rubric=rubric, skip_invalid=True).records] == ["p1"]


def test_duplicate_ids_across_files_and_an_empty_file(folder, rubric):
    one = _write(folder, [_own()], "one.jsonl")
    two = _write(folder, [_own()], "two.jsonl")
    errs = load_pairs([one, two], rubric=rubric, collect=True).errors
    assert len(errs) == 1 and errs[0].file == str(two) and f"first seen at {one}:1" in errs[0].message
    (folder / "empty.jsonl").write_text("\n")
    errs = load_pairs(folder / "empty.jsonl", collect=True).errors
    assert "holds no records" in errs[0].message


def test_root_replaces_the_file_folder(folder, rubric, tmp_path_factory):
    other = tmp_path_factory.mktemp("elsewhere")
    path = _write(other, [_own()])
    assert load_pairs(path, rubric=rubric, collect=True).errors  # images/ is not beside the file
    assert load_pairs(path, rubric=rubric, root=folder).records[0].images[0] == str(
        folder / "images" / "q.png"
    )


def test_pairs_and_annotations_of_one_question_share_a_split(small_demo, rubric):
    from judge.core.io import load_annotations
    from judge.data.split import split_questions, split_records

    anns = load_annotations(small_demo, rubric=rubric).records
    assignment = split_questions(anns, (0.5, 0.25, 0.25), seed=0)
    pair_rows = [
        {"id": f"pair-{r.id}", "task": r.task, "question_id": r.question_id,
         "question": [s.model_dump() for s in r.question], "response_a": [s.model_dump() for s in r.response],
         "response_b": "short", "preferred": "a", "reference": r.reference and [s.model_dump() for s in r.reference]}
        for r in anns
    ]  # fmt: skip
    pairs = load_pairs(_write(small_demo.parent, pair_rows, "split-pairs.jsonl"), rubric=rubric).records
    split = split_records(pairs, assignment=assignment)
    for name, recs in split.items():
        assert recs and all(assignment[p.question_id] == name for p in recs)


def test_id_less_exports_with_one_file_name_in_two_folders_do_not_collide(folder, rubric):
    # Two `train.jsonl` exports without ids: named by their path relative to the common folder, not both
    # `train:1` (the second file was refused as a duplicate).
    row = {"question": "What is shown?", "chosen": "A cat.", "rejected": "A dog."}
    (folder / "rlaif").mkdir()
    (folder / "vlfeedback").mkdir()
    a = _write(folder / "rlaif", [row], name="train.jsonl")
    b = _write(folder / "vlfeedback", [row], name="train.jsonl")
    res = load_pairs([a, b], rubric=rubric, default_task="SA")
    assert [r.id for r in res.records] == ["rlaif/train:1", "vlfeedback/train:1"]
    other = _write(folder, [row], name="other.jsonl")  # distinct stems keep the short name
    assert [r.id for r in load_pairs([a, other], rubric=rubric, default_task="SA").records] == [
        "train:1",
        "other:1",
    ]


def test_a_line_nested_too_deeply_is_an_error_with_file_and_line(folder, rubric):
    # The shared reader (annotations too): json recurses per bracket, so 100,000 nested arrays raised a
    # RecursionError traceback instead of a record error.
    from judge.core.io import load_annotations

    deep = "[" * 100_000 + "]" * 100_000
    path = _write(folder, [_own(), json.dumps(_own(id="p2"))[:-1] + f', "meta": {{"x": {deep}}}}}'])
    with pytest.raises(InvalidRecordsError, match=r"pairs\.jsonl:2: .*nested too deeply"):
        load_pairs(path, rubric=rubric)
    (folder / "ann.json").write_text(f'[\n{{"id": "r1"}},\n{deep}\n]')
    with pytest.raises(InvalidRecordsError, match=r"ann\.json:3: .*nested too deeply"):
        load_annotations(folder / "ann.json", rubric=rubric)


@pytest.mark.parametrize(
    "row, want",
    [
        ({"prompt": "q", "chosen": "a", "rejected": "b", "image": "nope.png"}, "image"),
        ({"prompt": "q", "chosen": "a", "rejected": "b", "images": ["images/q.png", "nope.png"]}, "images[1]"),
        ({"id": "v1", "query": "q", "response": ["a", "b"], "human_ranking": [0, 1], "image_path": "nope.png"},
         "image_path"),
    ],
)  # fmt: skip
def test_a_bad_image_of_a_public_layout_names_the_layouts_field(folder, rubric, row, want):
    # docs/data.md: errors name the layout's own field, not the canonical question[0].image.
    res = load_pairs(_write(folder, [row]), rubric=rubric, default_task="SA", collect=True)
    assert [e.field for e in res.errors] == [want] and "does not exist" in res.errors[0].message


@pytest.mark.parametrize("ranking", [[True, False], [False, True]])
def test_vl_rewardbench_ranking_of_booleans_is_refused(folder, rubric, ranking):
    row = {"id": "v1", "query": "q", "response": ["a", "b"], "human_ranking": ranking}
    res = load_pairs(_write(folder, [row]), rubric=rubric, default_task="SA", collect=True)
    assert not res.records and [e.field for e in res.errors] == ["human_ranking"]


def test_a_pairs_question_under_another_family_names_file_line_and_field(small_demo, rubric, tmp_path):
    from judge.core.io import load_annotations
    from judge.data.split import SplitError, split_questions

    ann = load_annotations(small_demo, rubric=rubric).records
    sa = next(r for r in ann if r.task == "SA")
    other = next(f for f in rubric.families if f != "SA" and not rubric.families[f].uses_reference)
    row = {"id": "clash", "task": other, "question_id": sa.question_id, "question": "q", "response_a": "a",
           "response_b": "b", "preferred": "a"}  # fmt: skip
    pairs = load_pairs(
        _write(tmp_path, [{**row, "id": "fine", "question_id": "q-own", "task": other}, row], "clash.jsonl"),
        rubric=rubric,
    ).records
    with pytest.raises(
        SplitError, match=r"clash\.jsonl:2, record 'clash': field 'question_id': .* two task families"
    ):
        split_questions([*ann, *pairs])


def test_identical_responses_with_a_verdict_are_refused_a_tie_is_not(folder, rubric):
    same = [{"type": "text", "text": "Same."}]
    rows = [
        _own(id="same-a", response_a=same, response_b=same, criteria={}),
        _own(id="same-tie", response_a=same, response_b=same, preferred="tie", criteria={}),
        _own(
            id="same-crit", response_a=same, response_b=same, preferred="tie", criteria={"text_quality": "b"}
        ),
        {"prompt": "q", "chosen": "Same.", "rejected": "Same."},
    ]
    res = load_pairs(_write(folder, rows), rubric=rubric, default_task="SA", collect=True)
    assert [r.id for r in res.records] == ["same-tie"]
    assert [(e.line, e.field) for e in res.errors] == [
        (1, "preferred"),
        (3, "criteria.text_quality"),
        (4, "rejected"),
    ]
    assert all("identical" in e.message for e in res.errors)
