"""The demo set's score model: families, criteria, models, hidden factors and the formulas that turn them
into true scores (what the README of a generation documents, and what a judge trained on it can learn)."""

from __future__ import annotations

SCALE_MIN, SCALE_MAX = 0, 6
FAMILIES: tuple[str, ...] = ("SA", "PBL", "MSR")

CRITERIA: dict[str, list[str]] = {
    "SA": [
        "text_quality",
        "image_quality",
        "text_image_coherence",
        "context_consistency",
        "innovation",
        "stylistic_consistency",
    ],
    "PBL": [
        "text_quality",
        "image_quality",
        "text_image_coherence",
        "method_quality",
        "creativity_engagement",
        "stylistic_consistency",
    ],
    "MSR": [
        "question_text_understanding",
        "question_image_understanding",
        "reasoning_clarity",
        "partial_correctness",
        "final_answer_accuracy",
        "excellency",
    ],
}

MODELS: list[str] = ["model-a", "model-b", "model-c"]
# Mean of the per-response latent skill q (drawn N(mean, SKILL_SD), clipped to [0.02, 0.98]).
MODEL_SKILL: dict[str, float] = {"model-a": 0.80, "model-b": 0.50, "model-c": 0.20}
SKILL_SD = 0.22

# (bias, noise sd) of the simulated annotators ann1, ann2, ann3; more annotators reuse
# these with a small deterministic shift (see _annotator_profile).
ANNOTATOR_PROFILES: list[tuple[float, float]] = [(-0.4, 0.7), (0.0, 0.6), (0.3, 0.8)]

# Probability of an outcome given the response's latent skill q: p = lo + slope * q
# (a defect for "defect*", the good outcome otherwise).
DRAW_P: dict[str, tuple[float, float]] = {
    "defect": (0.8, -0.8),
    "defect_msr": (0.7, -0.7),
    "tone": (0.3, 0.7),
    "match": (0.1, 0.85),
    "clean": (0.2, 0.75),
    "style": (0.3, 0.65),
    "context": (0.1, 0.85),
    "event": (0.1, 0.8),
    "task_match": (0.1, 0.85),
    "all_steps": (0.15, 0.8),
    "engage": (0.1, 0.8),
    "understood": (0.3, 0.65),
    "read_ok": (0.25, 0.7),
    "arith": (0.35, 0.6),
    "steps_msr": (0.2, 0.75),
    # Independent of skill: nothing in a response's text predicts that its pictures are blank, so a judge
    # that learns these scores has to look at the pictures.
    "blank": (0.25, 0.0),
    "off_prompt": (0.24, -0.22),
}


#: A response whose pictures are all blank fails its task, whatever its text: annotators give it at most this
#: on every criterion (its true scores are capped here), so blank pictures cost about 2.5 points overall.
BLANK_CAP = 2.0


def _p(key: str, q: float) -> float:
    lo, slope = DRAW_P[key]
    return lo + slope * q


def _pt(key: str) -> str:
    lo, slope = DRAW_P[key]
    return f"{lo:g}" if slope == 0 else f"{lo:g} {'+' if slope >= 0 else '-'} {abs(slope):g}q"


# Hidden factors per family: id -> (where it shows in the content, how it is drawn from q).
# Every factor lies in [0, 1]; 1 is good.
FACTORS: dict[str, dict[str, tuple[str, str]]] = {
    "SA": {
        "text_clean": (
            "1 - (writing defects)/3; defects are a doubled word ('the the'), a garbled token "
            "('zzq', 'qxv', ...) or a sentence cut off mid-way without a full stop",
            f"each of the 3 defect kinds present with p = {_pt('defect')}",
        ),
        "tone": (
            "1 unless the text contains an off-tone shouting sentence ('LOL WHATEVER, ...!!!')",
            f"p(1) = {_pt('tone')}",
        ),
        "image_text_match": (
            "share of response pictures whose caption names the colour, shape and count actually drawn "
            "(else one of the three is drawn differently)",
            f"per picture p = {_pt('match')}",
        ),
        "image_clean": (
            "share of response pictures drawn cleanly (else smeared with thick grey scribbles and a blotch)",
            f"per picture p = {_pt('clean')}",
        ),
        "image_style": (
            "share of response pictures drawn on the question picture's background (else a jarring one: "
            "black, hot pink or cyan)",
            f"per picture p = {_pt('style')}",
        ),
        "context_kept": (
            "1 if the story continues with the question's objects (same colour, shape and count); 0 if "
            "the text and pictures switch to a different colour and shape",
            f"p(1) = {_pt('context')}",
        ),
        "novelty": (
            "share of the 2 story sentences that add an event ('found a hidden door') rather than "
            "filler ('stayed in the meadow')",
            f"per sentence p = {_pt('event')}",
        ),
    },
    "PBL": {
        "text_clean": ("as for SA", "as for SA"),
        "tone": ("as for SA", "as for SA"),
        "image_text_match": ("as for SA", "as for SA"),
        "image_clean": ("as for SA", "as for SA"),
        "image_style": ("as for SA (the question's background is a wooden table)", "as for SA"),
        "task_match": (
            "1 if the steps use the count, colour and shape the question asks for; 0 if the text "
            "(and pictures) use another count and another colour or shape",
            f"p(1) = {_pt('task_match')}",
        ),
        "steps_complete": (
            "numbered steps given / steps asked for ('in 4 steps')",
            f"all steps with p = {_pt('all_steps')}, else 1..K-1 steps uniformly",
        ),
        "engagement": (
            "(friendly intro sentence present + closing 'Tip: ...' present) / 2",
            f"each with p = {_pt('engage')}",
        ),
    },
    "MSR": {
        "text_clean": (
            "as for SA (defects only in the opener and the step sentences)",
            f"each of the 3 defect kinds with p = {_pt('defect_msr')}",
        ),
        "task_understood": (
            "1 if the work computes what the question asks (total / difference); 0 if it computes "
            "another quantity (largest group, or total instead of difference)",
            f"p(1) = {_pt('understood')}",
        ),
        "image_read": (
            "share of the picture's values (group sizes, bar heights) the response reads correctly",
            f"all correct with p = {_pt('read_ok')}, else 1 (or 2) values off by one",
        ),
        "arith_ok": (
            "1 if the calculation step is right for the values read; 0 if its result is off by 1 or 2",
            f"p(1) = {_pt('arith')}",
        ),
        "steps_shown": (
            "written steps / 3 (reading the picture, restating the question, calculating)",
            f"all 3 with p = {_pt('steps_msr')}, else 0..2 uniformly",
        ),
        "final_correct": (
            "1 if the number after 'Final answer:' equals the reference answer, else 0",
            "follows from the three factors above",
        ),
    },
}

# True criterion score = clip(base + sum(weight * factor), 0, 6); all factors 1 gives 6.
CRITERION_FORMULAS: dict[str, dict[str, tuple[float, dict[str, float]]]] = {
    "SA": {
        "text_quality": (0.5, {"text_clean": 5.0, "tone": 0.5}),
        "image_quality": (0.5, {"image_clean": 5.5}),
        "text_image_coherence": (0.3, {"image_text_match": 5.7}),
        "context_consistency": (0.4, {"context_kept": 5.0, "image_text_match": 0.6}),
        "innovation": (0.5, {"novelty": 4.5, "context_kept": 1.0}),
        "stylistic_consistency": (0.4, {"image_style": 3.0, "tone": 2.6}),
    },
    "PBL": {
        "text_quality": (0.5, {"text_clean": 5.0, "tone": 0.5}),
        "image_quality": (0.5, {"image_clean": 5.5}),
        "text_image_coherence": (0.3, {"image_text_match": 5.7}),
        "method_quality": (0.3, {"task_match": 3.0, "steps_complete": 2.7}),
        "creativity_engagement": (0.5, {"engagement": 4.0, "steps_complete": 1.5}),
        "stylistic_consistency": (0.4, {"image_style": 3.0, "tone": 2.6}),
    },
    "MSR": {
        "question_text_understanding": (0.5, {"task_understood": 5.0, "steps_shown": 0.5}),
        "question_image_understanding": (0.5, {"image_read": 5.0, "steps_shown": 0.5}),
        "reasoning_clarity": (0.3, {"steps_shown": 3.2, "text_clean": 2.5}),
        "partial_correctness": (
            0.3,
            {"task_understood": 1.4, "image_read": 1.4, "arith_ok": 1.4, "final_correct": 1.5},
        ),
        "final_answer_accuracy": (0.3, {"final_correct": 5.7}),
        "excellency": (
            0.2,
            {"final_correct": 1.6, "steps_shown": 1.4, "text_clean": 1.4, "image_read": 1.4},
        ),
    },
}

# True overall score = weighted mean of the family's true criterion scores.
OVERALL_WEIGHTS: dict[str, dict[str, float]] = {
    "SA": {
        "text_quality": 0.25,
        "image_quality": 0.10,
        "text_image_coherence": 0.20,
        "context_consistency": 0.25,
        "innovation": 0.10,
        "stylistic_consistency": 0.10,
    },
    "PBL": {
        "text_quality": 0.25,
        "image_quality": 0.10,
        "text_image_coherence": 0.20,
        "method_quality": 0.25,
        "creativity_engagement": 0.10,
        "stylistic_consistency": 0.10,
    },
    "MSR": {
        "question_text_understanding": 0.10,
        "question_image_understanding": 0.10,
        "reasoning_clarity": 0.10,
        "partial_correctness": 0.20,
        "final_answer_accuracy": 0.40,
        "excellency": 0.10,
    },
}
