"""The leaderboard of a scoring run: candidate models ranked by their judge scores, with bootstrap intervals.

Built by :func:`build_leaderboard` from the same records as the rest of the summary (the merged
``scores.jsonl``, restricted to the run's items), so a resumed run and ``judge-score --server`` get
the same leaderboard. Only judge records (``metric == "judge"``) take part; rule-based metrics do not.

Boards. One per benchmark and task, plus ``group="all"`` (the benchmark's tasks together). A
*question* is ``(task, id)`` (for annotation inputs ``(task, question_id)``: there each response has
its own id): the records of the candidate models that answered the same question
share it. A model's *score on a question* is its ``overall`` judge score; on a board without any
``overall`` record it is the mean of the question's scored criteria instead (``basis`` says which:
``"overall"`` or ``"criteria_mean"``; as in the summary's rows, the ``all`` board of a benchmark with
``overall`` scores takes those only). Unscorable records (``score`` null) are left out and counted
(``n_unscorable``: the model's questions on the board without a score). A board whose records are
all unscorable is skipped (listed under ``skipped``).

Per model of a board:

* ``mean``: the mean of its scores over the questions it has a score for (``n`` of them): the
  ``value`` of the summary's ``judge.overall`` row of that model and group;
* ``ci``: 95% percentile bootstrap interval of ``mean`` (2.5th and 97.5th percentile over the
  resamples, :func:`judge.eval.bootstrap.sampled_interval`: null where the resamples do not vary, as on
  a board of one question or where every question got the same score, never a zero-width interval). Each resample draws as many questions
  as the board has (those with a score from any model) with replacement, and a model's resampled
  mean is the mean of its scores over the drawn questions, each counted as often as drawn; one
  resampling plan (:class:`judge.eval.bootstrap.ClusterBootstrap`, seeded with ``seed``, the
  benchmark and the group) serves every model of the board, so they share every resample;
* ``rank``: 1 + the number of models with a strictly higher ``mean`` (1 = best, higher scores are
  better; equal means share a rank); a model without a score on the board has none;
* ``rank_ci``: the 2.5th and 97.5th percentile of the model's rank over the same resamples (ranked
  among the models with a resampled mean; integers: the order statistics below and above). A
  resample that drew none of a model's questions leaves it out; with fewer than half of the
  resamples left, ``ci`` and ``rank_ci`` are null.

Win rates (boards with 2+ ranked models), for each ordered pair (A, B): over the ``n_shared``
questions where both have a score, ``win_rate = (wins + ties / 2) / n_shared``, a win being A's
score > B's (so ``win_rate(A, B) = 1 - win_rate(B, A)``), with its 95% interval under the board's
resamples (questions drawn as above); null when they share no question.

With human labels for some responses (``judge-score --labels``), each model also gets its human-only
and prediction-powered means (each from at least ``min_labels`` labelled questions, on the rubric's
scale), and a board where every ranked model has a prediction-powered mean is ranked by them, its win
rates too (``ranked_by: "ppi"``): :mod:`judge.scoring.labelled` says how.

Written beside the summary by :mod:`judge.scoring.leaderboard_files` (its CSVs, plot and markdown);
``summary.json`` holds the whole under ``leaderboard``. Never NaN: an undefined number is null.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from judge.core.rubric import OVERALL
from judge.eval.bootstrap import ClusterBootstrap, sampled_interval, seeded_rng
from judge.eval.ppi import MIN_LABELS
from judge.scoring.labelled import Labels, model_estimates, ppi_win_rate, question_labels

#: Bootstrap resamples and seed when none are given (``judge-score``'s defaults).
RESAMPLES = 1000
SEED = 0
LEVEL = 0.95
_CHUNK = 200  # resamples per block of the matrix products (bounds memory on large boards)

Question = tuple[str, str]  # (task, id)


def build_leaderboard(
    records: list[dict[str, Any]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
    scale: tuple[int, int] | None = None,
    question_map: Mapping[tuple[str, str, str], str] | None = None,
    labels: Labels | None = None,
    min_labels: int = MIN_LABELS,
) -> dict[str, Any]:
    """The leaderboard of the judge records (see the module doc).

    ``question_map``: ``(benchmark, model, id)`` -> the question the item answers, where that is not its
    ``id`` (annotation inputs: each response has its own id and shares a ``question_id``). ``labels``:
    human labels of some responses (:mod:`judge.scoring.labelled`): each model's human-only and
    prediction-powered means beside its judge-only mean, and ranks and win rates by the latter;
    ``min_labels``: the labelled questions each of those estimates needs.

    Returns ``{"resamples", "seed", "ci_level", "scale", "boards": [...], "skipped": [...]}``; each
    board ``{"benchmark", "group", "level", "basis", "n_questions", "models": [...], "win_rates":
    [...]}``, models best first, then those without a score. ``scale`` (the rubric's) sets the
    plot's axis.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    by_board: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("metric") != "judge":
            continue
        for group in (r["task"], "all"):
            by_board[(r["benchmark"], group)].append(r)
    boards: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    judged = {(str(r["model"]), str(r["id"])) for r in records if r.get("metric") == "judge"}
    # Every board reads the labels by the scored response they label (one rule: judge.core.identity).
    matched = labels.matched_to(judged) if labels is not None else None
    for benchmark, group in sorted(by_board, key=lambda k: (k[0], k[1] == "all", k[1])):
        board = _board(
            benchmark,
            group,
            by_board[(benchmark, group)],
            resamples,
            seed,
            level,
            question_map or {},
            matched,
            (float(scale[0]), float(scale[1])) if scale else None,
            min_labels,
        )
        (boards if "models" in board else skipped).append(board)
    out: dict[str, Any] = {
        "resamples": int(resamples),
        "seed": int(seed),
        "ci_level": level,
        "scale": list(scale) if scale else None,
        **({"min_labels": int(min_labels)} if labels is not None else {}),
        "boards": boards,
        "skipped": skipped,
    }
    if labels is not None:
        out["labels"] = labels.describe(judged)
    return out


def _question_of(question_map: Mapping[tuple[str, str, str], str]):
    """A record's question: ``(task, id)``, or ``(task, question_id)`` through ``question_map``."""

    def question(r: dict[str, Any]) -> Question:
        return (
            str(r["task"]),
            question_map.get((str(r["benchmark"]), str(r["model"]), str(r["id"])), str(r["id"])),
        )

    return question


def _question_scores(
    recs: list[dict[str, Any]], question_map: Mapping[tuple[str, str, str], str]
) -> tuple[str, dict[str, dict[Question, float | None]], list[dict[str, Any]]]:
    """The board's basis, each model's score per question (None: no scored record for it), and the records
    those scores come from."""
    overall = [r for r in recs if (r.get("criterion") or OVERALL) == OVERALL]
    basis = "overall" if overall else "criteria_mean"
    vals: dict[str, dict[Question, list[float]]] = defaultdict(lambda: defaultdict(list))
    question = _question_of(question_map)
    for r in overall or recs:
        cell = vals[r["model"]][question(r)]
        if r.get("score") is not None:
            cell.append(float(r["score"]))
    # One overall record per model and question (scores.jsonl's key); criteria are averaged.
    out = {
        model: {q: (math.fsum(v) / len(v) if v else None) for q, v in qs.items()}
        for model, qs in vals.items()
    }
    return basis, out, [r for r in overall or recs if r.get("score") is not None]


def _board(
    benchmark: str,
    group: str,
    recs: list[dict[str, Any]],
    resamples: int,
    seed: int,
    level: float,
    question_map: Mapping[tuple[str, str, str], str],
    labels: Labels | None = None,
    scale: tuple[float, float] | None = None,
    min_labels: int = MIN_LABELS,
) -> dict[str, Any]:
    basis, per_model, used = _question_scores(recs, question_map)
    head = {
        "benchmark": benchmark,
        "group": group,
        "level": "overall" if group == "all" else "task",
        "basis": basis,
    }
    questions = sorted({q for qs in per_model.values() for q, v in qs.items() if v is not None})
    if not questions:
        n_unscorable = sum(len(qs) for qs in per_model.values())
        return {**head, "reason": "no scored judge records", "n_unscorable": n_unscorable}
    plan = ClusterBootstrap(questions, resamples, seeded_rng(seed, "leaderboard", benchmark, group))
    ranked = sorted(m for m, qs in per_model.items() if any(v is not None for v in qs.values()))
    scores = np.zeros((len(ranked), plan.n_clusters))
    mask = np.zeros_like(scores)
    means: list[float] = []
    for i, model in enumerate(ranked):
        scored = {q: v for q, v in per_model[model].items() if v is not None}
        cols = [plan.index[q] for q in scored]
        scores[i, cols] = list(scored.values())
        mask[i, cols] = 1.0
        means.append(math.fsum(scored.values()) / len(scored))
    boot = _resampled_means(plan, scores, mask, np.asarray(means))
    ranked_by, rank_means, rank_boot = "judge", np.asarray(means), boot
    extra: dict[str, dict[str, Any]] = {m: {} for m in ranked}
    human_q: dict[str, dict[Question, float | None]] = {}
    ppi_reason = None
    if labels is not None:
        human_q = question_labels(used, labels, _question_of(question_map))
        for model in ranked:
            scored = {q: v for q, v in per_model[model].items() if v is not None}
            hum, ppi = model_estimates(
                scored, human_q.get(model, {}), level, scale=scale, min_labels=min_labels
            )
            extra[model] = {"human": hum, "ppi": ppi}
        # Ranked by PPI only when every model has a PPI mean: a board never mixes the two kinds of mean.
        missing = [m for m in ranked if extra[m]["ppi"]["mean"] is None]
        if missing:
            ppi_reason = "no prediction-powered mean for " + "; ".join(
                f"{m} ({extra[m]['ppi']['reason']})" for m in missing
            )
        else:
            ranked_by = "ppi"
            rank_means = np.asarray([np.nan if (v := extra[m]["ppi"]["mean"]) is None else v for m in ranked])
            rank_boot = _resampled_ppi(plan, ranked, scores, mask, human_q, extra)
    point_rank = _ranks(rank_means[None, :])[0]
    boot_rank = _ranks(rank_boot)
    rows: list[dict[str, Any]] = []
    for i, model in enumerate(ranked):
        qs = per_model[model]
        rows.append(
            {
                "rank": int(point_rank[i]) if np.isfinite(point_rank[i]) else None,
                "model": model,
                "mean": means[i],
                "ci": sampled_interval(boot[:, i], level),
                "rank_ci": _rank_interval(boot_rank[:, i], level) if np.isfinite(point_rank[i]) else None,
                "n": int(mask[i].sum()),
                "n_unscorable": sum(1 for v in qs.values() if v is None),
                **extra[model],
            }
        )
    rows.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0, r["model"]))
    # Models that answered questions of the board but have no score on any: listed, not ranked.
    for model in sorted(set(per_model) - set(ranked)):
        rows.append(
            {
                "rank": None,
                "model": model,
                "mean": None,
                "ci": None,
                "rank_ci": None,
                "n": 0,
                "n_unscorable": len(per_model[model]),
            }
        )
    order = [ranked.index(r["model"]) for r in rows if r["rank"] is not None]
    win_rates = _win_rates(plan, ranked, order, scores, mask, level)
    if ranked_by == "ppi":
        _ppi_win_rates(win_rates, plan, ranked, scores, mask, human_q, level, min_labels)
    return {
        **head,
        "ranked_by": ranked_by,
        **({"ppi_reason": ppi_reason} if ppi_reason else {}),
        "n_questions": plan.n_clusters,
        "models": rows,
        "win_rates": win_rates,
    }


def _resampled_ppi(
    plan: ClusterBootstrap,
    ranked: list[str],
    scores: np.ndarray,
    mask: np.ndarray,
    human_q: Mapping[str, Mapping[Question, float | None]],
    extra: Mapping[str, Mapping[str, Any]],
) -> np.ndarray:
    """``(resamples, models)``: each model's PPI mean on the question resamples, its ``lam`` fixed (NaN where
    undefined or where a resample drew none of its labelled or none of its unlabelled questions)."""
    lab = np.zeros_like(mask)
    human = np.zeros_like(scores)
    for i, model in enumerate(ranked):
        for q, v in human_q.get(model, {}).items():
            j = plan.index.get(q)
            if v is not None and j is not None and mask[i, j]:
                lab[i, j], human[i, j] = 1.0, v
    lam = np.asarray(
        [extra[m]["ppi"]["lam"] if extra[m]["ppi"]["mean"] is not None else np.nan for m in ranked]
    )
    unl = mask * (1.0 - lab)
    rect = (human - np.nan_to_num(lam)[:, None] * scores) * lab

    def centre(v: np.ndarray, m: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (v * m).sum(axis=1) / m.sum(axis=1)

    a = _resampled_means(plan, scores, unl, centre(scores, unl))
    b = _resampled_means(plan, rect, lab, centre(rect, lab))
    with np.errstate(invalid="ignore"):
        # lam 0 (every question labelled, or PPI++ gave the judge no weight): the human mean alone.
        return np.where(lam[None, :] == 0, b, lam[None, :] * a + b)


def _ppi_win_rates(
    win_rates: list[dict[str, Any]],
    plan: ClusterBootstrap,
    ranked: list[str],
    scores: np.ndarray,
    mask: np.ndarray,
    human_q: Mapping[str, Mapping[Question, float | None]],
    level: float,
    min_labels: int = MIN_LABELS,
) -> None:
    """Turn the judge-only win rates into PPI win rates, keeping the judge's beside (see
    :mod:`judge.scoring.labelled`)."""
    idx = {m: i for i, m in enumerate(ranked)}
    questions = plan.labels
    cache: dict[tuple[str, str], dict[str, Any]] = {}
    for w in win_rates:
        a, b = w["model"], w["opponent"]
        if (b, a) in cache:
            res = _mirrored(cache[(b, a)])
        else:
            i, j = idx[a], idx[b]
            judge_pts, human_pts = {}, {}
            for k in np.nonzero(mask[i] * mask[j])[0]:
                q: Any = questions[k]
                judge_pts[q] = _points(scores[i, k], scores[j, k])
                ha, hb = human_q.get(a, {}).get(q), human_q.get(b, {}).get(q)
                if ha is not None and hb is not None:
                    human_pts[q] = _points(ha, hb)
            res = ppi_win_rate(judge_pts, human_pts, level, min_labels=min_labels)
        cache[(a, b)] = res
        w.update(judge_win_rate=w["win_rate"], judge_ci=w["ci"], win_rate=res["win_rate"], ci=res["ci"],
                 n_labelled=res["n_labelled"])  # fmt: skip
        for key in ("reason", "bounded"):
            if key in res:
                w[key] = res[key]


def _mirrored(res: dict[str, Any]) -> dict[str, Any]:
    """B's PPI win rate over A from A's over B: ``1 -`` the rate, the interval flipped (so are its bounds)."""
    flip = {"mean": "mean", "ci_low": "ci_high", "ci_high": "ci_low"}
    out = {
        **res,
        "win_rate": None if res["win_rate"] is None else 1.0 - res["win_rate"],
        "ci": [1.0 - res["ci"][1], 1.0 - res["ci"][0]] if res["ci"] else None,
    }
    if "bounded" in res:
        out["bounded"] = [flip[b] for b in res["bounded"]]
    return out


def _points(a: float, b: float) -> float:
    """A win is 1, a tie 1/2 (scores within 1e-9), a loss 0."""
    return 0.5 if abs(a - b) <= 1e-9 else float(a > b)


def _blocks(plan: ClusterBootstrap):
    for start in range(0, plan.n_boot, _CHUNK):
        yield start, plan.counts[start : start + _CHUNK].astype(float)


def _resampled_means(
    plan: ClusterBootstrap, scores: np.ndarray, mask: np.ndarray, means: np.ndarray
) -> np.ndarray:
    """``(resamples, models)``: each model's mean over the drawn questions it has a score for; NaN where
    none of them was drawn (an internal value: only intervals leave this module). Computed as the mean
    plus the resampled mean deviation from it, so a model with one distinct score gets exactly it."""
    out = np.full((plan.n_boot, scores.shape[0]), np.nan)
    dev = (scores - means[:, None]) * mask
    for start, counts in _blocks(plan):
        sums = counts @ dev.T
        ns = counts @ mask.T
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + len(counts)] = np.where(ns > 0, means[None, :] + sums / ns, np.nan)
    return out


def _ranks(means: np.ndarray) -> np.ndarray:
    """Per row: 1 + the number of models with a strictly higher mean (NaN means neither count nor get a
    rank)."""
    higher = (means[:, None, :] > means[:, :, None]).sum(axis=2)
    ranks = 1.0 + higher
    ranks[~np.isfinite(means)] = np.nan
    return ranks


def _rank_interval(ranks: np.ndarray, level: float) -> list[int] | None:
    ok = ranks[np.isfinite(ranks)]
    if ok.size == 0 or ok.size < 0.5 * ranks.size:
        return None
    a = (1.0 - level) / 2.0
    return [
        int(np.percentile(ok, 100 * a, method="lower")),
        int(np.percentile(ok, 100 * (1 - a), method="higher")),
    ]


def _win_rates(
    plan: ClusterBootstrap,
    ranked: list[str],
    order: list[int],
    scores: np.ndarray,
    mask: np.ndarray,
    level: float,
) -> list[dict[str, Any]]:
    """Every ordered pair of ranked models (in board order): wins, ties, losses, the win rate, its interval."""
    if len(ranked) < 2:
        return []
    pairs = [(i, j) for a, i in enumerate(order) for j in order[a + 1 :]]
    shared = np.stack([mask[i] * mask[j] for i, j in pairs], axis=1)  # (questions, pairs)
    won = np.stack([(scores[i] > scores[j]) * mask[i] * mask[j] for i, j in pairs], axis=1)
    tied = np.stack([(scores[i] == scores[j]) * mask[i] * mask[j] for i, j in pairs], axis=1)
    points = won + 0.5 * tied
    boot = np.full((plan.n_boot, len(pairs)), np.nan)
    for start, counts in _blocks(plan):
        n = counts @ shared
        with np.errstate(invalid="ignore", divide="ignore"):
            boot[start : start + len(counts)] = np.where(n > 0, (counts @ points) / n, np.nan)
    cells: dict[tuple[int, int], dict[str, Any]] = {}
    for k, (i, j) in enumerate(pairs):
        n_shared, wins, ties = int(shared[:, k].sum()), int(won[:, k].sum()), int(tied[:, k].sum())
        rate = (wins + 0.5 * ties) / n_shared if n_shared else None
        ci = sampled_interval(boot[:, k], level) if n_shared else None
        cells[(i, j)] = _pair(ranked[i], ranked[j], rate, ci, wins, ties, n_shared - wins - ties, n_shared)
        # B against A: the same questions and resamples, wins and losses swapped.
        back_ci = [1.0 - ci[1], 1.0 - ci[0]] if ci else None
        back = 1.0 - rate if rate is not None else None
        cells[(j, i)] = _pair(
            ranked[j], ranked[i], back, back_ci, n_shared - wins - ties, ties, wins, n_shared
        )
    return [cells[(i, j)] for i in order for j in order if i != j]


def _pair(
    model: str,
    opponent: str,
    rate: float | None,
    ci: list[float] | None,
    wins: int,
    ties: int,
    losses: int,
    n: int,
) -> dict[str, Any]:
    return {
        "model": model,
        "opponent": opponent,
        "win_rate": rate,
        "ci": ci,
        "wins": wins,
        "ties": ties,
        "losses": losses,
        "n_shared": n,
    }


# ----------------------------------------------------------------------------- Markdown


__all__ = ["LEVEL", "RESAMPLES", "SEED", "build_leaderboard"]
