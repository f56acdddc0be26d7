"""The inputs of ``judge-score``: prediction files of any supported format, and annotation files.

* canonical prediction JSONL, MMIE, MileBench and MMRA files are read by
  :func:`judge.benchmarks.formats.load_benchmark_predictions` (``format="auto"`` detects each file);
* an annotation file (its records carry human ``scores``; ``format="annotations"``, or detected
  from the first record) is read by :func:`judge.core.io.load_annotations` and each record
  becomes a prediction with ``benchmark`` = the rubric's name, so a test split can be scored
  and compared with its humans (``judge-report``);
* a pairs file (two responses per record, ``response_a`` and ``response_b``; ``format="pairs"``, or
  detected from the first record) is read by :func:`judge.scoring.pairs.read_pairs`: each side becomes
  a prediction, and the run adds the judge's preference between them.

Every bad record of every file is collected first; then they stop the run (an
:class:`~judge.core.io.InvalidRecordsError` naming file, line and field) or, with
``skip_invalid``, are skipped and listed in the summary. Images are resolved here but opened
only when scored, where a bad one makes its item unscorable instead of stopping the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.benchmarks.formats import FORMATS, drop_duplicate_predictions, joined_files
from judge.core.errors import ConfigError, JudgeError, RecordError
from judge.core.io import InvalidRecordsError, file_sha256, iter_json_records, load_annotations, parse_records
from judge.core.schema import AnnotationRecord, PredictionRecord
from judge.scoring.pairs import PAIRS, looks_like_pairs, read_pairs


def input_formats() -> tuple[str, ...]:
    """Every input format: auto, each prediction format (a benchmark plugin's too), annotations, pairs."""
    return ("auto", *FORMATS, "annotations", PAIRS)


@dataclass
class InputFile:
    path: str
    format: str
    sha256: str
    n_records: int = 0


@dataclass
class Inputs:
    """Valid records in a stable order (files as given, records in file order), and what was skipped."""

    records: list[PredictionRecord] = field(default_factory=list)
    errors: list[RecordError] = field(default_factory=list)
    #: every file read: the inputs, then the MileBench dataset files their records were joined with
    files: list[InputFile] = field(default_factory=list)

    def describe(self) -> list[dict[str, Any]]:
        return [vars(f) for f in self.files]


def check_format(value: str) -> str:
    """A settings validator of `format`: one of :func:`input_formats` (a benchmark plugin's too)."""
    if value not in input_formats():
        raise ValueError(f"`format` {value!r} is not one of {', '.join(input_formats())}")
    return value


def looks_like_annotations(path: str | Path) -> bool:
    """True when the file's first record carries human ``scores`` and no ``benchmark``."""
    path = Path(path)
    if path.suffix.lower() not in (".json", ".jsonl"):
        return False
    try:
        for _, obj in iter_json_records(path):
            if isinstance(obj, dict):
                return "scores" in obj and "benchmark" not in obj
            if not isinstance(obj, RecordError):
                return False
    except JudgeError:
        return False
    return False


def annotation_as_prediction(rec: AnnotationRecord, benchmark: str) -> PredictionRecord:
    """An annotation record as a prediction of ``benchmark`` (its human scores are not needed here)."""

    def dump(content):
        return None if content is None else [s.model_dump() for s in content]

    pred = PredictionRecord(
        id=rec.id,
        benchmark=benchmark,
        task=rec.task,
        model=rec.model,
        question=dump(rec.question),
        response=dump(rec.response),
        reference=dump(rec.reference),
        meta={**rec.meta, "question_id": rec.question_id, "source": "annotations"},
    )
    pred._source = rec._source
    return pred


def question_id(rec: PredictionRecord) -> str:
    """The question a scored item answers: an annotation record's ``question_id`` (each response has its
    own id there), else the item's ``id`` (candidate models' predictions for one item share it)."""
    qid = rec.meta.get("question_id") if rec.meta.get("source") == "annotations" else None
    return str(qid) if qid else rec.id


def load_inputs(
    paths: list[str | Path],
    *,
    format: str = "auto",
    dataset_file: str | Path | None = None,
    skip_invalid: bool = False,
    annotation_benchmark: str = "mmie",
    root: str | Path | None = None,
) -> Inputs:
    """Read every input file; raise on any bad record unless ``skip_invalid`` (see the module doc)."""
    if format not in input_formats():
        raise ConfigError(f"unknown input format {format!r}; use one of {', '.join(input_formats())}")
    if not paths:
        raise JudgeError("no input files given")
    out = Inputs()
    # Keep the order of the files as given, whichever reader takes each one.
    per_file: list[tuple[Path, str]] = []
    for p in paths:
        p = Path(p)
        if not p.is_file():
            raise JudgeError(f"{p}: file not found")
        if format == "annotations" or (format in ("auto", "canonical", "mmie") and looks_like_annotations(p)):
            per_file.append((p, "annotations"))
        elif format == PAIRS or (format == "auto" and looks_like_pairs(p)):
            per_file.append((p, PAIRS))
        else:
            per_file.append((p, format))
    for p, fmt in per_file:
        if fmt == "annotations":
            res = load_annotations(p, check_images=False, collect=True, root=root)
            recs = [annotation_as_prediction(r, annotation_benchmark) for r in res.records]
            detected = "annotations"
        elif fmt == PAIRS:
            recs, pair_errors = read_pairs(p, annotation_benchmark, root)
            out.errors += pair_errors
            out.records += recs
            out.files.append(InputFile(str(p), PAIRS, file_sha256(p), len(recs) // 2))
            continue
        else:
            from judge.benchmarks.formats import detect_format, load_benchmark_predictions

            detected = detect_format(p) if fmt == "auto" else fmt
            res = load_benchmark_predictions(
                [p], format=fmt, dataset_file=dataset_file, skip_invalid=True, root=root
            )
            recs = res.records
        out.errors += res.errors
        out.records += recs
        out.files.append(InputFile(str(p), detected, file_sha256(p), len(recs)))
    # Files the readers joined records with (MileBench's dataset files) are inputs too.
    out.files += [InputFile(p, label, file_sha256(p), n) for p, label, n in joined_files(out.records)]
    out.records = drop_duplicate_predictions(out.records, out.errors)  # unique over all inputs
    if out.errors and not skip_invalid:
        raise InvalidRecordsError(out.errors, "input records")
    return out


def prediction_records(
    items: Iterable[PredictionRecord | AnnotationRecord | Mapping[str, Any]],
    benchmark: str,
    root: str | Path | None = None,
) -> list[PredictionRecord]:
    """Items as prediction records, validated like the lines of a prediction file: dicts (canonical or
    MMIE form; one with human ``scores`` is an annotation; ``benchmark`` fills a missing benchmark),
    :class:`PredictionRecord` or :class:`AnnotationRecord` (scored as a prediction of ``benchmark``).
    Relative image paths resolve from ``root`` (default: the working directory)."""
    items = list(items)
    where = [i for i, x in enumerate(items) if isinstance(x, Mapping)]
    parsed = dict(
        zip(
            where,
            parse_records(
                [items[i] for i in where],
                root=root,
                defaults={"benchmark": benchmark},
                positions=[i + 1 for i in where],
            ),
            strict=True,
        )
    )
    out = []
    for i, x in enumerate(items):
        rec = parsed.get(i, x)
        if isinstance(rec, AnnotationRecord):
            rec = annotation_as_prediction(rec, benchmark)
        if not isinstance(rec, PredictionRecord):
            raise ConfigError(
                f"item {i + 1} is a {type(x).__name__}; give dicts, PredictionRecord or AnnotationRecord"
            )
        out.append(rec)
    return out
