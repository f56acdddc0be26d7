"""What ``judge-report`` checks of prediction-powered means: do their intervals reach their level at the
leaderboard's label counts?

For each scorer on the rubric scale, on the ``overall`` items it scored (the responses, of several models,
to a set of questions), :func:`ppi_checks` simulates what ``judge-score --labels`` does with labels from
``judge-data sample --by question``. Each of ``draws`` draws

1. makes a new set of questions as large as the real one by drawing its questions with replacement (every
   response to a drawn question comes with it): a sample from the distribution the real questions stand
   for, whose mean is known (the all-human mean of the real responses);
2. labels ``round(fraction x questions)`` of its questions at random (every model's response to each);
3. per model, computes the PPI++ mean (:func:`judge.eval.ppi.ppi_mean`) and the human-only mean
   (:func:`judge.eval.ppi.classical_mean`) with their ``level`` intervals, on the rubric's scale, and per
   pair of models the first's win rates over the second (the PPI mean of the win points, human points on the questions
   both are labelled on: :func:`judge.scoring.labelled.ppi_win_rate`'s estimator), each needing
   ``min_labels`` labelled questions.

Reported: the share of intervals that contain the truth of the world they were drawn from (the model's
all-human mean; the pair's all-human win rate), the intervals' mean widths, and the Monte Carlo standard
error of the shares, computed for the draw design (the draws are the independent units: the intervals of
one draw, for every model and pair, share its questions and labels; :meth:`_Tally.se`). Drawing the questions again (step 1) is what makes the truth fixed and the labelled
questions a random sample of an unlimited population, which is what the intervals promise; labelling a
share of the real responses only would measure the intervals against the mean of those responses, whose
own sampling error the labels share (the finite-population correction), and overstate their coverage.

One more draw, of the real responses as they are (step 2 only), is shown as "one run" (``first_draw``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from judge.core.rubric import OVERALL
from judge.eval.bootstrap import seeded_rng
from judge.eval.matching import Scorer
from judge.eval.ppi import MIN_LABELS, MeanEstimate, classical_mean, ppi_mean
from judge.eval.report_data import PPICheck, PPIDraw, PPIModel, PPIWinRate

RATE = (0.0, 1.0)


def _points(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Win points of a over b: 1 a win, 1/2 a tie (within 1e-9), 0 a loss."""
    return np.where(np.abs(a - b) <= 1e-9, 0.5, (a > b).astype(float))


class _Tally:
    """Coverage and widths of one estimate kind over the draws, each interval tagged with its draw."""

    def __init__(self) -> None:
        self.cover: list[bool] = []
        self.width: list[float] = []
        self.draw: list[int] = []

    def add(self, est: MeanEstimate, truth: float, draw: int = 0) -> None:
        if est.ci is not None:
            self.cover.append(est.ci[0] - 1e-12 <= truth <= est.ci[1] + 1e-12)
            self.width.append(est.ci[1] - est.ci[0])
            self.draw.append(draw)

    def share(self) -> float | None:
        return float(np.mean(self.cover)) if self.cover else None

    def mean_width(self) -> float | None:
        return float(np.mean(self.width)) if self.width else None

    def se(self) -> float | None:
        """The Monte Carlo standard error of :meth:`share` for the draw design: the intervals of one draw
        share its questions and labels, so the draws (independent) are the units, not the intervals. The
        share is a ratio (covering intervals over intervals, summed over draws); its standard error is the
        cluster (linearised ratio) one, sqrt(D / (D - 1) sum_d (c_d - p n_d)^2) / sum_d n_d over the D
        draws with c_d of n_d intervals covering. None with fewer than 2 draws."""
        p = self.share()
        if p is None:
            return None
        draws = np.asarray(self.draw)
        ids, inv = np.unique(draws, return_inverse=True)
        if ids.size < 2:
            return None
        c = np.bincount(inv, weights=np.asarray(self.cover, dtype=float))
        n = np.bincount(inv).astype(float)
        d = ids.size
        return float(np.sqrt(d / (d - 1) * np.sum((c - p * n) ** 2)) / n.sum())


def _draw(ppi: MeanEstimate, hum: MeanEstimate) -> PPIDraw:
    return PPIDraw(
        n_labelled=ppi.n_labelled,
        ppi_mean=ppi.mean,
        ppi_ci=ppi.ci,
        human_mean=hum.mean,
        human_ci=hum.ci,
        reason=ppi.reason,
        bounded=ppi.bounded,
    )


def ppi_checks(
    scorers: Sequence[Scorer],
    fraction: float,
    draws: int,
    seed: int,
    level: float = 0.95,
    *,
    scale: tuple[float, float],
    min_labels: int = MIN_LABELS,
) -> list[PPICheck]:
    """One :class:`PPICheck` per scorer on the rubric scale with scored ``overall`` items (module doc)."""
    if draws < 1:
        return []
    checks = [_check(sc, fraction, draws, seed, level, scale, min_labels) for sc in scorers if sc.on_scale]
    return [c for c in checks if c is not None]


def _check(
    sc: Scorer,
    fraction: float,
    draws: int,
    seed: int,
    level: float,
    scale: tuple[float, float],
    min_labels: int,
) -> PPICheck | None:
    items = [m for m in sc.scored if m.item.criterion == OVERALL and m.score is not None]
    questions = sorted({m.item.question_id for m in items})
    if len(questions) < 2:
        return None
    qindex = {q: i for i, q in enumerate(questions)}
    models = sorted({m.item.model for m in items})
    # (model, question) -> the response's (score, human); one response per model and question
    # (a model that answered a question twice: its mean, as the leaderboard's per-question score).
    cells: dict[str, dict[int, list[tuple[float, float]]]] = {m: defaultdict(list) for m in models}
    for m in items:
        cells[m.item.model][qindex[m.item.question_id]].append((float(m.score), m.item.value))  # type: ignore[arg-type]
    score = np.full((len(models), len(questions)), np.nan)
    human = np.full_like(score, np.nan)
    for i, mod in enumerate(models):
        for q, vals in cells[mod].items():
            score[i, q] = np.mean([v[0] for v in vals])
            human[i, q] = np.mean([v[1] for v in vals])
    has = ~np.isnan(score)
    truth = {mod: float(np.nanmean(human[i])) for i, mod in enumerate(models)}
    pairs = [(i, j) for i in range(len(models)) for j in range(i + 1, len(models))]  # B over A: 1 - A over B
    both = {p: has[p[0]] & has[p[1]] for p in pairs}
    pts = {p: _points(score[p[0]], score[p[1]]) for p in pairs}
    hpts = {p: _points(human[p[0]], human[p[1]]) for p in pairs}
    win_truth = {p: float(hpts[p][both[p]].mean()) for p in pairs if both[p].any()}
    n_q = len(questions)
    k = max(1, round(fraction * n_q))

    def estimates(i: int, cols: np.ndarray, lab: np.ndarray) -> tuple[MeanEstimate, MeanEstimate]:
        c = cols[has[i, cols]]
        lab_c = lab[has[i, cols]]
        y, s = human[i, c], score[i, c]
        est = ppi_mean(y[lab_c], s[lab_c], s[~lab_c], level=level, bounds=scale, min_labels=min_labels)
        return est, classical_mean(y[lab_c], level=level, bounds=scale, min_labels=min_labels)

    def win_estimates(p, cols: np.ndarray, lab: np.ndarray) -> tuple[MeanEstimate, MeanEstimate]:
        c = cols[both[p][cols]]
        lab_c = lab[both[p][cols]]
        y, s = hpts[p][c], pts[p][c]
        est = ppi_mean(
            y[lab_c], s[lab_c], s[~lab_c], level=level, bounds=RATE, min_labels=min_labels, ends=True
        )
        return est, classical_mean(y[lab_c], level=level, bounds=RATE, min_labels=min_labels, ends=True)

    # One run on the responses as they are.
    everything = np.arange(n_q)
    first_lab = np.zeros(n_q, dtype=bool)
    first_lab[seeded_rng(seed, "ppi", sc.name, "first").choice(n_q, size=k, replace=False)] = True
    first = {mod: _draw(*estimates(i, everything, first_lab)) for i, mod in enumerate(models)}
    first_win = {p: _draw(*win_estimates(p, everything, first_lab)) for p in win_truth}

    tallies = {mod: (_Tally(), _Tally()) for mod in models}
    win_tallies = {p: (_Tally(), _Tally()) for p in win_truth}
    n_bounded = 0
    for d in range(draws):
        rng = seeded_rng(seed, "ppi", sc.name, str(d))
        cols = rng.choice(n_q, size=n_q, replace=True)
        lab = np.zeros(n_q, dtype=bool)
        lab[rng.choice(n_q, size=k, replace=False)] = True
        for i, mod in enumerate(models):
            est, hum = estimates(i, cols, lab)
            tallies[mod][0].add(est, truth[mod], d)
            tallies[mod][1].add(hum, truth[mod], d)
            n_bounded += bool(est.bounded)
        for p in win_truth:
            est, hum = win_estimates(p, cols, lab)
            win_tallies[p][0].add(est, win_truth[p], d)
            win_tallies[p][1].add(hum, win_truth[p], d)
            n_bounded += bool(est.bounded)
    rows = [
        PPIModel(
            model=mod,
            n=int(has[i].sum()),
            all_human_mean=truth[mod],
            first_draw=first[mod],
            n_draws=len(tallies[mod][0].cover),
            ppi_coverage=tallies[mod][0].share(),
            human_coverage=tallies[mod][1].share(),
            ppi_mean_width=tallies[mod][0].mean_width(),
            human_mean_width=tallies[mod][1].mean_width(),
        )
        for i, mod in enumerate(models)
    ]
    wins = [
        PPIWinRate(
            model=models[p[0]],
            opponent=models[p[1]],
            n_shared=int(both[p].sum()),
            all_human_win_rate=win_truth[p],
            first_draw=first_win[p],
            n_draws=len(win_tallies[p][0].cover),
            ppi_coverage=win_tallies[p][0].share(),
            human_coverage=win_tallies[p][1].share(),
            ppi_mean_width=win_tallies[p][0].mean_width(),
            human_mean_width=win_tallies[p][1].mean_width(),
        )
        for p in win_truth
    ]
    ppi_all, hum_all = (
        _pooled([t[0] for t in tallies.values()]),
        _pooled([t[1] for t in tallies.values()]),
    )
    win_all = _pooled([t[0] for t in win_tallies.values()])
    win_hum = _pooled([t[1] for t in win_tallies.values()])
    return PPICheck(
        scorer=sc.name,
        criterion=OVERALL,
        fraction=fraction,
        n_labelled=k,
        n_items=len(items),
        n_questions=n_q,
        draws=draws,
        seed=seed,
        level=level,
        min_labels=min_labels,
        by="question",
        draw="bootstrap",
        models=rows,
        n_intervals=len(ppi_all.cover),
        ppi_coverage=ppi_all.share(),
        human_coverage=hum_all.share(),
        ppi_coverage_se=ppi_all.se(),
        human_coverage_se=hum_all.se(),
        ppi_mean_width=ppi_all.mean_width(),
        human_mean_width=hum_all.mean_width(),
        win_rates=wins,
        win_n_intervals=len(win_all.cover),
        win_ppi_coverage=win_all.share(),
        win_human_coverage=win_hum.share(),
        win_ppi_coverage_se=win_all.se(),
        n_bounded=n_bounded,
        first_questions=[questions[i] for i in np.nonzero(first_lab)[0]],
    )


def _pooled(tallies: Sequence[_Tally]) -> _Tally:
    out = _Tally()
    for t in tallies:
        out.cover += t.cover
        out.width += t.width
        out.draw += t.draw
    return out


__all__ = ["ppi_checks"]
