"""What ``judge-report`` checks of calibrated scores and of selective evaluation, on held-out labels.

**Calibration** (:func:`calibration_checks`): for each scorer whose records are calibrated (they carry
``raw_score`` and ``interval``, and ``producer.calibration`` names the calibration), on its human items
that the calibration was *not* fitted on (the ids that ``calibration.json`` in the judge folder lists are
left out; when that file cannot be read, nothing can be left out and a warning says so), all criteria
pooled: MAE and MSE of the raw score and of the calibrated score against the human score, the empirical
coverage of the intervals (the share of items whose human score lies within ``[low, high]``) and their mean
width, each with the cluster bootstrap's 95% interval (questions resampled, as everywhere in the report);
per criterion the same without intervals.

With the read-out's and the calibrated distributions in the records (``raw_distribution``,
``distribution``), also the NLL of the annotators' ratings, the Brier score and both expected calibration
errors (:mod:`judge.eval.calibration_metrics`) before and after calibration, with the same intervals; per
criterion, the coverage with its interval (each criterion its own: the calibration promises its level per
criterion where it had enough labels for a criterion's own interval).

**Selective evaluation** (:func:`selective_checks`): for each scorer whose records carry the ``trusted``
mark, on the same held-out items, the share of trusted scores and the agreement with humans on them and
on all scores (no abstention), pointwise and, with the thresholds file at hand, pairwise.

The prediction-powered inference check is :mod:`judge.eval.ppi_check`'s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from judge.core.errors import JudgeError
from judge.eval.bootstrap import (
    ClusterBootstrap,
    interval_summary,
    sampled_interval,
    seeded_rng,
    weighted_mae,
    weighted_mse,
)
from judge.eval.calibration_metrics import distribution_metrics
from judge.eval.matching import Match, Scorer
from judge.eval.report_data import (
    CalibrationCheck,
    CriterionCoverage,
    Interval,
    SelectiveCheck,
    SelectiveCriterion,
    SelectivePairs,
)
from judge.models.calibration import CALIBRATION_FILE, read_calibration


def calibrated_matches(sc: Scorer) -> list[Match]:
    """The scorer's scored matches that carry a raw score and an interval (a calibrated judge's)."""
    return [m for m in sc.scored if m.record.raw_score is not None and m.record.interval is not None]


def _calibration_ids(producer: dict) -> tuple[set[str] | None, str]:
    """The response ids the calibration was fitted on (None: unknown) and how that was settled."""
    cal = producer.get("calibration") or {}
    judge = producer.get("judge")
    path = Path(str(judge)) / CALIBRATION_FILE if judge else None
    if path is None or not path.is_file():
        return (
            None,
            f"{path or CALIBRATION_FILE} not found: cannot tell which items the calibration was fitted on",
        )
    try:
        found = read_calibration(path)
    except JudgeError as e:
        return None, f"{path} unreadable ({str(e).splitlines()[0]})"
    if cal.get("fingerprint") and found.fingerprint() != cal["fingerprint"]:
        return None, f"{path} is not the calibration these scores were made with (its fingerprint differs)"
    return set(found.data.ids), f"items of {path}'s fitting data left out"


def held_out_matches(sc: Scorer) -> tuple[list[Match], int, str | None, str]:
    """A calibrated scorer's matches the calibration was not fitted on, how many were left out, a warning
    (None: none) and how the held-out items were settled."""
    matches = calibrated_matches(sc)
    if not matches:
        return [], 0, None, ""
    fitted_on, how = _calibration_ids(matches[0].record.producer)
    warning = (
        f"{sc.name}: {how}; its calibration section may include items it was fitted on"
        if fitted_on is None
        else None
    )
    held = [m for m in matches if fitted_on is None or m.item.id not in fitted_on]
    return held, len(matches) - len(held), warning, how


def _weighted_interval(values: np.ndarray, plan: ClusterBootstrap, clusters: Sequence[str]) -> Interval:
    w = plan.weights(clusters)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = (w @ values) / w.sum(axis=1)
    return Interval.model_validate(interval_summary(float(values.mean()), reps))


def _error_interval(fn, pred: np.ndarray, human: np.ndarray, plan: ClusterBootstrap, clusters) -> Interval:
    point = float(fn(pred, human, np.ones((1, pred.size)))[0])
    return Interval.model_validate(interval_summary(point, fn(pred, human, plan.weights(clusters))))


def _distribution_intervals(
    held: Sequence[Match], values: Sequence[int], plan: ClusterBootstrap, clusters: Sequence[str]
) -> dict[str, Interval]:
    """NLL, Brier and both expected calibration errors of the raw read-out (``_before``) and the calibrated
    view (``_after``), with the bootstrap's intervals; empty when a record lacks either distribution."""
    recs = [m.record for m in held]
    if any(r.distribution is None or r.raw_distribution is None for r in recs):
        return {}
    ratings = [[s for _, s in m.item.ratings] for m in held]
    human = [m.item.value for m in held]
    w = plan.weights(clusters)
    out = {}
    for suffix, dists, expected in (
        ("before", [r.raw_distribution for r in recs], [r.raw_score for r in recs]),
        ("after", [r.distribution for r in recs], [r.score for r in recs]),
    ):
        point = distribution_metrics(dists, expected, ratings, human, values)  # type: ignore[arg-type]
        reps = distribution_metrics(dists, expected, ratings, human, values, weights=w)  # type: ignore[arg-type]
        for k in ("nll", "brier", "ece_top", "ece_score"):
            out[f"{k}_{suffix}"] = Interval.model_validate(interval_summary(point[k], reps[k]))  # type: ignore[arg-type]
    return out


def calibration_checks(
    scorers: Sequence[Scorer], n_boot: int, seed: int, values: Sequence[int] | None = None
) -> tuple[list[CalibrationCheck], list[str]]:
    """One :class:`CalibrationCheck` per calibrated scorer (see the module doc), and warnings."""
    out, warnings = [], []
    for sc in scorers:
        held, n_excluded, warning, how = held_out_matches(sc)
        if not held and not n_excluded:
            continue
        if warning:
            warnings.append(warning)
        cal = (held or calibrated_matches(sc))[0].record.producer.get("calibration") or {}
        if n_excluded:
            warnings.append(
                f"{sc.name}: {n_excluded} scored items are in the calibration's fitting data and are left out of "
                "the calibration section (held-out items only)"
            )
        if len(held) < 2:
            warnings.append(f"{sc.name}: fewer than 2 held-out calibrated items: no calibration section")
            continue
        raw = np.asarray([m.record.raw_score for m in held], dtype=float)
        after = np.asarray([m.score for m in held], dtype=float)
        human = np.asarray([m.item.value for m in held], dtype=float)
        ends = np.asarray([m.record.interval for m in held], dtype=float)
        lo, hi = ends[:, 0], ends[:, 1]
        covered = ((lo - 1e-9 <= human) & (human <= hi + 1e-9)).astype(float)
        clusters = [m.item.question_id for m in held]
        plan = ClusterBootstrap(clusters, n_boot, seeded_rng(seed, "calibration", sc.name))
        per_crit = []
        by_crit: dict[str, list[int]] = defaultdict(list)
        for i, m in enumerate(held):
            by_crit[m.item.criterion].append(i)
        for crit, idx in by_crit.items():
            ix = np.asarray(idx)
            sub = [clusters[i] for i in idx]
            per_crit.append(
                CriterionCoverage(
                    criterion=crit,
                    n=len(idx),
                    coverage=float(covered[ix].mean()),
                    mean_width=float((hi - lo)[ix].mean()),
                    mae_before=float(np.abs(raw[ix] - human[ix]).mean()),
                    mae_after=float(np.abs(after[ix] - human[ix]).mean()),
                    coverage_ci=_weighted_interval(covered[ix], plan, sub).ci,
                )
            )
        out.append(
            CalibrationCheck(
                scorer=sc.name,
                method=cal.get("method"),
                level=cal.get("level"),
                fingerprint=cal.get("fingerprint"),
                held_out=how,
                n=len(held),
                n_questions=plan.n_clusters,
                n_excluded=n_excluded,
                mae_before=_error_interval(weighted_mae, raw, human, plan, clusters),
                mae_after=_error_interval(weighted_mae, after, human, plan, clusters),
                mse_before=_error_interval(weighted_mse, raw, human, plan, clusters),
                mse_after=_error_interval(weighted_mse, after, human, plan, clusters),
                coverage=_weighted_interval(covered, plan, clusters),
                mean_width=_weighted_interval(hi - lo, plan, clusters),
                per_criterion=per_crit,
                **(_distribution_intervals(held, values, plan, clusters) if values is not None else {}),
            )
        )
        if (broken := _coverage_broken(out[-1])) is not None:
            warnings.append(broken)
    return out, warnings


def _coverage_broken(c: CalibrationCheck) -> str | None:
    """The warning of a coverage whose whole interval lies below the level the intervals promise (None when
    the promise may hold on these labels)."""
    cov, level = c.coverage, c.level
    if level is None or cov.value is None or not cov.ci or cov.ci[1] >= level:
        return None
    return (
        f"{c.scorer}: its {level:.0%} intervals contain {cov.value:.3f} [{cov.ci[0]:.3f}, {cov.ci[1]:.3f}] of "
        f"the {c.n} held-out human scores, the whole interval below the {level:.0%} promised: the calibration "
        "does not keep its promise on these labels (refit it with judge-calibrate --human on labelled items "
        "like these)"
    )


def _ratio_interval(
    num: np.ndarray, den: np.ndarray, plan: ClusterBootstrap, clusters: Sequence[str]
) -> Interval:
    """``sum(num) / sum(den)`` with its bootstrap interval (None where nothing is in the denominator, and no
    interval where the resamples do not vary: nothing trusted gives 0 in every resample, and a ``[0, 0]``
    would claim the share is exactly 0 on new items)."""
    w = plan.weights(clusters)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = (w @ num) / (w @ den)
    point = float(num.sum() / den.sum()) if den.sum() > 0 else None
    return Interval(value=point, ci=sampled_interval(reps) if point is not None else None,
                    n_valid=int(np.isfinite(reps).sum()))  # fmt: skip


def selective_checks(
    scorers: Sequence[Scorer], n_boot: int, seed: int, values: Sequence[int]
) -> tuple[list[SelectiveCheck], list[str]]:
    """Each scorer whose records carry the ``trusted`` mark, on its held-out items (as the calibration
    section's: not those the calibration, and so the thresholds, were fitted on): the share of scores
    trusted, the agreement with humans on them (the calibrated score within the thresholds' tolerance of the
    human mean score) and on every score, each with the bootstrap's 95% interval (questions resampled); per
    criterion the same without intervals; pairwise, when the judge folder's ``selective.json`` is readable,
    the same for the pairs of held-out responses to one question that the annotators order."""
    out, warnings = [], []
    for sc in scorers:
        marked = [m for m in sc.scored if m.record.trusted is not None]
        if not marked:
            continue
        held, n_excluded, warning, how = held_out_matches(sc)
        held = [m for m in held if m.record.trusted is not None]
        if len(held) < 2:
            warnings.append(f"{sc.name}: fewer than 2 held-out marked items: no selective-evaluation section")
            continue
        prod = held[0].record.producer.get("selective") or {}
        tolerance = float(prod.get("tolerance", 1.0))
        trusted = np.asarray([bool(m.record.trusted) for m in held], dtype=float)
        agree = np.asarray(
            [abs(float(m.score or 0.0) - m.item.value) <= tolerance + 1e-9 for m in held], dtype=float
        )
        clusters = [m.item.question_id for m in held]
        sel = _thresholds(held)
        plan = ClusterBootstrap(clusters, n_boot, seeded_rng(seed, "selective", sc.name))
        ones = np.ones_like(trusted)
        by_crit: dict[str, list[int]] = defaultdict(list)
        for i, m in enumerate(held):
            by_crit[m.item.criterion].append(i)
        per_crit = [
            SelectiveCriterion(
                criterion=c,
                n=len(ix),
                n_trusted=int(trusted[ix].sum()),
                agreement_trusted=float(agree[ix][trusted[ix] > 0].mean()) if trusted[ix].sum() else None,
                agreement_all=float(agree[ix].mean()),
            )
            for c, ix in ((c, np.asarray(ix)) for c, ix in by_crit.items())
        ]
        out.append(
            SelectiveCheck(
                scorer=sc.name,
                agreement=prod.get("agreement"),
                delta=prod.get("delta"),
                tolerance=tolerance,
                confidence=prod.get("confidence"),
                fingerprint=prod.get("fingerprint"),
                held_out=how,
                n=len(held),
                n_questions=plan.n_clusters,
                n_trusted=int(trusted.sum()),
                share_trusted=_ratio_interval(trusted, ones, plan, clusters),
                agreement_trusted=_ratio_interval(agree * trusted, trusted, plan, clusters),
                agreement_all=_ratio_interval(agree, ones, plan, clusters),
                per_criterion=per_crit,
                pairwise=_pairwise_check(sc, held, values, plan),
                no_threshold=None
                if sel is None
                else all(r.threshold is None for r in sel.pointwise.values()),
            )
        )
    return out, warnings


def _thresholds(held: Sequence[Match]):
    """The thresholds the held-out records were marked by (the judge folder's ``selective.json`` whose
    fingerprint they carry); None when it cannot be read."""
    from judge.models.selective import SELECTIVE_FILE, read_selective

    prod = held[0].record.producer
    judge = prod.get("judge")
    path = Path(str(judge)) / SELECTIVE_FILE if judge else None
    if path is None or not path.is_file():
        return None
    try:
        sel = read_selective(path)
    except JudgeError:
        return None
    return sel if sel.fingerprint() == (prod.get("selective") or {}).get("fingerprint") else None


def _pairwise_check(
    sc: Scorer, held: Sequence[Match], values: Sequence[int], plan: ClusterBootstrap
) -> SelectivePairs | None:
    """Pairwise selective evaluation on the held-out pairs, by the thresholds in the judge folder (None when
    they cannot be read or hold no pairwise thresholds)."""
    from itertools import combinations

    from judge.eval.selective import human_preference
    from judge.models.preference import preference

    sel = _thresholds(held)
    if sel is None or not sel.pairwise:
        return None
    by: dict[tuple[str, str], list[Match]] = defaultdict(list)
    for m in held:
        by[(m.item.question_id, m.item.criterion)].append(m)
    rows = []
    for (q, crit), group in sorted(by.items()):
        for a, b in combinations(sorted(group, key=lambda m: m.item.id), 2):
            h = human_preference(_labelled(a), _labelled(b))
            if h == 0:
                continue
            p = preference(a.record.distribution, b.record.distribution, values).p_first_better  # type: ignore[arg-type]
            judge_pref = 0 if p == 0.5 else (1 if p > 0.5 else -1)
            rows.append((q, bool(sel.trusted_pair(crit, p)), judge_pref == h, judge_pref == 0))
    if len(rows) < 2:
        return None
    clusters = [r[0] for r in rows]
    trusted = np.asarray([r[1] for r in rows], dtype=float)
    agree = np.asarray([r[2] for r in rows], dtype=float)
    ones = np.ones_like(trusted)
    return SelectivePairs(
        n=len(rows),
        no_threshold=all(r.threshold is None for r in sel.pairwise.values()),
        share_trusted=_ratio_interval(trusted, ones, plan, clusters),
        agreement_trusted=_ratio_interval(agree * trusted, trusted, plan, clusters),
        agreement_all=_ratio_interval(agree, ones, plan, clusters),
        n_judge_ties=sum(r[3] for r in rows),
    )


def _labelled(m: Match):
    """A match as :class:`judge.eval.calibration.LabelledScore` (for the annotators' majority preference)."""
    from judge.eval.calibration import LabelledScore

    return LabelledScore(
        m.item.id,
        m.item.criterion,
        m.item.question_id,
        float(m.score),  # type: ignore[arg-type]
        tuple(m.record.distribution or ()),
        m.item.value,
        tuple(s for _, s in m.item.ratings),
        tuple(a for a, _ in m.item.ratings),
    )


__all__ = ["calibrated_matches", "calibration_checks", "held_out_matches", "selective_checks"]
