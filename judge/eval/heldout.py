"""What ``judge-report`` checks of calibrated scores and of prediction-powered means, on held-out labels.

**Calibration** (:func:`calibration_checks`): for each scorer whose records are calibrated (they carry
``raw_score`` and ``interval``, and ``producer.calibration`` names the calibration), on its human items
that the calibration was *not* fitted on (the ids that ``calibration.json`` in the judge folder lists are
left out; when that file cannot be read, nothing can be left out and a warning says so), all criteria
pooled: MAE and MSE of the raw score and of the calibrated score against the human score, the empirical
coverage of the intervals (the share of items whose human score lies within ``[low, high]``) and their mean
width, each with the cluster bootstrap's 95% interval (questions resampled, as everywhere in the report);
per criterion the same without intervals.

**Prediction-powered inference** (:func:`ppi_checks`): for each scorer on the rubric scale, on the
``overall`` items it scored, a simulation of labelling a share of the responses. Each draw labels
``round(fraction x responses)`` responses at random (all models' together); per responding model the
prediction-powered mean (:func:`judge.eval.ppi.ppi_mean`: the scorer's scores, corrected by its error on
the labelled responses) and the human-only mean of the same labels (:func:`judge.eval.ppi.classical_mean`),
each with its 95% interval. Over the draws: the share of intervals that contain the model's all-human mean
(the mean human score of all its responses here), and the mean widths. Those intervals are made for the
mean over the population the responses were drawn from; the all-human mean of these responses is a
finite-sample stand-in, whose own sampling error the labelled share partly shares, so the coverage of it
may exceed the level when the share is large.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from judge.core.errors import JudgeError
from judge.core.rubric import OVERALL
from judge.eval.bootstrap import ClusterBootstrap, interval_summary, seeded_rng, weighted_mae, weighted_mse
from judge.eval.matching import Match, Scorer
from judge.eval.ppi import classical_mean, ppi_mean
from judge.eval.report_data import (
    CalibrationCheck,
    CriterionCoverage,
    Interval,
    PPICheck,
    PPIDraw,
    PPIModel,
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


def calibration_checks(
    scorers: Sequence[Scorer], n_boot: int, seed: int
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
            per_crit.append(
                CriterionCoverage(
                    criterion=crit,
                    n=len(idx),
                    coverage=float(covered[ix].mean()),
                    mean_width=float((hi - lo)[ix].mean()),
                    mae_before=float(np.abs(raw[ix] - human[ix]).mean()),
                    mae_after=float(np.abs(after[ix] - human[ix]).mean()),
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
            )
        )
    return out, warnings


def ppi_checks(
    scorers: Sequence[Scorer], fraction: float, draws: int, seed: int, level: float = 0.95
) -> list[PPICheck]:
    """One :class:`PPICheck` per scorer on the rubric scale with scored ``overall`` items (module doc)."""
    out = []
    for sc in scorers:
        if not sc.on_scale or draws < 1:
            continue
        items = [m for m in sc.scored if m.item.criterion == OVERALL and m.score is not None]
        if len(items) < 4:
            continue
        score = np.asarray([m.score for m in items], dtype=float)
        human = np.asarray([m.item.value for m in items], dtype=float)
        models = sorted({m.item.model for m in items})
        of_model = {
            mod: np.asarray([i for i, m in enumerate(items) if m.item.model == mod]) for mod in models
        }
        truth = {mod: float(human[ix].mean()) for mod, ix in of_model.items()}
        k = max(2, round(fraction * len(items)))
        stats: dict[str, dict[str, list]] = {mod: defaultdict(list) for mod in models}
        first: dict[str, PPIDraw] = {}
        for d in range(draws):
            rng = seeded_rng(seed, "ppi", sc.name, str(d))
            labelled = np.zeros(len(items), dtype=bool)
            labelled[rng.choice(len(items), size=k, replace=False)] = True
            for mod, ix in of_model.items():
                lab, unl = ix[labelled[ix]], ix[~labelled[ix]]
                est = ppi_mean(human[lab], score[lab], score[unl], level=level)
                hum = classical_mean(human[lab], level=level)
                if d == 0:
                    first[mod] = PPIDraw(
                        n_labelled=len(lab),
                        ppi_mean=est.mean,
                        ppi_ci=est.ci,
                        human_mean=hum.mean,
                        human_ci=hum.ci,
                    )
                for name, e in (("ppi", est), ("human", hum)):
                    if e.ci is not None:
                        stats[mod][f"{name}_cover"].append(e.ci[0] <= truth[mod] <= e.ci[1])
                        stats[mod][f"{name}_width"].append(e.ci[1] - e.ci[0])
        rows = []
        for mod in models:
            st = stats[mod]
            rows.append(
                PPIModel(
                    model=mod,
                    n=len(of_model[mod]),
                    all_human_mean=truth[mod],
                    first_draw=first[mod],
                    n_draws=len(st["ppi_cover"]),
                    ppi_coverage=_share(st["ppi_cover"]),
                    human_coverage=_share(st["human_cover"]),
                    ppi_mean_width=_share(st["ppi_width"]),
                    human_mean_width=_share(st["human_width"]),
                )
            )
        every = [c for mod in models for c in stats[mod]["ppi_cover"]]
        every_h = [c for mod in models for c in stats[mod]["human_cover"]]
        out.append(
            PPICheck(
                scorer=sc.name,
                criterion=OVERALL,
                fraction=fraction,
                n_labelled=k,
                n_items=len(items),
                draws=draws,
                seed=seed,
                level=level,
                models=rows,
                n_intervals=len(every),
                ppi_coverage=_share(every),
                human_coverage=_share(every_h),
                ppi_mean_width=_share([w for mod in models for w in stats[mod]["ppi_width"]]),
                human_mean_width=_share([w for mod in models for w in stats[mod]["human_width"]]),
            )
        )
    return out


def _share(values: Sequence) -> float | None:
    return float(np.mean(values)) if len(values) else None


__all__ = ["calibrated_matches", "calibration_checks", "held_out_matches", "ppi_checks"]
