"""Judge benchmarks: public sets of human verdicts on which a judge itself is measured.

VL-RewardBench, Multimodal RewardBench and MLLM-as-a-Judge give, per item, a question with an image and two
or more responses, and the humans' verdict: which response is better, a score, or a ranking. Each ships a
script that turns a judge's verdicts into its published metric. A judge benchmark is one module here: a
subclass of :class:`JudgeBenchmark` decorated with :func:`register_judge_benchmark`, which

* reads the benchmark's own files into :class:`JudgeItem` (:meth:`JudgeBenchmark.read`);
* computes its metric from the judge's per-item :class:`JudgeOutput` in two modes
  (:meth:`JudgeBenchmark.evaluate`): ``official``, exactly as the benchmark's code at :attr:`official`
  computes it today (what it drops, randomises or collapses included), and ``strict``, where every item
  counts, an item without a verdict as a miss.

The judge that produces the outputs, the bootstrap intervals and the files written are the runner's
(:mod:`judge.scoring.bench`, ``judge-bench``); nothing here loads a model. ``judge/benchmarks/__init__.py``
imports the built-in modules; a package outside registers its own through the ``judge.benchmarks`` entry
point group, as for prediction benchmarks. "Adding a judge benchmark" in docs/benchmarks.md walks through it.

Outputs (``judge-bench --judge-outputs FILE``; what the runner writes as ``judge_outputs.jsonl``): JSON
Lines, one object per item, ``id`` the benchmark's unique item key, and per kind of item

* ``pair``: ``p_first_better`` (the preference for the first response in the dataset's own order, in
  [0, 1]; exactly 0.5 is an undecided verdict), or ``score_a`` and ``score_b`` (the first response is
  preferred when its score is higher; equal scores are undecided);
* ``score``: ``score``;
* ``rank``: ``ranking``, the response letters (A for the first response) from best to worst, ``"CDAB"``.

A verdict may be ``null`` (with an optional ``reason``): the judge could not score the item. An item
missing from the file has no verdict either. Other keys are ignored.
"""

from __future__ import annotations

import hashlib
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np

from judge.core.atomic import atomic_write
from judge.core.errors import ConfigError, JudgeError, RecordError
from judge.core.images import resolve_image
from judge.core.io import InvalidRecordsError, iter_json_records

Kind = Literal["pair", "score", "rank"]
KINDS: tuple[str, ...] = ("pair", "score", "rank")
OFFICIAL = "official"
STRICT = "strict"
#: Verdicts of a pair item, in the dataset's order of its two responses.
FIRST, SECOND, UNDECIDED = "first", "second", "undecided"


@dataclass(frozen=True)
class OfficialCode:
    """The code whose metric :meth:`JudgeBenchmark.evaluate` reproduces in official mode."""

    repository: str  #: ``owner/name`` on GitHub
    commit: str  #: the full commit hash read
    files: tuple[str, ...]  #: the files whose metric is reproduced

    def describe(self) -> str:
        return f"{self.repository} {', '.join(self.files)} @ {self.commit[:8]}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "repository": f"https://github.com/{self.repository}",
            "commit": self.commit,
            "files": list(self.files),
        }


@dataclass
class JudgeItem:
    """One item of a judge benchmark: a question, its responses, the humans' verdict.

    ``id``: the item's unique key (the id outputs name); ``question``, ``responses``: content segments
    (``{"type": "text", ...}`` / ``{"type": "image", "image": <resolved path>}``), the responses in the
    dataset's own order; ``cluster``: the unit the bootstrap resamples (items sharing an image and
    instruction share it); ``info``: what the benchmark's metric reads (its labels and group fields);
    ``line``: where the item starts in its file.
    """

    id: str
    kind: Kind
    question: list[dict[str, str]]
    responses: list[list[dict[str, str]]]
    cluster: str
    info: dict[str, Any]
    line: int | None = None
    #: images embedded in the data file: the placeholder standing for each in ``question`` -> (file name, bytes)
    embedded: dict[str, tuple[str, bytes]] = field(default_factory=dict)


@dataclass
class JudgeData:
    """A judge benchmark's file, read: its items in file order and what kind of verdict each needs."""

    benchmark: str
    path: Path
    mode: str  #: the file's kind as the benchmark names it (MLLM-as-a-Judge: score, pair, batch)
    kind: Kind
    items: list[JudgeItem]

    def by_id(self) -> dict[str, JudgeItem]:
        return {it.id: it for it in self.items}


@dataclass
class JudgeOutput:
    """A judge's verdict on one item (see the module doc); all verdict fields None: no verdict."""

    id: str
    p_first_better: float | None = None
    score: float | None = None
    ranking: str | None = None
    reason: str | None = None  #: why there is no verdict
    extra: dict[str, Any] = field(default_factory=dict)  #: what the judge wrote besides (scores, p_tie)

    @property
    def has_verdict(self) -> bool:
        return self.p_first_better is not None or self.score is not None or self.ranking is not None

    def to_dict(self, kind: str) -> dict[str, Any]:
        """The output as a line of an outputs file for an item of ``kind`` (its verdict key always present)."""
        d: dict[str, Any] = {"id": self.id}
        if kind == "pair":
            d["p_first_better"] = self.p_first_better
        elif kind == "score":
            d["score"] = self.score
        else:
            d["ranking"] = self.ranking
        d.update(self.extra)
        if self.reason:
            d["reason"] = self.reason
        return d


def pair_verdict(p: float) -> str:
    """:data:`FIRST` when ``p`` (the preference for the first response) is over 0.5, :data:`SECOND` under,
    :data:`UNDECIDED` at exactly 0.5."""
    return FIRST if p > 0.5 else SECOND if p < 0.5 else UNDECIDED


@dataclass
class Evaluation:
    """One mode's metric of a benchmark on a judge's outputs.

    ``metrics``: the numbers under the benchmark's own names, shaped as its code reports them (None where
    its code would give NaN or raise; ``notes`` says so); ``headline``: the main ones of them by flat name
    (``"Overall Accuracy"``, ``"overall.correlation"``); ``statistic(rows)``: the headline numbers
    recomputed from a selection of the evaluation's rows (indices, repeats allowed: a bootstrap resample),
    equal to ``headline`` for ``np.arange(len(clusters))`` (to rounding where the official code's library
    is replaced by a faster equivalent); ``clusters``: the bootstrap unit of each row; ``counts``: items
    used, dropped, and why; ``notes``: every branch of the official code that applied (dropped, randomised,
    collapsed), in words.
    """

    metrics: dict[str, Any]
    statistic: Callable[[np.ndarray], dict[str, float | None]]
    clusters: list[str]
    counts: dict[str, int]
    notes: list[str] = field(default_factory=list)
    headline: dict[str, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.headline:
            self.headline = self.statistic(np.arange(len(self.clusters)))


class JudgeBenchmark(ABC):
    """A judge benchmark: set the class attributes, implement :meth:`read` and :meth:`evaluate`, decorate
    with :func:`register_judge_benchmark`.

    ``name``: lower case, what ``judge-bench NAME`` takes; ``aliases``: other names accepted; ``title``:
    as the benchmark spells itself; ``official``: the code followed in official mode (``also_followed``:
    further code whose numbers the official metrics include, e.g. analysis notebooks); ``source`` and
    ``licence``: where users get the data and under which terms (the toolkit never downloads it).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    official: ClassVar[OfficialCode]
    source: ClassVar[str]
    licence: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    also_followed: ClassVar[tuple[OfficialCode, ...]] = ()

    @abstractmethod
    def read(self, path: Path, root: Path | None = None) -> JudgeData:
        """The items of a data file in the benchmark's own format, in file order; image paths resolve from
        ``root`` (default: where the benchmark's own scripts resolve them); images embedded in the file (a
        parquet release) are kept in :attr:`JudgeItem.embedded` (see :func:`write_embedded`). Nothing is
        written. Raises :class:`~judge.core.io.InvalidRecordsError` naming every bad line and field."""

    @abstractmethod
    def evaluate(
        self, data: JudgeData, outputs: dict[str, JudgeOutput], order: list[str], mode: str
    ) -> Evaluation:
        """The metric of ``mode`` (``official`` or ``strict``) on ``outputs`` (by item id; items without
        a verdict are absent or have none). ``order``: the ids in the order the outputs were produced (the
        order the official code would read them in)."""


#: Registered judge benchmarks by name, in registration order.
JUDGE_BENCHMARKS: dict[str, JudgeBenchmark] = {}

J = TypeVar("J", bound=type[JudgeBenchmark])


def register_judge_benchmark(cls: J) -> J:
    """Class decorator: register an instance of ``cls`` under its ``name`` (refuses a name taken, or
    missing attributes). Returns the class unchanged."""
    where = f"{cls.__module__}.{cls.__qualname__}"
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name or name != name.lower():
        raise ConfigError(f"{where}: a judge benchmark needs a lower-case 'name', got {name!r}")
    for attr in ("title", "official", "source", "licence"):
        if not getattr(cls, attr, None):
            raise ConfigError(f"{where}: set {attr!r}")
    taken = {n for bm in JUDGE_BENCHMARKS.values() for n in (bm.name, *bm.aliases)}
    for n in (name, *cls.aliases):
        if n in taken:
            raise ConfigError(f"{where}: judge benchmark name {n!r} is already registered")
    JUDGE_BENCHMARKS[name] = cls()
    return cls


def unregister_judge_benchmark(name: str) -> None:
    JUDGE_BENCHMARKS.pop(name.lower(), None)


def get_judge_benchmark(name: str) -> JudgeBenchmark:
    """The judge benchmark of that name or alias (any case); a ConfigError listing them otherwise."""
    key = str(name).lower()
    for bm in JUDGE_BENCHMARKS.values():
        if key == bm.name or key in bm.aliases:
            return bm
    known = ", ".join(JUDGE_BENCHMARKS) or "none"
    raise ConfigError(f"unknown judge benchmark {name!r}; known: {known}")


# ----------------------------------------------------------------------------- readers' helpers


def read_objects(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[RecordError]]:
    """(line, object) of every record of a JSON / JSON Lines file (or a CSV / parquet table: its rows,
    numbered from 1), and the records that are not objects."""
    from judge.benchmarks.common import TABLE_SUFFIXES, iter_rows

    rows, errors = [], []
    records = iter_rows(path) if path.suffix.lower() in TABLE_SUFFIXES else iter_json_records(path)
    for line, obj in records:
        if isinstance(obj, RecordError):
            errors.append(obj)
        elif not isinstance(obj, dict):
            errors.append(
                RecordError(f"expected a JSON object, got {type(obj).__name__}", file=path, line=line)
            )
        else:
            rows.append((line, obj))
    return rows, errors


def check_first(
    path: Path, rows: list[tuple[int, dict[str, Any]]], keys: tuple[str, ...], title: str
) -> None:
    """Refuse, in one line, a file whose first record lacks the benchmark's fields (another benchmark's file)
    instead of listing an error per line."""
    if not rows:
        return
    missing = [k for k in keys if k not in rows[0][1]]
    if missing:
        has = ", ".join(list(rows[0][1])[:8]) or "nothing"
        raise JudgeError(
            f"{path}: not a {title} file: its first record (line {rows[0][0]}) has no {', '.join(missing)} "
            f"(it has {has})"
        )


class RowReader:
    """Typed access to one record's fields; every problem becomes a RecordError naming file, line, field."""

    def __init__(self, path: Path, line: int, obj: dict[str, Any], record_id: str | None = None):
        self.path, self.line, self.obj, self.record_id = path, line, obj, record_id
        self.errors: list[RecordError] = []

    def error(self, message: str, fld: str | None = None) -> None:
        self.errors.append(
            RecordError(message, file=self.path, line=self.line, field=fld, record_id=self.record_id)
        )

    def text(self, key: str, *, allow_empty: bool = False) -> str | None:
        value = self.obj.get(key)
        if value is None:
            self.error("is missing" if key not in self.obj else "is null; expected text", key)
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.error(f"expected text, got {type(value).__name__}", key)
            return None
        value = str(value)
        if not allow_empty and not value.strip():
            self.error("is empty", key)
            return None
        return value

    def key(self, key: str) -> str | None:
        """An id field: text or a whole number, as text."""
        value = self.obj.get(key)
        if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
            self.error(
                "is missing"
                if key not in self.obj
                else f"expected an id (text or a whole number), got {value!r}",
                key,
            )
            return None
        return str(value)


def image_segment(reader: RowReader, key: str, base: Path, root: Path | None) -> dict[str, str] | None:
    """The image segment of ``reader.obj[key]``, resolved inside ``root`` (else ``base``); a path that
    leaves it is an error. The file is not opened: a missing image makes its item unscorable later."""
    ref = reader.text(key)
    if ref is None:
        return None
    try:
        return {"type": "image", "image": resolve_image(ref, base, root=root)}
    except JudgeError as e:
        reader.error(str(e), key)
        return None


def embedded_image(reader: RowReader, key: str) -> tuple[dict[str, str], tuple[str, bytes]] | None:
    """An image embedded in the row (``{"bytes": ..., "path": ...}``, as the Hugging Face datasets library
    writes an image to parquet): a segment whose ``image`` is a placeholder, and the file name and bytes it
    stands for (:func:`write_embedded` writes them where the judge opens them)."""
    value = reader.obj.get(key)
    data = value.get("bytes") if isinstance(value, dict) else None
    if not isinstance(value, dict) or not isinstance(data, (bytes, bytearray)) or not data:
        reader.error("expected an embedded image ({'bytes': ..., 'path': ...}) or an image_path", key)
        return None
    rid = reader.record_id or f"row{reader.line}"
    suffix = Path(str(value.get("path") or "")).suffix.lower()
    if suffix not in (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"):
        suffix = ".png" if data[:4] == b"\x89PNG" else ".jpg" if data[:2] == b"\xff\xd8" else ".img"
    name = (
        f"{re.sub(r'[^A-Za-z0-9._-]', '_', rid)[:80]}-{hashlib.sha256(rid.encode()).hexdigest()[:8]}{suffix}"
    )
    placeholder = f"<image embedded in {reader.path.name}, row {reader.line}>"
    return {"type": "image", "image": placeholder}, (name, bytes(data))


def write_embedded(items: list[JudgeItem], folder: Path) -> int:
    """Write the embedded images of ``items`` into ``folder`` (each once: an identical file is left alone) and
    point their segments at the files; returns how many files were written."""
    written = 0
    for it in items:
        for placeholder, (name, data) in it.embedded.items():
            target = folder / name
            if not (target.is_file() and target.read_bytes() == data):
                with atomic_write(target, "wb") as f:
                    f.write(data)
                written += 1
            for seg in it.question:
                if seg.get("image") == placeholder:
                    seg["image"] = str(target.resolve())
        it.embedded = {}
    return written


def text_segment(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def check_unique(items: list[JudgeItem], path: Path, key_name: str) -> list[RecordError]:
    """A RecordError for every item whose id was seen before (outputs are keyed by it)."""
    seen: dict[str, int | None] = {}
    errors = []
    for it in items:
        if it.id in seen:
            errors.append(
                RecordError(
                    f"duplicate {key_name} {it.id!r} (first at line {seen[it.id]}): outputs are keyed by it",
                    file=path,
                    line=it.line,
                    field=key_name,
                    record_id=it.id,
                )
            )
        else:
            seen[it.id] = it.line
    return errors


def finish_read(
    benchmark: str,
    path: Path,
    mode: str,
    kind: Kind,
    items: list[JudgeItem],
    errors: list[RecordError],
    key_name: str,
) -> JudgeData:
    """The :class:`JudgeData`, or an InvalidRecordsError listing every problem (duplicate keys included)."""
    errors = errors + check_unique(items, path, key_name)
    if errors:
        raise InvalidRecordsError(errors, f"{benchmark} records", can_skip=False)
    if not items:
        raise JudgeError(f"{path}: no items")
    return JudgeData(benchmark, path, mode, kind, items)


# ----------------------------------------------------------------------------- outputs


def read_judge_outputs(path: str | Path, data: JudgeData) -> tuple[dict[str, JudgeOutput], list[str]]:
    """A judge's outputs for ``data`` (see the module doc): by item id, and the ids in file order.

    An id that is not an item of ``data``, an id given twice, or a verdict of the wrong kind or out of
    range is an error naming file, line and field (all of them at once)."""
    path = Path(path)
    known = data.by_id()
    outputs: dict[str, JudgeOutput] = {}
    lines: dict[str, int] = {}
    order: list[str] = []
    rows, errors = read_objects(path)
    for line, obj in rows:
        r = RowReader(path, line, obj)
        rid = r.key("id")
        if rid is None:
            errors += r.errors
            continue
        r.record_id = rid
        item = known.get(rid)
        if item is None:
            r.error(f"{rid!r} is not an item of {data.path} ({data.benchmark}, {data.mode})", "id")
        elif rid in outputs:
            r.error(f"id {rid!r} given twice (first at line {lines[rid]})", "id")
        else:
            out = _output(r, rid, data.kind, item)
            if not r.errors:
                outputs[rid], lines[rid] = out, line
                order.append(rid)
        errors += r.errors
    if errors:
        raise InvalidRecordsError(errors, "judge outputs", can_skip=False)
    return outputs, order


def _number(r: RowReader, key: str, lo: float | None = None, hi: float | None = None) -> float | None:
    value = r.obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        r.error(f"expected a number, got {value!r}", key)
        return None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        r.error(f"{value!r} is outside [{lo}, {hi}]", key)
        return None
    return float(value)


def _output(r: RowReader, rid: str, kind: str, item: JudgeItem) -> JudgeOutput:
    reason = r.obj.get("reason")
    reason = str(reason) if reason is not None else None
    keys = {"p_first_better", "score_a", "score_b", "score", "ranking"}
    extra = {k: v for k, v in r.obj.items() if k not in {"id", "reason"} | keys}
    if kind == "pair":
        if "p_first_better" in r.obj:
            p = _number(r, "p_first_better", 0.0, 1.0)
            extra.update({k: r.obj[k] for k in ("score_a", "score_b") if k in r.obj})
            return JudgeOutput(rid, p_first_better=p, reason=reason, extra=extra)
        if "score_a" in r.obj or "score_b" in r.obj:
            a, b = _number(r, "score_a"), _number(r, "score_b")
            if (a is None) != (b is None) and not r.errors:
                r.error(
                    "give both score_a and score_b, or neither (no verdict)",
                    "score_b" if b is None else "score_a",
                )
            p = None if a is None or b is None else 1.0 if a > b else 0.0 if a < b else 0.5
            return JudgeOutput(
                rid, p_first_better=p, reason=reason, extra={**extra, "score_a": a, "score_b": b}
            )
        r.error("a pair item needs p_first_better, or score_a and score_b", "p_first_better")
    elif kind == "score":
        if "score" not in r.obj:
            r.error("a score item needs score (null: no verdict)", "score")
        return JudgeOutput(rid, score=_number(r, "score"), reason=reason, extra=extra)
    else:
        if "ranking" not in r.obj:
            r.error('a ranking item needs ranking, e.g. "CDAB" (null: no verdict)', "ranking")
        value = r.obj.get("ranking")
        if value is not None and (not isinstance(value, str) or not value.isalpha() or not value.isupper()):
            r.error(f'expected capital letters from best to worst, e.g. "CDAB", got {value!r}', "ranking")
            value = None
        return JudgeOutput(rid, ranking=value, reason=reason, extra=extra)
    return JudgeOutput(rid, reason=reason)


def letters(n: int) -> str:
    """The letters of ``n`` responses: ``"ABCD"`` for four."""
    return "".join(chr(ord("A") + i) for i in range(n))


# ----------------------------------------------------------------------------- metrics' helpers


def ratio(num: float, den: float) -> float | None:
    """``num / den``, None when ``den`` is 0 (where the official code divides by zero or gives NaN)."""
    return num / den if den else None


def finite(value: float) -> float | None:
    """A float, or None for NaN / inf (what JSON can hold; the official code's NaN becomes null)."""
    v = float(value)
    return v if math.isfinite(v) else None


def group_codes(labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """Integer codes of ``labels`` and the distinct labels in order of first appearance."""
    order: dict[str, int] = {}
    codes = np.array([order.setdefault(g, len(order)) for g in labels], dtype=np.int64)
    return codes, list(order)


__all__ = [
    "FIRST",
    "JUDGE_BENCHMARKS",
    "KINDS",
    "OFFICIAL",
    "SECOND",
    "STRICT",
    "UNDECIDED",
    "Evaluation",
    "JudgeBenchmark",
    "JudgeData",
    "JudgeItem",
    "JudgeOutput",
    "OfficialCode",
    "get_judge_benchmark",
    "pair_verdict",
    "read_judge_outputs",
    "register_judge_benchmark",
    "unregister_judge_benchmark",
]
