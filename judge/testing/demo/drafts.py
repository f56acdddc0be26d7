"""A response under construction (:class:`_Draft`) and what every family writes into it the same way:
number words, writing defects, an off-tone sentence and pictures whose captions may not match."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from PIL import Image

from .pictures import COLOURS, IMAGE_SIZE, JARRING_SCENES, SHAPES, _draw_objects
from .spec import _p

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
