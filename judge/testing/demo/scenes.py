"""The demo set's scenes: a question per family (SA stories, PBL how-tos, MSR counting and bar charts) with
its picture, the responses the simulated models write to it, and the off-prompt failure mode."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from PIL import Image

from .drafts import (
    NUM_WORDS,
    _apply_defects,
    _bern,
    _cap,
    _desc,
    _Draft,
    _join_numbers,
    _noun,
    _picture,
    _picture_flags,
    _Sentence,
    _the,
    _tone,
)
from .pictures import COLOURS, SCENES, SHAPES, TABLE_SCENE, _draw_bars, _draw_groups, _draw_objects
from .spec import FACTORS, _p

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
