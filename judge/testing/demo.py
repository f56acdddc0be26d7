"""Synthetic demo annotation set: MMIE-style records with simulated human scores.

``generate_demo(out_dir)`` writes ``annotations.jsonl``, ``images/*.png`` and a
``README.md`` that documents the set. Everything is synthetic and byte-for-byte
deterministic for a given seed: the pictures are flat-colour shapes drawn with PIL,
the texts are templates, and the three "annotators" are the true score plus a fixed
bias and Gaussian noise.

The point of the set is to drive the whole pipeline (validate, aggregate, split,
build SFT data, train, score, report) end to end on a laptop. Scores depend on the
content in a documented and *learnable* way (see ``FACTORS``, ``CRITERION_FORMULAS``
and ``OVERALL_WEIGHTS``), so a tiny judge trained briefly should beat chance; the set
says nothing about how good any judge is on real data.

How a response is made:

1. The responding model (``MODELS``) sets the mean of a latent skill ``q`` in [0, 1]
   (``MODEL_SKILL``); ``q`` is drawn per response.
2. Hidden quality factors, each in [0, 1] with 1 = good, are drawn with
   probabilities that grow with ``q`` (``FACTORS``), and the text and pictures are
   written so that each factor is *visible* in the content (a garbled token, a caption
   that names the wrong colour, a final answer that differs from the reference...).
3. True criterion scores are clipped linear functions of the factors
   (``CRITERION_FORMULAS``); the true overall score is a weighted mean of the family's
   criteria (``OVERALL_WEIGHTS``).
4. Each annotator adds a fixed bias and Gaussian noise to every true score, rounds
   half up and clips to 0..6 (``ANNOTATOR_PROFILES``).

Two failure modes of real multimodal generators are in the set too: *blank pictures* (every picture of a
story or how-to response is a plain white canvas, for any model: nothing in the text predicts it, so a judge
must look at the pictures; the response fails its task, every criterion capped at ``BLANK_CAP``) and, more
often for weaker models, an *off-prompt* response (its text replaced by fluent sentences about everyday
things, ``RAMBLE``; the factors of answering the task are 0, see ``OFF_PROMPT_FAILS``).
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

__all__ = [
    "ANNOTATOR_PROFILES",
    "CRITERIA",
    "CRITERION_FORMULAS",
    "FACTORS",
    "FAMILIES",
    "MODELS",
    "MODEL_SKILL",
    "OVERALL_WEIGHTS",
    "generate_demo",
]

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

# --------------------------------------------------------------------------- drawing

IMAGE_SIZE = (128, 96)
GROUND_HEIGHT = 22
OUTLINE = (30, 30, 30)

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 160, 60),
    "blue": (40, 80, 220),
    "yellow": (240, 210, 30),
    "purple": (140, 60, 170),
    "orange": (245, 140, 30),
}
SHAPES: list[str] = ["circle", "square", "triangle", "star"]

# name -> (sky/background, ground band). Mid-tone and saturated, far from white: at the tiny judge's 56-pixel
# tiles a pale scene and a blank (white) picture look nearly alike, and a judge could not learn to tell them.
SCENES: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "sunny meadow": ((95, 160, 230), (70, 150, 60)),
    "sandy beach": ((60, 140, 210), (215, 180, 110)),
    "snowy field": ((120, 130, 170), (200, 205, 220)),
    "quiet garden": ((120, 175, 120), (140, 100, 60)),
}
TABLE_SCENE = ("wooden table", ((170, 120, 70), (120, 80, 45)))
JARRING_SCENES: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "black": ((15, 15, 15), (15, 15, 15)),
    "hot pink": ((255, 40, 190), (255, 40, 190)),
    "cyan": ((0, 240, 240), (0, 240, 240)),
}
CHART_BG = (250, 250, 250)
GRID = (222, 222, 222)

OWNED_IMAGE = re.compile(r"^(sa|pbl|msr)-\d+-(q\d+|r\d+-\d+)\.png$")


def _shape_points(shape: str, cx: float, cy: float, r: float) -> list[tuple[int, int]]:
    if shape == "triangle":
        return [(round(cx), round(cy - r)), (round(cx + r), round(cy + r)), (round(cx - r), round(cy + r))]
    # five-pointed star: alternate outer and inner radius, point up
    pts = []
    for k in range(10):
        rad = r if k % 2 == 0 else r * 0.45
        ang = -math.pi / 2 + k * math.pi / 5
        pts.append((round(cx + rad * math.cos(ang)), round(cy + rad * math.sin(ang))))
    return pts


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float, colour: str) -> None:
    fill = COLOURS[colour]
    box = [round(cx - r), round(cy - r), round(cx + r), round(cy + r)]
    if shape == "circle":
        draw.ellipse(box, fill=fill, outline=OUTLINE)
    elif shape == "square":
        draw.rectangle(box, fill=fill, outline=OUTLINE)
    else:
        draw.polygon(_shape_points(shape, cx, cy, r), fill=fill, outline=OUTLINE)


def _scene_canvas(colours: tuple[tuple[int, int, int], tuple[int, int, int]]) -> Image.Image:
    sky, ground = colours
    img = Image.new("RGB", IMAGE_SIZE, sky)
    w, h = IMAGE_SIZE
    ImageDraw.Draw(img).rectangle([0, h - GROUND_HEIGHT, w, h], fill=ground)
    return img


def _layout(kind: str, count: int, rng: random.Random) -> tuple[list[tuple[float, float]], float]:
    """Centres and radius for ``count`` objects in a layout."""
    w, h = IMAGE_SIZE
    if kind == "row":
        r = min(13.0, (w - 8) / (count * 2.5))
        step = (w - 8) / count
        return [(4 + step * (i + 0.5), 46.0) for i in range(count)], r
    if kind == "column":
        r = min(10.0, (h - 8) / (count * 2.4))
        step = (h - 8) / count
        return [(w / 2, 4 + step * (i + 0.5)) for i in range(count)], r
    if kind == "two_rows":
        top = (count + 1) // 2
        r = min(11.0, (w - 8) / (top * 2.6))
        step = (w - 8) / top
        pts = [(4 + step * (i + 0.5), 28.0) for i in range(top)]
        bottom = count - top
        off = (w - step * bottom) / 2
        pts += [(off + step * (i + 0.5), 60.0) for i in range(bottom)]
        return pts, r
    # loose: distinct random cells of a 4x3 grid, jittered
    cells = rng.sample(range(12), count)
    pts = []
    for c in cells:
        col, row = c % 4, c // 4
        pts.append((16 + 32 * col + rng.randint(-3, 3), 14 + 24 * row + rng.randint(-2, 2)))
    return pts, 9.0


def _degrade(img: Image.Image, rng: random.Random) -> None:
    """Smear a picture: thick grey scribbles and a blotch (flat colours, still compressible)."""
    d = ImageDraw.Draw(img)
    w, h = IMAGE_SIZE
    for _ in range(3):
        d.line(
            [(rng.randint(0, w), rng.randint(0, h)), (rng.randint(0, w), rng.randint(0, h))],
            fill=(110, 110, 110),
            width=5,
        )
    x, y = rng.randint(10, w - 40), rng.randint(10, h - 40)
    d.ellipse([x, y, x + 34, y + 26], fill=(140, 140, 140))


def _draw_objects(
    scene: tuple[tuple[int, int, int], tuple[int, int, int]],
    colour: str,
    shape: str,
    count: int,
    layout: str,
    rng: random.Random,
    degraded: bool = False,
) -> Image.Image:
    img = _scene_canvas(scene)
    d = ImageDraw.Draw(img)
    pts, r = _layout(layout, count, rng)
    for cx, cy in pts:
        _draw_shape(d, shape, cx, cy, r, colour)
    if degraded:
        _degrade(img, rng)
    return img


def _draw_groups(values: list[int], colour: str, shape: str) -> Image.Image:
    img = Image.new("RGB", IMAGE_SIZE, CHART_BG)
    d = ImageDraw.Draw(img)
    w, h = IMAGE_SIZE
    g = len(values)
    width = (w - 4) / g
    for i, v in enumerate(values):
        x0 = 2 + i * width
        d.rectangle([round(x0 + 2), 3, round(x0 + width - 3), h - 4], outline=(150, 150, 150))
        for k in range(v):
            _draw_shape(d, shape, x0 + width / 2, 13 + 17 * k, 6, colour)
    return img


def _draw_bars(values: list[int], colours: list[str]) -> Image.Image:
    img = Image.new("RGB", IMAGE_SIZE, CHART_BG)
    d = ImageDraw.Draw(img)
    w, h = IMAGE_SIZE
    base, unit, left = h - 8, 12, 12
    for k in range(1, 7):
        d.line([(left, base - k * unit), (w - 4, base - k * unit)], fill=GRID)
    d.line([(left, 4), (left, base)], fill=OUTLINE)
    d.line([(left, base), (w - 4, base)], fill=OUTLINE)
    slot = (w - 4 - left) / len(values)
    for i, v in enumerate(values):
        x0 = left + i * slot + slot * 0.2
        d.rectangle([round(x0), base - v * unit, round(x0 + slot * 0.6), base - 1], fill=COLOURS[colours[i]])
    return img


def _png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


# --------------------------------------------------------------------------- text

NUM_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
GARBLE_TOKENS = ["zzq", "qxv", "blorf", "xqj", "vrrk"]
TONE_BREAKS = [
    "LOL WHATEVER, THIS IS SO BORING!!!",
    "OMG WHO EVEN CARES LOL!!!",
    "UGH, JUST DO IT ALREADY!!!",
]


def _noun(shape: str, count: int) -> str:
    return shape if count == 1 else shape + "s"


def _desc(count: int, colour: str, shape: str) -> str:
    """'two red circles' / 'one red circle'."""
    return f"{NUM_WORDS[count]} {colour} {_noun(shape, count)}"


def _the(count: int, colour: str, shape: str) -> str:
    """'the red circle' / 'the two red circles'."""
    return f"the {colour} {shape}" if count == 1 else f"the {_desc(count, colour, shape)}"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _join_numbers(values: list[int]) -> str:
    parts = [str(v) for v in values]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _bern(rng: random.Random, p: float) -> bool:
    return rng.random() < p


@dataclass
class _Sentence:
    text: str
    free: bool  # may receive a writing defect


@dataclass
class _Draft:
    """A response under construction: content parts plus what the rationale may cite."""

    parts: list[list[_Sentence] | Image.Image] = field(default_factory=list)  # a text segment or an image
    factors: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # factor -> sentence naming the problem
    blank: bool = False  # every picture of the response is blank (see BLANK_CAP)
    off_prompt: bool = False  # the text ignores the task (see _off_prompt)

    def text(self, *sentences: _Sentence) -> None:
        if sentences:
            self.parts.append(list(sentences))

    def image(self, img: Image.Image) -> None:
        self.parts.append(img)


def _apply_defects(rng: random.Random, draft: _Draft, n_defects: int) -> None:
    free = [s for p in draft.parts if isinstance(p, list) for s in p if s.free]
    kinds = rng.sample(["repeat", "garble", "truncate"], n_defects)
    kinds.sort(key=lambda k: k != "truncate")  # cut first, so later edits stay visible
    targets = rng.sample(free, n_defects) if len(free) >= n_defects else [rng.choice(free) for _ in kinds]
    descs = []
    for kind, s in zip(kinds, targets, strict=True):
        words = s.text.split(" ")
        plain = [i for i, w in enumerate(words) if w.isalpha() and w.islower()]
        if kind == "repeat" and plain:
            i = rng.choice(plain)
            words.insert(i + 1, words[i])
            descs.append(f"a doubled word ('{words[i]} {words[i]}')")
        elif kind in ("repeat", "garble"):
            tok = rng.choice(GARBLE_TOKENS)
            words.insert(rng.randrange(1, len(words) + 1), tok)
            descs.append(f"a garbled token ('{tok}')")
        else:
            keep = max(2, len(words) // 2)
            words = words[:keep]
            words[-1] = words[-1].rstrip(".,:!?")
            descs.append("a sentence cut off mid-way")
        s.text = " ".join(words)
    draft.factors["text_clean"] = 1 - n_defects / 3
    if descs:
        n = len(descs)
        draft.notes["text_clean"] = (
            f"The writing has {NUM_WORDS[n]} defect{'s' if n > 1 else ''}, starting with {descs[0]}."
        )


def _tone(rng: random.Random, q: float, draft: _Draft) -> _Sentence | None:
    ok = _bern(rng, _p("tone", q))
    draft.factors["tone"] = 1.0 if ok else 0.0
    if ok:
        return None
    s = rng.choice(TONE_BREAKS)
    draft.notes["tone"] = f"An off-tone shouting sentence ('{s.split(',')[0]}...') breaks the voice."
    return _Sentence(s, free=False)


def _picture_flags(
    rng: random.Random, q: float, n_images: int, draft: _Draft
) -> list[tuple[bool, bool, bool, bool]]:
    """(caption matches, clean, on the question's background, blank) per response picture.

    With p = DRAW_P["blank"], whatever the model's skill, the model drew nothing: every picture of the
    response is a plain white canvas, which matches no caption, is not clean and is not on the question's
    background, and the response is capped (:data:`BLANK_CAP`)."""
    blank = draft.blank = _bern(rng, _p("blank", q))
    flags = []
    for _ in range(n_images):
        match, clean, styled = (
            _bern(rng, _p("match", q)),
            _bern(rng, _p("clean", q)),
            _bern(rng, _p("style", q)),
        )
        flags.append((False, False, False, True) if blank else (match, clean, styled, False))
    draft.factors["image_text_match"] = sum(f[0] for f in flags) / n_images
    draft.factors["image_clean"] = sum(f[1] for f in flags) / n_images
    draft.factors["image_style"] = sum(f[2] for f in flags) / n_images
    if blank:
        which = "The picture is" if n_images == 1 else "Every picture is"
        draft.notes["image_clean"] = f"{which} blank: nothing is drawn."
        draft.notes["image_text_match"] = f"{which} blank, so it shows nothing the text says."
        draft.notes["image_style"] = f"{which} blank, a white canvas unlike the question's scene."
    for i, (_, clean, _, _) in enumerate(flags):
        if not blank and not clean:
            draft.notes.setdefault(
                "image_clean", f"Picture {i + 1} is smeared with grey scribbles and a blotch."
            )
    return flags


def _mismatch(
    rng: random.Random, said: tuple[int, str, str], max_count: int
) -> tuple[tuple[int, str, str], str, str]:
    """Change one attribute of (count, colour, shape); return drawn attributes and the two phrases."""
    count, colour, shape = said
    what = rng.choice(["count", "colour", "shape"])
    if what == "count":
        c2 = rng.choice([c for c in range(1, max_count + 1) if c != count])
        return (c2, colour, shape), NUM_WORDS[count], f"{NUM_WORDS[c2]} {_noun(shape, c2)}"
    if what == "colour":
        col2 = rng.choice([c for c in COLOURS if c != colour])
        return (count, col2, shape), colour, f"{col2} {_noun(shape, count)}"
    sh2 = rng.choice([s for s in SHAPES if s != shape])
    return (count, colour, sh2), _noun(shape, count), _noun(sh2, count)


def _picture(
    rng: random.Random,
    draft: _Draft,
    index: int,
    said: tuple[int, str, str],
    flags: tuple[bool, bool, bool, bool],
    scene_name: str,
    scene: tuple[tuple[int, int, int], tuple[int, int, int]],
    layout: str,
    max_count: int,
) -> Image.Image:
    match, clean, styled, blank = flags
    if blank:
        return Image.new("RGB", IMAGE_SIZE, (255, 255, 255))
    drawn = said
    if not match:
        drawn, said_phrase, drawn_phrase = _mismatch(rng, said, max_count)
        draft.notes.setdefault(
            "image_text_match", f"The text says {said_phrase} but picture {index} shows {drawn_phrase}."
        )
    if not styled:
        name = rng.choice(sorted(JARRING_SCENES))
        scene = JARRING_SCENES[name]
        draft.notes.setdefault(
            "image_style",
            f"Picture {index} jumps to a {name} background, unlike the question's {scene_name}.",
        )
    return _draw_objects(scene, drawn[1], drawn[2], drawn[0], layout, rng, degraded=not clean)


# --------------------------------------------------------------------------- SA

SA_EVENTS = [
    "Then {the} rolled up a tall hill to see the sea.",
    "Suddenly {the} found a hidden door in the ground.",
    "{The} met a friendly cloud that told a silly joke.",
    "At noon {the} built a tiny boat and sailed away.",
    "A gust of wind lifted {the} high above the trees.",
    "{The} discovered a glowing key under a stone.",
]
SA_FILLERS = [
    "{The} stayed in the {place}.",
    "{The} did not move at all.",
    "Nothing else happened to {the}.",
    "{The} sat in the {place} as before.",
]


@dataclass
class _Question:
    qid: str
    task: str
    content: list[dict]
    images: dict[str, Image.Image]
    info: dict


def _sa_question(qid: str, rng: random.Random) -> _Question:
    colour, shape = rng.choice(sorted(COLOURS)), rng.choice(SHAPES)
    count = rng.randint(1, 3)
    place = rng.choice(sorted(SCENES))
    img = _draw_objects(SCENES[place], colour, shape, count, "row", rng)
    start = f"a {colour} {shape}" if count == 1 else _desc(count, colour, shape)
    text = (
        f"Story start: {start} sat in the {place}, as the picture shows. "
        "Continue the story in a few sentences, with pictures."
    )
    name = f"images/{qid}-q0.png"
    return _Question(
        qid,
        "SA",
        [{"type": "text", "text": text}, {"type": "image", "image": name}],
        {name: img},
        {"colour": colour, "shape": shape, "count": count, "place": place},
    )


def _sa_response(q: _Question, rng: random.Random, skill: float) -> _Draft:
    d = _Draft()
    qi = q.info
    place = qi["place"]
    kept = _bern(rng, _p("context", skill))
    d.factors["context_kept"] = 1.0 if kept else 0.0
    if kept:
        hero = (qi["count"], qi["colour"], qi["shape"])
    else:
        hero = (
            rng.randint(1, 3),
            rng.choice([c for c in sorted(COLOURS) if c != qi["colour"]]),
            rng.choice([s for s in SHAPES if s != qi["shape"]]),
        )
        d.notes["context_kept"] = (
            f"The story drops {_the(qi['count'], qi['colour'], qi['shape'])} and follows "
            f"{_the(*hero)} instead."
        )
    the = _the(*hero)
    events = rng.sample(SA_EVENTS, 2)
    fillers = rng.sample(SA_FILLERS, 2)
    story = []
    n_events = 0
    for k in range(2):
        if _bern(rng, _p("event", skill)):
            story.append(events[k])
            n_events += 1
        else:
            story.append(fillers[k])
    story = [_cap(s.format(the=the, The=_cap(the), place=place)) for s in story]
    d.factors["novelty"] = n_events / 2
    if n_events == 0:
        d.notes["novelty"] = f"Nothing new happens; the story only repeats that {the} stayed put."

    n_images = rng.randint(1, 2)
    flags = _picture_flags(rng, skill, n_images, d)
    tone_break = _tone(rng, skill, d)

    def caption(i: int) -> _Sentence:
        verb = "is" if hero[0] == 1 else "are"
        lead = "Here" if i == 1 else "In the next picture there"
        return _Sentence(f"{lead} {verb} {_desc(*hero)} in the {place}.", free=False)

    pictures = [
        _picture(rng, d, i + 1, hero, flags[i], place, SCENES[place], "row", 4) for i in range(n_images)
    ]
    d.text(_Sentence(story[0], True), caption(1))
    d.image(pictures[0])
    if n_images == 2:
        d.text(caption(2))
        d.image(pictures[1])
    tail = [_Sentence(story[1], True)]
    if tone_break:
        tail.append(tone_break)
    d.text(*tail)
    _apply_defects(rng, d, sum(_bern(rng, _p("defect", skill)) for _ in range(3)))
    d.notes["_good"] = (
        f"A clean, fitting continuation: the pictures match the text and the story stays with "
        f"{_the(qi['count'], qi['colour'], qi['shape'])}."
    )
    return d


# --------------------------------------------------------------------------- PBL

PBL_TARGETS = {
    "a straight row": ("row", "from left to right"),
    "a tall column": ("column", "from top to bottom"),
    "two neat rows": ("two_rows", "top row first"),
}
PBL_STEPS = {
    "lay": "Lay all {n} {colour} {noun} on a flat table.",
    "first": "Put the first {shape} where {target} should begin.",
    "add": "Add the other {noun} one at a time, {direction}.",
    "nudge": "Nudge any {shape} that sits out of line back into place.",
    "check": "Count them again to make sure all {n} are used.",
}
PBL_PLAN = {3: ["lay", "add", "check"], 4: ["lay", "first", "add", "check"], 5: list(PBL_STEPS)}
PBL_INTROS = [
    "Let's build {target} together, it only takes a minute!",
    "This is a fun little puzzle, so let's get started!",
    "Ready? You will have {target} in no time!",
]
PBL_TIPS = [
    "Tip: try it again with your eyes closed for a fun challenge!",
    "Tip: time yourself and see if you can beat your record!",
    "Tip: use a ruler to make the lines extra straight!",
]


def _pbl_question(qid: str, rng: random.Random) -> _Question:
    colour, shape = rng.choice(sorted(COLOURS)), rng.choice(SHAPES)
    n = rng.randint(3, 5)
    target = rng.choice(sorted(PBL_TARGETS))
    k = rng.randint(3, 5)
    img = _draw_objects(TABLE_SCENE[1], colour, shape, n, "loose", rng)
    text = (
        f"Explain how to arrange {_desc(n, colour, shape)} into {target} in {k} steps. "
        "Show pictures of your steps."
    )
    name = f"images/{qid}-q0.png"
    return _Question(
        qid,
        "PBL",
        [{"type": "text", "text": text}, {"type": "image", "image": name}],
        {name: img},
        {"colour": colour, "shape": shape, "count": n, "target": target, "steps": k},
    )


def _pbl_response(q: _Question, rng: random.Random, skill: float) -> _Draft:
    d = _Draft()
    qi = q.info
    asked = (qi["count"], qi["colour"], qi["shape"])
    target = qi["target"]
    layout, direction = PBL_TARGETS[target]
    matched = _bern(rng, _p("task_match", skill))
    d.factors["task_match"] = 1.0 if matched else 0.0
    used = asked
    if not matched:
        n2 = rng.choice([c for c in range(2, 7) if c != asked[0]])
        if rng.random() < 0.5:
            used = (n2, rng.choice([c for c in sorted(COLOURS) if c != asked[1]]), asked[2])
        else:
            used = (n2, asked[1], rng.choice([s for s in SHAPES if s != asked[2]]))
        d.notes["task_match"] = f"The steps use {_desc(*used)} instead of the {_desc(*asked)} asked for."
    k = qi["steps"]
    present = k if _bern(rng, _p("all_steps", skill)) else rng.randint(1, k - 1)
    d.factors["steps_complete"] = present / k
    if present < k:
        d.notes["steps_complete"] = (
            f"Only {NUM_WORDS[present]} of the {NUM_WORDS[k]} steps asked for are given."
        )
    fmt = {
        "n": NUM_WORDS[used[0]],
        "colour": used[1],
        "shape": used[2],
        "noun": _noun(used[2], used[0]),
        "target": target,
        "direction": direction,
    }
    steps = [
        _Sentence(f"Step {i + 1}: " + PBL_STEPS[key].format(**fmt), True)
        for i, key in enumerate(PBL_PLAN[k][:present])
    ]
    intro = _bern(rng, _p("engage", skill))
    tip = _bern(rng, _p("engage", skill))
    d.factors["engagement"] = (intro + tip) / 2
    if not intro and not tip:
        d.notes["engagement"] = "The steps are dry, with no friendly intro and no tip."

    n_images = rng.randint(1, 2)
    flags = _picture_flags(rng, skill, n_images, d)
    tone_break = _tone(rng, skill, d)
    verb = "is" if used[0] == 1 else "are"
    max_count = 6
    first: list[_Sentence] = []
    if intro:
        first.append(_Sentence(_cap(rng.choice(PBL_INTROS).format(target=target)), True))
    first.append(steps[0])
    if n_images == 2:
        loose = _picture(rng, d, 1, used, flags[0], TABLE_SCENE[0], TABLE_SCENE[1], "loose", max_count)
        first.append(_Sentence(f"Here {verb} the {_desc(*used)}, laid out loose.", False))
        d.text(*first)
        d.image(loose)
        d.text(*steps[1:], _Sentence(f"Here {verb} the {_desc(*used)} in {target}.", False))
    else:
        d.text(*first, *steps[1:], _Sentence(f"Here {verb} the {_desc(*used)} in {target}.", False))
    d.image(_picture(rng, d, n_images, used, flags[-1], TABLE_SCENE[0], TABLE_SCENE[1], layout, max_count))
    tail = []
    if tip:
        tail.append(_Sentence(rng.choice(PBL_TIPS), True))
    if tone_break:
        tail.append(tone_break)
    d.text(*tail)
    _apply_defects(rng, d, sum(_bern(rng, _p("defect", skill)) for _ in range(3)))
    d.notes["_good"] = f"Clear, complete steps for the {_desc(*asked)}, with pictures that match the text."
    return d


# --------------------------------------------------------------------------- MSR

MSR_ITEMS = ["apples", "books", "shells", "stickers"]
MSR_OPENERS = [
    "Let me work this out step by step.",
    "I will solve this carefully.",
    "Here is how I get the answer.",
]


def _op_value(op: str, values: list[int]) -> int:
    if op == "total":
        return sum(values)
    if op == "largest":
        return max(values)
    return max(values) - min(values)  # difference


def _msr_question(qid: str, rng: random.Random) -> _Question:
    name = f"images/{qid}-q0.png"
    info: dict[str, Any]
    if rng.random() < 0.5:
        colour, shape = rng.choice(sorted(COLOURS)), rng.choice(SHAPES)
        values = [rng.randint(1, 5) for _ in range(rng.randint(2, 4))]
        img = _draw_groups(values, colour, shape)
        noun = shape + "s"
        text = (
            f"The picture shows {NUM_WORDS[len(values)]} groups of {colour} {noun}. "
            f"How many {noun} are there altogether?"
        )
        info = {
            "kind": "groups",
            "values": values,
            "colour": colour,
            "shape": shape,
            "op": "total",
            "noun": noun,
        }
    else:
        values = [rng.randint(1, 6) for _ in range(rng.randint(3, 5))]
        colours = [rng.choice(sorted(COLOURS)) for _ in values]
        item = rng.choice(MSR_ITEMS)
        op = rng.choice(["total", "difference"])
        img = _draw_bars(values, colours)
        lead = (
            f"The bar chart shows how many {item} each of {NUM_WORDS[len(values)]} children collected "
            f"(one grid line is one of the {item}). "
        )
        ask = (
            f"How many {item} did the children collect altogether?"
            if op == "total"
            else f"How many more {item} did the child with the tallest bar collect than the child with the shortest bar?"
        )
        text = lead + ask
        info = {"kind": "bars", "values": values, "colours": colours, "op": op, "noun": item}
    info["answer"] = _op_value(info["op"], info["values"])
    return _Question(
        qid, "MSR", [{"type": "text", "text": text}, {"type": "image", "image": name}], {name: img}, info
    )


def _msr_response(q: _Question, rng: random.Random, skill: float) -> tuple[_Draft, int]:
    d = _Draft()
    qi = q.info
    values, noun, answer = qi["values"], qi["noun"], qi["answer"]
    groups = qi["kind"] == "groups"

    understood = _bern(rng, _p("understood", skill))
    d.factors["task_understood"] = 1.0 if understood else 0.0
    wrong_op = {"total": "largest" if groups else "difference", "difference": "total"}[qi["op"]]
    op = qi["op"] if understood else wrong_op
    phrases = {
        "total": f"total number of {noun}",
        "largest": f"number of {noun} in the largest group",
        "difference": "difference between the tallest and the shortest bar",
    }
    if not understood:
        d.notes["task_understood"] = (
            f"It works out the {phrases[op]} instead of the {phrases[qi['op']]} the question asks for."
        )

    read = list(values)
    if not _bern(rng, _p("read_ok", skill)):
        n_wrong = 2 if len(values) >= 3 and rng.random() < 0.4 else 1
        top = 5 if groups else 6
        for i in rng.sample(range(len(values)), n_wrong):
            read[i] = (
                values[i] + 1
                if values[i] == 1
                else values[i] - 1
                if values[i] == top
                else values[i] + rng.choice([-1, 1])
            )
        d.notes["image_read"] = (
            f"It reads the values as {_join_numbers(read)} but the picture shows {_join_numbers(values)}."
        )
    d.factors["image_read"] = sum(a == b for a, b in zip(read, values, strict=True)) / len(values)

    right = _op_value(op, read)
    final = right
    if not _bern(rng, _p("arith", skill)):
        deltas = [x for x in (-2, -1, 1, 2) if right + x >= 0]
        final = right + rng.choice(deltas)
        d.factors["arith_ok"] = 0.0
        d.notes["arith_ok"] = f"The calculation is wrong: the values it read give {right}, not {final}."
    else:
        d.factors["arith_ok"] = 1.0
    d.factors["final_correct"] = 1.0 if final == answer else 0.0
    if final != answer:
        d.notes["final_correct"] = f"The final answer {final} does not match the reference answer {answer}."

    shown = 3 if _bern(rng, _p("steps_msr", skill)) else rng.randint(0, 2)
    d.factors["steps_shown"] = shown / 3
    if shown < 2:
        d.notes["steps_shown"] = "It gives the final answer with little or no working shown."

    if groups:
        read_s = f"I count {_join_numbers(read)} {noun} in the groups."
        sketch = _draw_groups(read, qi["colour"], qi["shape"])
    else:
        read_s = f"I read the bars as {_join_numbers(read)}."
        sketch = _draw_bars(read, qi["colours"])
    restate = f"The question asks for the {phrases[op]}."
    if op == "total":
        calc = f"Adding them up: {' + '.join(map(str, read))} = {final}."
    elif op == "largest":
        calc = f"The largest group has {final} {noun}."
    else:
        calc = f"Tallest minus shortest: {max(read)} - {min(read)} = {final}."
    plan = {3: [read_s, restate, calc], 2: [read_s, calc], 1: [calc], 0: []}[shown]
    steps = [_Sentence(f"Step {i + 1}: {s}", True) for i, s in enumerate(plan)]

    opener = _Sentence(rng.choice(MSR_OPENERS), True)
    final_s = _Sentence(f"Final answer: {final}.", False)
    if shown >= 2:
        d.text(opener, steps[0], _Sentence("Here is my sketch of what I read.", False))
        d.image(sketch)
        d.text(*steps[1:], final_s)
    else:
        d.text(opener, _Sentence("Here is my sketch of the picture.", False))
        d.image(sketch)
        d.text(*steps, final_s)
    _apply_defects(rng, d, sum(_bern(rng, _p("defect_msr", skill)) for _ in range(3)))
    d.notes["_good"] = f"Correct final answer {answer} with clear, correct working."
    return d, answer


# --------------------------------------------------------------------------- failure modes

#: What an off-prompt response says instead of answering: everyday sentences about nothing in the task.
RAMBLE = [
    "My neighbour grows tomatoes on her balcony every summer.",
    "The football match last night went into extra time.",
    "Trains to the coast are always busy on holiday weekends.",
    "Coffee tastes better after a long walk in the cold.",
    "The town library closes early on Sundays and public holidays.",
    "Our old car needs new tyres before the winter comes.",
    "Jazz sounds best in a small and crowded room.",
    "The recipe calls for two eggs and a pinch of salt.",
    "Swimming lessons start again after the school holidays.",
    "The cinema on the high street shows old films on Mondays.",
]

#: The factors an off-prompt response fails (set to 0); its text is fluent (text_clean, tone: 1).
OFF_PROMPT_FAILS: dict[str, tuple[str, ...]] = {
    "SA": ("context_kept", "novelty", "image_text_match"),
    "PBL": ("task_match", "steps_complete", "engagement", "image_text_match"),
    "MSR": ("task_understood", "image_read", "arith_ok", "final_correct", "steps_shown"),
}


def _off_prompt(rng: random.Random, q: float, family: str, draft: _Draft) -> bool:
    """With p = 0.24 - 0.22q the response ignores the task: each text part is replaced by as many
    rambling sentences (:data:`RAMBLE`), the pictures stay. Returns whether it happened."""
    if not _bern(rng, _p("off_prompt", q)):
        return False
    for i, part in enumerate(draft.parts):
        if isinstance(part, list):
            draft.parts[i] = [_Sentence(t, False) for t in rng.sample(RAMBLE, min(len(part), len(RAMBLE)))]
    draft.off_prompt = True
    note = "The text ignores the task and rambles about everyday things instead."
    draft.notes = {"_good": draft.notes["_good"]}
    for f in OFF_PROMPT_FAILS[family]:
        draft.factors[f] = 0.0
        draft.notes[f] = note
    draft.factors["text_clean"] = 1.0
    if "tone" in FACTORS[family]:
        draft.factors["tone"] = 1.0
    return True


# --------------------------------------------------------------------------- scoring


def _clip(x: float) -> float:
    return min(float(SCALE_MAX), max(float(SCALE_MIN), x))


def true_scores(family: str, factors: dict[str, float], blank: bool = False) -> dict[str, float]:
    """True criterion scores and overall (floats on 0..6) from a response's hidden factors; ``blank``: every
    picture of the response is blank, so each criterion is capped at :data:`BLANK_CAP`."""
    out = {}
    for crit in CRITERIA[family]:
        base, weights = CRITERION_FORMULAS[family][crit]
        out[crit] = _clip(base + sum(w * factors[f] for f, w in weights.items()))
        if blank:
            out[crit] = min(out[crit], BLANK_CAP)
    out["overall"] = sum(OVERALL_WEIGHTS[family][c] * out[c] for c in CRITERIA[family])
    return out


def _factor_impact(family: str) -> dict[str, float]:
    """How many overall points a factor moves between 0 and 1 (ignoring clipping)."""
    impact: dict[str, float] = {}
    for crit, (_, weights) in CRITERION_FORMULAS[family].items():
        for f, w in weights.items():
            impact[f] = impact.get(f, 0.0) + OVERALL_WEIGHTS[family][crit] * w
    return impact


def _main_note(family: str, draft: _Draft) -> str:
    if draft.blank and not draft.off_prompt:  # the failure that capped every score
        return "The pictures are blank: nothing is drawn, so the response fails its task."
    impact = _factor_impact(family)
    best, best_loss = None, 0.25
    for f in FACTORS[family]:
        loss = impact[f] * (1 - draft.factors[f])
        if loss > best_loss and f in draft.notes:
            best, best_loss = f, loss
    return draft.notes[best] if best else draft.notes["_good"]


def _annotator_profile(i: int) -> tuple[float, float]:
    bias, sd = ANNOTATOR_PROFILES[i % len(ANNOTATOR_PROFILES)]
    shift = 0.1 * (i // len(ANNOTATOR_PROFILES))
    return round(bias + (shift if i % 2 else -shift), 2), sd


RATIONALE_LEADS = ["{}", "Main point: {}", "Mostly this: {}"]


def _annotate(
    family: str, truth: dict[str, float], note: str, n_annotators: int, rng: random.Random
) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    scores: dict[str, dict[str, int]] = {}
    rationale: dict[str, str] = {}
    for i in range(n_annotators):
        bias, sd = _annotator_profile(i)
        name = f"ann{i + 1}"
        scores[name] = {
            c: int(min(SCALE_MAX, max(SCALE_MIN, math.floor(truth[c] + bias + rng.gauss(0.0, sd) + 0.5))))
            for c in [*CRITERIA[family], "overall"]
        }
        lead = RATIONALE_LEADS[i % len(RATIONALE_LEADS)]
        rationale[name] = lead.format(note if lead.startswith("{") else note[:1].lower() + note[1:])
    return scores, rationale


# --------------------------------------------------------------------------- writing


def _content(draft: _Draft, rid: str, images: dict[str, Image.Image]) -> list[dict]:
    out = []
    k = 0
    for part in draft.parts:
        if isinstance(part, list):
            out.append({"type": "text", "text": " ".join(s.text for s in part)})
        else:
            name = f"images/{rid}-{k}.png"
            images[name] = part
            out.append({"type": "image", "image": name})
            k += 1
    return out


def _family_counts(n_questions: int) -> dict[str, int]:
    return {f: n_questions // 3 + (1 if i < n_questions % 3 else 0) for i, f in enumerate(FAMILIES)}


_BUILDERS: dict[str, tuple[Callable, Callable]] = {
    "SA": (_sa_question, _sa_response),
    "PBL": (_pbl_question, _pbl_response),
    "MSR": (_msr_question, _msr_response),
}


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def generate_demo(
    out_dir: str | Path,
    *,
    n_questions: int = 250,
    responses_per_question: int = 3,
    n_annotators: int = 3,
    seed: int = 0,
) -> Path:
    """Write out_dir/annotations.jsonl, out_dir/images/*.png and out_dir/README.md; return the jsonl path.

    Questions are split into the three families as evenly as possible (SA first). Each
    question gets ``responses_per_question`` responses; when that equals ``len(MODELS)``
    every model answers every question once. Output is byte-for-byte deterministic for a
    given seed and arguments; a previous generation in ``out_dir`` is replaced (only the
    images this generator names are removed; other files are left alone).
    """
    for name, value in (
        ("n_questions", n_questions),
        ("responses_per_question", responses_per_question),
        ("n_annotators", n_annotators),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an integer, got {seed!r}")

    out = Path(out_dir)
    img_dir = out / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    for p in img_dir.iterdir():
        if p.is_file() and OWNED_IMAGE.match(p.name):
            p.unlink()

    records: list[dict] = []
    images: dict[str, Image.Image] = {}
    truths: list[tuple[str, str, dict[str, float]]] = []  # (family, model, true scores)
    counts = _family_counts(n_questions)
    for family in FAMILIES:
        make_question, make_response = _BUILDERS[family]
        width = max(3, len(str(counts[family] - 1)))
        for qn in range(counts[family]):
            qid = f"{family.lower()}-{qn:0{width}d}"
            qrng = random.Random(f"judge-demo:{seed}:{qid}")
            question = make_question(qid, qrng)
            images.update(question.images)
            order = list(MODELS)
            qrng.shuffle(order)
            models = [order[i % len(order)] for i in range(responses_per_question)]
            for r, model in enumerate(models):
                rid = f"{qid}-r{r}"
                rrng = random.Random(f"judge-demo:{seed}:{rid}")
                skill = min(0.98, max(0.02, rrng.gauss(MODEL_SKILL[model], SKILL_SD)))
                made = make_response(question, rrng, skill)
                draft, answer = made if isinstance(made, tuple) else (made, None)
                _off_prompt(rrng, skill, family, draft)
                truth = true_scores(family, draft.factors, blank=draft.blank)
                arng = random.Random(f"judge-demo:{seed}:{rid}:annotators")
                scores, rationale = _annotate(family, truth, _main_note(family, draft), n_annotators, arng)
                records.append(
                    {
                        "id": rid,
                        "question_id": qid,
                        "task": family,
                        "question": question.content,
                        "response": _content(draft, rid, images),
                        "reference": None
                        if answer is None
                        else [{"type": "text", "text": f"The answer is {answer}."}],
                        "model": model,
                        "scores": scores,
                        "rationale": rationale,
                    }
                )
                truths.append((family, model, truth))

    for name in sorted(images):
        _write_atomic(out / name, _png_bytes(images[name]))
    jsonl = out / "annotations.jsonl"
    lines = "".join(json.dumps(rec, ensure_ascii=False, sort_keys=False) + "\n" for rec in records)
    _write_atomic(jsonl, lines.encode("utf-8"))
    readme = _readme(
        records,
        truths,
        counts,
        n_images=len(images),
        args={
            "n_questions": n_questions,
            "responses_per_question": responses_per_question,
            "n_annotators": n_annotators,
            "seed": seed,
        },
    )
    _write_atomic(out / "README.md", readme.encode("utf-8"))
    return jsonl


# --------------------------------------------------------------------------- README


def _fmt(x: float) -> str:
    return f"{x:.2f}"


def _mean_sd(xs: list[float]) -> str:
    if not xs:
        return "-"
    sd = statistics.pstdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.fmean(xs):.2f} ± {sd:.2f}"


def _readme(
    records: list[dict],
    truths: list[tuple[str, str, dict[str, float]]],
    counts: dict[str, int],
    n_images: int,
    args: dict[str, int],
) -> str:
    annotators = list(records[0]["scores"]) if records else []
    call = ", ".join(f"{k}={v}" for k, v in args.items())
    lines = [
        "# Demo annotation set (synthetic)",
        "",
        "**This data set is synthetic.** No person wrote or scored anything in it. It was made by",
        f"`judge.testing.demo.generate_demo(out_dir, {call})`; the same call gives the same bytes.",
        "",
        "It exists to prove the pipeline end to end (validate, aggregate annotators, split, build SFT",
        "data, train, score, report) on a small machine. The pictures are flat-colour shapes, the texts",
        "are templates and the scores come from the formulas below, so a judge's agreement with these",
        "scores says nothing about its quality on real responses or real human judgements.",
        "",
        "## Contents",
        "",
        "| family | task | questions | records | models |",
        "| --- | --- | --- | --- | --- |",
    ]
    task_names = {
        "SA": "visual storytelling: continue a story given a scene picture",
        "PBL": "how-to: arrange shapes in a given number of steps",
        "MSR": "multi-step counting / bar-chart arithmetic, with a reference answer",
    }
    for f in FAMILIES:
        recs = [r for r in records if r["task"] == f]
        models = sorted({r["model"] for r in recs})
        lines.append(f"| {f} | {task_names[f]} | {counts[f]} | {len(recs)} | {', '.join(models) or '-'} |")
    lines += [
        f"| all | | {sum(counts.values())} | {len(records)} | |",
        "",
        f"{n_images} PNG pictures ({IMAGE_SIZE[0]}x{IMAGE_SIZE[1]} RGB) live in `images/`; "
        f"annotators: {', '.join(annotators)}.",
        "",
        "## Record format",
        "",
        "One JSON object per line of `annotations.jsonl`, keys in this order:",
        "",
        "- `id` (`sa-007-r2`), `question_id` (`sa-007`; all responses to a question share it), `task` (SA, PBL or MSR);",
        '- `question`, `response`: content lists of `{"type": "text", "text": ...}` and',
        '  `{"type": "image", "image": "images/....png"}` segments in reading order; image paths are',
        "  relative to the folder of `annotations.jsonl`;",
        "- `reference`: for MSR a content list with the correct answer (`The answer is 7.`), else `null`;",
        "- `model`: the simulated responding model;",
        '- `scores`: `{annotator: {criterion: int 0..6, ..., "overall": int 0..6}}`, every criterion of the family;',
        "- `rationale`: `{annotator: one sentence naming the factor that cost the most points}`.",
        "",
        "## How the scores depend on the content",
        "",
        "Each response has a latent skill q ~ N(model mean, "
        f"{SKILL_SD}) clipped to [0.02, 0.98]; model means: "
        + ", ".join(f"{m} {MODEL_SKILL[m]}" for m in MODELS)
        + ". Hidden factors in [0, 1] (1 = good) are drawn from q and written into the text and pictures,",
        "so that each can be seen in the content. True criterion score = clip(base + sum of weight x factor, 0, 6);",
        "true overall = weighted mean of the family's true criterion scores.",
    ]
    for f in FAMILIES:
        impact = _factor_impact(f)
        lines += [
            "",
            f"### {f}",
            "",
            "| factor | what it is in the content | how it is drawn | overall points at stake |",
            "| --- | --- | --- | --- |",
        ]
        for fac, (visible, drawn) in FACTORS[f].items():
            lines.append(f"| `{fac}` | {visible} | {drawn} | {_fmt(impact[fac])} |")
        lines += ["", "| criterion | true score | weight in overall |", "| --- | --- | --- |"]
        for crit in CRITERIA[f]:
            base, weights = CRITERION_FORMULAS[f][crit]
            formula = " + ".join([_fmt(base)] + [f"{_fmt(w)} x `{fac}`" for fac, w in weights.items()])
            lines.append(f"| `{crit}` | clip({formula}, 0, 6) | {_fmt(OVERALL_WEIGHTS[f][crit])} |")
    lines += [
        "",
        "## Failure modes",
        "",
        "Two failures of real multimodal generators are drawn on top of the factors. **Blank pictures**: with",
        f"p = {_pt('blank')} for every model (nothing in the text predicts it, so a judge that learns these scores",
        "has to look at the pictures), every picture of an SA or PBL response is a plain white canvas, which",
        "matches no caption, is not clean and is off the question's background; the response fails its task,",
        f"so each of its true criterion scores is capped at {BLANK_CAP:g} (MSR sketches are never blank). The",
        "scenes are mid-tone colours, far from white, so that a blank picture is plain to see even at a small",
        f"model's resolution. An **off-prompt** response (p = {_pt('off_prompt')}, more often for weaker models:",
        "every text part replaced by as many fluent sentences about everyday things; the pictures stay) scores 0",
        "on the factors",
        "of answering the task ("
        + "; ".join(f"{f}: " + ", ".join(f"`{x}`" for x in OFF_PROMPT_FAILS[f]) for f in FAMILIES)
        + ") and 1 on clean writing. The tables above give what each factor costs.",
        "",
        "## Simulated annotators",
        "",
        "Every annotator scores every criterion and the overall score of every record: the true score plus",
        "the annotator's fixed bias plus Gaussian noise (drawn independently per score), rounded half up",
        "and clipped to 0..6. The rationale is a templated sentence about the factor that cost the most",
        "overall points (or a positive sentence when nothing cost more than 0.25 points).",
        "",
        "| annotator | bias | noise sd | mean overall given |",
        "| --- | --- | --- | --- |",
    ]
    for i, a in enumerate(annotators):
        bias, sd = _annotator_profile(i)
        given = [r["scores"][a]["overall"] for r in records]
        lines.append(f"| {a} | {bias:+.2f} | {sd:.2f} | {statistics.fmean(given):.2f} |")
    lines += [
        "",
        "## Score summary (computed from this generation)",
        "",
        "| family | model | records | true overall (mean ± sd) | annotators' overall (mean ± sd) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for f in FAMILIES:
        for m in MODELS:
            sel = [i for i, (fam, mod, _) in enumerate(truths) if fam == f and mod == m]
            if not sel:
                continue
            true_o = [truths[i][2]["overall"] for i in sel]
            ann_o = [float(s["overall"]) for i in sel for s in records[i]["scores"].values()]
            lines.append(f"| {f} | {m} | {len(sel)} | {_mean_sd(true_o)} | {_mean_sd(ann_o)} |")
    all_true = [t[2]["overall"] for t in truths]
    all_ann = [float(s["overall"]) for r in records for s in r["scores"].values()]
    lines += [f"| all | all | {len(records)} | {_mean_sd(all_true)} | {_mean_sd(all_ann)} |", ""]
    return "\n".join(lines)
