"""The demo set on disk: ``generate_demo`` draws every question, response and annotation, then writes
``annotations.jsonl``, ``images/*.png``, the preference pairs of its scores (``pairs.jsonl``) and the
``README.md`` that documents the generation."""

from __future__ import annotations

import json
import os
import random
import statistics
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from .annotators import _annotate, _annotator_profile, _factor_impact, _main_note, true_scores
from .drafts import _Draft
from .pairs import MIN_DIFFERENCE, demo_pairs
from .pictures import IMAGE_SIZE, OWNED_IMAGE, _png_bytes
from .scenes import (
    OFF_PROMPT_FAILS,
    _msr_question,
    _msr_response,
    _off_prompt,
    _pbl_question,
    _pbl_response,
    _sa_question,
    _sa_response,
)
from .spec import (
    BLANK_CAP,
    CRITERIA,
    CRITERION_FORMULAS,
    FACTORS,
    FAMILIES,
    MODEL_SKILL,
    MODELS,
    OVERALL_WEIGHTS,
    SKILL_SD,
    _pt,
)

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
    """Write out_dir/annotations.jsonl, out_dir/images/*.png, out_dir/pairs.jsonl and out_dir/README.md; return
    the jsonl path.

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
    # The preference pairs of the same human scores (judge.testing.demo.pairs), for pairwise training.
    pairs = demo_pairs(records)
    _write_atomic(
        out / "pairs.jsonl", "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs).encode()
    )
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
    pairs = demo_pairs(records)
    lines += [
        "## Preference pairs",
        "",
        f"`pairs.jsonl` holds {len(pairs)} preference pairs drawn from these scores (`judge.testing.demo.pairs`): two "
        f"responses to one question whose annotators' mean overall scores differ by at least {MIN_DIFFERENCE:g}, "
        "the better one preferred (a per-criterion preference where a criterion's means differ as much); response "
        "A is the preferred one in every other pair. They keep the question ids, so a split by question keeps a "
        "question's pairs with its responses. `judge-train --config demo-pairs` trains on them.",
        "",
    ]
    return "\n".join(lines)
