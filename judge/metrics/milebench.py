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
(:func:`judge.metrics.extract.extract_choice`) on the raw prediction, keys A, B, ... (option
text only for GPR1200, whose prompt shows no letters), the gold key from the raw choice list.
Needle, MMCoQA and ROUGE-L are the same in both modes.

What a record needs: ``task`` or ``meta["dataset"]`` (dataset name), ``meta["question_type"]``
(else multi-choice when ``choices`` are given), ``choices``, ``answer`` (ground truth),
``meta["n_images"]`` (else the question's images are counted); the reader
:func:`judge.data.benchmarks.load_benchmark_predictions` sets them all.
"""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from importlib import metadata

from ..data.schema import PredictionRecord, ScoreRecord, content_images
from .common import (
    METRICS_VERSION,
    OFFICIAL,
    SOURCE_OFFICIAL,
    SOURCE_TOOLKIT,
    gold_text,
    macro_row,
    make_score,
    mean_row,
    record_mode,
    response_missing,
    response_text,
)
from .extract import extract_choice, option_keys

BENCHMARK = "milebench"
#: The official code this module reproduces (recorded in every score record's producer version).
OFFICIAL_REF = "MileBench evaluate.py+score.py@9583e1f"
VERSION = f"{METRICS_VERSION} ({OFFICIAL_REF})"

#: score.py's taxonomy, names as it writes them (head: CamelCase temporal datasets).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "Realistic Temporal": (
        "ActionLocalization", "ActionPrediction", "ActionSequence", "CharacterOrder",
        "CounterfactualInference", "EgocentricNavigation", "MovingAttribute", "MovingDirection",
        "ObjectExistence", "ObjectInteraction", "ObjectShuffle", "SceneTransition", "StateChange",
    ),
    "Realistic Semantic": (
        "ALFRED", "CLEVR-Change", "DocVQA", "IEdit", "MMCoQA", "MultiModalQA", "nuscenes", "OCR-VQA",
        "SlideVQA", "Spot-the-Diff", "TQA", "WebQA", "WikiVQA",
    ),
    "Diagnostic": ("TextNeedleInAHaystack", "ImageNeedleInAHaystack", "GPR1200"),
}
#: The 29 datasets, each with its category.
DATASETS: dict[str, str] = {ds: cat for cat, names in CATEGORIES.items() for ds in names}

ACCURACY = "milebench.accuracy"
ROUGE_L = "milebench.rouge_l"
NEEDLE = "milebench.needle"
MMCOQA = "milebench.mmcoqa"


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

_PUNCT = [";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!"]
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


def _dataset(rec: PredictionRecord) -> str:
    return str(rec.meta.get("dataset") or rec.task)


def _question_type(rec: PredictionRecord) -> str:
    qt = rec.meta.get("question_type")
    if qt:
        return str(qt)
    return "multi-choice" if rec.choices else "open-ended"


def rule_of(rec: PredictionRecord) -> str | None:
    """The metric name the official code picks for this record, or None if it has none."""
    ds = _dataset(rec)
    if "NeedleInAHaystack" in ds:
        return NEEDLE
    if "MMCoQA" in ds:
        return MMCOQA
    qt = _question_type(rec)
    if qt == "open-ended":
        return ROUGE_L
    if qt == "multi-choice":
        return ACCURACY
    return None


def _n_images(rec: PredictionRecord) -> int:
    n = rec.meta.get("n_images")
    return int(n) if n is not None else len(content_images(rec.question))


def _details(rec: PredictionRecord) -> dict:
    n = _n_images(rec)
    ds = _dataset(rec)
    return {
        "dataset": ds, "category": dataset_category(ds), "question_type": _question_type(rec),
        "n_images": n, "image_quantity_level": image_quantity_level(n),
    }


def score_record(rec: PredictionRecord, mode: str) -> ScoreRecord:
    """Score one MileBench prediction in ``mode`` ("official" or "strict")."""
    rule = rule_of(rec)
    details = _details(rec)
    common = dict(benchmark=BENCHMARK, mode=mode, task=details["dataset"])

    def unscorable(metric: str, reason: str) -> ScoreRecord:
        return make_score(rec, metric=metric, score=None, reason=reason, details=details, version=VERSION,
                          **common)

    if rule is None:
        return unscorable("milebench.unsupported", f"question_type {details['question_type']!r} is neither "
                          "multi-choice nor open-ended (the official evaluate.py: 'Dataset not supported')")
    if response_missing(rec):
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
            return make_score(rec, metric=rule, score=0.0, details=details, version=f"rouge=={ROUGE_VERSION}",
                              **common)
        try:
            f = rouge_l_f(p, g)
        except ValueError as e:
            return unscorable(rule, f"rouge cannot score this text ({e}); the official evaluate.py stops here")
        return make_score(rec, metric=rule, score=f, details=details, version=f"rouge=={ROUGE_VERSION}", **common)

    choices = [str(c) for c in rec.choices or []]
    if not choices:
        return unscorable(rule, "multi-choice item without a choice_list")
    if mode == OFFICIAL:
        g, p = normalize_answer(gold), normalize_answer(pred)
        norm_choices = [normalize_answer(c) for c in choices]
        if g not in norm_choices:
            return unscorable(rule, f"the normalized ground truth {g!r} is not in the normalized choice_list "
                              "(the official evaluate.py stops with an AssertionError)")
        gold_key = official_key(norm_choices.index(g))
        extracted = match_choice_official(p, official_options(norm_choices))
        details.update(extracted=extracted, gold=gold_key, prediction=p)
        return make_score(rec, metric=rule, score=float(extracted == gold_key), details=details, version=VERSION,
                          **common)

    keys = option_keys(len(choices))
    idx = _gold_index(gold, choices)
    if idx is None:
        return unscorable(rule, f"the ground truth {gold!r} is not one of the choices")
    letters_shown = canonical_dataset(details["dataset"]) != "GPR1200"
    ex = extract_choice(pred, dict(zip(keys, choices, strict=True)), letters_shown=letters_shown)
    details.update(extracted=ex.answer, gold=keys[idx], how=ex.how)
    if ex.no_answer:
        details["no_answer"] = True
    return make_score(rec, metric=rule, score=float(ex.answer == keys[idx]), details=details,
                      version=METRICS_VERSION, extractor="strict", **common)


def _gold_index(gold: str, choices: list[str]) -> int | None:
    """The raw ground truth's position among the raw choices (exact, then stripped, then normalized)."""
    for probe, conv in ((gold, str), (gold.strip(), str.strip), (normalize_answer(gold), normalize_answer)):
        matches = [i for i, c in enumerate(choices) if conv(c) == probe]
        if matches:
            return matches[0]
    return None


def score(records: list[PredictionRecord], mode: str) -> list[ScoreRecord]:
    """Score MileBench records in one mode; one ScoreRecord per record, in order."""
    return [score_record(r, mode) for r in records]


def needs_judge(rec: PredictionRecord) -> bool:
    """MileBench is scored by its rule-based metrics only."""
    return False


# ----------------------------------------------------------------------------- summary


def summarize(records: list[ScoreRecord]) -> list[dict]:
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
        base = dict(benchmark=BENCHMARK, model=model, mode=mode)
        by_ds: dict[str, list[ScoreRecord]] = {}
        for s in recs:
            by_ds.setdefault(s.task, []).append(s)
        ds_rows = {}
        for ds, dr in by_ds.items():
            metrics = {s.metric for s in dr}
            metric = metrics.pop() if len(metrics) == 1 else "milebench.score"
            ds_rows[ds] = mean_row(dr, level="dataset", group=ds, metric=metric, source=src, **base)
            rows.append(ds_rows[ds])
            for lvl in ("Few", "Medium", "Many"):
                part = [s for s in dr if (s.details or {}).get("image_quantity_level") == lvl]
                if part:
                    rows.append(mean_row(part, level="image_quantity", group=f"{ds}/{lvl}", metric=metric,
                                         source=src, **base))
        for lvl in ("Few", "Medium", "Many"):
            part = [s for s in recs if (s.details or {}).get("image_quantity_level") == lvl]
            if part:
                rows.append(mean_row(part, level="image_quantity", group=lvl, metric="milebench.score",
                                     source=SOURCE_TOOLKIT, **base))
        for cat in [*CATEGORIES, None]:
            parts = [r for ds, r in ds_rows.items() if dataset_category(ds) == cat]
            if parts:
                rows.append(macro_row(parts, level="category", group=cat or "uncategorized",
                                      metric="milebench.score", source=SOURCE_TOOLKIT, **base))
        rows.append(macro_row(list(ds_rows.values()), level="overall", group="all", metric="milebench.score",
                              source=SOURCE_TOOLKIT, **base))
    return rows
