"""Deterministic train/validation/test splits by question, stratified by task family.

All responses to one question land in one split, so a judge is never validated on
a question it was trained on. The assignment depends only on the seed, the
fractions and the set of question ids (not on file order).
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from judge.core.errors import JudgeError
from judge.core.schema import AnnotationRecord

SPLITS = ("train", "validation", "test")


class SplitError(JudgeError, ValueError):
    """Records that cannot be split as asked."""


def _question_id(r: AnnotationRecord) -> str:
    """A record's question id: never None once read (the schema fills a missing one from the question)."""
    assert r.question_id is not None, f"record {r.id!r} was not validated by AnnotationRecord"
    return r.question_id


def _counts(n: int, fractions: Sequence[float]) -> list[int]:
    """Largest-remainder allocation of n questions; every split with a positive fraction gets one if n allows."""
    total = sum(fractions)
    raw = [n * f / total for f in fractions]
    counts = [int(x) for x in raw]
    for i in sorted(range(len(raw)), key=lambda i: (raw[i] - counts[i], -i), reverse=True)[: n - sum(counts)]:
        counts[i] += 1
    # Small families: move one question from the largest split to any empty split that asked for some.
    for i, f in enumerate(fractions):
        if f > 0 and counts[i] == 0:
            donor = max(range(len(counts)), key=lambda j: counts[j])
            if counts[donor] > 1:
                counts[donor] -= 1
                counts[i] += 1
    return counts


def split_questions(
    records: Sequence[AnnotationRecord],
    fractions: Sequence[float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    stratify: bool = True,
) -> dict[str, str]:
    """Map each question id to ``train``, ``validation`` or ``test``."""
    if len(fractions) != len(SPLITS) or any(f < 0 for f in fractions) or sum(fractions) <= 0:
        raise SplitError(f"fractions must be three non-negative numbers for {SPLITS}, got {list(fractions)}")
    family_of: dict[str, str] = {}
    for r in records:
        q = _question_id(r)
        if family_of.setdefault(q, r.task) != r.task:
            raise SplitError(
                f"question {q!r} has responses under two task families "
                f"({family_of[q]}, {r.task}; record {r.id!r}); a question belongs to one family"
            )
    groups: dict[str, set[str]] = defaultdict(set)
    for q, fam in family_of.items():
        groups[fam if stratify else "*"].add(q)
    assignment: dict[str, str] = {}
    for family in sorted(groups):
        qids = sorted(groups[family])
        # A string seed gives the same shuffle on every Python version and platform.
        rng = random.Random(hashlib.sha256(f"{seed}:{family}".encode()).hexdigest())
        rng.shuffle(qids)
        start = 0
        for name, count in zip(SPLITS, _counts(len(qids), fractions), strict=True):
            for q in qids[start : start + count]:
                assignment[q] = name
            start += count
    return assignment


def split_records(
    records: Sequence[AnnotationRecord],
    fractions: Sequence[float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    stratify: bool = True,
) -> dict[str, list[AnnotationRecord]]:
    """Records grouped by split (record order kept inside each split)."""
    assignment = split_questions(records, fractions, seed, stratify)
    out: dict[str, list[AnnotationRecord]] = {s: [] for s in SPLITS}
    for r in records:
        out[assignment[_question_id(r)]].append(r)
    return out


def sample_lines(path: str | Path, fraction: float, seed: int = 0) -> tuple[list[str], int]:
    """A random share of a JSON Lines file's records, as their lines (verbatim, in file order), and how many
    records the file has: ``round(fraction x records)`` of them (at least one), drawn with ``seed``.

    What to send to annotators for prediction-powered means (``judge-score --labels``): the labelled
    responses must be a random sample of the scored ones. Blank lines are not records."""
    if not 0 < fraction <= 1:
        raise JudgeError(f"fraction {fraction} must lie in (0, 1]")
    path = Path(path)
    if path.suffix.lower() != ".jsonl":
        raise JudgeError(f"{path}: sampling takes a JSON Lines file (.jsonl), one record per line")
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except OSError as e:
        raise JudgeError(f"{path}: cannot read ({e.strerror or e})") from None
    if not lines:
        raise JudgeError(f"{path}: no records to sample")
    k = max(1, round(fraction * len(lines)))
    keep = sorted(random.Random(seed).sample(range(len(lines)), k))
    return [lines[i] for i in keep], len(lines)
