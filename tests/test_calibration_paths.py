"""A calibrated judge folder end to end: judge-calibrate writes calibration.json and names it in the card;
judge-score, Judge.score, judge-serve's /v1/score and judge-score --server apply it the same way (calibrated
score, raw score and interval side by side, the calibration named); --no-calibration gives the raw read-out."""

from __future__ import annotations

import json

import httpx
import pytest

from judge.cli.calibrate import main as calibrate_main
from judge.cli.score import main as score_main
from judge.core.errors import JudgeError
from judge.models.calibration import read_calibration

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def judge_dir(tmp_path_factory, rubric):
    """A judge folder as judge-train writes one, with the seeded tiny model as its merged weights."""
    from judge.models.card import CardRubric, JudgeCard, write_card
    from judge.models.loading import save_tiny_scorer

    folder = tmp_path_factory.mktemp("calibrated") / "judge"
    save_tiny_scorer(folder / "merged", seed=0)
    card = JudgeCard(
        base_model="tiny:seed=0",
        finetune="full",
        rubric=CardRubric(name=rubric.name, version=rubric.version, hash=rubric.hash),
        scale=rubric.scale.values,
        target_format="score",
    )
    write_card(folder, card)
    return folder


@pytest.fixture(scope="module")
def calibrated(judge_dir, small_demo):
    from judge.models.card import read_card

    before = read_card(judge_dir)
    assert before.calibration is None
    code = calibrate_main(["--judge", str(judge_dir), "--human", str(small_demo), "--min-items", "20",
                           "--no-progress", "--device", "cpu"])  # fmt: skip
    assert code == 0
    return read_calibration(judge_dir / "calibration.json")


def _records(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_calibrate_writes_the_file_and_names_it_in_the_card(judge_dir, calibrated, small_demo, capsys):
    from judge.core.io import file_sha256
    from judge.models.card import read_card

    card = read_card(judge_dir)
    assert card.calibration is not None and card.calibration.fingerprint == calibrated.fingerprint()
    assert card.calibration.data_fingerprint == calibrated.data.fingerprint
    assert calibrated.data.human_files == [{"path": str(small_demo), "sha256": file_sha256(small_demo)}]
    assert (
        calibrated.data.n_items == 12 * 3 * 7
        and calibrated.method == "temperature"
        and calibrated.level == 0.9
    )
    # It was fitted on the judge's raw scores of those items, written by judge-score.
    raw = _records(judge_dir / "calibration" / "scores.jsonl")
    assert raw and all("raw_score" not in r and "calibration" not in r["producer"] for r in raw)


def test_judge_score_writes_calibrated_raw_and_interval_side_by_side(
    judge_dir, calibrated, small_demo, tmp_path
):
    out = tmp_path / "score"
    assert score_main([str(small_demo), "--judge", str(judge_dir), "--out", str(out), "--no-progress",
                       "--device", "cpu"]) == 0  # fmt: skip
    recs = [r for r in _records(out / "scores.jsonl") if r["metric"] == "judge"]
    raw = {(r["id"], r["criterion"]): r for r in _records(judge_dir / "calibration" / "scores.jsonl")}
    for r in recs:
        assert r["producer"]["calibration"] == calibrated.producer()
        base = raw[(r["id"], r["criterion"])]
        assert r["raw_score"] == pytest.approx(base["score"], abs=1e-4)  # the same read-out
        want = calibrated.apply(r["criterion"], r["raw_score"], r["distribution"])
        assert r["score"] == pytest.approx(want.score, abs=1e-12) and r["interval"] == pytest.approx(
            want.interval
        )
        assert r["interval"][0] <= r["score"] <= r["interval"][1]
    run = json.loads((out / "run.json").read_text())
    assert run["identity"]["calibration"] == calibrated.fingerprint()
    # Resuming that folder without calibration would mix calibrated and raw scores: refused.
    with pytest.raises(JudgeError, match="calibration"):
        from judge.scoring import ScoreConfig
        from judge.scoring.run import score_files

        score_files(ScoreConfig(inputs=[str(small_demo)], judge=str(judge_dir), out=str(out), calibration=False,
                                device="cpu", progress=False))  # fmt: skip
    plain = tmp_path / "plain"
    assert score_main([str(small_demo), "--judge", str(judge_dir), "--out", str(plain), "--no-progress",
                       "--no-calibration", "--device", "cpu"]) == 0  # fmt: skip
    for r in _records(plain / "scores.jsonl"):
        assert "raw_score" not in r and "interval" not in r and "calibration" not in r["producer"]


def test_judge_score_applies_it_in_memory_too(judge_dir, calibrated, small_demo):
    from judge import Judge
    from judge.core.io import load_annotations

    items = load_annotations(small_demo, check_images=False).records[:3]
    cal = Judge.load(str(judge_dir), device="cpu").score_records(items, root=small_demo.parent)
    raw = Judge.load(str(judge_dir), device="cpu", calibration=False).score_records(
        items, root=small_demo.parent
    )
    assert len(cal) == len(raw) == 21
    for c, r in zip(cal, raw, strict=True):
        assert c.raw_score == pytest.approx(r.score, abs=1e-5) and r.raw_score is None and r.interval is None
        assert c.score == pytest.approx(calibrated.apply(c.criterion, c.raw_score, c.distribution).score)
        assert c.producer["calibration"]["fingerprint"] == calibrated.fingerprint()


def test_v1_score_and_the_client_carry_the_calibration(judge_dir, calibrated, small_demo, tmp_path):
    from serving import running_server

    item = json.loads(small_demo.read_text().splitlines()[0])
    for key in ("scores", "rationale", "question_id"):  # a prediction item, not an annotation
        item.pop(key)
    root = str(small_demo.parent)
    with running_server(
        ["--judge", str(judge_dir), "--image-root", root, "--device", "cpu"], tmp_path
    ) as srv:
        body = httpx.post(srv.url + "/v1/score", json={"items": [item]}, timeout=120).json()
        assert "results" in body, body
        assert body["provenance"]["calibration"] == calibrated.producer()
        for crit, s in body["results"][0]["scores"].items():
            want = calibrated.apply(crit, s["raw_score"], s["distribution"])
            assert s["score"] == pytest.approx(want.score) and s["interval"] == pytest.approx(want.interval)
        out = tmp_path / "remote"
        assert score_main([str(small_demo), "--server", srv.url, "--out", str(out), "--no-progress",
                           "--limit", "3"]) == 0  # fmt: skip
    recs = [r for r in _records(out / "scores.jsonl") if r["metric"] == "judge"]
    assert len(recs) == 21 and all("interval" in r and r["producer"]["calibration"] for r in recs)
    assert json.loads((out / "run.json").read_text())["identity"]["calibration"] == calibrated.fingerprint()


def test_judge_train_calibrate_fits_on_the_validation_split_at_the_end(small_demo, tmp_path, capsys):
    from judge.cli.train import main as train_main
    from judge.models.card import read_card

    out = tmp_path / "run"
    code = train_main(
        ["--config", "demo", "--calibrate",
         "--set", f"output_dir={out}", "--set", f"data.annotations=[{small_demo}]",
         "--set", "data.split={train: 0.5, validation: 0.5, test: 0.0, seed: 0}",
         "--set", "train.max_steps=1", "--set", "train.per_device_train_batch_size=4",
         "--set", "eval.strategy=no", "--set", "eval.at_start=false"]
    )  # fmt: skip
    assert code == 0
    judge = out / "judge"
    cal = read_calibration(judge / "calibration.json")
    card = read_card(judge)
    assert card.calibration is not None and card.calibration.fingerprint == cal.fingerprint()
    validation = out / "data" / "splits" / "validation.jsonl"
    assert card.calibration.human_files == [str(validation)]
    assert cal.data.ids == sorted(json.loads(x)["id"] for x in validation.read_text().splitlines())
    printed = capsys.readouterr().out
    assert "== calibration (judge-calibrate)" in printed and "Held-out comparison" in printed
