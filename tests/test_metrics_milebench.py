"""MileBench metrics: the official evaluate.py reproduced quirk by quirk, the strict mode, the summary.

Every expected value below is worked out by hand from the official rules of MileBench's
``evaluate.py`` and ``score.py`` at the repository's head (9583e1f, 2024-07-11); the comments show
the working. Where the first commit (730e930) scored differently, a test says so.
"""

from __future__ import annotations

import pytest

from judge.benchmarks import score_predictions, summarize
from judge.benchmarks.milebench import (
    CATEGORIES,
    DATASETS,
    OFFICIAL_REF,
    ROUGE_VERSION,
    dataset_category,
    image_quantity_level,
    match_choice_official,
    normalize_answer,
    official_key,
    official_options,
)
from judge.core.schema import PredictionRecord


def mb(
    pred: str | None,
    gold: str,
    choices: list[str] | None = None,
    *,
    dataset: str = "ActionLocalization",
    question_type: str | None = None,
    n_images: int = 3,
    rid: str = "1",
    model: str = "m",
    **meta,
) -> PredictionRecord:
    qt = question_type or ("multi-choice" if choices else "open-ended")
    m = {"dataset": dataset, "question_type": qt, "n_images": n_images, **meta}
    if pred is None:
        m["response_missing"] = True
    return PredictionRecord(
        id=f"{dataset}/{rid}",
        benchmark="milebench",
        task=dataset,
        model=model,
        question="q",
        response=pred or "",
        answer=gold,
        choices=choices,
        meta=m,
    )


def one(rec: PredictionRecord, mode: str = "official"):
    (s,) = score_predictions([rec], mode=mode)
    return s


def official_pick(pred: str, choices: list[str]) -> str:
    """What the official pipeline extracts: everything normalized first, then match_choice."""
    return match_choice_official(
        normalize_answer(pred), official_options([normalize_answer(c) for c in choices])
    )


# ----------------------------------------------------------------------------- datasets


def test_29_datasets_in_three_categories():
    assert len(DATASETS) == 29
    assert list(CATEGORIES) == ["Realistic Temporal", "Realistic Semantic", "Diagnostic"]  # score.py's names
    assert [len(v) for v in CATEGORIES.values()] == [13, 13, 3]
    assert dataset_category("ActionLocalization") == "Realistic Temporal"
    assert dataset_category("ActionSequence") == "Realistic Temporal"
    assert dataset_category("CLEVR-Change-adv") == "Realistic Semantic"
    assert dataset_category("GPR1200") == "Diagnostic"
    assert dataset_category("NotABenchmark") is None


def test_snake_case_temporal_names_are_not_the_heads():
    # The first commit's score.py spelt them action_sequence; the head's collects ActionSequence only.
    assert dataset_category("action_sequence") is None
    assert dataset_category("action_localization") is None
    s = one(mb("B", "dog", ["cat", "dog"], dataset="action_sequence"))
    assert s.details["category"] is None


def test_producer_names_the_official_commit():
    s = one(mb("B", "dog", ["cat", "dog"]))
    assert "9583e1f" in OFFICIAL_REF and OFFICIAL_REF in s.producer["version"]


@pytest.mark.parametrize("n, level", [(1, "Few"), (5, "Few"), (6, "Medium"), (31, "Medium"), (32, "Many")])
def test_image_quantity_levels(n, level):
    assert image_quantity_level(n) == level


@pytest.mark.parametrize(
    "dataset, args",
    [
        ("ActionLocalization", dict(pred="B", gold="dog", choices=["cat", "dog"])),  # multi-choice
        ("TextNeedleInAHaystack", dict(pred="42", gold="42")),  # needle
        ("ALFRED", dict(pred="a cat", gold="a cat")),  # ROUGE-L
    ],
)
@pytest.mark.parametrize("mode", ["official", "strict"])
def test_level_counted_from_images_in_every_evaluator(dataset, args, mode):
    # 7 images is Medium by count, whatever a label in the dataset file says: the head's
    # get_image_quantity_level(len(images_path)) in all three evaluators.
    s = one(mb(args["pred"], args["gold"], args.get("choices"), dataset=dataset, n_images=7), mode)
    assert s.details["image_quantity_level"] == "Medium"
    assert "image_quantity_level_official" not in s.details


# ----------------------------------------------------------------------------- normalization


def test_normalize_character_rule():
    # "," stands next to a space -> deleted; "!" never does -> replaced by a space, then stripped.
    assert normalize_answer("Hello, World!") == "hello world"
    # "-" is not next to a space -> replaced by a space; next to one -> deleted everywhere.
    assert normalize_answer("x-ray") == "x ray"
    assert normalize_answer("x-ray - scan") == "xray  scan"


def test_normalize_digit_comma_digit_deletes_every_punctuation_character():
    # "1,000" anywhere in the text: "-" is deleted (not spaced) although no space touches it.
    assert normalize_answer("x-ray 1,000") == "xray 1000"
    # "1, 000" is no digit-comma-digit: "," touches a space (deleted), "-" does not (spaced).
    assert normalize_answer("x-ray 1, 000") == "x ray 1 000"


def test_normalize_only_first_32_periods_removed():
    text = "a. " * 34  # 34 periods, none followed by a digit
    out = normalize_answer(text)
    assert out.count(".") == 2
    assert out.endswith("a. a.")
    assert normalize_answer("x." * 40).count(".") == 8


def test_normalize_period_before_digit_kept_and_lookbehind_ineffective():
    assert normalize_answer("pi is 3.14.") == "pi is 3.14"
    # A period after a digit and before a non-digit is still removed (the lookbehind never worked).
    assert normalize_answer("version 3. done") == "version 3 done"


def test_normalize_quotes_stripped_then_lowercased():
    assert normalize_answer("'Quoted'") == "quoted"
    # "?" becomes a trailing space first, so the closing quote is not at the end when quotes are stripped.
    assert normalize_answer("'Quoted'?") == "quoted'"
    assert normalize_answer('  "Say"\n\tHi ') == "say  hi"


# ----------------------------------------------------------------------------- official option extraction


def test_empty_prediction_returns_c():
    assert official_pick("", ["cat", "dog", "cow"]) == "C"
    assert one(mb("", "cow", ["cat", "dog", "cow"])).score == 1.0  # right by accident when C is the answer


def test_empty_prediction_returns_c_even_with_two_options():
    s = one(mb("", "dog", ["cat", "dog"]))
    assert s.details["extracted"] == "C" and s.details["gold"] == "B" and s.score == 0.0


def test_the_answer_is_b_gives_ab():
    # No "<key> <text>" or option text matches; every key letter of the text is kept: a(nswer) + b.
    assert official_pick("The answer is B", ["cat", "dog", "cow", "pig"]) == "AB"
    s = one(mb("The answer is B", "dog", ["cat", "dog", "cow", "pig"]))
    assert s.score == 0.0
    assert one(mb("The answer is B", "dog", ["cat", "dog", "cow", "pig"]), "strict").score == 1.0


def test_rosemary_prefix_option_wins():
    # Leftmost match, and at one position the first option in option order: "rose" before "rosemary".
    assert official_pick("rosemary", ["rose", "rosemary"]) == "A"
    rec = mb("rosemary", "rosemary", ["rose", "rosemary"])
    assert one(rec).score == 0.0
    assert one(rec, "strict").score == 1.0


def test_option_with_regex_character_never_matched_by_text():
    # "3.5" is escaped to "3\.5" and compared with the unescaped match "3.5": never equal.
    assert official_pick("3.5", ["2", "3.5"]) == ""
    assert one(mb("3.5", "3.5", ["2", "3.5"])).score == 0.0
    # With its key in front, rule 2 ("<key> <text>") still finds it.
    assert official_pick("B 3.5", ["2", "3.5"]) == "B"
    assert one(mb("3.5", "3.5", ["2", "3.5"]), "strict").score == 1.0


def test_article_a_picks_option_a():
    # "a car" is "<key A> <text of A>": the article matches option A.
    assert official_pick("It is a truck, not a car", ["car", "truck"]) == "A"
    rec = mb("It is a truck, not a car", "truck", ["car", "truck"])
    assert one(rec).score == 0.0
    s = one(rec, "strict")
    assert s.details["extracted"] == "B" and s.score == 1.0


def test_one_character_prediction_is_a_key():
    assert official_pick("c", ["x", "y", "z"]) == "C"
    assert official_pick("(B)", ["x", "y", "z"]) == "B"  # normalized to "b", then rule 4


def test_two_character_prediction_is_a_key_when_there_are_that_many_options():
    choices = [f"w{i:02d}" for i in range(30)]  # keys A..Z, AA..AD
    # Rule 4 of the head takes a 2-character key ("ab" -> AB). (For two letters rule 5 would concatenate the
    # same keys, so this change of the head moves no score; it is reproduced all the same.)
    assert official_pick("ab", choices) == "AB"
    assert official_pick("ad", choices) == "AD"
    # "zz" is no key: rule 5 keeps each character that is a key -> "ZZ".
    assert official_pick("zz", choices) == "ZZ"
    rec = mb("AC", "w28", choices)
    s = one(rec)
    assert s.details["extracted"] == "AC" and s.details["gold"] == "AC" and s.score == 1.0
    # With 3 options "ab" is no key: rule 5 -> "AB", wrong.
    assert official_pick("ab", ["x", "y", "z"]) == "AB"


def test_normalized_duplicate_choices_move_the_gold_letter():
    # "Cat!" and "cat" both normalize to "cat": the gold is the FIRST index -> A, though the answer is B.
    rec = mb("B", "cat", ["Cat!", "cat", "dog"])
    s = one(rec)
    assert s.details["gold"] == "A" and s.details["extracted"] == "B" and s.score == 0.0
    t = one(rec, "strict")
    assert t.details["gold"] == "B" and t.score == 1.0


def test_official_keys_after_z_are_two_letters():
    keys = list(official_options([str(i) for i in range(60)]))
    assert keys[:3] == ["A", "B", "C"] and keys[25:28] == ["Z", "AA", "AB"]
    assert keys[51:54] == ["AZ", "BA", "BB"]
    # Past 78 options the official char() keeps prefixing "B" to what follows "Z" in ASCII.
    assert official_key(77) == "BZ" and official_key(78) == "B["


def test_gold_beyond_z_scores_through_option_text():
    # GPR1200-style: 30 choices, the gold is the 29th (key AC). Rule 2 ("<key> <text>") returns only the
    # match's first character, so "AC w28" can never score; the option text alone goes through rule 3.
    # (Two-digit names: with "item2" beside "item28" the prefix quirk would pick item2.)
    choices = [f"item{i:02d}" for i in range(30)]
    assert official_pick("item28", choices) == "AC"
    assert one(mb("item28", "item28", choices, dataset="GPR1200")).score == 1.0
    assert official_pick("ac item28", choices) == "A"
    assert one(mb("ac item28", "item28", choices, dataset="GPR1200")).score == 0.0


def test_gold_not_in_choices_is_unscorable_not_zero():
    s = one(mb("A", "horse", ["cat", "dog"]))
    assert s.score is None and s.status == "unscorable" and "AssertionError" in s.reason


def test_null_response_is_unscorable():
    s = one(mb(None, "dog", ["cat", "dog"]))
    assert s.score is None and "pred_response is null" in s.reason


# ----------------------------------------------------------------------------- needle, MMCoQA, ROUGE-L


def test_needle_token_rule():
    ds = "TextNeedleInAHaystack"
    assert one(mb("The password is 42.", "42", dataset=ds)).score == 1.0
    assert one(mb("The password is 420", "42", dataset=ds)).score == 0.0
    assert one(mb("42-7", "42", dataset=ds)).score == 1.0  # "-" -> space: tokens "42", "7"
    s = one(mb("x 42", "42", dataset="ImageNeedleInAHaystack"))
    assert s.metric == "milebench.needle" and s.details["rule"] == "token"


def test_mmcoqa_substring_rule():
    assert one(mb("It is Parisian.", "Paris", dataset="MMCoQA")).score == 1.0
    assert one(mb("London", "Paris", dataset="MMCoQA")).score == 0.0
    assert one(mb("x", "y", dataset="MMCoQA")).metric == "milebench.mmcoqa"


def test_rouge_l_hand_checked():
    # One sentence each; words counted as sets: ref {the, cat, sat, on, mat} = 5 (the "the" twice counts once),
    # hyp {the, cat, sat} = 3, union LCS {the, cat, sat} = 3 -> R = 3/5, P = 1, F = 2*0.6/1.6 = 0.75.
    s = one(mb("The cat sat", "the cat sat on the mat", dataset="ALFRED"))
    assert s.metric == "milebench.rouge_l"
    assert s.score == pytest.approx(0.75, abs=1e-6)
    assert s.producer["version"] == f"rouge=={ROUGE_VERSION}" == "rouge==1.0.1"


def test_rouge_l_empty_prediction_scores_zero():
    assert one(mb("", "a cat", dataset="ALFRED")).score == 0.0
    assert one(mb("?!", "a cat", dataset="ALFRED")).score == 0.0  # normalizes to ""


def test_rouge_summary_level_differs_from_sentence_level_lcs():
    # Periods before a digit survive normalization, so rouge 1.0.1 splits "x 1.2 y" into the sentences
    # "x 1" and "2 y". Against the one-sentence hypothesis "2 y x 1": LCS("x 1", hyp) = "x 1",
    # LCS("2 y", hyp) = "2 y"; the union has 4 words of 4 (ref) and 4 (hyp): F = 1.
    s = one(mb("2 y x 1", "x 1.2 y", dataset="ALFRED"))
    assert s.score == pytest.approx(1.0, abs=1e-6)
    # A plain sentence-level LCS over whitespace tokens, by hand: ref [x, 1.2, y], hyp [2, y, x, 1];
    # the longest common subsequence is one token ("y" or "x"): P = 1/4, R = 1/3, F = 2PR/(P+R) = 2/7.
    p, r = 1 / 4, 1 / 3
    plain = 2 * p * r / (p + r)
    assert plain == pytest.approx(2 / 7)
    # Google's rouge_score tokenizes on non-alphanumerics: ref [x,1,2,y], hyp [2,y,x,1]: LCS 2, F = 0.5.
    assert abs(s.score - plain) > 0.5 and abs(s.score - 0.5) > 0.4


# ----------------------------------------------------------------------------- strict mode


@pytest.mark.parametrize("pred", ["The answer is B", "Answer: (B)", "**B**", "B.", "dog", "B. dog", "(B)"])
def test_strict_reads_common_forms(pred):
    s = one(mb(pred, "dog", ["cat", "dog", "cow"]), "strict")
    assert s.details["extracted"] == "B" and s.score == 1.0, s.details


@pytest.mark.parametrize("pred", ["", "I cannot determine this from the images.", "Sorry, I can't tell."])
def test_strict_refusals_and_empty_are_no_answer(pred):
    s = one(mb(pred, "cow", ["cat", "dog", "cow"]), "strict")
    assert s.score == 0.0 and s.status == "ok"
    assert s.details["no_answer"] is True and s.details["how"].startswith("no answer")
    assert s.producer["mode"] == "strict"


def test_strict_gpr1200_reads_option_text_only():
    choices = ["a red bus", "a dog", "a tree"]
    rec = mb("It shows a dog.", "a dog", choices, dataset="GPR1200")
    assert one(rec, "strict").details["extracted"] == "B"
    # Letters were not shown to the model for GPR1200: a bare "B" is not read as a key.
    assert one(mb("B", "a dog", choices, dataset="GPR1200"), "strict").details["no_answer"] is True


# ----------------------------------------------------------------------------- summary


def test_summary_rows_sources_and_disagreements():
    recs = [
        mb("The answer is B", "dog", ["cat", "dog"], rid="1", n_images=2),  # official AB (0), strict B (1)
        mb("B", "dog", ["cat", "dog"], rid="2", n_images=2),  # both 1
        mb("the cat sat", "the cat sat on the mat", dataset="ALFRED", rid="3", n_images=40),
        mb("42", "42", dataset="TextNeedleInAHaystack", rid="4", n_images=8),
        mb("A", "horse", ["cat", "dog"], rid="5", n_images=2),  # unscorable (both modes)
    ]
    scores = score_predictions(recs, mode="both")
    assert len(scores) == 10
    assert [s.producer["mode"] for s in scores[:2]] == ["official", "strict"]
    rows = summarize(scores)

    def get(mode, level, group):
        (r,) = [r for r in rows if r["mode"] == mode and r["level"] == level and r["group"] == group]
        return r

    al = get("official", "dataset", "ActionLocalization")
    assert al["value"] == pytest.approx(50.0) and al["metric"] == "milebench.accuracy"
    assert (al["n"], al["n_scored"], al["n_unscorable"], al["source"]) == (3, 2, 1, "official")
    assert get("strict", "dataset", "ActionLocalization")["value"] == pytest.approx(100.0)
    assert get("strict", "dataset", "ActionLocalization")["source"] == "judge toolkit"
    alfred = get("official", "dataset", "ALFRED")
    assert alfred["value"] == pytest.approx(75.0, abs=1e-4) and alfred["metric"] == "milebench.rouge_l"
    # Categories and overall are the toolkit's: means of the dataset values.
    sem = get("official", "category", "Realistic Semantic")
    assert sem["source"] == "judge toolkit" and sem["value"] == pytest.approx(75.0, abs=1e-4)
    overall = get("official", "overall", "all")
    assert overall["source"] == "judge toolkit"
    assert overall["value"] == pytest.approx((50.0 + 75.0 + 100.0) / 3, abs=1e-4)
    assert get("official", "image_quantity", "Many")["n"] == 1
    assert get("official", "image_quantity", "ActionLocalization/Few")["source"] == "official"
    dis = get("official vs strict", "overall", "disagreements")
    assert dis["metric"] == "milebench.disagreements"
    assert dis["value"] == 1 and dis["n"] == 5 and dis["n_unscorable"] == 1
