"""The judge's prompt: built here, and only here, for training and scoring alike.

Layout of the single user turn, in order:

1. instructions: the rubric's scale, the task family and its penalty checks;
2. ``## Question`` and the question's segments;
3. ``## Reference answer`` (only for families that show it);
4. ``## Response to judge`` and the response's segments;
5. the criterion's own question: what it measures, its anchor levels, the answer format.

Everything before part 5 is identical for every criterion of one response, so a
scorer can compute that prefix once (:attr:`JudgePrompt.prefix_parts`). Images
become ``{"type": "image"}`` placeholders standing exactly where the images stand
in the content; :attr:`JudgePrompt.images` lists them in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from judge.core.rubric import OVERALL, Rubric
from judge.core.schema import ImageSegment, TextSegment, normalize_content

TargetFormat = Literal["score", "score_rationale", "rationale_score"]
TARGET_FORMATS: tuple[TargetFormat, ...] = ("score", "score_rationale", "rationale_score")

#: Text that precedes the score when a rationale comes first; the score is read at the next token.
SCORE_CUE = "Score: "
RATIONALE_CUE = "Rationale: "


@dataclass
class JudgePrompt:
    """A prompt in TRL's conversational vision format plus what a scorer needs to know about it."""

    messages: list[dict]  #: ``[{"role": "user", "content": [...]}]``
    images: list[str]  #: image references, in placeholder order
    prefix_parts: int  #: number of leading content parts shared by every criterion of this response
    criterion: str
    family: str


def _layout(content) -> tuple[list[dict], list[str]]:
    """Chat parts (images as placeholders) and image references of content in any accepted form."""
    parts, images = [], []
    for seg in normalize_content(content) or []:
        if isinstance(seg, dict):
            seg = ImageSegment(**seg) if seg.get("type") == "image" else TextSegment(**seg)
        if isinstance(seg, ImageSegment):
            parts.append({"type": "image"})
            images.append(seg.image)
        else:
            parts.append({"type": "text", "text": seg.text})
    return parts, images


def answer_instruction(fmt: TargetFormat, lo: int, hi: int) -> str:
    if fmt == "score":
        return f"Answer with a single integer from {lo} to {hi} and nothing else."
    if fmt == "score_rationale":
        return f"Answer with a single integer from {lo} to {hi} on the first line, then one short paragraph explaining it."
    if fmt == "rationale_score":
        return (
            f"First write '{RATIONALE_CUE.strip()}' and one short paragraph of reasoning, then on a new line "
            f"'{SCORE_CUE.strip()}' followed by a single integer from {lo} to {hi}."
        )
    raise ValueError(f"unknown target format {fmt!r}; choose one of {', '.join(TARGET_FORMATS)}")


def build_judge_prompt(
    rubric: Rubric,
    family: str,
    criterion: str,
    question,
    response,
    reference=None,
    target_format: TargetFormat = "score",
) -> JudgePrompt:
    """The one template function: the judge's user turn for one (response, criterion).

    ``question``, ``response`` and ``reference`` are content lists (segments or
    canonical dicts). ``criterion`` is a criterion id of the family or ``"overall"``.
    """
    fam = rubric.family(family)
    crit = fam.criterion(criterion)
    lo, hi = rubric.scale.min, rubric.scale.max

    intro = (
        f"You are an impartial judge of answers written by AI models that read and write interleaved text "
        f"and images. Score the response below on one criterion, using integers from {lo} (worst) to {hi} (best).\n"
        f"Task family: {fam.name}. {fam.description}\n"
    )
    if fam.penalties:
        intro += (
            "Penalty-only checks (they can lower a score, never raise it): "
            + " ".join(f"{p.name}: {p.description}" for p in fam.penalties)
            + "\n"
        )
    parts: list[dict] = [{"type": "text", "text": intro + "\n## Question\n"}]
    images: list[str] = []

    def add(content, if_empty: str) -> None:
        p, i = _layout(content)
        parts.extend(p or [{"type": "text", "text": if_empty}])
        images.extend(i)

    add(question, "(no question text)")
    if fam.uses_reference:
        parts.append({"type": "text", "text": "\n\n## Reference answer (correct)\n"})
        add(reference, "(none given)")
    parts.append({"type": "text", "text": "\n\n## Response to judge\n"})
    add(response, "(the model gave no response)")
    prefix_parts = len(parts)

    levels = "\n".join(f"- {k}: {v}" for k, v in sorted(crit.levels.items()))
    name = crit.name if criterion != OVERALL else f"{crit.name} (overall score)"
    suffix = (
        f"\n\n## Criterion: {name}\n{crit.measures}\nAnchor levels:\n{levels}\n"
        f"{answer_instruction(target_format, lo, hi)}"
    )
    parts.append({"type": "text", "text": suffix})
    return JudgePrompt(
        messages=[{"role": "user", "content": parts}],
        images=images,
        prefix_parts=prefix_parts,
        criterion=criterion,
        family=family,
    )


def build_target(score: int, rationale: str | None = None, target_format: TargetFormat = "score") -> str:
    """The assistant's answer text the judge is trained to produce."""
    if target_format == "score":
        return str(score)
    if not rationale:
        raise ValueError(f"target format {target_format!r} needs a rationale")
    rationale = " ".join(rationale.split())
    if target_format == "score_rationale":
        return f"{score}\n{rationale}"
    if target_format == "rationale_score":
        return f"{RATIONALE_CUE}{rationale}\n{SCORE_CUE}{score}"
    raise ValueError(f"unknown target format {target_format!r}; choose one of {', '.join(TARGET_FORMATS)}")


def completion_messages(target: str) -> list[dict]:
    return [{"role": "assistant", "content": [{"type": "text", "text": target}]}]
