"""Which criteria a run scores: ``--criteria`` (judge-score, judge-audit), and by default those the judge was
trained on, as its card says (a judge trained on the overall score only is not asked for readings it never
learned: they would be noise, and its calibration would say so with intervals as wide as the scale). The
calibration judge-calibrate fits is fitted on those criteria too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.cli.audit import main as audit_main
from judge.cli.calibrate import main as calibrate_main
from judge.cli.score import main as score_main

pytestmark = pytest.mark.usefixtures("one_thread")


def _judge_folder(path, rubric, criteria):
    """A judge folder as judge-train writes one (the seeded tiny model as its merged weights), whose card says
    it was trained on ``criteria`` (``data.criteria`` of its run config; None: the card does not say)."""
    from judge.models.card import CardRubric, JudgeCard, write_card
    from judge.models.loading import save_tiny_scorer

    save_tiny_scorer(path / "merged", seed=0)
    card = JudgeCard(
        base_model="tiny:seed=0",
        finetune="full",
        rubric=CardRubric(name=rubric.name, version=rubric.version, hash=rubric.hash),
        scale=rubric.scale.values,
        target_format="score",
        config=None if criteria is None else {"data": {"criteria": criteria}},
    )
    write_card(path, card)
    return path


@pytest.fixture(scope="module")
def overall_judge(tmp_path_factory, rubric):
    return _judge_folder(tmp_path_factory.mktemp("overall") / "judge", rubric, "overall")


def _scored(out):
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return [r for r in rows if r["metric"] == "judge"]


def _criteria_by_family(rows, small_demo):
    task = {json.loads(x)["id"]: json.loads(x)["task"] for x in small_demo.read_text().splitlines()}
    out: dict[str, set] = {}
    for r in rows:
        out.setdefault(task[r["id"]], set()).add(r["criterion"])
    return out


def test_criteria_scores_those_and_overall_only(small_demo, tmp_path, capsys):
    out = tmp_path / "some"
    code = score_main([str(small_demo), "--judge", "tiny", "--rubric", "mmie", "--criteria", "text_quality",
                       "--out", str(out), "--no-progress"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    by_family = _criteria_by_family(_scored(out), small_demo)
    # text_quality is a criterion of SA and PBL; MSR has none of that name: its overall alone.
    assert by_family == {
        "SA": {"overall", "text_quality"},
        "PBL": {"overall", "text_quality"},
        "MSR": {"overall"},
    }
    # The same scores as a full run's, for the criteria both have.
    full = tmp_path / "full"
    assert score_main([str(small_demo), "--judge", "tiny", "--rubric", "mmie", "--out", str(full),
                       "--no-progress"]) == 0  # fmt: skip
    every = {(r["id"], r["model"], r["criterion"]): r["score"] for r in _scored(full)}
    assert len(every) > len(_scored(out))
    for r in _scored(out):
        assert r["score"] == pytest.approx(every[(r["id"], r["model"], r["criterion"])], abs=1e-4)


def test_an_unknown_criterion_is_refused_before_anything_is_written(small_demo, tmp_path, capsys):
    out = tmp_path / "bad"
    code = score_main([str(small_demo), "--judge", "tiny", "--rubric", "mmie", "--criteria", "text_qualty",
                       "--out", str(out), "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: --criteria: 'text_qualty' is not a criterion of rubric 'mmie'"), err
    assert "text_quality" in err and "Traceback" not in err
    assert not out.exists()


def test_a_judge_trained_on_overall_is_asked_overall_by_default(overall_judge, small_demo, tmp_path, capsys):
    out = tmp_path / "default"
    assert (
        score_main([str(small_demo), "--judge", str(overall_judge), "--out", str(out), "--no-progress"]) == 0
    )
    err = capsys.readouterr().err
    assert "scoring overall only: the criteria the judge was trained on" in err
    rows = _scored(out)
    assert rows and {r["criterion"] for r in rows} == {"overall"}
    # Asked for more, it scores them and says they are untrained readings.
    more = tmp_path / "more"
    assert score_main([str(small_demo), "--judge", str(overall_judge), "--criteria", "text_quality",
                       "--out", str(more), "--no-progress"]) == 0  # fmt: skip
    assert "the judge was not trained on text_quality" in capsys.readouterr().err
    assert {r["criterion"] for r in _scored(more)} == {"overall", "text_quality"}


def test_a_card_that_does_not_say_means_every_criterion(tmp_path, rubric, small_demo, capsys):
    judge = _judge_folder(tmp_path / "judge", rubric, None)
    out = tmp_path / "out"
    assert score_main([str(small_demo), "--judge", str(judge), "--out", str(out), "--no-progress"]) == 0
    assert "scoring overall only" not in capsys.readouterr().err
    assert _criteria_by_family(_scored(out), small_demo)["SA"] == set(rubric.families["SA"].criterion_ids)


def test_calibration_and_audit_follow_the_trained_criteria(tmp_path, rubric, small_demo, capsys):
    judge = _judge_folder(tmp_path / "judge", rubric, "overall")
    code = calibrate_main(["--judge", str(judge), "--human", str(small_demo), "--min-items", "20",
                           "--no-progress", "--device", "cpu"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    fitted = [json.loads(x) for x in (judge / "calibration" / "scores.jsonl").read_text().splitlines()]
    assert fitted and {r["criterion"] for r in fitted} == {"overall"}
    out = tmp_path / "audit"
    code = audit_main([str(small_demo), "--judge", str(judge), "--perturb", "blank-images", "--bootstrap", "50",
                       "--out", str(out), "--no-progress"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    audit = json.loads((out / "audit.json").read_text())
    assert {c["criterion"] for c in audit["cells"]} == {"overall"}
    assert {r["criterion"] for r in _scored(out)} == {"overall"}


# ----------------------------------------------------------------------------- one rule on every path (issue 38)

_ITEM = {"id": "a", "task": "SA", "question": [{"type": "text", "text": "Tell a story."}],
         "response": [{"type": "text", "text": "Once upon a time."}]}  # fmt: skip


def test_the_api_scores_the_trained_criteria_by_default_and_marks_the_others(overall_judge):
    from judge import Judge

    j = Judge.load(str(overall_judge), device="cpu")
    (default,) = j.score([_ITEM])
    assert list(default.criteria) == ["overall"] and default["overall"].trained is None
    (asked,) = j.score([_ITEM], criteria=["text_quality", "overall"])
    assert asked["text_quality"].trained is False and asked["text_quality"].status == "ok"
    assert asked["overall"].trained is None and "trained" not in asked["overall"].model_dump()
    assert asked["text_quality"].model_dump()["trained"] is False
    (every,) = j.score([_ITEM], criteria="all")
    assert {c for c, r in every.criteria.items() if r.trained is False} == set(every.criteria) - {"overall"}


def test_a_query_gets_exactly_the_criteria_it_names_and_a_run_adds_overall_as_the_readme_says(overall_judge):
    """judge-score --criteria text_quality writes overall too (a run's leaderboard reads it: tested above);
    Judge.score(criteria=["text_quality"]) answers text_quality only. The README says both rules, where the
    reader looks for which criteria a call scores (it said the CLI's only, so the API read as a mismatch): since
    the README became a front door, that is judge-score's page, docs/scoring.md ("Which criteria")."""
    from judge import Judge

    page = Path(__file__).resolve().parents[1] / "docs" / "scoring.md"
    readme = " ".join(page.read_text(encoding="utf-8").split())
    assert "a run always has `overall`, which its leaderboard and audits read" in readme
    assert (
        'A single query names exactly what it gets: `Judge.score(items, criteria=["text_quality"])`, '
        "`/v1/score` and a reward function return the criteria named and no other" in readme
    )
    j = Judge.load(str(overall_judge), device="cpu")
    (one,) = j.score([_ITEM], criteria=["text_quality"])
    (two,) = j.score([_ITEM], criteria=["text_quality", "overall"])
    assert list(one.criteria) == ["text_quality"] and list(two.criteria) == ["text_quality", "overall"]


def test_v1_score_scores_the_trained_criteria_by_default_and_marks_the_others(overall_judge):
    import httpx
    from serving import serving_in_process

    from judge.serve.config import ServeConfig
    from judge.serve.service import JudgeService

    service = JudgeService(ServeConfig(judge=str(overall_judge), max_wait_ms=0, allow_unauthenticated=True))
    service.load()
    try:
        with serving_in_process(service) as url:
            default = httpx.post(url + "/v1/score", json={"items": [_ITEM]}, timeout=120)
            asked = httpx.post(
                url + "/v1/score", json={"items": [_ITEM], "criteria": ["text_quality"]}, timeout=120
            )
    finally:
        service.close()
    assert default.status_code == 200, default.text
    scores = default.json()["results"][0]["scores"]
    assert list(scores) == ["overall"] and "trained" not in scores["overall"]
    assert asked.status_code == 200, asked.text
    tq = asked.json()["results"][0]["scores"]["text_quality"]
    assert tq["status"] == "ok" and tq["trained"] is False


def test_the_chat_route_marks_an_untrained_criterion_as_v1_score_does(overall_judge):
    """The rubric prompt of a criterion the judge never learned, sent to /v1/chat/completions: the reply's
    `judge` block says `trained: false`, as /v1/score's answer does; the trained one's says nothing."""
    import httpx
    from serving import serving_in_process

    from judge.serve.config import ServeConfig
    from judge.serve.judge_prompt import judge_chat_messages
    from judge.serve.service import JudgeService

    item = {**_ITEM, "benchmark": "mmie"}
    service = JudgeService(ServeConfig(judge=str(overall_judge), max_wait_ms=0, allow_unauthenticated=True))
    service.load()
    blocks = {}
    try:
        with serving_in_process(service) as url:
            for crit in ("text_quality", "overall"):
                body = {"model": "judge", "max_tokens": 1, "temperature": 0,
                        "messages": judge_chat_messages("mmie", item, crit)}  # fmt: skip
                r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
                assert r.status_code == 200, r.text
                blocks[crit] = r.json()["judge"]
    finally:
        service.close()
    assert (
        blocks["text_quality"]["criterion"] == "text_quality" and blocks["text_quality"]["trained"] is False
    )
    assert blocks["overall"]["criterion"] == "overall" and "trained" not in blocks["overall"]


def test_judge_score_marks_a_criterion_asked_for_by_name(overall_judge, small_demo, tmp_path, capsys):
    out = tmp_path / "asked"
    code = score_main([str(small_demo), "--judge", str(overall_judge), "--criteria", "text_quality",
                       "--limit", "2", "--out", str(out), "--no-progress"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert "was not trained on text_quality" in capsys.readouterr().err
    rows = _scored(out)
    assert {r["criterion"]: r.get("trained") for r in rows if r["criterion"] == "text_quality"} == {
        "text_quality": False
    }
    assert all("trained" not in r for r in rows if r["criterion"] == "overall")
