"""MMRA: 11 subtasks of image pairs, scored as the official demo scores them, or strictly.

Official mode follows Wusiwei0410/MMRA ``evaluate/evaluate_demo.py`` (commit 92e8db2):

* ``Choice QA``: letters in parentheses ``(A)``..``(D)``, else standalone capitals ``A``..``D``
  (case-sensitive, word-bounded); ``True or false QA``: the words yes/no, case-insensitive but
  counted as written ("Yes" and "yes" apart). The most frequent wins; among ties the one
  whose first appearance is latest ("A good choice is C" -> C).
* score 1 when the extracted answer equals the gold answer ignoring case; no answer scores 0.
* rows with no response (null) are skipped: an unscorable record, out of the means.
* the bug the official numbers carry: a ``Chooice QA`` row (misspelt) is not extracted and
  keeps the answer extracted for the last row extracted before it (per model, in input
  order; skipped rows do not update it). A ``Chooice QA`` row with nothing before it is
  unscorable here (the official script stops with a NameError).
* reported: the mean accuracy per ``Task``; the official code has no overall average.

Strict mode extracts every choice row, ``Chooice QA`` included, with the toolkit's extractor
(:func:`judge.metrics.extract.extract_choice`, case-sensitive so "a" is never a key and the
article "A" is skipped) and yes/no with :func:`judge.metrics.extract.extract_yes_no`.

What a record needs: ``task`` (the Task), ``meta["qa_type"]``, ``choices`` (option texts,
keys in ``meta["option_keys"]`` or A, B, ...), ``answer`` (gold), ``meta["response_missing"]``
for rows without a response. The reader in :mod:`judge.data.benchmarks` sets them.
"""

from __future__ import annotations

import re
from collections import Counter

from ..data.schema import PredictionRecord, ScoreRecord
from .common import (
    METRICS_VERSION,
    OFFICIAL,
    SOURCE_OFFICIAL,
    SOURCE_TOOLKIT,
    gold_text,
    make_score,
    mean_row,
    record_mode,
    response_missing,
    response_text,
)
from .extract import extract_choice, extract_yes_no, option_keys

BENCHMARK = "mmra"
METRIC = "mmra.accuracy"
OFFICIAL_REF = "MMRA evaluate/evaluate_demo.py@92e8db2"
VERSION = f"{METRICS_VERSION} ({OFFICIAL_REF})"

CHOICE_QA = "Choice QA"
CHOICE_QA_MISSPELT = "Chooice QA"
YES_NO_QA = "True or false QA"
QA_TYPES = (CHOICE_QA, CHOICE_QA_MISSPELT, YES_NO_QA)

_PAREN_RE = re.compile(r"\(([A-D])\)")
_BARE_RE = re.compile(r"\b([A-D])\b")
_YES_NO_RE = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def _latest_of_most_frequent(matches: list[str]) -> str:
    """Counter.most_common()[...][-1] of the official code: among the most frequent, the one
    first seen last (Counter keeps first-appearance order; the sort is stable)."""
    counts = Counter(matches)
    top = max(counts.values())
    return [m for m, c in counts.items() if c == top][-1]


def extract_option_official(text: str) -> str | None:
    """The official ``extract_option_labels`` (its option-text fallback is never reached: no options are passed)."""
    matches = _PAREN_RE.findall(text) or _BARE_RE.findall(text)
    return _latest_of_most_frequent(matches) if matches else None


def extract_yes_no_official(text: str) -> str | None:
    """The official ``extract_yes_no``: the matched word as written ("Yes" and "yes" count apart)."""
    matches = _YES_NO_RE.findall(text)
    return _latest_of_most_frequent(matches) if matches else None


def _qa_type(rec: PredictionRecord) -> str:
    qt = rec.meta.get("qa_type") or rec.meta.get("QA_type")
    if qt:
        return str(qt)
    return CHOICE_QA if rec.choices else YES_NO_QA


def _options(rec: PredictionRecord) -> dict[str, str]:
    choices = [str(c) for c in rec.choices or []]
    keys = rec.meta.get("option_keys") or option_keys(len(choices))
    return dict(zip((str(k).upper() for k in keys), choices, strict=False))


def _score(extracted: str | None, gold: str) -> float:
    return float(extracted is not None and gold.lower() == extracted.lower())


def score(records: list[PredictionRecord], mode: str) -> list[ScoreRecord]:
    """Score MMRA records in one mode, one ScoreRecord per record in input order.

    Official mode runs the carry-over per model in input order, so it depends on row order.
    """
    out: list[ScoreRecord | None] = [None] * len(records)
    by_model: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        by_model.setdefault(r.model, []).append(i)
    for idxs in by_model.values():
        run = _official_run if mode == OFFICIAL else _strict_one
        state: dict = {}
        for i in idxs:
            out[i] = run(records[i], state)
    return out  # type: ignore[return-value]


def _common(rec: PredictionRecord, mode: str) -> dict:
    return dict(benchmark=BENCHMARK, metric=METRIC, mode=mode, task=rec.task)


def _official_run(rec: PredictionRecord, state: dict) -> ScoreRecord:
    qt = _qa_type(rec)
    details = {"qa_type": qt}
    common = _common(rec, OFFICIAL)
    if response_missing(rec):
        return make_score(rec, score=None, reason="no response (the official evaluation skips the row)",
                          details=details, version=VERSION, **common)
    gold = gold_text(rec)
    if gold is None:
        return make_score(rec, score=None, reason="no gold answer", details=details, version=VERSION, **common)
    text = response_text(rec)
    if qt == YES_NO_QA:
        state.update(extracted=extract_yes_no_official(text), source=rec.id)
    elif qt == CHOICE_QA:
        state.update(extracted=extract_option_official(text), source=rec.id)
    else:
        # The official if/elif has no branch for "Chooice QA": the previous row's answer stays.
        if "source" not in state:
            return make_score(rec, score=None, details=details, version=VERSION, **common,
                              reason=f"{qt!r} row with no earlier extracted row to carry over from "
                              "(the official script stops here with a NameError)")
        details.update(carried_over_from=state["source"],
                       note=f"official bug: {qt!r} rows are not extracted and keep the last extracted answer")
    details.update(extracted=state["extracted"], gold=gold)
    return make_score(rec, score=_score(state["extracted"], gold), details=details, version=VERSION, **common)


def _strict_one(rec: PredictionRecord, state: dict) -> ScoreRecord:
    qt = _qa_type(rec)
    details = {"qa_type": qt}
    common = _common(rec, "strict")
    if response_missing(rec):
        return make_score(rec, score=None, reason="no response (skipped, as the official evaluation does)",
                          details=details, **common)
    gold = gold_text(rec)
    if gold is None:
        return make_score(rec, score=None, reason="no gold answer", details=details, **common)
    text = response_text(rec)
    if qt == YES_NO_QA:
        ex = extract_yes_no(text)
    else:
        opts = _options(rec) or {k: "" for k in "ABCD"}
        ex = extract_choice(text, opts, case_sensitive=True)
    details.update(extracted=ex.answer, gold=gold, how=ex.how)
    if ex.no_answer:
        details["no_answer"] = True
    return make_score(rec, score=_score(ex.answer, gold.strip()), details=details, extractor="strict", **common)


def needs_judge(rec: PredictionRecord) -> bool:
    """MMRA is scored by its rule-based metric only."""
    return False


def summarize(records: list[ScoreRecord]) -> list[dict]:
    """Rows per Task (official in official mode) and overall (the toolkit's: mean over all scored rows)."""
    rows: list[dict] = []
    groups: dict[tuple[str, str], list[ScoreRecord]] = {}
    for s in records:
        if s.metric == METRIC:
            groups.setdefault((s.model, record_mode(s)), []).append(s)
    for (model, mode), recs in groups.items():
        base = dict(benchmark=BENCHMARK, model=model, mode=mode, metric=METRIC)
        by_task: dict[str, list[ScoreRecord]] = {}
        for s in recs:
            by_task.setdefault(s.task, []).append(s)
        for task, tr in by_task.items():
            rows.append(mean_row(tr, level="task", group=task,
                                 source=SOURCE_OFFICIAL if mode == OFFICIAL else SOURCE_TOOLKIT, **base))
        rows.append(mean_row(recs, level="overall", group="all", source=SOURCE_TOOLKIT, **base))
    return rows
