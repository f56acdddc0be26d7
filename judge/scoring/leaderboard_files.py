"""The leaderboard of a scoring run (:mod:`judge.scoring.leaderboard`) as files and text: written beside the
summary (:func:`write_leaderboard`): ``leaderboard.csv`` (one row per board and model,
:data:`LEADERBOARD_COLUMNS`), ``win_rates.csv`` (one row per board and ordered pair,
:data:`WIN_RATE_COLUMNS`) and ``leaderboard.png`` (a panel per board: means with their intervals, best on
top); ``summary.md``'s section and the console's tables (:func:`leaderboard_markdown`,
:func:`board_table`). An undefined number is an empty CSV cell; an estimate moved onto its range's end is
marked :data:`BOUNDED`.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from judge.core.atomic import atomic_write
from judge.core.identity import RULE
from judge.core.tables import md_table
from judge.eval.ppi import MIN_LABELS
from judge.scoring.leaderboard import LEVEL

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
#: What :data:`BOUNDED` means: every place that shows a board with it prints this under it (summary.md,
#: judge-score's console, judge-view).
BOUNDED_LEGEND = (
    f"{BOUNDED} an end of the interval (or the mean) fell outside its range (the rubric's scale; [0, 1] "
    "for a win rate) and was set to the range's end: the interval keeps its coverage, since the true "
    "value lies in the range."
)


def _ci(ci: list[float] | None, digits: int = 3) -> str:
    """An interval, or what stands for one that sampled data cannot give (never a zero-width one)."""
    return f"[{_num(ci[0], digits)}, {_num(ci[1], digits)}]" if ci else "[no interval]"


def _mean_ci(m: dict[str, Any]) -> str:
    if m.get("mean") is None:
        return "-"
    mark = BOUNDED if m.get("bounded") else ""
    return f"{_num(m['mean'])} {_ci(m['ci'])}{mark}"


def ranked_by(board: dict[str, Any]) -> str:
    """What a board's ranks, rank ranges and win rates follow, in words (every table says it)."""
    if board.get("ranked_by") == "ppi":
        return "the prediction-powered (PPI) mean"
    return "the judge-only mean"


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
                (
                    _mean_ci(est) + f" (n={est.get('n_labelled', 0)})"
                    if est.get("mean") is not None
                    else f"- ({est['reason']})"
                )
                if est
                else "-",
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
    head = f"### {board_title(board)}\n\nRanked by {ranked_by(board)}.\n\n"
    if board["basis"] != "overall":
        head += "Ranked on the per-question mean of the scored criteria (no `overall` scores here).\n\n"
    if labelled and not ppi:
        head += (
            "Too few labelled questions for a prediction-powered mean of every model: ranked by the judge "
            f"({board.get('ppi_reason', '')}).\n\n"
        )
    parts = [head + md_table(*board_table(board, level))]
    if _any_bounded(board):
        parts.append(BOUNDED_LEGEND)
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
        return f"{_num(w['win_rate'], 2)} {_ci(w['ci'], 2)} (n={w['n_shared']})"
    if w["win_rate"] is None:
        return (
            f"- (judge only {_num(w['judge_win_rate'], 2)} {_ci(w.get('judge_ci'), 2)}; n={w['n_shared']}, "
            f"{w['n_labelled']} labelled)"
        )
    mark = BOUNDED if w.get("bounded") else ""
    return f"{_num(w['win_rate'], 2)} {_ci(w['ci'], 2)}{mark} (n={w['n_shared']}, {w['n_labelled']} labelled)"


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
        "counted half, with its interval under the same resamples. [no interval]: the resamples did not vary (one "
        "question, or the same score on every question), so sampled data give no honest interval; each board "
        "says what it is ranked by. Also in leaderboard.csv, win_rates.csv and leaderboard.png.",
    ]
    labels = lb.get("labels")
    if labels:
        parts += [
            "",
            f"Human labels: {labels['matched']} of {labels['responses']} labelled responses matched a judge "
            f"score ({RULE}), "
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
    "BOUNDED",
    "FILES",
    "LEADERBOARD_COLUMNS",
    "WIN_RATE_COLUMNS",
    "board_markdown",
    "board_table",
    "BOUNDED_LEGEND",
    "board_title",
    "leaderboard_markdown",
    "leaderboard_plot",
    "leaderboard_rows",
    "win_rate_rows",
    "write_leaderboard",
]
