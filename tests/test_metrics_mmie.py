"""MMIE: which items go to the judge, the toolkit's multiple-choice accuracy, the judge summary;
and the registry's public API (modes, mixed benchmarks, order)."""

from __future__ import annotations

import pytest

from judge.benchmarks import get_benchmark, metric_for, needs_judge, score_predictions, summarize
from judge.benchmarks.extract import extract_choice, option_keys
from judge.benchmarks.mmie import judge_summary
from judge.core.errors import ConfigError
from judge.core.schema import PredictionRecord, ScoreRecord


def item(rid: str, response: str, *, choices=None, answer=None, task="MSR", benchmark="mmie", **meta):
    return PredictionRecord(
        id=rid,
        benchmark=benchmark,
        task=task,
        question="q",
        response=response,
        choices=choices,
        answer=answer,
        meta=meta,
    )


def judge_score(rid: str, value: float | None, task: str = "SA", criterion: str = "overall") -> ScoreRecord:
    if value is None:
        return ScoreRecord(
            id=rid,
            benchmark="mmie",
            task=task,
            metric="judge",
            criterion=criterion,
            score=None,
            status="unscorable",
            reason="missing image",
        )
    return ScoreRecord(id=rid, benchmark="mmie", task=task, metric="judge", criterion=criterion, score=value)


def test_needs_judge():
    assert needs_judge(item("SA_1", "a story", task="SA")) is True
    assert needs_judge(item("MSR_1", "B", choices=["1", "2"], answer="B")) is False
    assert needs_judge(item("MSR_2", "B", options={"A": "1", "B": "2"}, answer="B")) is False
    assert needs_judge(item("x", "y", benchmark="SomethingElse")) is True  # no rule-based metric
    assert needs_judge(item("x", "y", benchmark="MileBench")) is False


def test_registry_case_insensitive_and_metric_for():
    assert get_benchmark("MileBench") is get_benchmark("milebench")
    assert get_benchmark("nope") is None
    assert metric_for(item("SA_1", "x", task="SA")) is None
    assert metric_for(item("MSR_1", "B", choices=["1", "2"], answer="B")) == "mmie.mc_accuracy"
    assert (
        metric_for(item("d/1", "x", benchmark="milebench", task="TextNeedleInAHaystack"))
        == "milebench.needle"
    )
    assert "ActionLocalization" in get_benchmark("milebench").tasks


@pytest.mark.parametrize("mode", ["official", "strict", "both"])
def test_mc_scored_once_in_the_toolkits_mode_never_called_official(mode):
    # MMIE publishes no rule-based scorer: whatever mode is asked for, one record in mode "toolkit".
    rec = item("MSR_1", "The answer is B", choices=["12", "13", "14"], answer="B")
    (s,) = score_predictions([rec], mode=mode)
    assert s.metric == "mmie.mc_accuracy" and s.score == 1.0
    assert s.producer["extractor"] == "strict" and s.producer["mode"] == "toolkit"


@pytest.mark.parametrize("gold", ["B", "(B)", "13", "B. 13"])
def test_mc_gold_as_key_or_text(gold):
    (s,) = score_predictions([item("MSR_1", "13", choices=["12", "13", "14"], answer=gold)], mode="strict")
    assert s.details["gold"] == "B" and s.score == 1.0


def test_mc_gold_from_reference_and_unknown_gold_unscorable():
    rec = PredictionRecord(
        id="MSR_1",
        benchmark="mmie",
        task="MSR",
        question="q",
        response="C",
        choices=["1", "2", "3"],
        reference="3",
    )
    assert score_predictions([rec])[0].score == 1.0
    (s,) = score_predictions([item("MSR_2", "A", choices=["1", "2"], answer="7")])
    assert s.score is None and s.status == "unscorable" and "not one of the options" in s.reason


def test_mc_refusal_is_no_answer():
    (s,) = score_predictions(
        [item("MSR_1", "I'm not able to tell. Sorry.", choices=["1", "2"], answer="A")], mode="strict"
    )
    assert s.score == 0.0 and s.details["no_answer"] is True and s.details["how"] == "no answer (refusal)"


def test_open_ended_and_unknown_benchmarks_produce_no_record_and_order_is_kept():
    recs = [
        item("SA_1", "story", task="SA"),
        item("d/1", "42", benchmark="milebench", task="TextNeedleInAHaystack", answer="42"),
        item("x", "y", benchmark="other"),
        item("MSR_1", "A", choices=["1", "2"], answer="A"),
        item(
            "r1", "B", benchmark="mmra", task="SubEvent", choices=["x", "y"], answer="B", qa_type="Choice QA"
        ),
    ]
    out = score_predictions(recs, mode="both")
    assert [(s.id, s.producer["mode"]) for s in out] == [
        ("d/1", "official"),
        ("d/1", "strict"),
        ("MSR_1", "toolkit"),
        ("r1", "official"),
        ("r1", "strict"),
    ]
    assert [s.benchmark for s in out] == ["milebench", "milebench", "mmie", "mmra", "mmra"]


def test_bad_mode_refused():
    with pytest.raises(ConfigError, match="official, strict, both"):
        score_predictions([], mode="lenient")


def test_judge_summary_mean_and_percent():
    recs = [
        judge_score("SA_1", 6.0),
        judge_score("SA_2", 3.0),
        judge_score("SA_3", None),
        judge_score("PBL_1", 1.5, task="PBL"),
        judge_score("SA_1", 2.0, criterion="text_quality"),
    ]
    js = judge_summary(recs)
    assert js["mean"] == pytest.approx(3.5) and js["percent"] == pytest.approx(3.5 / 6 * 100)
    assert (js["n"], js["n_scored"], js["n_unscorable"]) == (4, 3, 1)
    rows = summarize(recs)
    by = {(r["level"], r["group"]): r for r in rows}
    sa = by[("task", "SA")]
    assert sa["value"] == pytest.approx(75.0) and sa["mean_0_6"] == pytest.approx(4.5)
    assert sa["mode"] == "judge" and sa["source"] == "judge toolkit" and sa["n_unscorable"] == 1
    assert by[("overall", "all")]["value"] == pytest.approx(3.5 / 6 * 100)
    assert judge_summary([])["mean"] is None


def test_mc_summary_rows_are_the_toolkits():
    recs = [
        item("MSR_1", "A", choices=["1", "2"], answer="A"),
        item("MSR_2", "A", choices=["1", "2"], answer="B"),
    ]
    rows = summarize(score_predictions(recs, mode="both"))
    (overall,) = [r for r in rows if r["level"] == "overall"]
    assert overall["value"] == 50.0 and overall["source"] == "judge toolkit" and overall["mode"] == "toolkit"
    assert not [r for r in rows if r["mode"] == "official" or r["group"] == "disagreements"]


def test_option_keys_after_z():
    assert option_keys(28)[-3:] == ["Z", "AA", "AB"]
    assert option_keys(53)[-1] == "BA"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is B", "B"),
        ("Answer: (C)", "C"),
        ("**B**", "B"),
        ("B.", "B"),
        ("dog", "B"),
        ("it is a truck, not a car", "D"),
        ("the answer is b", "B"),
        ("B is correct", "B"),
        ("I think C", "C"),
        ("The answer is A because it barks", "A"),
        ("A good choice is C", "C"),
        ("rosemary", None),
    ],
)
def test_strict_extractor(text, expected):
    assert extract_choice(text, ["car", "dog", "cow", "truck"]).answer == expected


def test_strict_extractor_no_answers():
    opts = ["car", "dog", "cow"]
    assert extract_choice("", opts).how == "no answer (empty response)"
    assert extract_choice("I cannot determine that.", opts).how == "no answer (refusal)"
    assert extract_choice("B or C", opts).answer is None
    assert extract_choice("a car or a dog", opts).how.startswith("no answer (ambiguous")
    assert extract_choice("rosemary", ["rose", "rosemary"]).answer == "B"
    assert extract_choice("dark red", ["red", "dark red"]).answer == "B"
