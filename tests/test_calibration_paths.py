"""A calibrated judge folder end to end: judge-calibrate writes calibration.json (and with --selective,
selective.json) and names them in the card; every path (judge-score and its pairs, Judge.score and
Judge.compare, judge-serve's /v1/score, chat route and reward route, judge-score --server, judge-bench) gives
the same calibrated view: the calibrated distribution, its mean, its argmax and the interval, the read-out
under raw_ names, and the same trusted mark; --no-calibration gives the raw read-out. The paths are
compared with each other, and the calibrated view with a computation from the calibration file's numbers
(scipy's softmax, numpy's interp), never with the function that made it."""

from __future__ import annotations

import json

import httpx
import numpy as np
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


VALUES = list(range(7))


def assert_view_from_the_file(r: dict, cal) -> None:
    """A record's calibrated view, recomputed from the calibration file's numbers with scipy and numpy: the
    distribution (tempered: softmax of the scaled logits; isotonic: mean = the interpolated score; none: the
    read-out), its mean, its argmax, the interval (score -/+ halfwidth, clipped to the scale)."""
    from scipy.special import softmax

    key = r["criterion"] if r["criterion"] in cal.criteria else "*"
    cc = cal.criteria.get(key, cal.pooled)
    raw = np.asarray(r["raw_distribution"])
    if cc.temperature is not None:
        assert r["distribution"] == pytest.approx(softmax(np.log(raw) / cc.temperature).tolist(), abs=1e-9)
    elif cc.x is not None:
        assert r["score"] == pytest.approx(float(np.interp(r["raw_score"], cc.x, cc.y)), abs=1e-9)
    else:
        assert r["distribution"] == pytest.approx(r["raw_distribution"], abs=1e-12)
        assert r["score"] == pytest.approx(r["raw_score"], abs=1e-12)
    assert r["score"] == pytest.approx(float(np.dot(r["distribution"], VALUES)), abs=1e-9)
    assert r["argmax"] == int(np.argmax(r["distribution"]))
    half = cc.halfwidth if cc.halfwidth is not None else 99.0
    assert r["interval"] == pytest.approx(
        [max(0.0, r["score"] - half), min(6.0, r["score"] + half)], abs=1e-12
    )


def test_calibrate_writes_the_file_and_names_it_in_the_card(judge_dir, calibrated, small_demo, capsys):
    from judge.core.io import file_sha256
    from judge.models.card import read_card

    card = read_card(judge_dir)
    assert card.calibration is not None and card.calibration.fingerprint == calibrated.fingerprint()
    assert card.calibration.data_fingerprint == calibrated.data.fingerprint
    assert calibrated.data.human_files == [{"path": str(small_demo), "sha256": file_sha256(small_demo)}]
    assert calibrated.data.n_items == 12 * 3 * 7 and calibrated.method == "auto" and calibrated.level == 0.9
    assert set(calibrated.comparison["choice"]) >= {"*"}  # each map's choice, with its cross-validated NLLs
    assert (judge_dir / "calibration" / "reliability.png").is_file()
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
        assert r["raw_distribution"] == pytest.approx(base["distribution"], abs=1e-4)
        assert r["raw_argmax"] == base["argmax"]
        assert_view_from_the_file(r, calibrated)
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
        assert c.raw_distribution == pytest.approx(r.distribution, abs=1e-5)
        assert_view_from_the_file(c.model_dump(), calibrated)
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
            assert_view_from_the_file({**s, "criterion": crit}, calibrated)
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


# ----------------------------------------------------------------------------- one view on every path

T_OVERALL = 1.7
KNOTS = ([1.5, 2.5, 3.5], [2.0, 3.4, 4.2])
PAIR_THRESHOLD = 0.55


def _item(rec: dict) -> dict:
    """An annotation record as a prediction item."""
    return {k: rec[k] for k in ("id", "task", "question", "response", "reference", "model") if k in rec}


@pytest.fixture(scope="module")
def hand_judge(tmp_path_factory, rubric, small_demo):
    """A judge folder with a calibration written by hand (temperature 1.7 for overall; an isotonic map that
    shifts the other criteria up) and selective thresholds: pointwise at the median confidence of its
    scores of the small demo set (so some are trusted and some escalated), pairwise at 0.55."""
    from statistics import median

    from judge import Judge
    from judge.core.io import load_annotations
    from judge.models.calibration import Calibration, CalibrationData, CriterionCalibration, write_calibration
    from judge.models.card import CardCalibration, CardRubric, CardSelective, JudgeCard, write_card
    from judge.models.loading import save_tiny_scorer
    from judge.models.selective import Selective, SelectiveRule, mass_within, write_selective

    folder = tmp_path_factory.mktemp("hand") / "judge"
    save_tiny_scorer(folder / "merged", seed=0)
    card = JudgeCard(base_model="tiny:seed=0", finetune="full", scale=VALUES, target_format="score",
                     rubric=CardRubric(name=rubric.name, version=rubric.version, hash=rubric.hash))  # fmt: skip
    cal = Calibration(
        method="auto", level=0.9, scale=VALUES, min_items=30,
        criteria={"overall": CriterionCalibration(n_fit=50, n_conformal=50, temperature=T_OVERALL, halfwidth=1.1)},
        pooled=CriterionCalibration(n_fit=50, n_conformal=50, x=KNOTS[0], y=KNOTS[1], halfwidth=1.4),
        data=CalibrationData(fingerprint="0" * 64, human_files=[], n_items=100, n_questions=20, ids=[],
                             conformal_fraction=0.5, seed=0),
    )  # fmt: skip
    write_calibration(folder, cal)
    card.calibration = CardCalibration(file="calibration.json", fingerprint=cal.fingerprint(), method="auto",
                                       level=0.9, data_fingerprint="0" * 64, human_files=[], n_items=100)  # fmt: skip
    write_card(folder, card)
    items = load_annotations(small_demo, check_images=False).records[:6]
    recs = Judge.load(str(folder), device="cpu").score_records(items, root=small_demo.parent)
    threshold = median(mass_within(r.distribution, r.score, VALUES, 1.0) for r in recs)
    rule = SelectiveRule(threshold=threshold, n=100, n_trusted=50, agreement=0.95, p_value=0.01)
    pair_rule = SelectiveRule(threshold=PAIR_THRESHOLD, n=100, n_trusted=50, agreement=0.95, p_value=0.01)
    sel = Selective(agreement=0.9, delta=0.1, tolerance=1.0, confidence="mass", scale=VALUES,
                    calibration=cal.fingerprint(), pointwise={"*": rule}, pairwise={"*": pair_rule})  # fmt: skip
    write_selective(folder, sel)
    card.selective = CardSelective(file="selective.json", fingerprint=sel.fingerprint(),
                                   calibration_fingerprint=cal.fingerprint(), agreement=0.9, delta=0.1)  # fmt: skip
    write_card(folder, card)
    return folder, cal, sel


def _view(r: dict) -> tuple:
    return (r["score"], r["argmax"], tuple(r["distribution"]), tuple(r["interval"]), r["raw_score"],
            r.get("trusted"))  # fmt: skip


def _same(a: dict, b: dict, tol: float = 1e-4) -> None:
    assert a["argmax"] == b["argmax"] and a.get("trusted") == b.get("trusted")
    assert a["score"] == pytest.approx(b["score"], abs=tol)
    assert a["distribution"] == pytest.approx(b["distribution"], abs=tol)
    assert a["interval"] == pytest.approx(b["interval"], abs=tol)
    assert a["raw_score"] == pytest.approx(b["raw_score"], abs=tol)


def test_every_path_gives_one_calibrated_view_and_one_trusted_mark(hand_judge, small_demo, tmp_path):
    from openai import OpenAI
    from serving import running_server

    from judge import Judge, score_from_logprobs
    from judge.core.io import load_annotations
    from judge.models.preference import preference
    from judge.serve.judge_prompt import judge_chat_messages

    folder, cal, sel = hand_judge
    lines = [json.loads(x) for x in small_demo.read_text().splitlines()]
    out = tmp_path / "score"
    assert score_main([str(small_demo), "--judge", str(folder), "--out", str(out), "--no-progress", "--limit", "3",
                       "--device", "cpu"]) == 0  # fmt: skip
    recs = {(r["id"], r["criterion"]): r for r in _records(out / "scores.jsonl") if r["metric"] == "judge"}
    threshold = sel.pointwise["*"].threshold
    for r in recs.values():
        assert_view_from_the_file(r, cal)
        # trusted: the calibrated distribution's mass within 1 of its mean reaches the threshold.
        mass = sum(
            p for p, v in zip(r["distribution"], VALUES, strict=True) if abs(v - r["score"]) <= 1.0 + 1e-9
        )
        assert r["trusted"] is (mass >= threshold)
        assert r["producer"]["selective"] == sel.producer()
    marks = [r["trusted"] for r in recs.values()]
    assert any(marks) and not all(marks)  # the mark separates
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["trusted"] == sum(marks) and summary["counts"]["escalated"] == len(marks) - sum(
        marks
    )
    assert "Selective evaluation:" in (out / "summary.md").read_text()
    # The API.
    items = load_annotations(small_demo, check_images=False).records[:3]
    j = Judge.load(str(folder), device="cpu")
    for c in j.score_records(items, root=small_demo.parent):
        _same(c.model_dump(), recs[(c.id, c.criterion)])
    # Pairs: judge-score's preference records, Judge.compare and the preference of the served distributions.
    a, b = lines[0], lines[1]  # two responses to one question
    assert a["question_id"] == b["question_id"]
    pairs = tmp_path / "pairs.jsonl"
    pair = {"id": "p1", "task": a["task"], "question": a["question"], "response_a": a["response"],
            "response_b": b["response"], "model_a": "A", "model_b": "B"}  # fmt: skip
    pairs.write_text(json.dumps(pair) + "\n")
    pout = tmp_path / "pairs-out"
    assert score_main([str(pairs), "--judge", str(folder), "--out", str(pout), "--no-progress", "--device", "cpu",
                       "--root", str(small_demo.parent)]) == 0  # fmt: skip
    prefs = {r["criterion"]: r for r in _records(pout / "scores.jsonl") if r["metric"] == "preference"}
    pref_rec = prefs["overall"]
    ra, rb = recs[(a["id"], "overall")], recs[(b["id"], "overall")]
    want = preference(ra["distribution"], rb["distribution"], VALUES)
    assert pref_rec["score"] == pytest.approx(want.p_first_better, abs=1e-4)
    assert pref_rec["details"]["score_a"] == pytest.approx(ra["score"], abs=1e-4)
    assert pref_rec["trusted"] is (max(want.p_first_better, 1 - want.p_first_better) >= PAIR_THRESHOLD)
    cmp = j.compare(_item(a), _item(b), root=small_demo.parent)
    assert (
        cmp.p_first_better == pytest.approx(pref_rec["score"], abs=1e-4)
        and cmp.trusted is pref_rec["trusted"]
    )
    assert cmp.score_a == pytest.approx(ra["score"], abs=1e-4)
    # The server: /v1/score, the chat route (content, expected, distribution, logprobs) and the reward route.
    root = str(small_demo.parent)
    with running_server(["--judge", str(folder), "--image-root", root, "--device", "cpu", "--reward-task",
                         a["task"]], tmp_path) as srv:  # fmt: skip
        body = httpx.post(srv.url + "/v1/score", json={"items": [_item(a)]}, timeout=120).json()
        assert body["provenance"]["selective"] == sel.producer()
        for crit, s in body["results"][0]["scores"].items():
            _same(s, recs[(a["id"], crit)])
            assert s["raw_distribution"] == pytest.approx(recs[(a["id"], crit)]["raw_distribution"], abs=1e-4)
        client = OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=120)
        msgs = judge_chat_messages("mmie", _item(a), "overall", root=small_demo.parent)
        reply = client.chat.completions.create(model="judge", messages=msgs, logprobs=True, top_logprobs=20)
        judged = (reply.model_extra or {})["judge"]
        ref = recs[(a["id"], "overall")]
        assert reply.choices[0].message.content == str(ref["argmax"]) == str(judged["argmax"])
        assert judged["expected"] == pytest.approx(ref["score"], abs=1e-4)
        assert judged["distribution"] == pytest.approx(ref["distribution"], abs=1e-4)
        assert judged["raw_expected"] == pytest.approx(ref["raw_score"], abs=1e-4)
        assert judged["trusted"] is ref["trusted"] and judged["interval"] == pytest.approx(
            ref["interval"], abs=1e-4
        )
        tops = reply.choices[0].logprobs.content[0].top_logprobs
        assert score_from_logprobs([t.model_dump() for t in tops]) == pytest.approx(ref["score"], abs=1e-4)
        assert ref["score"] != pytest.approx(ref["raw_score"], abs=1e-3)  # the calibration moved it
        query = {
            "query": ["Tell a story.\nOnce upon a time."],
            "prompts": ["Tell a story.\n"],
            "labels": [None],
        }
        reward = httpx.post(srv.url + "/get_reward", json=query, timeout=120).json()
        item = {"id": "r", "task": a["task"], "question": "Tell a story.", "response": "Once upon a time."}
        served = httpx.post(
            srv.url + "/v1/score", json={"items": [item], "criteria": ["overall"]}, timeout=120
        ).json()
        s = served["results"][0]["scores"]["overall"]
        assert reward["rewards"][0] == pytest.approx(s["score"], abs=1e-4)
        assert reward["judge"]["items"][0]["trusted"] is s["trusted"]


def test_judge_bench_compares_the_calibrated_distributions(hand_judge, tmp_path):
    import judge_bench_data as D
    from scipy.special import softmax

    from judge.cli.bench import main as bench_main
    from judge.models.preference import preference

    folder, cal, _ = hand_judge
    path, _ = D.write_mmrb(tmp_path / "data")
    out = tmp_path / "bench"
    assert bench_main(["multimodal-rewardbench", str(path), "--judge", str(folder), "--task", "SA", "--no-progress",
                       "--bootstrap", "20", "--out", str(out), "--device", "cpu"]) == 0  # fmt: skip
    scores = {r["id"]: r for r in _records(out / "scores.jsonl")}
    for r in scores.values():  # overall: tempered by 1.7
        assert r["distribution"] == pytest.approx(
            softmax(np.log(r["raw_distribution"]) / T_OVERALL).tolist(), abs=1e-9
        )
    outputs = [o for o in _records(out / "judge_outputs.jsonl") if o.get("p_first_better") is not None]
    from judge.benchmarks.judging import get_judge_benchmark
    from judge.scoring.bench import response_records

    data = get_judge_benchmark("multimodal-rewardbench").read(path)
    _, per_item = response_records(data, "SA", "multimodal-rewardbench")
    assert outputs
    for o in outputs:
        ra, rb = (scores[rid] for rid in per_item[o["id"]])
        assert (
            o["p_first_better"] == preference(ra["distribution"], rb["distribution"], VALUES).p_first_better
        )
        assert (o["score_a"], o["score_b"]) == (ra["score"], rb["score"])


def test_judge_calibrate_selective_writes_the_thresholds_and_a_recalibration_drops_them(
    judge_dir, calibrated, small_demo, tmp_path, capsys
):
    from judge.models.card import read_card
    from judge.models.selective import read_selective

    scores = judge_dir / "calibration" / "scores.jsonl"
    args = ["--judge", str(judge_dir), "--human", str(small_demo), "--scores", str(scores), "--min-items", "20",
            "--no-progress", "--device", "cpu"]  # fmt: skip
    assert calibrate_main([*args, "--selective", "--agreement", "0.8", "--delta", "0.2"]) == 0
    printed = capsys.readouterr().out
    assert "Selective evaluation: agreement >= 80%" in printed and "selective.json" in printed
    card = read_card(judge_dir)
    sel = read_selective(judge_dir / "selective.json")
    assert card.selective is not None and card.selective.fingerprint == sel.fingerprint()
    assert (
        sel.calibration
        == read_calibration(judge_dir / "calibration.json").fingerprint()
        == card.calibration.fingerprint
    )
    assert sel.agreement == 0.8 and sel.delta == 0.2 and "*" in sel.pointwise
    out = tmp_path / "marked"
    assert score_main([str(small_demo), "--judge", str(judge_dir), "--out", str(out), "--no-progress", "--limit", "2",
                       "--device", "cpu"]) == 0  # fmt: skip
    assert all(
        isinstance(r["trusted"], bool) for r in _records(out / "scores.jsonl") if r["metric"] == "judge"
    )
    # A new calibration without --selective: the old thresholds no longer fit it, and go.
    assert calibrate_main(args) == 0
    assert read_card(judge_dir).calibration is not None and read_card(judge_dir).selective is None
    assert not (judge_dir / "selective.json").exists()


def test_judge_calibrate_selective_plan_prints_the_plan_and_writes_nothing(
    judge_dir, calibrated, small_demo, capsys
):
    before = {p.name: p.read_bytes() for p in judge_dir.iterdir() if p.is_file()}
    scores = judge_dir / "calibration" / "scores.jsonl"
    args = ["--judge", str(judge_dir), "--human", str(small_demo), "--scores", str(scores), "--min-items", "20",
            "--no-progress", "--device", "cpu", "--selective", "--plan", "--agreement", "0.6"]  # fmt: skip
    assert calibrate_main(args) == 0
    printed = capsys.readouterr().out
    assert "Plan for a promise of 60% agreement" in printed and "observed agreement" in printed
    assert "nothing written" in printed
    assert {p.name: p.read_bytes() for p in judge_dir.iterdir() if p.is_file()} == before


def test_judge_calibrate_refuses_scores_of_another_judge_or_calibrated_ones(
    judge_dir, calibrated, small_demo, tmp_path, capsys
):
    """--scores must be this judge's raw scores: another judge's (here tiny:seed=3) or calibrated ones would be
    fitted and written into this judge's card, and every later score would rest on them (issue 38's review).
    Nothing in the judge folder changes."""
    before = {p.name: p.read_bytes() for p in judge_dir.iterdir() if p.is_file()}
    other, mine = tmp_path / "other", tmp_path / "calibrated"
    assert score_main([str(small_demo), "--judge", "tiny:seed=3", "--rubric", "mmie", "--out", str(other),
                       "--no-progress", "--device", "cpu", "--criteria", "overall"]) == 0  # fmt: skip
    assert score_main([str(small_demo), "--judge", str(judge_dir), "--out", str(mine), "--no-progress",
                       "--device", "cpu"]) == 0  # fmt: skip
    capsys.readouterr()
    for scores, said in ((other, "scored by another judge (tiny:seed=3"), (mine, "a calibrated score")):
        code = calibrate_main(["--judge", str(judge_dir), "--human", str(small_demo), "--scores",
                               str(scores / "scores.jsonl"), "--min-items", "20", "--no-progress"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2 and said in err and "--scores" in err and "Traceback" not in err, err
    assert {p.name: p.read_bytes() for p in judge_dir.iterdir() if p.is_file()} == before
