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
  resamples, :func:`judge.eval.bootstrap.percentile_interval`). Each resample draws as many questions
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

Written beside the summary (:func:`write_leaderboard`): ``leaderboard.csv`` (one row per board and
model, :data:`LEADERBOARD_COLUMNS`), ``win_rates.csv`` (one row per board and ordered pair,
:data:`WIN_RATE_COLUMNS`) and ``leaderboard.png`` (a panel per board: means with their intervals,
best on top); ``summary.json`` holds the whole under ``leaderboard``, ``summary.md`` a section.
Never NaN: an undefined number is null (an empty CSV cell).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from judge.core.atomic import atomic_write
from judge.core.rubric import OVERALL
from judge.core.tables import md_table
from judge.eval.bootstrap import ClusterBootstrap, percentile_interval, seeded_rng
from judge.eval.ppi import MIN_LABELS
from judge.scoring.labelled import Labels, model_estimates, ppi_win_rate, question_labels

#: Bootstrap resamples and seed when none are given (``judge-score``'s defaults).
RESAMPLES = 1000
SEED = 0
LEVEL = 0.95
#: What :func:`write_leaderboard` writes, by its key in the summary's ``files``.
FILES = {
    "leaderboard_csv": "leaderboard.csv",
    "win_rates_csv": "win_rates.csv",
    "leaderboard_png": "leaderboard.png",
}
LEADERBOARD_COLUMNS = [
    "benchmark",
    "group",
    "level",
    "basis",
    "rank",
    "model",
    "mean",
    "ci_low",
    "ci_high",
    "rank_low",
    "rank_high",
    "n",
    "n_unscorable",
    "n_questions",
    "resamples",
    "seed",
    "ranked_by",
    "human_mean",
    "human_ci_low",
    "human_ci_high",
    "n_labelled",
    "ppi_mean",
    "ppi_ci_low",
    "ppi_ci_high",
    "ppi_lambda",
    "human_note",
    "ppi_note",
]
WIN_RATE_COLUMNS = [
    "benchmark",
    "group",
    "level",
    "basis",
    "model",
    "opponent",
    "win_rate",
    "ci_low",
    "ci_high",
    "wins",
    "ties",
    "losses",
    "n_shared",
    "ranked_by",
    "judge_win_rate",
    "judge_ci_low",
    "judge_ci_high",
    "n_labelled",
    "note",
]
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
    for benchmark, group in sorted(by_board, key=lambda k: (k[0], k[1] == "all", k[1])):
        board = _board(
            benchmark,
            group,
            by_board[(benchmark, group)],
            resamples,
            seed,
            level,
            question_map or {},
            labels,
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
        out["labels"] = labels.describe(
            {(str(r["model"]), str(r["id"])) for r in records if r.get("metric") == "judge"}
        )
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
                "ci": percentile_interval(boot[:, i], level),
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
        ci = percentile_interval(boot[:, k], level) if n_shared else None
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


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _rank_range(r: list[int] | None) -> str:
    if not r:
        return "-"
    return str(r[0]) if r[0] == r[1] else f"{r[0]}-{r[1]}"


def board_title(board: dict[str, Any]) -> str:
    group = board["group"]
    return f"{board['benchmark']}, " + ("all tasks" if group == "all" else f"task {group}")


#: The mark of an estimate a range bound moved (explained under the table).
BOUNDED = "†"


def _mean_ci(m: dict[str, Any]) -> str:
    if m.get("mean") is None:
        return "-"
    ci = m["ci"]
    mark = BOUNDED if m.get("bounded") else ""
    return _num(m["mean"]) + (f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else "") + mark


def board_table(board: dict[str, Any], level: float = LEVEL) -> tuple[list[str], list[list[Any]]]:
    """One board's ranked table, its header and rows: rank, model, the judge-only mean (then the human-only
    and PPI means when labels were given), rank range, n, unscorable. ``summary.md`` and the console show
    it."""
    labelled = any("ppi" in r for r in board["models"])
    body = []
    for r in board["models"]:
        row = [r["rank"], r["model"], _mean_ci(r)]
        if labelled:
            hum, est = r.get("human") or {}, r.get("ppi") or {}
            row += [
                _mean_ci(hum) + f" (n={hum.get('n_labelled', 0)})" if hum else "-",
                (_mean_ci(est) if est.get("mean") is not None else f"- ({est['reason']})") if est else "-",
            ]
        body.append([*row, _rank_range(r["rank_ci"]), r["n"], r["n_unscorable"]])
    means = [f"judge-only mean [{level:.0%} CI]"]
    if labelled:
        means += [f"human-only [{level:.0%} CI] (labelled)", f"PPI [{level:.0%} CI]"]
    return ["rank", "model", *means, "rank range", "n", "unscorable"], body


def board_markdown(board: dict[str, Any], level: float = LEVEL) -> str:
    """One board: the ranked table, then the win-rate matrix (row model against column model)."""
    ppi = board.get("ranked_by") == "ppi"
    labelled = any("ppi" in r for r in board["models"])
    head = f"### {board_title(board)}\n\n"
    if board["basis"] != "overall":
        head += "Ranked on the per-question mean of the scored criteria (no `overall` scores here).\n\n"
    if labelled and not ppi:
        head += (
            "Too few labelled questions for a prediction-powered mean of every model: ranked by the judge "
            f"({board.get('ppi_reason', '')}).\n\n"
        )
    parts = [head + md_table(*board_table(board, level))]
    if _any_bounded(board):
        parts.append(
            f"{BOUNDED} an end of the interval (or the mean) fell outside its range (the rubric's scale; [0, 1] "
            "for a win rate) and was set to the range's end: the interval keeps its coverage, since the true "
            "value lies in the range."
        )
    if board["win_rates"]:
        models = [r["model"] for r in board["models"] if r["rank"] is not None]
        cell = {(w["model"], w["opponent"]): w for w in board["win_rates"]}
        matrix = [[a] + ["-" if a == b else _win_cell(cell[(a, b)]) for b in models] for a in models]
        what = "prediction-powered win rate" if ppi else "Win rate"
        parts.append(
            f"{what[0].upper()}{what[1:]} of the row model against the column model:\n\n"
            + md_table(["", *models], matrix)
        )
    return "\n\n".join(parts)


def _any_bounded(board: dict[str, Any]) -> bool:
    models = [x for r in board["models"] for x in (r.get("human") or {}, r.get("ppi") or {})]
    return any(x.get("bounded") for x in [*models, *board["win_rates"]])


def _win_cell(w: dict[str, Any]) -> str:
    """A win-rate matrix cell: the rate and its questions; a PPI rate also its interval and labelled
    questions, and the judge-only rate when too few are labelled for PPI."""
    if "judge_win_rate" not in w:
        return f"{_num(w['win_rate'], 2)} (n={w['n_shared']})"
    if w["win_rate"] is None:
        return f"- (judge only {_num(w['judge_win_rate'], 2)}; n={w['n_shared']}, {w['n_labelled']} labelled)"
    ci = w["ci"]
    mark = BOUNDED if w.get("bounded") else ""
    return (
        f"{_num(w['win_rate'], 2)} [{_num(ci[0], 2)}, {_num(ci[1], 2)}]{mark} "
        f"(n={w['n_shared']}, {w['n_labelled']} labelled)"
    )


def leaderboard_markdown(lb: dict[str, Any], *, compact: bool = False) -> list[str]:
    """The summary's "Leaderboard" section as lines (empty without boards); ``compact``: the console
    version, the ``all`` boards only when there are per-task ones too."""
    boards = lb.get("boards") or []
    if not boards:
        return []
    shown = [b for b in boards if b["group"] == "all"] if compact else boards
    parts = [
        "",
        "## Leaderboard",
        "",
        "Candidate models ranked per benchmark and task by their mean judge score ("
        + (
            "`overall`"
            if all(b["basis"] == "overall" for b in boards)
            else "`overall`, else the criteria's mean"
        )
        + "; higher is better, rank 1 is best) over the questions they have a score for (n); "
        f"[low, high] is the {lb['ci_level']:.0%} percentile bootstrap interval with questions resampled "
        f"({lb['resamples']} resamples, seed {lb['seed']}, the same resamples for every model of a board), "
        "the rank range the same percentiles of the model's rank over those resamples. Win rate: the share "
        "of the n questions both models have a score for where the row model's score is higher, ties "
        "counted half. Also in leaderboard.csv, win_rates.csv and leaderboard.png.",
    ]
    labels = lb.get("labels")
    if labels:
        parts += [
            "",
            f"Human labels: {labels['matched']} labelled responses matched a judge score (by model and id), "
            f"from {', '.join(f'`{f}`' for f in labels['files'])}"
            + (
                f"; {labels['unmatched']} did not (e.g. {', '.join(labels['unmatched_examples'])})"
                if labels["unmatched"]
                else ""
            )
            + ". Beside the judge-only mean: the human-only mean of the labelled questions and the "
            "prediction-powered mean (PPI++: the judge's scores corrected by its error on the labelled questions), "
            f"each with its {lb['ci_level']:.0%} interval (Student's t; PPI's variance by the jackknife), from at "
            f"least {lb.get('min_labels', MIN_LABELS)} labelled questions. Where every model of a board has a "
            "prediction-powered mean, its ranks, rank ranges and win rates follow them (the win rate's labels: "
            "questions where both models are labelled; `judge-data sample --by question` labels every model's "
            "response to a drawn question). Valid only if the labelled responses are a random sample of the "
            "scored ones.",
        ]
    parts += ["", "\n\n".join(board_markdown(b, lb["ci_level"]) for b in shown)]
    if len(shown) < len(boards):
        parts += ["", "(per-task boards in summary.md)"]
    skipped = lb.get("skipped") or []
    if skipped:
        parts += [
            "",
            "No scored judge records, not ranked: "
            + ", ".join(f"{board_title(s)} ({s['n_unscorable']} unscorable)" for s in skipped)
            + ".",
        ]
    return parts


# ----------------------------------------------------------------------------- files


def _csv(columns: list[str], rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def leaderboard_rows(lb: dict[str, Any]) -> list[dict[str, Any]]:
    """``leaderboard.csv``'s rows: one per board and model (:data:`LEADERBOARD_COLUMNS`)."""
    rows = []
    for b in lb.get("boards") or []:
        for m in b["models"]:
            ci, rci = m["ci"] or [None, None], m["rank_ci"] or [None, None]
            rows.append(
                {
                    **{k: b[k] for k in ("benchmark", "group", "level", "basis")},
                    "rank": m["rank"],
                    "model": m["model"],
                    "mean": m["mean"],
                    "ci_low": ci[0],
                    "ci_high": ci[1],
                    "rank_low": rci[0],
                    "rank_high": rci[1],
                    "n": m["n"],
                    "n_unscorable": m["n_unscorable"],
                    "n_questions": b["n_questions"],
                    "resamples": lb["resamples"],
                    "seed": lb["seed"],
                    "ranked_by": b.get("ranked_by", "judge"),
                    **_estimate_cells(m),
                }
            )
    return rows


def _estimate_cells(m: dict[str, Any]) -> dict[str, Any]:
    """The human-only and PPI columns of a model's CSV row (empty without labels)."""
    hum, ppi = m.get("human") or {}, m.get("ppi") or {}
    hci, pci = hum.get("ci") or [None, None], ppi.get("ci") or [None, None]
    return {
        "human_mean": hum.get("mean"),
        "human_ci_low": hci[0],
        "human_ci_high": hci[1],
        "n_labelled": hum.get("n_labelled"),
        "ppi_mean": ppi.get("mean"),
        "ppi_ci_low": pci[0],
        "ppi_ci_high": pci[1],
        "ppi_lambda": ppi.get("lam"),
        "human_note": _note(hum),
        "ppi_note": _note(ppi),
    }


def _note(est: dict[str, Any]) -> str | None:
    """A CSV cell on an estimate: why there is none, or what a range bound moved."""
    if est.get("reason"):
        return str(est["reason"])
    if est.get("bounded"):
        return "bounded to its range: " + ", ".join(est["bounded"])
    return None


def win_rate_rows(lb: dict[str, Any]) -> list[dict[str, Any]]:
    """``win_rates.csv``'s rows: one per board and ordered pair of models (:data:`WIN_RATE_COLUMNS`)."""
    rows = []
    for b in lb.get("boards") or []:
        for w in b["win_rates"]:
            ci = w["ci"] or [None, None]
            rows.append(
                {
                    **{k: b[k] for k in ("benchmark", "group", "level", "basis")},
                    **{k: w[k] for k in ("model", "opponent", "win_rate")},
                    "ci_low": ci[0],
                    "ci_high": ci[1],
                    **{k: w[k] for k in ("wins", "ties", "losses", "n_shared")},
                    "ranked_by": b.get("ranked_by", "judge"),
                    "judge_win_rate": w.get("judge_win_rate"),
                    "judge_ci_low": (w.get("judge_ci") or [None, None])[0],
                    "judge_ci_high": (w.get("judge_ci") or [None, None])[1],
                    "n_labelled": w.get("n_labelled"),
                    "note": _note(w),
                }
            )
    return rows


def leaderboard_plot(path: str | Path, lb: dict[str, Any]) -> Path:
    """A panel per board: each ranked model's mean with its interval, best on top (one colour per model
    across panels)."""
    from judge.eval.plots import _plt, _save, scorer_colours

    plt = _plt()
    boards = lb["boards"]
    cols = min(len(boards), 3)
    nrows = (len(boards) + cols - 1) // cols
    tallest = max(sum(1 for m in b["models"] if m["rank"] is not None) for b in boards)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.8 * cols, (0.35 * tallest + 1.4) * nrows), squeeze=False)
    colours = scorer_colours(
        sorted({m["model"] for b in boards for m in b["models"] if m["rank"] is not None})
    )
    scale = lb.get("scale")
    for ax, b in zip(axes.flat, boards, strict=False):
        ranked = [m for m in b["models"] if m["rank"] is not None]
        ppi = b.get("ranked_by") == "ppi"
        for y, m in enumerate(ranked):
            # Ranked by PPI: its mean and interval filled, the judge-only one hollow just below.
            marks = (
                [(m["ppi"]["mean"], m["ppi"]["ci"], "o", y - 0.12), (m["mean"], m["ci"], "o", y + 0.12)]
                if ppi
                else [(m["mean"], m["ci"], "o", y)]
            )
            for k, (mean, ci, fmt, at) in enumerate(marks):
                # A percentile interval need not contain the mean (skewed data): clip the whiskers at it.
                err = [[max(mean - ci[0], 0.0)], [max(ci[1] - mean, 0.0)]] if ci else None
                ax.errorbar(mean, at, xerr=err, fmt=fmt, color=colours[m["model"]], capsize=3, elinewidth=1.2,
                            mfc="white" if k else None)  # fmt: skip
        ax.set_yticks(range(len(ranked)))
        ax.set_yticklabels([f"{m['rank']}. {m['model']} (n={m['n']})" for m in ranked], fontsize=8)
        ax.set_ylim(len(ranked) - 0.5, -0.5)  # best on top
        if scale:
            ax.set_xlim(scale[0], scale[1])
        ax.set_title(board_title(b), fontsize=10)
        what = "mean judge score" if b["basis"] == "overall" else "mean of the criteria"
        ax.set_xlabel(what + (" (filled: PPI, hollow: judge only)" if ppi else ""), fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(boards) :]:
        ax.axis("off")
    fig.suptitle(
        f"Mean judge score with {lb['ci_level']:.0%} bootstrap intervals (questions resampled)"
        + ("; prediction-powered means with normal intervals where labelled" if lb.get("labels") else ""),
        fontsize=11,
    )
    fig.tight_layout()
    return _save(fig, path)


def write_leaderboard(out_dir: str | Path, lb: dict[str, Any]) -> dict[str, str]:
    """Write ``leaderboard.csv``, ``win_rates.csv`` (header only when no board has two models) and
    ``leaderboard.png`` atomically into ``out_dir``; returns their paths by :data:`FILES` key. Without
    boards nothing is written, and such files of an earlier run there are removed (they would be stale)."""
    out_dir = Path(out_dir)
    paths = {k: str(out_dir / name) for k, name in FILES.items()}
    if not lb.get("boards"):
        for p in paths.values():
            Path(p).unlink(missing_ok=True)
        return {}
    with atomic_write(paths["leaderboard_csv"]) as f:
        f.write(_csv(LEADERBOARD_COLUMNS, leaderboard_rows(lb)))
    with atomic_write(paths["win_rates_csv"]) as f:
        f.write(_csv(WIN_RATE_COLUMNS, win_rate_rows(lb)))
    leaderboard_plot(paths["leaderboard_png"], lb)
    return paths


__all__ = [
    "FILES",
    "LEADERBOARD_COLUMNS",
    "RESAMPLES",
    "WIN_RATE_COLUMNS",
    "board_markdown",
    "build_leaderboard",
    "leaderboard_markdown",
    "leaderboard_plot",
    "leaderboard_rows",
    "win_rate_rows",
    "write_leaderboard",
]
