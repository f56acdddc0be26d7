"""MMRA metrics: the official demo's extraction, its row-order bug, skipped rows, strict mode, summary."""

from __future__ import annotations

import pytest

from judge.benchmarks import score_predictions, summarize
from judge.benchmarks.mmra import extract_option_official, extract_yes_no_official
from judge.core.schema import PredictionRecord

OPTS = ["cat", "dog", "cow", "pig"]


def row(
    rid: str,
    response: str | None,
    answer: str,
    qa_type: str = "Choice QA",
    task: str = "UsageSimilarity",
    model: str = "m",
) -> PredictionRecord:
    meta = {"qa_type": qa_type}
    if response is None:
        meta["response_missing"] = True
    return PredictionRecord(
        id=rid,
        benchmark="MMRA",
        task=task,
        model=model,
        question="q",
        response=response or "",
        answer=answer,
        choices=None if qa_type == "True or false QA" else OPTS,
        meta=meta,
    )


def scores(records, mode="official"):
    return [s.score for s in score_predictions(records, mode=mode)]


# ----------------------------------------------------------------------------- official extraction


def test_parenthesised_letters_come_first():
    assert extract_option_official("(B) is right; A and A are not") == "B"
    assert extract_option_official("A or C, A again") == "A"  # most frequent


def test_latest_first_appearance_wins_ties():
    assert extract_option_official("A good choice is C") == "C"
    assert extract_option_official("B, C, B, C") == "C"  # tie 2-2: C first appears later
    assert extract_option_official("C then B") == "B"


def test_capitals_only_and_a_to_d():
    assert extract_option_official("a cat") is None
    assert extract_option_official("E is best") is None
    assert extract_option_official("I don't know") is None


def test_yes_and_yes_count_apart():
    # As written: Yes 1, yes 1, No 1 -> a three-way tie, and "No" appears first last.
    assert extract_yes_no_official("Yes. yes. No.") == "No"
    # Case-insensitively "yes" would win 2 to 1; the strict extractor reads the leading "Yes.".
    rec = row("1", "Yes. yes. No.", "Yes", "True or false QA")
    assert scores([rec]) == [0.0]
    assert scores([rec], "strict") == [1.0]


def test_score_ignores_case_and_no_answer_is_zero():
    assert scores([row("1", "yes", "Yes", "True or false QA")]) == [1.0]
    assert scores([row("1", "(b)", "B")]) == [0.0]  # lower case in parentheses is not matched
    s = score_predictions([row("1", "I don't know", "B")])[0]
    assert s.score == 0.0 and s.details["extracted"] is None


# ----------------------------------------------------------------------------- the Chooice QA bug


def test_chooice_rows_carry_the_previous_extraction_so_order_matters():
    right_before = row("1", "B", "B")
    tf_before = row("2", "Yes", "Yes", "True or false QA")
    misspelt = row("3", "The answer is (C)", "C", "Chooice QA")
    misspelt_b = row("3", "The answer is (C)", "B", "Chooice QA")
    # Carries "B" from the Choice QA row before it: right only when its own gold is B.
    assert scores([tf_before, right_before, misspelt_b]) == [1.0, 1.0, 1.0]
    assert scores([tf_before, right_before, misspelt]) == [1.0, 1.0, 0.0]
    # The same three rows in another order: it now carries "Yes".
    assert scores([right_before, tf_before, misspelt_b]) == [1.0, 1.0, 0.0]
    s = score_predictions([right_before, misspelt])[1]
    assert s.details["carried_over_from"] == "1" and s.details["extracted"] == "B"
    # Strict extracts the row itself, whatever the order.
    assert scores([tf_before, right_before, misspelt], "strict") == [1.0, 1.0, 1.0]
    assert scores([right_before, tf_before, misspelt], "strict") == [1.0, 1.0, 1.0]


def test_first_row_chooice_is_unscorable():
    s = score_predictions([row("1", "C", "C", "Chooice QA")])[0]
    assert s.score is None and s.status == "unscorable" and "NameError" in s.reason
    assert scores([row("1", "C", "C", "Chooice QA")], "strict") == [1.0]


def test_carry_over_is_per_model():
    a = row("1", "B", "B", model="m1")
    b = row("2", "C", "C", "Chooice QA", model="m2")
    assert score_predictions([a, b])[1].score is None  # m2 has no earlier row of its own


# ----------------------------------------------------------------------------- skipped rows


def test_rows_without_response_are_skipped_and_do_not_update_the_carry_over():
    recs = [row("1", "A", "A"), row("2", None, "D"), row("3", "whatever", "A", "Chooice QA")]
    out = score_predictions(recs)
    assert out[1].score is None and out[1].status == "unscorable" and "skips" in out[1].reason
    assert out[2].details["carried_over_from"] == "1" and out[2].score == 1.0
    rows = summarize(out)
    (task,) = [r for r in rows if r["level"] == "task"]
    assert (task["value"], task["n"], task["n_scored"], task["n_unscorable"]) == (100.0, 3, 2, 1)


# ----------------------------------------------------------------------------- strict mode


def test_strict_article_a_and_lowercase_a():
    assert extract_option_official("A good choice is C") == "C"
    s = score_predictions([row("1", "A good choice is C", "C")], mode="strict")[0]
    assert s.details["extracted"] == "C" and s.score == 1.0
    s = score_predictions([row("1", "a", "A")], mode="strict")[0]
    assert s.details["extracted"] is None and s.details["no_answer"] is True and s.score == 0.0


@pytest.mark.parametrize("resp", ["The answer is B", "Answer: (B)", "**B**", "B.", "dog"])
def test_strict_common_forms(resp):
    assert scores([row("1", resp, "B")], "strict") == [1.0]


def test_strict_empty_response_is_no_answer():
    s = score_predictions([row("1", "", "B")], mode="strict")[0]
    assert s.score == 0.0 and s.details["no_answer"] is True


# ----------------------------------------------------------------------------- summary


def test_summary_per_task_official_and_overall_toolkit_and_disagreements():
    recs = [
        row("1", "B", "B", task="SubEvent"),
        row("2", "The answer is (C)", "C", "Chooice QA", task="SubEvent"),  # official carries B -> 0
        row("3", "Yes", "Yes", "True or false QA", task="Environment"),
        row("4", None, "No", "True or false QA", task="Environment"),  # skipped
    ]
    rows = summarize(score_predictions(recs, mode="both"))
    by = {(r["mode"], r["level"], r["group"]): r for r in rows}
    assert by[("official", "task", "SubEvent")]["value"] == 50.0
    assert by[("official", "task", "SubEvent")]["source"] == "official"
    assert by[("strict", "task", "SubEvent")]["value"] == 100.0
    assert by[("official", "task", "Environment")]["value"] == 100.0
    overall = by[("official", "overall", "all")]
    assert overall["source"] == "judge toolkit" and overall["value"] == pytest.approx(200 / 3)
    assert overall["metric"] == "mmra.accuracy" and overall["benchmark"] == "mmra"
    dis = by[("official vs strict", "overall", "disagreements")]
    assert (dis["value"], dis["n"], dis["n_scored"], dis["n_unscorable"]) == (1, 4, 3, 1)
