"""MLLM-as-a-Judge (Chen et al., ICML 2024): a judge scores, compares and ranks responses, beside humans.

Data: ``Benchmark/score.jsonl``, ``pair.jsonl`` and ``batch.jsonl`` of the release (the ``Dataset`` folder
of Dongping-Chen/MLLM-Judge, or ``ONE-Lab/MLLM-as-a-Judge`` on the Hugging Face hub), whose
``image_path`` (``image/200.jpg``) is relative to the folder above ``Benchmark/``: that folder is the
default image root. The mode is read from the file:

* score: ``score_id`` (unique), ``id`` (the image and instruction, **shared** by several rows),
  ``instruction``, ``image_path``, ``answer``, ``original_dataset``, ``human`` (1-5, a number or text);
* pair: ``pair_id`` (unique), ``id`` (shared), ``answer1`` / ``answer2`` (``{name, answer}``),
  ``human_answer`` A, B, C (tie), or -1 (no label);
* batch: ``id`` (unique), ``answers`` (a list of ``{name, answer}``: letters A, B, ... in order),
  ``human_answer`` the letters from best to worst (``"CDAB"``).

Items are keyed by the unique key (``score_id``, ``pair_id``, ``id`` in batch mode) and the bootstrap
resamples the shared ``id`` (rows of one image and instruction move together).

Official metrics: ``scripts/calculate_metrics.ipynb`` at :data:`OFFICIAL`'s commit, whose functions read a
prediction file and a ground-truth file keyed by ``id`` (a repeated key silently keeps the last line: keyed
by the native ``id`` the score and pair rows of one image would collapse, so the unique key is used, as
the notebook's "transform your results" asks), iterate the ground truth in file order, **skip the rows
without a prediction**, group by ``original_dataset`` in order of first appearance, and pool all kept rows
for ``overall``:

* score (``calculate_pearson_metrics``): ``scipy.stats.pearsonr(pred, human)`` per dataset and over all
  rows, with its p-value and the number of rows; a prediction of -1 (the paper's "no score") is an
  ordinary value there; a constant input gives NaN (null here), fewer than two rows make scipy raise
  (null here, with a note);
* pair (``calculate_accuracy_metrics``, with ``include_ties`` False then True): exact equality of the
  letters, a verdict over 0.5 being A (``answer1``), under 0.5 B, exactly 0.5 C (tie); without ties a
  row is dropped when the human label **or the verdict** is C; a human label -1 is kept and never equal;
* batch (``calculate_levenshtein_metrics``): the mean raw character edit distance
  (``Levenshtein.distance``) between the predicted and the human ranking, per dataset and over all rows
  (lower is better; not normalised).

Besides, the analysis notebooks behind the paper's tables (``scripts/Score_analysis.ipynb``,
``scripts/pair_analysis.ipynb`` at :data:`ANALYSIS_COMMIT`; under ``analysis``): rows are filed into ten
datasets by ranges of ``score_id`` / ``pair_id`` (0-300 coco, 300-600 Concept Caption, ..., 3000-3300
LLaVA), not by ``original_dataset``; rows outside the ranges are dropped. Score: the judge's score and
the human score are cut to whole numbers with ``int()``, a judge score of -1 is dropped, Pearson per
dataset, and the sum of the dataset correlations divided by 10 (NaN when one is NaN). Pair: rows whose
human label is -1 are dropped; per dataset the accuracy and the macro recall, precision and F1 of
scikit-learn over the labels present (a label never predicted has precision 0), and the sum of the
dataset accuracies divided by 10 (10 even when datasets are empty).

Strict: score: a prediction of -1 is no score (left out and counted), and ``dataset_mean`` is the mean of
the defined per-dataset correlations; pair: rows without a human label (-1) are left out and counted,
every other row counts, an item without a verdict as wrong, an undecided verdict (C) on a row the humans
did not call a tie earns half in the accuracy without ties; batch: every row counts, one without a
verdict at the largest distance (the length of the human ranking), and ``average_normalized_distance``
divides each distance by that length.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from judge.benchmarks.judging import (
    OFFICIAL,
    Evaluation,
    JudgeBenchmark,
    JudgeData,
    JudgeItem,
    JudgeOutput,
    OfficialCode,
    RowReader,
    finish_read,
    finite,
    group_codes,
    image_segment,
    read_objects,
    register_judge_benchmark,
    text_segment,
)
from judge.benchmarks.mllm_judge_datasets import (
    ANALYSIS_COMMIT,
    ANALYSIS_RANGES,
    _by_dataset,
    analysis_dataset,
)
from judge.benchmarks.mllm_judge_pairs import _batch, _pair_official, _pair_strict
from judge.core.errors import JudgeError

NO_SCORE = -1.0
MODES = {"score": ("score", "score_id"), "pair": ("pair", "pair_id"), "batch": ("rank", "id")}


def pearson(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None, str | None]:
    """``scipy.stats.pearsonr(x, y)`` as (r, p-value, problem): None where scipy gives NaN or raises."""
    from scipy.stats import pearsonr

    if len(x) < 2:
        return None, None, f"{len(x)} row(s): scipy's pearsonr raises ValueError"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant input warns and gives NaN: reported as a problem
        res = pearsonr(x, y)
    r, p = finite(res[0]), finite(res[1])
    return r, p, None if r is not None else "a constant input: the correlation is NaN"


def fast_pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r by numpy (equal to scipy's to rounding; for the bootstrap's many resamples): None for
    fewer than two rows or a constant input."""
    if len(x) < 2 or x.max() == x.min() or y.max() == y.min():
        return None
    dx, dy = x - x.mean(), y - y.mean()
    return float(np.clip(np.dot(dx, dy) / math.sqrt(np.dot(dx, dx) * np.dot(dy, dy)), -1.0, 1.0))


def _int_key(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


@register_judge_benchmark
class MLLMAsAJudge(JudgeBenchmark):
    name = "mllm-as-a-judge"
    aliases = ("mllm-judge", "mllm_as_a_judge")
    title = "MLLM-as-a-Judge"
    official = OfficialCode(
        "Dongping-Chen/MLLM-Judge",
        "363cb98a1449cccc0aa7f47ac1f97cf61ad72a71",
        ("scripts/calculate_metrics.ipynb",),
    )
    also_followed = (
        OfficialCode(
            "Dongping-Chen/MLLM-Judge",
            ANALYSIS_COMMIT,
            ("scripts/Score_analysis.ipynb", "scripts/pair_analysis.ipynb"),
        ),
    )
    source = "https://huggingface.co/datasets/ONE-Lab/MLLM-as-a-Judge (Benchmark/ and image/), or the Dataset folder of https://github.com/Dongping-Chen/MLLM-Judge"
    licence = "MIT (the dataset card on the Hugging Face hub)"

    def read(self, path: Path, root: Path | None = None) -> JudgeData:
        rows, errors = read_objects(path)
        mode = _detect_mode(path, rows[0][1] if rows else {})
        kind, key_name = MODES[mode]
        base = path.parent.parent  # the release's image paths start at the folder above Benchmark/
        items = []
        for line, obj in rows:
            r = RowReader(path, line, obj)
            key = r.key(key_name)
            r.record_id = key
            native = r.key("id")
            instruction = r.text("instruction")
            image = image_segment(r, "image_path", base, root)
            dataset = r.text("original_dataset")
            info: dict[str, Any] = {
                "dataset": dataset,
                "native_id": native,
                "key": _int_key(obj.get(key_name)),
            }
            responses = _responses(r, mode)
            if mode == "score":
                info["human"] = _human_score(r)
            elif mode == "pair":
                human = obj.get("human_answer")
                if human not in ("A", "B", "C", -1):
                    r.error(f"expected 'A', 'B', 'C' (tie) or -1 (no label), got {human!r}", "human_answer")
                info["human"] = human
            else:
                human = obj.get("human_answer")
                if not (isinstance(human, str) and human.isalpha() and human.isupper()):
                    r.error(
                        f"expected the answers' letters from best to worst, e.g. 'CDAB', got {human!r}",
                        "human_answer",
                    )
                info["human"] = human
            errors += r.errors
            if (
                r.errors
                or key is None
                or native is None
                or instruction is None
                or image is None
                or responses is None
            ):
                continue
            items.append(
                JudgeItem(
                    id=key,
                    kind=kind,  # type: ignore[arg-type]
                    question=[image, text_segment(instruction)],
                    responses=responses,
                    cluster=native,
                    info=info,
                    line=line,
                )
            )
        return finish_read(self.name, path, mode, kind, items, errors, key_name)  # type: ignore[arg-type]

    def evaluate(
        self, data: JudgeData, outputs: dict[str, JudgeOutput], order: list[str], mode: str
    ) -> Evaluation:
        official = mode == OFFICIAL
        if data.mode == "score":
            return _score_official(data, outputs, order) if official else _score_strict(data, outputs)
        if data.mode == "pair":
            return _pair_official(data, outputs, order) if official else _pair_strict(data, outputs)
        return _batch(data, outputs, official)


def _detect_mode(path: Path, first: dict[str, Any]) -> str:
    if "score_id" in first:
        return "score"
    if "pair_id" in first:
        return "pair"
    if isinstance(first.get("answers"), list):
        return "batch"
    raise JudgeError(
        f"{path}: not an MLLM-as-a-Judge file: its first record has no score_id (score.jsonl), pair_id "
        "(pair.jsonl) or answers list (batch.jsonl)"
    )


def _responses(r: RowReader, mode: str) -> list[list[dict[str, str]]] | None:
    if mode == "score":
        answer = r.text("answer", allow_empty=True)
        return None if answer is None else [[text_segment(answer)]]
    if mode == "pair":
        out = []
        for key in ("answer1", "answer2"):
            value = r.obj.get(key)
            if not (isinstance(value, dict) and isinstance(value.get("answer"), str)):
                r.error("expected {'name': ..., 'answer': text}", key)
                return None
            out.append([text_segment(value["answer"])])
        return out
    answers = r.obj.get("answers")
    if not (
        isinstance(answers, list)
        and answers
        and all(isinstance(a, dict) and isinstance(a.get("answer"), str) for a in answers)
    ):
        r.error("expected a list of {'name': ..., 'answer': text}", "answers")
        return None
    if len(answers) > 26:
        r.error(f"{len(answers)} answers: at most 26 (letters A to Z)", "answers")
        return None
    return [[text_segment(a["answer"])] for a in answers]


def _human_score(r: RowReader) -> float | None:
    value = r.obj.get("human")
    try:
        if value is None or isinstance(value, bool):
            raise ValueError
        score = float(value)  # the notebook's float(item['human'])
        if not math.isfinite(score):
            raise ValueError
        return score
    except (TypeError, ValueError):
        r.error(f"expected a human score (a number, or text of one), got {value!r}", "human")
        return None


# ----------------------------------------------------------------------------- score


def _pearson_table(datasets: list[str], pred: np.ndarray, human: np.ndarray):
    codes, names = group_codes(datasets)

    def statistic(idx: np.ndarray) -> dict[str, float | None]:
        out = {"overall.correlation": fast_pearson(pred[idx], human[idx])}
        for k, name in enumerate(names):
            sel = idx[codes[idx] == k]
            out[f"{name}.correlation"] = fast_pearson(pred[sel], human[sel])
        return out

    def metrics(idx: np.ndarray) -> tuple[dict[str, Any], list[str]]:
        table: dict[str, Any] = {}
        notes = []
        for k, name in [*enumerate(names), (-1, "overall")]:
            sel = idx if k == -1 else idx[codes[idx] == k]
            r, p, problem = pearson(pred[sel], human[sel])
            table[name] = {"correlation": r, "p_value": p, "num_samples": int(len(sel))}
            if problem:
                notes.append(f"{name}: {problem}")
        return table, notes

    return statistic, metrics


def _correlations(table: dict[str, Any]) -> dict[str, float | None]:
    """The correlations of a Pearson table by flat name, overall first (the headline of score mode)."""
    out = {"overall.correlation": table["overall"]["correlation"]}
    out.update({f"{k}.correlation": v["correlation"] for k, v in table.items() if k != "overall"})
    return out


def _score_official(data: JudgeData, outputs: dict[str, JudgeOutput], order: list[str]) -> Evaluation:
    rows = _by_dataset(
        [(it, out.score) for it in data.items if (out := outputs.get(it.id)) and out.score is not None]
    )
    pred = np.array([s for _, s in rows], dtype=float)
    human = np.array([it.info["human"] for it, _ in rows], dtype=float)
    statistic, metrics = _pearson_table([it.info["dataset"] for it, _ in rows], pred, human)
    table, notes = metrics(np.arange(len(rows)))
    n_missing = len(data.items) - len(rows)
    n_marker = int((pred == NO_SCORE).sum())
    if n_missing:
        notes.append(f"{n_missing} rows without a prediction are skipped")
    if n_marker:
        notes.append(f"{n_marker} predictions of -1 (the paper's 'no score') enter the correlation as -1")
    analysis, analysis_notes = _score_analysis(data, outputs, order)
    return Evaluation(
        metrics={**table, "analysis": analysis},
        headline=_correlations(table),
        statistic=statistic,
        clusters=[it.cluster for it, _ in rows],
        counts={"used": len(rows), "not_evaluated": n_missing, "no_score_markers_used": n_marker},
        notes=notes + analysis_notes,
    )


def _score_analysis(data: JudgeData, outputs: dict[str, JudgeOutput], order: list[str]):
    items = data.by_id()
    per: dict[str, tuple[list[int], list[int]]] = {name: ([], []) for _, name in ANALYSIS_RANGES}
    for rid in order:
        out = outputs.get(rid)
        if out is None or out.score is None:
            continue
        item = items[rid]
        name = analysis_dataset(item.info["key"])
        if name is None or int(out.score) == -1:
            continue
        per[name][0].append(int(item.info["human"]))
        per[name][1].append(int(out.score))
    table: dict[str, Any] = {}
    notes = []
    total = 0.0
    for name, (hum, jud) in per.items():
        if not hum:
            continue
        r, p, problem = pearson(np.array(hum, dtype=float), np.array(jud, dtype=float))
        table[name] = {"correlation": r, "p_value": p, "num_samples": len(hum)}
        if problem:
            notes.append(f"analysis {name}: {problem}")
        total += math.nan if r is None else r
    table["mean_over_10"] = finite(total / 10)
    return table, notes


def _score_strict(data: JudgeData, outputs: dict[str, JudgeOutput]) -> Evaluation:
    rows, markers, missing = [], 0, 0
    for it in data.items:
        out = outputs.get(it.id)
        if out is None or out.score is None:
            missing += 1
        elif out.score == NO_SCORE:
            markers += 1
        else:
            rows.append((it, out.score))
    rows = _by_dataset(rows)
    pred = np.array([s for _, s in rows], dtype=float)
    human = np.array([it.info["human"] for it, _ in rows], dtype=float)
    base_stat, metrics = _pearson_table([it.info["dataset"] for it, _ in rows], pred, human)

    def statistic(idx: np.ndarray) -> dict[str, float | None]:
        out = base_stat(idx)
        per = [v for k, v in out.items() if k != "overall.correlation" and v is not None]
        return {
            "overall.correlation": out["overall.correlation"],
            "dataset_mean": sum(per) / len(per) if per else None,
            **{k: v for k, v in out.items() if k != "overall.correlation"},
        }

    table, notes = metrics(np.arange(len(rows)))
    headline = _correlations(table)
    per = [v for k, v in headline.items() if k != "overall.correlation" and v is not None]
    table["dataset_mean"] = sum(per) / len(per) if per else None
    headline = {
        "overall.correlation": headline.pop("overall.correlation"),
        "dataset_mean": table["dataset_mean"],
        **headline,
    }
    return Evaluation(
        metrics=table,
        headline=headline,
        statistic=statistic,
        clusters=[it.cluster for it, _ in rows],
        counts={"used": len(rows), "without_score": missing + markers, "no_score_markers": markers},
        notes=notes
        + [
            f"{missing + markers} rows without a score ({markers} of them -1) are left out: a correlation "
            "cannot count them; dataset_mean averages the defined dataset correlations"
        ],
    )
