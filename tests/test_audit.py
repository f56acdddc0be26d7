"""judge-audit: each perturbation changes one thing; the change statistics and verdicts; the command end to
end with the tiny judge on annotation, canonical and MMIE-format files (scores equal judge-score's, a cut-off
run resumes, a changed seed is refused, bad options are clear errors)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from judge.audit.perturb import FILLER, PERTURBATIONS, Context
from judge.audit.report import change_cell, verdict
from judge.audit.run import question_of
from judge.cli.audit import main
from judge.core.schema import ImageSegment, PredictionRecord, TextSegment

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


# ----------------------------------------------------------------------------- perturbations


def _img(path: Path, colour: tuple[int, int, int], size=(40, 30)) -> str:
    Image.new("RGB", size, colour).save(path)
    return str(path)


@pytest.fixture
def records(tmp_path) -> list[PredictionRecord]:
    """Four SA responses to three questions (two models on q1), one PBL response; real image files."""
    red = _img(tmp_path / "red.png", (255, 0, 0), (40, 30))
    blue = _img(tmp_path / "blue.png", (0, 0, 255), (50, 20))
    green = _img(tmp_path / "green.png", (0, 255, 0))

    def rec(id_, model, task, text1, images, text2="The end of it all."):
        response: list = [{"type": "text", "text": text1}]
        for im in images:
            response.append({"type": "image", "image": im})
        response.append({"type": "text", "text": text2})
        return PredictionRecord(
            id=id_, benchmark="mmie", task=task, model=model, question=f"Question {id_}?", response=response
        )

    return [
        rec("q1", "a", "SA", "Three red circles sat in the park.", [red, blue]),
        rec("q1", "b", "SA", "A blue square rolled down the hill.", [blue]),
        rec("q2", "a", "SA", "Two green stars went to the sea.", [green]),
        rec("q3", "a", "SA", "One yellow ring found a key.", [green, red]),
        rec("p1", "a", "PBL", "Lay the blocks in a row.", [red]),
    ]


def ctx(records, tmp_path, seed=0) -> Context:
    return Context(records, question_of, tmp_path / "audit-images", seed)


def texts(content) -> list[str]:
    return [s.text for s in content if isinstance(s, TextSegment)]


def images(content) -> list[str]:
    return [s.image for s in content if isinstance(s, ImageSegment)]


def test_blank_images_are_white_images_of_the_same_size_and_nothing_else_changes(records, tmp_path):
    rec = records[0]
    out = PERTURBATIONS["blank-images"].apply(rec, ctx(records, tmp_path))
    assert out is not None and out.question == rec.question and texts(out.response) == texts(rec.response)
    for orig, blank in zip(images(rec.response), images(out.response), strict=True):
        with Image.open(orig) as a, Image.open(blank) as b:
            assert b.size == a.size
            assert (np.asarray(b.convert("RGB")) == 255).all()
    assert rec.response[1].image.endswith("red.png")  # the original record is untouched


def test_swapped_and_off_topic_take_another_question_of_the_same_family(records, tmp_path):
    c = ctx(records, tmp_path)
    for seed in range(8):  # whatever the seed picks
        c = ctx(records, tmp_path, seed)
        swapped = PERTURBATIONS["swapped-images"].apply(records[0], c)
        assert swapped is not None and texts(swapped.response) == texts(records[0].response)
        donors = [r for r in records if set(images(swapped.response)) <= set(images(r.response))]
        assert any(question_of(d) != question_of(records[0]) and d.task == "SA" for d in donors)
        assert images(swapped.response) != images(records[0].response)
        off = PERTURBATIONS["off-topic"].apply(records[0], c)
        assert off is not None
        source = [r for r in records if r.response == off.response]
        assert source and question_of(source[0]) != question_of(records[0]) and source[0].task == "SA"
    # The PBL item has no other PBL question: nothing to take.
    assert PERTURBATIONS["off-topic"].apply(records[4], c) is None
    assert PERTURBATIONS["swapped-images"].apply(records[4], c) is None


def test_text_perturbations(records, tmp_path):
    rec, c = records[0], ctx(records, tmp_path)
    words = " ".join(texts(rec.response)).split()

    shuffled = PERTURBATIONS["shuffled-words"].apply(rec, c)
    assert shuffled is not None
    got = " ".join(texts(shuffled.response)).split()
    assert sorted(got) == sorted(words) and got != words
    assert images(shuffled.response) == images(rec.response)
    assert [type(s) for s in shuffled.response] == [type(s) for s in rec.response]

    unrelated = PERTURBATIONS["unrelated-text"].apply(rec, c)
    assert unrelated is not None and images(unrelated.response) == images(rec.response)
    for before, after in zip(texts(rec.response), texts(unrelated.response), strict=True):
        sentences = [s for s in FILLER if s in after]
        assert sentences and len(" ".join(sentences)) == len(after)  # only whole filler sentences
        longest = max(len(s.split()) for s in FILLER)
        assert len(before.split()) <= len(after.split()) < len(before.split()) + longest

    padded = PERTURBATIONS["padded"].apply(rec, c)
    assert padded is not None and padded.response[: len(rec.response)] == rec.response
    assert sum(s in padded.response[-1].text for s in FILLER) == 3

    # Units: 7 words, 2 images, 5 words = 14; the first 7 are the first text part.
    truncated = PERTURBATIONS["truncated"].apply(rec, c)
    assert truncated is not None
    assert [s.model_dump() for s in truncated.response] == [
        {"type": "text", "text": "Three red circles sat in the park."}
    ]
    short = rec.model_copy(
        update={"response": [TextSegment(text="a b"), *rec.response[1:3], TextSegment(text="c d")]}
    )
    half = PERTURBATIONS["truncated"].apply(short, c)  # 6 units: "a", "b" and the first image stay
    assert half is not None and half.response == [TextSegment(text="a b"), rec.response[1]]


def test_reordered_reverses_the_images_and_needs_two_different_ones(records, tmp_path):
    c = ctx(records, tmp_path)
    out = PERTURBATIONS["reordered"].apply(records[0], c)
    assert out is not None and images(out.response) == images(records[0].response)[::-1]
    assert texts(out.response) == texts(records[0].response)
    assert PERTURBATIONS["reordered"].apply(records[1], c) is None  # one image
    assert PERTURBATIONS["blank-images"].apply(records[1].model_copy(update={"response": []}), c) is None


def test_expectations_follow_the_criterion_ids(rubric):
    p = PERTURBATIONS
    assert p["blank-images"].expect("overall") == "fall"
    assert p["blank-images"].expect("image_quality") == "fall"
    assert p["blank-images"].expect("question_image_understanding") == "fall"
    assert p["blank-images"].expect("text_quality") == "not_rise"
    assert p["off-topic"].expect("final_answer_accuracy") == "fall"
    assert p["off-topic"].expect("context_consistency") == "fall"
    assert p["off-topic"].expect("text_quality") is None
    assert p["off-topic"].expect("image_quality") is None
    assert p["shuffled-words"].expect("text_quality") == "fall"
    assert p["padded"].expect("overall") == "not_rise"
    assert p["reordered"].expect("text_image_coherence") == "fall"
    # Every criterion of the shipped rubric gets an expectation from some perturbation.
    ids = {c for fam in rubric.families.values() for c in fam.criterion_ids}
    assert all(any(q.expect(c) == "fall" for q in p.values()) for c in ids)


# ----------------------------------------------------------------------------- statistics


def test_change_cell_mean_shares_interval_and_verdicts():
    orig = [4.0, 3.0, 5.0, 2.0, 4.0, 3.0]
    pert = [3.0, 2.0, 5.0, 1.5, 3.5, 2.0]
    qs = ["a", "a", "b", "c", "d", "e"]
    cell = change_cell("judge", "x", "overall", "fall", orig, pert, qs, n_boot=500, seed=0)
    d = np.array(pert) - np.array(orig)
    assert cell.change == pytest.approx(d.mean())
    assert cell.fell == pytest.approx(5 / 6) and cell.rose == 0
    assert cell.n == 6 and cell.n_questions == 5
    assert cell.ci is not None and cell.ci[0] <= cell.change <= cell.ci[1] and cell.ci[1] < 0
    assert cell.verdict == "sensitive"
    again = change_cell("judge", "x", "overall", "fall", orig, pert, qs, n_boot=500, seed=0)
    assert again.ci == cell.ci
    # The same numbers, rising: rewarded where a fall (or no rise) is expected, "rises" without expectation.
    up = change_cell("judge", "x", "overall", "not_rise", pert, orig, qs, n_boot=500, seed=0)
    assert up.verdict == "rewarded" and up.change == pytest.approx(-d.mean())
    assert change_cell("judge", "x", "c", None, pert, orig, qs, n_boot=500, seed=0).verdict == "rises"
    # No movement on average: blind where a fall is expected.
    flat = change_cell(
        "judge", "x", "overall", "fall", [3, 3, 3, 3], [4, 2, 4, 2], list("abcd"), n_boot=500, seed=0
    )
    assert flat.verdict == "blind" and flat.fell == 0.5


@pytest.mark.parametrize(
    ("expect", "ci", "change", "want"),
    [
        ("fall", [-0.5, -0.1], -0.3, "sensitive"),
        ("fall", [-0.5, 0.1], -0.2, "blind"),
        ("fall", [0.1, 0.5], 0.3, "rewarded"),
        ("not_rise", [-0.5, -0.1], -0.3, "falls"),
        ("not_rise", [-0.1, 0.1], 0.0, "steady"),
        ("not_rise", [0.1, 0.5], 0.3, "rewarded"),
        (None, [0.1, 0.5], 0.3, "rises"),
        ("fall", None, None, "n/a"),
        # Certain but negligible (below 0.06 on a 0-6 scale): no verdict of a change, as in the demo's
        # "rewarded" on +0.00 [+0.00, +0.01] before an effect size was asked for.
        ("fall", [0.001, 0.009], 0.004, "blind"),
        ("not_rise", [0.001, 0.009], 0.004, "steady"),
        ("fall", [-0.05, -0.01], -0.03, "blind"),
        (None, [-0.05, -0.01], -0.03, "steady"),
    ],
)
def test_verdict_table(expect, ci, change, want):
    assert verdict(expect, ci, change, min_effect=0.06) == want


# ----------------------------------------------------------------------------- the command


@pytest.fixture(scope="module")
def audit_input(small_demo) -> Path:
    """Two questions of each family (18 responses) of the small demo set, beside its images."""
    recs = [json.loads(x) for x in small_demo.read_text().splitlines()]
    keep = []
    for fam in ("SA", "PBL", "MSR"):
        qids = sorted({r["question_id"] for r in recs if r["task"] == fam})[:2]
        keep += [r for r in recs if r["question_id"] in qids]
    p = small_demo.parent / "audit.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in keep))
    return p


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def read_scores(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def audited(audit_input, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("audit") / "a"
    code = main(
        [
            str(audit_input),
            "--judge",
            "tiny",
            "--rubric",
            "mmie",
            "--out",
            str(out),
            "--no-progress",
            "--bootstrap",
            "200",
        ]
    )
    assert code == 0
    return out


@pytest.mark.slow
def test_audit_writes_its_files_and_the_numbers_come_from_the_scores(audited):
    data = json.loads((audited / "audit.json").read_text())
    md = (audited / "audit.md").read_text()
    assert (audited / "audit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["n_items"] == 18 and data["n_questions"] == 6
    assert [p["name"] for p in data["perturbations"]] == list(PERTURBATIONS)
    # Columns say which families' items a criterion pools; verdicts ask for a change of a stated size.
    assert data["criterion_families"]["text_quality"] == ["SA", "PBL"]
    assert data["criterion_families"]["final_answer_accuracy"] == ["MSR"]
    assert data["settings"]["min_effect"] == {"judge": 0.06}
    assert "at least 0.06 (judge)" in md
    for c in data["cells"]:
        if c["verdict"] in ("sensitive", "rewarded", "falls", "rises"):
            assert abs(c["change"]) >= 0.06, c
    for name in PERTURBATIONS:
        assert f"`{name}`" in md
    # Recompute one cell from the per-item records by hand.
    rows = read_scores(audited)
    overall = {(r["model"], r["id"]): r["score"] for r in rows if r["criterion"] == "overall"}
    diffs = [
        overall[(m, f"{i}@off-topic")] - overall[(m, i)]
        for (m, i) in overall
        if "@" not in i and (m, f"{i}@off-topic") in overall
    ]
    cell = next(c for c in data["cells"] if c["perturbation"] == "off-topic" and c["criterion"] == "overall")
    assert cell["n"] == len(diffs) == 18
    assert cell["change"] == pytest.approx(float(np.mean(diffs)), abs=1e-9)
    assert cell["verdict"] in ("sensitive", "blind", "rewarded")
    # Every record is a judge-score record; a copy's id names its item and perturbation.
    assert {r["metric"] for r in rows} == {"judge"}
    named = {r["id"].split("@")[1] for r in rows if "@" in r["id"]}
    applied = {p["name"] for p in data["perturbations"] if p["n_applied"]}
    assert named == applied and applied >= set(PERTURBATIONS) - {"reordered"}


@pytest.mark.slow
def test_original_scores_equal_judge_score(audited, audit_input, tmp_path):
    from judge.cli.score import main as score_main

    out = tmp_path / "score"
    assert (
        score_main(
            [str(audit_input), "--judge", "tiny", "--rubric", "mmie", "--out", str(out), "--no-progress"]
        )
        == 0
    )
    want = {
        (r["model"], r["id"], r["criterion"]): r["score"] for r in read_scores(out) if r["metric"] == "judge"
    }
    got = {
        (r["model"], r["id"], r["criterion"]): r["score"] for r in read_scores(audited) if "@" not in r["id"]
    }
    assert got.keys() == want.keys()
    assert max(abs(got[k] - want[k]) for k in want) < 1e-4


@pytest.mark.slow
def test_a_cut_off_audit_resumes_and_ends_like_an_uninterrupted_one(audited, audit_input, tmp_path, capsys):
    out = tmp_path / "resumed"
    out.mkdir()
    full = (audited / "scores.jsonl").read_text().splitlines()
    (out / "scores.jsonl").write_text(
        "".join(x + "\n" for x in full[: len(full) // 2]) + full[len(full) // 2][:40]
    )
    (out / "run.json").write_text((audited / "run.json").read_text())
    code, stdout, _ = run(
        capsys,
        audit_input,
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--out",
        out,
        "--no-progress",
        "--bootstrap",
        "200",
    )
    assert code == 0
    assert f"wrote {len(full) - len(full) // 2} new score records" in stdout
    want = json.loads((audited / "audit.json").read_text())["cells"]
    got = json.loads((out / "audit.json").read_text())["cells"]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g["n"] == w["n"] and g["verdict"] == w["verdict"]
        assert (g["change"] is None) == (w["change"] is None)
        if w["change"] is not None:
            assert g["change"] == pytest.approx(w["change"], abs=1e-4)
    # Another seed would make other copies: refused, naming the setting; --overwrite starts afresh.
    code, _, err = run(
        capsys,
        audit_input,
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--out",
        out,
        "--seed",
        "1",
        "--perturb",
        "off-topic",
        "--no-progress",
    )
    assert code == 2 and "--seed" in err and "--overwrite" in err
    code, stdout, _ = run(
        capsys,
        audit_input,
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--out",
        out,
        "--seed",
        "1",
        "--perturb",
        "off-topic",
        "--overwrite",
        "--no-progress",
        "--bootstrap",
        "100",
    )
    assert code == 0 and "wrote 252 new score records" in stdout  # 18 items x 7 criteria, twice


@pytest.mark.slow
@pytest.mark.parametrize("name", ["canonical.jsonl", "mmie.json"])
def test_prediction_files_and_clipscore(name, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, _ = run(
        capsys,
        REPO / "examples" / "predictions" / name,
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--out",
        out,
        "--perturb",
        "blank-images",
        "--perturb",
        "off-topic",
        "--clip-model",
        "tiny",
        "--no-progress",
        "--bootstrap",
        "100",
    )
    assert code == 0, stdout
    data = json.loads((out / "audit.json").read_text())
    assert data["scorers"] == ["judge", "clipscore"]
    blank = [
        c
        for c in data["cells"]
        if c["perturbation"] == "blank-images" and c["criterion"] in ("overall", "clipscore")
    ]
    assert {c["scorer"] for c in blank} == {"judge", "clipscore"} and all(c["n"] > 0 for c in blank)
    assert "CLIPScore" in (out / "audit.md").read_text() and "CLIPScore:" in stdout


def test_bad_options_and_inputs_are_clear_errors(audit_input, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main([str(audit_input), "--judge", "tiny", "--perturb", "blur"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--perturb" in err and "blank-images" in err
    code, _, err = run(
        capsys, tmp_path / "missing.jsonl", "--judge", "tiny", "--rubric", "mmie", "--out", tmp_path / "o"
    )
    assert code == 2 and "missing.jsonl" in err and "Traceback" not in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(audit_input.read_text().splitlines()[0] + "\n{not json\n")
    code, _, err = run(capsys, bad, "--judge", "tiny", "--rubric", "mmie", "--out", tmp_path / "o2")
    assert code == 2 and "bad.jsonl" in err and ":2" in err


def test_the_python_api_audits_with_keywords(audit_input, tmp_path):
    import judge

    result = judge.audit_judge(
        [audit_input],
        judge="tiny",
        rubric="mmie",
        out=tmp_path / "api",
        perturb=["off-topic"],
        progress=False,
        bootstrap=100,
    )
    assert isinstance(result, judge.AuditResult)
    cell = result.data.cell("judge", "off-topic", "overall")
    assert cell is not None and cell.n == 18 and cell.ci is not None
    assert (
        json.loads((tmp_path / "api" / "audit.json").read_text())["cells"][0]["n"] == result.data.cells[0].n
    )
    with pytest.raises(judge.ConfigError, match="`perturb`"):
        judge.audit_judge([audit_input], judge="tiny", perturb=["blur"])


def test_criteria_audits_only_those_and_the_overall_score(audit_input, tmp_path, capsys):
    """`--criteria`: a judge trained on the overall score only (the demo's) is audited on what it learned,
    at a seventh of the scoring; the overall cells equal a full audit's, and a wrong name is refused."""
    import judge

    kw = dict(judge="tiny", rubric="mmie", perturb=["blank-images"], progress=False, bootstrap=100)
    only = judge.audit_judge([audit_input], out=tmp_path / "only", criteria=["overall"], **kw)
    full = judge.audit_judge([audit_input], out=tmp_path / "full", **kw)
    assert only.data.criteria == ["overall"] and len(full.data.criteria) > 7
    rows = read_scores(tmp_path / "only")
    assert {r["criterion"] for r in rows} == {"overall"} and len(rows) == 2 * 18
    a, b = (
        only.data.cell("judge", "blank-images", "overall"),
        full.data.cell("judge", "blank-images", "overall"),
    )
    # The same scores but for float32 rounding: fewer criteria pack the forward batches otherwise.
    assert a is not None and b is not None and a.verdict == b.verdict and a.n == b.n == 18
    assert a.change == pytest.approx(b.change, abs=1e-5) and a.ci == pytest.approx(b.ci, abs=1e-5)
    with_one = judge.audit_judge([audit_input], out=tmp_path / "one", criteria=["text_quality"], **kw).data
    assert with_one.criteria == ["overall", "text_quality"]
    code, _, err = run(
        capsys, audit_input, "--judge", "tiny", "--rubric", "mmie", "--criteria", "text_qualty",
        "--out", tmp_path / "bad",
    )  # fmt: skip
    assert (
        code == 2
        and err.startswith("error: --criteria: 'text_qualty' is not a criterion")
        and "text_quality" in err
    )
