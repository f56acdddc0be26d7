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
from typing import Any, Protocol, TypeVar

from judge.core.errors import JudgeError

SPLITS = ("train", "validation", "test")


class Splittable(Protocol):
    """What a split reads of a record: an annotation record, or a preference pair (judge.data.pairs)."""

    @property
    def id(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def question_id(self) -> str | None: ...


R = TypeVar("R", bound=Splittable)


class SplitError(JudgeError, ValueError):
    """Records that cannot be split as asked."""


def _question_id(r: Splittable) -> str:
    """A record's question id: never None once read (the schema fills a missing one from the question)."""
    assert r.question_id is not None, f"record {r.id!r} was not validated by its schema"
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


def _loc(r: Any) -> str:
    """``file:line, record 'id'`` of a record read from a file (annotations and pairs keep it), else the id."""
    loc = getattr(r, "_source", None)
    if loc is None or not getattr(loc, "file", None):
        return f"record {r.id!r}"
    return f"{loc.file}:{loc.line}, record {r.id!r}"


def split_questions(
    records: Sequence[Splittable],
    fractions: Sequence[float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    stratify: bool = True,
) -> dict[str, str]:
    """Map each question id to ``train``, ``validation`` or ``test``."""
    if len(fractions) != len(SPLITS) or any(f < 0 for f in fractions) or sum(fractions) <= 0:
        raise SplitError(f"fractions must be three non-negative numbers for {SPLITS}, got {list(fractions)}")
    family_of: dict[str, str] = {}
    first: dict[str, Any] = {}
    for r in records:
        q = _question_id(r)
        first.setdefault(q, r)
        if family_of.setdefault(q, r.task) != r.task:
            raise SplitError(
                f"{_loc(r)}: field 'question_id': question {q!r} has responses under two task families "
                f"({r.task} here, {family_of[q]} in {_loc(first[q])}); a question belongs to one family"
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
    records: Sequence[R],
    fractions: Sequence[float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    stratify: bool = True,
    *,
    assignment: dict[str, str] | None = None,
) -> dict[str, list[R]]:
    """Records grouped by split (record order kept inside each split). ``assignment``: a question -> split
    map made over more records (annotations and pairs split together), instead of one made of these."""
    if assignment is None:
        assignment = split_questions(records, fractions, seed, stratify)
    out: dict[str, list[R]] = {s: [] for s in SPLITS}
    for r in records:
        out[assignment[_question_id(r)]].append(r)
    return out


#: What :func:`sample_lines` draws: single records, or whole questions (every response to each).
SAMPLE_UNITS = ("record", "question")


def sample_lines(
    path: str | Path | Sequence[str | Path], fraction: float, seed: int = 0, *, by: str = "record"
) -> tuple[list[str], int, int]:
    """A random share of the records of one JSON Lines file or several (one per model, as judge-score takes
    them), as their lines (verbatim, in file order, the files in the order given), how many records they have
    and how many units they were drawn from.

    ``by="record"``: ``round(fraction x records)`` records (at least one). ``by="question"``:
    ``round(fraction x questions)`` questions (at least one), each with every record that answers it in
    every file, so that every model's response to a drawn question is labelled and a pair of models has
    paired labels (their win rate needs them). A record's question is its ``question_id`` (an annotation
    record without one: its question's content hash, as the schema fills it), else ``(benchmark, task,
    id)``: candidate models' predictions for one item share the id (:func:`question_key`).

    What to send to annotators for prediction-powered means (``judge-score --labels``): the labelled
    responses must be a random sample of the scored ones. Blank lines are not records."""
    if not 0 < fraction <= 1:
        raise JudgeError(f"fraction {fraction} must lie in (0, 1]")
    if by not in SAMPLE_UNITS:
        raise JudgeError(f"`by` {by!r} is not one of {', '.join(SAMPLE_UNITS)}")
    paths = [Path(path)] if isinstance(path, (str, Path)) else [Path(p) for p in path]
    lines: list[str] = []
    keys: list[tuple[str, ...]] = []
    for p in paths:
        numbered = _numbered_lines(p)
        lines += [ln for _, ln in numbered]
        if by == "question":
            keys += _question_keys(p, numbered)
    if by == "record":
        k = max(1, round(fraction * len(lines)))
        keep = sorted(random.Random(seed).sample(range(len(lines)), k))
        return [lines[i] for i in keep], len(lines), len(lines)
    questions = sorted(set(keys))
    k = max(1, round(fraction * len(questions)))
    drawn = set(random.Random(seed).sample(questions, k))
    return [ln for ln, q in zip(lines, keys, strict=True) if q in drawn], len(lines), len(questions)


def _numbered_lines(path: Path) -> list[tuple[int, str]]:
    """A JSON Lines file's non-blank lines with their line numbers (an error naming the file otherwise)."""
    if path.suffix.lower() != ".jsonl":
        raise JudgeError(f"{path}: sampling takes a JSON Lines file (.jsonl), one record per line")
    try:
        numbered = [
            (i, ln) for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if ln.strip()
        ]
    except OSError as e:
        raise JudgeError(f"{path}: cannot read ({e.strerror or e})") from None
    if not numbered:
        raise JudgeError(f"{path}: no records to sample")
    return numbered


def question_key(obj: dict) -> tuple[str, ...]:
    """The question a JSON record answers (see :func:`sample_lines`)."""
    qid = obj.get("question_id")
    if qid is None and "scores" in obj and "question" in obj:  # an annotation record: as the schema fills it
        from judge.core.schema import content_hash

        qid = "q-" + content_hash(obj["question"])[:16]
    if qid is not None:
        return (str(obj.get("task", "")), str(qid))
    return (str(obj.get("benchmark", "")), str(obj.get("task", "")), str(obj.get("id", "")))


def _question_keys(path: Path, numbered: list[tuple[int, str]]) -> list[tuple[str, ...]]:
    import json

    keys = []
    for i, ln in numbered:
        try:
            obj = json.loads(ln)
        except json.JSONDecodeError as e:
            raise JudgeError(
                f"{path}, line {i}: not JSON ({e.msg}); sampling by question reads each record"
            ) from None
        if not isinstance(obj, dict) or ("id" not in obj and "question_id" not in obj):
            raise JudgeError(
                f"{path}, line {i}: no `id` or `question_id` to tell its question by (--by question)"
            )
        keys.append(question_key(obj))
    return keys
