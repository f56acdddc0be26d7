"""MileBench's metrics: one score record per prediction (official or strict mode, see
:mod:`judge.benchmarks.milebench`) and the summary rows per dataset, image-quantity level, category and
overall."""

from __future__ import annotations

from typing import Any

from judge.benchmarks.common import (
    METRICS_VERSION,
    OFFICIAL,
    SOURCE_OFFICIAL,
    SOURCE_TOOLKIT,
    gold_text,
    macro_row,
    make_score,
    mean_row,
    record_mode,
    response_text,
)
from judge.benchmarks.extract import extract_choice, option_keys
from judge.benchmarks.milebench_official import (
    ROUGE_VERSION,
    match_choice_official,
    normalize_answer,
    official_key,
    official_options,
    rouge_l_f,
)
from judge.benchmarks.milebench_tasks import (
    ACCURACY,
    BENCHMARK,
    CATEGORIES,
    MMCOQA,
    NEEDLE,
    ROUGE_L,
    SCORE,
    UNSUPPORTED,
    VERSION,
    MileBenchMeta,
    canonical_dataset,
    dataset_category,
    image_quantity_level,
)
from judge.core.schema import PredictionRecord, ScoreRecord, content_images


# ----------------------------------------------------------------------------- scoring
def _dataset(rec: PredictionRecord, meta: MileBenchMeta) -> str:
    return str(meta.dataset or rec.task)


def _question_type(rec: PredictionRecord, meta: MileBenchMeta) -> str:
    if meta.question_type:
        return meta.question_type
    return "multi-choice" if rec.choices else "open-ended"


def rule_of(rec: PredictionRecord, meta: MileBenchMeta | None = None) -> str | None:
    """The metric name the official code picks for this record, or None if it has none."""
    meta = meta or MileBenchMeta.of(rec)
    ds = _dataset(rec, meta)
    if "NeedleInAHaystack" in ds:
        return NEEDLE
    if "MMCoQA" in ds:
        return MMCOQA
    qt = _question_type(rec, meta)
    if qt == "open-ended":
        return ROUGE_L
    if qt == "multi-choice":
        return ACCURACY
    return None


def _details(rec: PredictionRecord, meta: MileBenchMeta) -> dict:
    n = meta.n_images if meta.n_images is not None else len(content_images(rec.question))
    ds = _dataset(rec, meta)
    return {
        "dataset": ds,
        "category": dataset_category(ds),
        "question_type": _question_type(rec, meta),
        "n_images": n,
        "image_quantity_level": image_quantity_level(n),
    }


def score_record(rec: PredictionRecord, mode: str) -> ScoreRecord:
    """Score one MileBench prediction in ``mode`` ("official" or "strict")."""
    meta = MileBenchMeta.of(rec)
    rule = rule_of(rec, meta)
    details = _details(rec, meta)
    common = dict(benchmark=BENCHMARK, mode=mode, task=details["dataset"])

    def unscorable(metric: str, reason: str) -> ScoreRecord:
        return make_score(
            rec, metric=metric, score=None, reason=reason, details=details, version=VERSION, **common
        )

    if rule is None:
        return unscorable(
            UNSUPPORTED,
            f"question_type {details['question_type']!r} is neither "
            "multi-choice nor open-ended (the official evaluate.py: 'Dataset not supported')",
        )
    if meta.response_missing:
        return unscorable(rule, "no response: pred_response is null")
    gold = gold_text(rec)
    if gold is None:
        return unscorable(rule, "no ground truth (gt_response)")
    pred = response_text(rec)

    if rule in (NEEDLE, MMCOQA):
        g, p = normalize_answer(gold), normalize_answer(pred)
        hit = g in p.split() if rule == NEEDLE else g in p
        details.update(gold=g, prediction=p, rule="token" if rule == NEEDLE else "substring")
        return make_score(rec, metric=rule, score=float(hit), details=details, version=VERSION, **common)

    if rule == ROUGE_L:
        g, p = normalize_answer(gold), normalize_answer(pred)
        if g == "":
            return unscorable(rule, "the normalized ground truth is empty (the official evaluate.py asserts)")
        details["gold"] = g
        if p == "":
            details["note"] = "empty prediction scores 0"
            return make_score(
                rec, metric=rule, score=0.0, details=details, version=f"rouge=={ROUGE_VERSION}", **common
            )
        try:
            f = rouge_l_f(p, g)
        except ValueError as e:
            return unscorable(
                rule, f"rouge cannot score this text ({e}); the official evaluate.py stops here"
            )
        return make_score(
            rec, metric=rule, score=f, details=details, version=f"rouge=={ROUGE_VERSION}", **common
        )

    choices = [str(c) for c in rec.choices or []]
    if not choices:
        return unscorable(rule, "multi-choice item without a choice_list")
    if mode == OFFICIAL:
        g, p = normalize_answer(gold), normalize_answer(pred)
        norm_choices = [normalize_answer(c) for c in choices]
        if g not in norm_choices:
            return unscorable(
                rule,
                f"the normalized ground truth {g!r} is not in the normalized choice_list "
                "(the official evaluate.py stops with an AssertionError)",
            )
        gold_key = official_key(norm_choices.index(g))
        extracted = match_choice_official(p, official_options(norm_choices))
        details.update(extracted=extracted, gold=gold_key, prediction=p)
        return make_score(
            rec, metric=rule, score=float(extracted == gold_key), details=details, version=VERSION, **common
        )

    keys = option_keys(len(choices))
    idx = _gold_index(gold, choices)
    if idx is None:
        return unscorable(rule, f"the ground truth {gold!r} is not one of the choices")
    letters_shown = canonical_dataset(details["dataset"]) != "GPR1200"
    ex = extract_choice(pred, dict(zip(keys, choices, strict=True)), letters_shown=letters_shown)
    details.update(extracted=ex.answer, gold=keys[idx], how=ex.how)
    if ex.no_answer:
        details["no_answer"] = True
    return make_score(
        rec,
        metric=rule,
        score=float(ex.answer == keys[idx]),
        details=details,
        version=METRICS_VERSION,
        extractor="strict",
        **common,
    )


def _gold_index(gold: str, choices: list[str]) -> int | None:
    """The raw ground truth's position among the raw choices (exact, then stripped, then normalized)."""
    for probe, conv in ((gold, str), (gold.strip(), str.strip), (normalize_answer(gold), normalize_answer)):
        matches = [i for i, c in enumerate(choices) if conv(c) == probe]
        if matches:
            return matches[0]
    return None


# ----------------------------------------------------------------------------- summary


def summary_rows(records: list[ScoreRecord]) -> list[dict]:
    """Rows per dataset (the official column), per image-quantity level (per dataset: what
    evaluate.py writes to eval.json; across datasets: the toolkit's), per category and overall
    (the toolkit's: the mean of the dataset values). Values are x100, unrounded (the official
    table rounds to 2 decimals)."""
    rows: list[dict] = []
    groups: dict[tuple[str, str], list[ScoreRecord]] = {}
    for s in records:
        if s.metric.startswith("milebench."):  # judge scores, if any were made, are not MileBench's numbers
            groups.setdefault((s.model, record_mode(s)), []).append(s)
    for (model, mode), recs in groups.items():
        src = SOURCE_OFFICIAL if mode == OFFICIAL else SOURCE_TOOLKIT
        base: dict[str, Any] = dict(benchmark=BENCHMARK, model=model, mode=mode)
        by_ds: dict[str, list[ScoreRecord]] = {}
        for s in recs:
            by_ds.setdefault(s.task, []).append(s)
        ds_rows = {}
        for ds, dr in by_ds.items():
            metrics = {s.metric for s in dr}
            metric = metrics.pop() if len(metrics) == 1 else SCORE
            ds_rows[ds] = mean_row(dr, level="dataset", group=ds, metric=metric, source=src, **base)
            rows.append(ds_rows[ds])
            for lvl in ("Few", "Medium", "Many"):
                part = [s for s in dr if (s.details or {}).get("image_quantity_level") == lvl]
                if part:
                    rows.append(
                        mean_row(
                            part,
                            level="image_quantity",
                            group=f"{ds}/{lvl}",
                            metric=metric,
                            source=src,
                            **base,
                        )
                    )
        for lvl in ("Few", "Medium", "Many"):
            part = [s for s in recs if (s.details or {}).get("image_quantity_level") == lvl]
            if part:
                rows.append(
                    mean_row(
                        part,
                        level="image_quantity",
                        group=lvl,
                        metric=SCORE,
                        source=SOURCE_TOOLKIT,
                        **base,
                    )
                )
        for cat in [*CATEGORIES, None]:
            parts = [r for ds, r in ds_rows.items() if dataset_category(ds) == cat]
            if parts:
                rows.append(
                    macro_row(
                        parts,
                        level="category",
                        group=cat or "uncategorized",
                        metric=SCORE,
                        source=SOURCE_TOOLKIT,
                        **base,
                    )
                )
        rows.append(
            macro_row(
                list(ds_rows.values()),
                level="overall",
                group="all",
                metric=SCORE,
                source=SOURCE_TOOLKIT,
                **base,
            )
        )
    return rows
