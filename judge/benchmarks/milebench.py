"""MileBench: 29 datasets, scored as the official ``evaluate.py`` scores them, or strictly.

Official mode follows MileBench/MileBench ``evaluate.py`` and ``score.py`` at the repository's
head, commit 9583e1f (2024-07-11), which is what users run today, rule for rule:

* which metric: dataset name containing ``NeedleInAHaystack`` -> the normalized ground truth
  is one of the normalized prediction's whitespace tokens; containing ``MMCoQA`` -> substring;
  else ``open-ended`` -> ROUGE-L F of the ``rouge`` package 1.0.1 (empty prediction: 0);
  else ``multi-choice`` -> accuracy after :func:`match_choice_official`.
* :func:`normalize_answer` is the official VQA-style ``process`` with its quirks (see there).
* multiple choice: prediction, ground truth and every choice are normalized, options keyed by
  the official ``char(i)`` (:func:`official_key`: A..Z, then AA..AZ, then BA..), the gold key is
  the index of the normalized ground truth in the normalized choice list (the first one, so
  choices that normalize alike move it).
* image-quantity level of every sample, in all three evaluators: counted from the dataset
  file's ``images_path`` (Few under 6 images, Medium 6 to 31, Many over 31).
* categories: ``score.py``'s taxonomy, with its exact dataset names (CamelCase for the
  temporal datasets: ``ActionSequence``); ``score.py`` computes no category or overall
  averages, so those rows are the toolkit's.

The first commit (730e930) differed in each of these and is not followed.

Strict mode changes only multiple choice: the toolkit's extractor
(:func:`judge.benchmarks.extract.extract_choice`) on the raw prediction, keys A, B, ... (option
text only for GPR1200, whose prompt shows no letters), the gold key from the raw choice list.
Needle, MMCoQA and ROUGE-L are the same in both modes.

What a record needs: ``task`` or ``meta.dataset`` (dataset name), ``meta.question_type``
(else multi-choice when ``choices`` are given), ``choices``, ``answer`` (ground truth),
``meta.n_images`` (else the question's images are counted); :class:`MileBenchMeta` is that
metadata, and the reader here (:func:`read_milebench`: a ``pred.json`` joined with its dataset
file) sets all of it.
"""

from __future__ import annotations

import json
import re
import sys
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from judge.benchmarks.base import Benchmark, Format, MetricInfo, register_benchmark
from judge.benchmarks.common import (
    METRICS_VERSION,
    OFFICIAL,
    SOURCE_OFFICIAL,
    SOURCE_TOOLKIT,
    RecordMeta,
    build_record,
    gold_text,
    is_missing,
    macro_row,
    make_score,
    mean_row,
    record_mode,
    response_text,
)
from judge.benchmarks.extract import extract_choice, option_keys
from judge.core.errors import JudgeError, RecordError
from judge.core.io import iter_json_records
from judge.core.schema import PredictionRecord, ScoreRecord, content_images

BENCHMARK = "milebench"
#: The official code this module reproduces (recorded in every score record's producer version).
OFFICIAL_REF = "MileBench evaluate.py+score.py@9583e1f"
VERSION = f"{METRICS_VERSION} ({OFFICIAL_REF})"

#: score.py's taxonomy, names as it writes them (head: CamelCase temporal datasets).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "Realistic Temporal": (
        "ActionLocalization",
        "ActionPrediction",
        "ActionSequence",
        "CharacterOrder",
        "CounterfactualInference",
        "EgocentricNavigation",
        "MovingAttribute",
        "MovingDirection",
        "ObjectExistence",
        "ObjectInteraction",
        "ObjectShuffle",
        "SceneTransition",
        "StateChange",
    ),
    "Realistic Semantic": (
        "ALFRED",
        "CLEVR-Change",
        "DocVQA",
        "IEdit",
        "MMCoQA",
        "MultiModalQA",
        "nuscenes",
        "OCR-VQA",
        "SlideVQA",
        "Spot-the-Diff",
        "TQA",
        "WebQA",
        "WikiVQA",
    ),
    "Diagnostic": ("TextNeedleInAHaystack", "ImageNeedleInAHaystack", "GPR1200"),
}
#: The 29 datasets, each with its category.
DATASETS: dict[str, str] = {ds: cat for cat, names in CATEGORIES.items() for ds in names}

ACCURACY = "milebench.accuracy"
ROUGE_L = "milebench.rouge_l"
NEEDLE = "milebench.needle"
MMCOQA = "milebench.mmcoqa"
#: The record of an item whose question_type the official evaluate.py does not support (never a score).
UNSUPPORTED = "milebench.unsupported"
#: Summary rows mixing metrics (a dataset scored by several, image-quantity levels across datasets,
#: categories, overall): the toolkit's averages.
SCORE = "milebench.score"


class MileBenchMeta(RecordMeta):
    """What :func:`read_milebench` puts in ``PredictionRecord.meta`` and the metrics read.

    ``dataset``: the dataset name; ``question_type``: ``multi-choice`` or ``open-ended`` (the
    dataset file's ``meta_data``); ``sample_id`` as pred.json wrote it; ``n_images``: len of
    the item's ``images_path`` (what the official evaluator bins image-quantity levels by);
    ``dataset_file``: the file joined; ``response_missing``: ``pred_response`` was null.
    """

    dataset: str | None = None
    question_type: str | None = None
    sample_id: int | float | str | None = None
    n_images: int | None = None
    dataset_file: str | None = None
    response_missing: bool = False


# Adversarial (-adv) and combined-image (_combined_N) variants share their dataset's category.
_VARIANT_RE = re.compile(r"(?:[-_]adv|[-_]combined[-_]?\d*)+$", re.IGNORECASE)


def canonical_dataset(name: str) -> str | None:
    """The MileBench dataset a name (or an -adv / _combined variant of it) belongs to, or None.

    Names are matched exactly, as ``score.py`` collects them: the first commit's snake_case
    spellings (``action_sequence``) belong to no dataset of the head's taxonomy."""
    base = _VARIANT_RE.sub("", name)
    return base if base in DATASETS else None


def dataset_category(name: str) -> str | None:
    ds = canonical_dataset(name)
    return DATASETS[ds] if ds else None


def image_quantity_level(n_images: int) -> str:
    """Few under 6 images, Medium 6 to 31, Many over 31."""
    return "Few" if n_images < 6 else ("Medium" if n_images <= 31 else "Many")


# ----------------------------------------------------------------------------- official normalization

_PUNCT = [
    ";",
    "/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
]
_DIGIT_COMMA_DIGIT = re.compile(r"(\d)(,)(\d)")
# The official pattern meant "not preceded by a digit" but wrote a lookahead "(?!<=\d)", which never fires.
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
# The official code calls periodStrip.sub("", text, re.UNICODE): the flag lands in `count` (= 32).
_PERIOD_COUNT = int(re.UNICODE)


def _process_punctuation(text: str) -> str:
    out = text
    digit_comma = _DIGIT_COMMA_DIGIT.search(text) is not None
    for p in _PUNCT:
        # Both tests look at the text as it came in, not at the text being rewritten.
        if p + " " in text or " " + p in text or digit_comma:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _PERIOD.sub("", out, count=_PERIOD_COUNT)


def normalize_answer(text: str) -> str:
    """The official ``Eval.process``: newlines/tabs to spaces, strip; per punctuation character,
    delete every occurrence if it stands next to a space anywhere (or the text has a
    digit-comma-digit), else replace it by a space; remove the first 32 periods not followed
    by a digit; strip ``'`` then ``"``; strip; lowercase."""
    text = text.replace("\n", " ").replace("\t", " ").strip()
    text = _process_punctuation(text)
    return text.strip("'").strip('"').strip().lower()


_REGEX_SPECIALS = ["\\", ".", "^", "$", "*", "+", "?", "{", "}", "[", "]", "|", "(", ")"]


def _option_pattern(option: str) -> str:
    """The official ``preprocess_option_string``: normalize, then backslash the regex specials."""
    out = normalize_answer(option)
    for ch in _REGEX_SPECIALS:
        if ch in out:
            out = out.replace(ch, "\\" + ch)
    return out


def official_key(index: int) -> str:
    """The official ``Eval.char``: A..Z, then AA..AZ, then ``"B" + chr(index + 13)`` for every later index
    (BA..BZ, and past 78 options the characters after Z, as the official code writes them)."""
    if index < 26:
        return chr(index + 65)
    if index < 52:
        return "A" + chr(index + 65 - 26)
    return "B" + chr(index + 65 - 26 - 26)


def official_options(choices: list[str]) -> dict[str, str]:
    """Options keyed as the official code keys them (:func:`official_key`)."""
    return {official_key(i): c for i, c in enumerate(choices)}


def match_choice_official(text: str, options: dict[str, str]) -> str:
    """The official ``match_choice`` on an already normalized prediction; returns what it returns:

    1. empty prediction -> ``"C"`` (whatever the options);
    2. leftmost match of any ``"<key> <option>"`` (normalized, regex-escaped; at one position
       the first option in option order wins) -> the match's first character, upper-cased;
    3. leftmost match of any option with spaces removed in the space-free prediction; the match
       is then compared with the *escaped* option text, so an option holding a regex special
       ("3.5") never matches here and the rule falls through;
    4. a prediction of 1 or 2 characters that is a key (``"b"``, ``"ab"`` when there are 28+ options);
    5. every character of the prediction that is a key, upper-cased, concatenated
       ("the answer is b" -> "AB").

    Any exception returns the prediction itself, as the official ``except`` does.
    """
    if text == "":
        return "C"
    try:
        pattern = "(" + "|".join(_option_pattern(f"{k} {v}") for k, v in options.items()) + ")"
        m = re.search(pattern, text, re.S)
        if m:
            return m.group(0)[0].upper()
        escaped = {k: _option_pattern(v).replace(" ", "") for k, v in options.items()}
        m = re.search("(" + "|".join(escaped.values()) + ")", text.replace(" ", ""), re.S)
        if m:
            for k, v in escaped.items():
                if m[0].strip() == v:
                    return k.upper()
        if len(text) in (1, 2) and text.upper() in options:
            return text.upper()
    except Exception:  # noqa: BLE001 - the official code answers any failure with the raw text
        return text
    return "".join(c.upper() for c in text if c.upper() in options)


# ----------------------------------------------------------------------------- ROUGE-L

try:
    ROUGE_VERSION = metadata.version("rouge")
except metadata.PackageNotFoundError:  # pragma: no cover - rouge is a declared dependency
    ROUGE_VERSION = "not installed"


@contextmanager
def _recursion_limit(limit: int):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def rouge_l_f(prediction: str, reference: str) -> float:
    """ROUGE-L F of ``rouge`` 1.0.1 (what the official code calls): summary-level union LCS over
    sentences split on ".", words counted as sets. Raises ValueError for text with no sentence."""
    from rouge import Rouge

    scorer = Rouge(metrics=["rouge-l"])  # the same F as Rouge() gives; rouge-1/2 are not needed
    try:
        return scorer.get_scores(prediction, reference)[0]["rouge-l"]["f"]
    except RecursionError:
        # rouge reconstructs the LCS recursively; long texts need a deeper stack, not a different answer.
        n = len(prediction.split()) + len(reference.split())
        with _recursion_limit(4 * n + 1000):
            return scorer.get_scores(prediction, reference)[0]["rouge-l"]["f"]


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


# ----------------------------------------------------------------------------- reading pred.json

_IMAGE_MARK = "<ImageHere>"


def is_pred_json(path: Path, first: dict[str, Any]) -> bool:
    """A pred.json's first record has ``sample_id`` and ``pred_response`` or ``gt_response``; a dataset
    file (``meta_data`` + ``data``) given as predictions is refused."""
    if "meta_data" in first and "data" in first:
        raise JudgeError(
            f"{path}: this is a MileBench dataset file, not predictions; give the pred.json and "
            "pass this file as dataset_file"
        )
    return "sample_id" in first and ("pred_response" in first or "gt_response" in first)


class _DatasetFile:
    """A parsed MileBench dataset file: name, question type, items by sample id with their lines."""

    def __init__(self, path: Path, name: str, question_type: str, items: dict[str, tuple[int, int, dict]]):
        self.path, self.name, self.question_type = path, name, question_type
        self.items = items  # sample key -> (index in data, line, item)


def _sample_key(value: Any) -> str:
    # The official code joins on int(sample_id); "7" and 7 are the same sample.
    try:
        return str(int(value))
    except (TypeError, ValueError):
        return str(value)


def _find_dataset_file(pred_path: Path, dataset_file: str | Path | None) -> tuple[Path | None, list[Path]]:
    ds = pred_path.parent.name
    if dataset_file is not None:
        given = Path(dataset_file)
        if given.is_file():
            return given, [given]
        base = given
        tried = [given / ds / f"{ds}.json", given / f"{ds}.json"]
    else:
        base = pred_path.parent
        tried = [base / f"{ds}.json", base / ds / f"{ds}.json"]
    for cand in tried:
        if cand.is_file():
            return cand, tried
    return None, tried


def _read_dataset_file(path: Path) -> _DatasetFile:
    """Parse a dataset file; raises RecordError (file, line, field) for whole-file problems."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise RecordError(
            f"not UTF-8 text ({e.reason} at byte {e.start})",
            file=path,
            line=raw.count(b"\n", 0, e.start) + 1,
        ) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(f"not valid JSON ({e.msg} at column {e.colno})", file=path, line=e.lineno) from None
    if not isinstance(obj, dict):
        raise RecordError(
            f"expected an object with 'meta_data' and 'data', got {type(obj).__name__}", file=path, line=1
        )
    meta = obj.get("meta_data")
    if not isinstance(meta, dict):
        raise RecordError("required field is missing or not an object", file=path, line=1, field="meta_data")
    data = obj.get("data")
    if not isinstance(data, list):
        raise RecordError("required field is missing or not a list", file=path, line=1, field="data")
    qt = meta.get("question_type")
    if not isinstance(qt, str):
        raise RecordError(
            "required field is missing (multi-choice or open-ended)",
            file=path,
            line=1,
            field="meta_data.question_type",
        )
    lines = _array_item_lines(text, "data")
    items: dict[str, tuple[int, int, dict]] = {}
    for i, item in enumerate(data):
        line = lines[i] if i < len(lines) else 1
        if not isinstance(item, dict) or "sample_id" not in item:
            raise RecordError(
                "each data item needs a 'sample_id'", file=path, line=line, field=f"data[{i}].sample_id"
            )
        items.setdefault(_sample_key(item["sample_id"]), (i, line, item))
    meta_name = str(meta.get("dataset") or "")
    # Variants (<ds>-adv.json, <ds>_combined_N.json) keep their own name; a renamed file keeps meta's.
    stem = path.stem
    name = stem if (not meta_name or stem.startswith(meta_name)) else meta_name
    return _DatasetFile(path, name, qt, items)


def _array_item_lines(text: str, key: str) -> list[int]:
    """1-based start line of each item of the top-level object's array ``key`` (``text`` is valid JSON)."""
    dec = json.JSONDecoder()

    def ws(p: int) -> int:
        while p < len(text) and text[p] in " \t\r\n":
            p += 1
        return p

    pos = ws(0)
    if text[pos : pos + 1] != "{":
        return []
    pos = ws(pos + 1)
    while pos < len(text) and text[pos] != "}":
        name, pos = dec.raw_decode(text, pos)
        pos = ws(ws(pos) + 1)  # past ':'
        if name == key and text[pos : pos + 1] == "[":
            lines, line, last = [], 1, 0
            pos = ws(pos + 1)
            while pos < len(text) and text[pos] != "]":
                line += text.count("\n", last, pos)  # counted incrementally: files hold thousands of items
                last = pos
                lines.append(line)
                _, pos = dec.raw_decode(text, pos)
                pos = ws(pos)
                if text[pos : pos + 1] == ",":
                    pos = ws(pos + 1)
            return lines
        _, pos = dec.raw_decode(text, pos)
        pos = ws(pos)
        if text[pos : pos + 1] == ",":
            pos = ws(pos + 1)
    return []


def _milebench_question(pred: dict, context: Any, images: list[str]) -> list[dict]:
    """The prompt as content: pred.json's question with its <ImageHere> marks replaced by its images
    (in order) when the counts agree; else the text followed by the images."""
    text = pred.get("question")
    pics = pred.get("image")
    if not isinstance(text, str):
        text, pics = (context if isinstance(context, str) else ""), images
    pics = [p for p in (pics if isinstance(pics, list) else []) if isinstance(p, str) and p]
    parts = text.split(_IMAGE_MARK)
    if len(parts) == len(pics) + 1 and pics:
        out: list[dict] = []
        for i, part in enumerate(parts):
            if part:
                out.append({"type": "text", "text": part})
            if i < len(pics):
                out.append({"type": "image", "image": pics[i]})
        return out
    return [{"type": "text", "text": text}] + [{"type": "image", "image": p} for p in pics]


def read_milebench(
    pred_path: str | Path, dataset_file: str | Path | None = None, *, cache: dict | None = None
) -> tuple[list[PredictionRecord], list[RecordError]]:
    """Records of one MileBench ``pred.json`` joined with its dataset file, and the errors met.

    ``dataset_file``: the dataset file ``<ds>.json``, or a folder holding ``<ds>/<ds>.json`` or
    ``<ds>.json``; when not given, the dataset file is looked for next to the pred.json as
    ``<ds>.json`` or ``<ds>/<ds>.json``. ``<ds>`` is the name of the folder holding the
    pred.json (the official layout is ``outputs/<model>/<ds>/pred.json``). ``cache``: dataset
    files already parsed, by resolved path (shared by the pred.json files of one load).

    Each record: ``id`` ``"<dataset>/<sample_id>"``, ``task`` the dataset name (the dataset
    file's stem, or ``meta_data.dataset`` when the file was renamed), ``model`` ``gen_model_id``
    (else the folder above the dataset folder), ``answer``/``reference`` ``gt_response``,
    ``response`` ``pred_response``, ``choices`` ``task_instance.choice_list``, and ``meta``:
    ``dataset, question_type, sample_id, n_images`` (len of ``images_path``, which the official
    evaluator bins image-quantity levels by), ``dataset_file``, and ``response_missing`` when
    ``pred_response`` is null (:class:`MileBenchMeta`). A sample_id absent from the dataset
    file is an error at its pred.json line.
    """
    pred_path = Path(pred_path)
    cache = cache if cache is not None else {}
    try:
        rows = list(iter_json_records(pred_path))
    except RecordError as e:
        return [], [e]
    ds_path, tried = _find_dataset_file(pred_path, dataset_file)
    if ds_path is None:
        return [], [
            RecordError(
                f"no MileBench dataset file for this pred.json; looked for {', '.join(str(t) for t in tried)}; "
                "pass dataset_file (the <ds>.json, or the folder holding <ds>/<ds>.json)",
                file=pred_path,
            )
        ]
    key = ds_path.resolve()
    if key not in cache:
        try:
            cache[key] = _read_dataset_file(ds_path)
        except RecordError as e:
            cache[key] = e
    ds = cache[key]
    if isinstance(ds, RecordError):
        return [], [ds]
    records, errors = [], []
    for line, obj in rows:
        if isinstance(obj, RecordError):
            errors.append(obj)
            continue
        rec, errs = _milebench_record(obj, pred_path, line, ds)
        errors += errs
        if rec is not None:
            records.append(rec)
    return records, errors


def _milebench_record(
    obj: Any, path: Path, line: int, ds: _DatasetFile
) -> tuple[PredictionRecord | None, list[RecordError]]:
    def err(
        msg: str, fld: str | None, rid: str | None = None, file: Path = path, at: int = line
    ) -> tuple[None, list[RecordError]]:
        return None, [RecordError(msg, file=file, line=at, field=fld, record_id=rid)]

    if not isinstance(obj, dict):
        return err(f"expected a JSON object, got {type(obj).__name__}", None)
    if is_missing(obj.get("sample_id")):
        return err("required field is missing", "sample_id")
    sid = _sample_key(obj["sample_id"])
    rid = f"{ds.name}/{sid}"
    for fld in ("gt_response", "pred_response"):
        if fld not in obj:
            return err("required field is missing", fld, rid)
    if is_missing(obj["gt_response"]):
        return err("the ground truth is null", "gt_response", rid)
    pred = obj["pred_response"]
    if not (pred is None or isinstance(pred, (str, int, float))):
        return err(f"expected text, got {type(pred).__name__}", "pred_response", rid)
    if sid not in ds.items:
        return err(
            f"sample_id {obj['sample_id']!r} is not in the dataset file {ds.path} "
            f"({len(ds.items)} samples of {ds.name!r})",
            "sample_id",
            rid,
        )
    index, item_line, item = ds.items[sid]
    ti = item.get("task_instance")
    ti = ti if isinstance(ti, dict) else {}
    images = ti.get("images_path")
    if not isinstance(images, list):
        return err(
            "required field is missing or not a list",
            f"data[{index}].task_instance.images_path",
            rid,
            ds.path,
            item_line,
        )
    choices = ti.get("choice_list")
    if choices is not None and not isinstance(choices, list):
        return err("expected a list", f"data[{index}].task_instance.choice_list", rid, ds.path, item_line)
    if ds.question_type == "multi-choice" and not choices:
        return err(
            "a multi-choice dataset needs a choice_list",
            f"data[{index}].task_instance.choice_list",
            rid,
            ds.path,
            item_line,
        )
    model = obj.get("gen_model_id")
    if not isinstance(model, str) or not model.strip():
        model = path.parent.parent.name or "unknown"
    gold = str(obj["gt_response"])
    meta = MileBenchMeta(
        dataset=ds.name,
        question_type=ds.question_type,
        sample_id=obj["sample_id"],
        n_images=len(images),
        dataset_file=str(ds.path),
        response_missing=pred is None,
    )
    rec = {
        "id": rid,
        "benchmark": BENCHMARK,
        "task": ds.name,
        "model": model,
        "question": _milebench_question(obj, ti.get("context"), images),
        "response": "" if pred is None else str(pred),
        "answer": gold,
        "reference": gold,
        "choices": [str(c) for c in choices] if choices else None,
        "meta": meta.to_meta(),
    }
    return build_record(rec, path, line, rid)


# ----------------------------------------------------------------------------- the benchmark


@register_benchmark
class MileBench(Benchmark):
    """MileBench: 29 datasets, its pred.json files, official and strict metrics (see the module doc)."""

    name = BENCHMARK
    title = "MileBench"
    tasks = tuple(DATASETS)
    meta = MileBenchMeta
    formats = (
        Format(
            name="milebench",
            detect=is_pred_json,
            read=lambda path, ctx: read_milebench(path, ctx.dataset_file, cache=ctx.cache("milebench")),
            joined_file=lambda rec: MileBenchMeta.of(rec).dataset_file,
            joined_label="milebench dataset file",
        ),
    )
    metrics = (
        MetricInfo(
            name=ACCURACY,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="multiple-choice accuracy: 1 when the extracted option is the gold one "
            "(official: match_choice on normalized text; strict: the toolkit's extractor)",
        ),
        MetricInfo(
            name=ROUGE_L,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="ROUGE-L F of rouge 1.0.1 on normalized text (open-ended datasets); "
            "an empty prediction scores 0",
        ),
        MetricInfo(
            name=NEEDLE,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="1 when the normalized ground truth is one of the normalized prediction's "
            "whitespace tokens (NeedleInAHaystack datasets)",
        ),
        MetricInfo(
            name=MMCOQA,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="1 when the normalized ground truth is a substring of the normalized prediction (MMCoQA)",
        ),
        MetricInfo(
            name=UNSUPPORTED,
            higher_is_better=True,
            scale=(0, 100),
            record_scale=(0, 1),
            official=OFFICIAL_REF,
            description="never scored: an item whose question_type is neither multi-choice nor open-ended "
            "('Dataset not supported' in the official evaluate.py), kept as an unscorable record",
        ),
        MetricInfo(
            name=SCORE,
            higher_is_better=True,
            scale=(0, 100),
            description="the toolkit's averages (x100) where metrics mix: a dataset scored by several, "
            "image-quantity levels across datasets, categories and overall (means of the dataset values)",
        ),
    )

    def score(self, records: list[PredictionRecord], mode: str) -> list[ScoreRecord | None]:
        return [score_record(r, mode) for r in records]

    def metric_for(self, record: PredictionRecord) -> str | None:
        return rule_of(record)

    def summarize(self, score_records: list[ScoreRecord]) -> list[dict]:
        return summary_rows(score_records)
