"""What ``judge-score`` writes, and how a killed run resumes without losing or doubling a record.

Out folder (``--out``, default ``runs/score``)::

    run.json                 what the run is: judge, rubric and hash, inputs (with sha256), options, history
    scores.jsonl             one ScoreRecord per line; the merged, sorted result at the end of a run
    scores.part{rank}.jsonl  while a sharded run (several processes) is going: each process's own file
    summary.{md,csv,json}    written atomically from scores.jsonl at the end of a run
    leaderboard.csv, win_rates.csv, leaderboard.png
                             beside the summary when the run has judge scores (judge.scoring.leaderboard)

Durability. Each finished batch is appended to the writing process's file in one ``os.write``,
then ``fsync``-ed, so after a kill the file holds every finished batch and at most one torn last
line. On restart the main process drops a torn (or unparseable) last line of each file, every
process reads the keys already done (:func:`record_key`) from ``scores.jsonl`` and every part,
and scoring skips them. At the end the main process merges every file into ``scores.jsonl``
(atomically, sorted by :func:`record_key`, duplicates dropped) and only then removes the parts,
so a kill during the merge loses nothing either.

A damaged line that is *not* the last one is never dropped silently: it is an error naming file
and line (such a file was edited or written by something else; ``--overwrite`` starts afresh).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judge.core.atomic import atomic_write, write_json
from judge.core.errors import JudgeError, format_validation_error
from judge.models.card import JudgeCard
from judge.models.loader import JudgeSpec

SCORES = "scores.jsonl"
RUN = "run.json"
SUMMARY_FILES = (
    "summary.md",
    "summary.csv",
    "summary.json",
    "leaderboard.csv",
    "win_rates.csv",
    "leaderboard.png",
)
_PART_RE = re.compile(r"^scores\.part(\d+)\.jsonl$")

logger = logging.getLogger(__name__)

Key = tuple[str, str, str, str, str, str]


def record_key(rec: dict[str, Any] | BaseModel) -> Key:
    """The identity of a score: ``(benchmark, model, id, metric, mode, criterion)``.

    ``mode`` is the metric's ``producer.mode`` (``official``/``strict``; empty for judge scores),
    ``criterion`` the rubric criterion or ``overall`` (empty for a metric). Two records with the
    same key are the same score; a rerun skips keys already written.
    """
    d = rec.model_dump(mode="json") if isinstance(rec, BaseModel) else rec
    producer = d.get("producer") or {}
    return (
        str(d.get("benchmark") or ""),
        str(d.get("model") or ""),
        str(d["id"]),
        str(d["metric"]),
        str(producer.get("mode") or ""),
        str(d.get("criterion") or ""),
    )


def item_key(benchmark: str, model: str, record_id: str) -> tuple[str, str, str]:
    """The identity of an input item: ``(benchmark, model, id)`` (a prefix of :func:`record_key`)."""
    return (benchmark, model, record_id)


# ----------------------------------------------------------------------------- reading


def read_records(path: str | Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """Every complete record of a scores file, in file order.

    A last line that is torn (no final newline) or does not parse is what a kill leaves behind:
    it is dropped, and with ``repair`` cut off the file so the next append starts on a clean
    line. Any other bad line raises :class:`JudgeError` with file and line.
    """
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    # After a final "\n", split() leaves one empty piece; anything else there is a torn tail.
    tail = lines.pop()
    good_end = len(data) - len(tail)
    out: list[dict[str, Any]] = []
    dropped = tail != b""
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
            if not isinstance(obj, dict) or "id" not in obj or "metric" not in obj:
                raise ValueError("not a score record")
        except (UnicodeDecodeError, ValueError) as e:
            if lineno == len(lines) and not dropped:
                # The last complete-looking line is garbage: also the trace of an interrupted write.
                good_end -= len(raw) + 1
                dropped = True
                continue
            raise JudgeError(
                f"{path}:{lineno}: damaged score line ({e}); it is not the last line, so it was "
                "not left by an interrupted run. Fix or remove it, or pass `overwrite` to start "
                "afresh"
            ) from None
        out.append(obj)
    if dropped:
        if repair:
            with open(path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
            logger.warning(
                f"{path}: dropped a torn last line left by an interrupted run "
                f"({len(data) - good_end} bytes); "
                "its scores will be computed again"
            )
    return out


def part_files(out_dir: str | Path) -> list[Path]:
    """The per-process part files in ``out_dir``, by rank."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    parts = [(int(m.group(1)), p) for p in out_dir.iterdir() if (m := _PART_RE.match(p.name))]
    return [p for _, p in sorted(parts)]


def part_path(out_dir: str | Path, rank: int) -> Path:
    return Path(out_dir) / f"scores.part{rank}.jsonl"


# ----------------------------------------------------------------------------- the store


class ScoreStore:
    """The scores of one out folder: what is done, appending new batches, merging at the end.

    One process (``world == 1``) appends to ``scores.jsonl`` itself; in a sharded run process
    ``rank`` appends to ``scores.part{rank}.jsonl``. Call :meth:`prepare` on the main process
    before any other process reads (:meth:`load_done`), then :meth:`open`, :meth:`append` per
    batch, :meth:`close`, and :meth:`merge` on the main process once every process is done.
    """

    def __init__(self, out_dir: str | Path, rank: int = 0, world: int = 1):
        self.out_dir = Path(out_dir)
        self.rank, self.world = rank, world
        self.scores_path = self.out_dir / SCORES
        self.path = self.scores_path if world == 1 else part_path(self.out_dir, rank)
        self.done: set[Key] = set()
        self.written = 0
        self._fd: int | None = None

    # -- setup
    def prepare(self, overwrite: bool = False, outputs: Iterable[str] = ()) -> None:
        """Main process only: start afresh (``overwrite``: the scores, ``run.json``, the summary files and
        the job's own ``outputs`` are removed) or repair torn tails of every scores file."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        files = [self.scores_path, *part_files(self.out_dir)]
        if overwrite:
            for p in [*files, self.out_dir / RUN, *(self.out_dir / s for s in (*SUMMARY_FILES, *outputs))]:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            return
        for p in files:
            read_records(p, repair=True)

    def load_done(self) -> set[Key]:
        """Keys already written, in ``scores.jsonl`` and every part (of any earlier world size)."""
        done: set[Key] = set()
        for p in [self.scores_path, *part_files(self.out_dir)]:
            # Another process may be appending to its part already: its torn tail is simply not done yet.
            done.update(record_key(r) for r in read_records(p))
        self.done = done
        return done

    def open(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if created:
            _fsync_dir(self.out_dir)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ScoreStore:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing
    def append(self, records: Iterable[BaseModel | dict]) -> int:
        """Append the records whose key is not done yet, as one write, then fsync; returns how many."""
        if self._fd is None:
            raise RuntimeError("ScoreStore.append before open()")
        lines = []
        for rec in records:
            d = rec.model_dump(mode="json") if isinstance(rec, BaseModel) else rec
            key = record_key(d)
            if key in self.done:
                continue
            self.done.add(key)
            lines.append(json.dumps(d, ensure_ascii=False, allow_nan=False) + "\n")
        if not lines:
            return 0
        blob = "".join(lines).encode("utf-8")
        view = memoryview(blob)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        os.fsync(self._fd)
        self.written += len(lines)
        return len(lines)

    # -- merging
    def merge(self) -> list[dict[str, Any]]:
        """Main process, after every process finished: one sorted, de-duplicated ``scores.jsonl``.

        The merged file replaces ``scores.jsonl`` in one rename; the parts are removed after it.
        """
        parts = part_files(self.out_dir)
        seen: dict[Key, dict[str, Any]] = {}
        for p in [self.scores_path, *parts]:
            for r in read_records(p, repair=True):
                seen.setdefault(record_key(r), r)
        rows = [seen[k] for k in sorted(seen)]
        with atomic_write(self.scores_path) as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n")
        for p in parts:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        _fsync_dir(self.out_dir)
        return rows


def _fsync_dir(path: Path) -> None:
    # A new or renamed file survives a crash only once its directory entry is on disk too.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- run.json


class _RunPart(BaseModel):
    # run.json written by another version may hold keys this one does not know: read, never refused.
    model_config = ConfigDict(extra="allow")


class RunIdentity(_RunPart):
    """What a run's scores depend on (see :data:`JUDGE_IDENTITY`); a metrics-only run has no judge and
    leaves ``judge_fingerprint`` and ``quantization`` out."""

    judge: str | None = None  #: the judge folder or model as resolved; None: metrics only
    judge_fingerprint: str | None = None
    quantization: str | None = None
    rubric: str
    rubric_hash: str
    target_format: str | None = None
    calibration: str | None = None  #: fingerprint of the calibration applied (None: the raw read-out)
    selective: str | None = None  #: fingerprint of the selective thresholds applied (the trusted mark)

    @classmethod
    def of(cls, spec: JudgeSpec) -> RunIdentity:
        """What must match to resume scores of the judge ``spec`` into an out folder (:func:`check_resume`)."""
        return cls(
            judge=spec.source,
            judge_fingerprint=spec.fingerprint,
            quantization=spec.quantization,
            rubric=spec.rubric.name,
            rubric_hash=spec.rubric.hash,
            target_format=spec.target_format,
            calibration=spec.calibration.fingerprint() if spec.calibration is not None else None,
            selective=spec.selective.fingerprint() if spec.selective is not None else None,
        )


class RunInput(_RunPart):
    """One input file of a run, identified by its content."""

    path: str
    format: str | None = None
    sha256: str
    n_records: int | None = None


class RunEvent(_RunPart):
    """One start of a run in an out folder (a resumed folder has several); ``finished`` when it ended."""

    started: str
    host: str
    argv: list[str]
    world_size: int
    inputs: list[str]
    finished: str | None = None
    written: int | None = None  #: records this start wrote
    resumed_from: int | None = None  #: records already in the folder when it started


class RunInfo(_RunPart):
    """``run.json``: what made the scores of an out folder. Written with the fields that were set
    (:func:`write_run`), so a field a run has not reached yet (``finished``) is absent, not null."""

    identity: RunIdentity
    judge_card: JudgeCard | None = None  #: the identifying part of a judge folder's card
    rubric_forced: bool = False
    inputs: list[RunInput] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)  #: the run's settings, inputs aside
    world_size: int = 1
    history: list[RunEvent] = Field(default_factory=list)
    status: Literal["running", "finished"] | None = None
    finished: str | None = None
    records: int | None = None  #: score records of the run's items in scores.jsonl
    items: int | None = None  #: input items of the run


#: What of the judge must match to resume into an out folder (when both runs use a judge), with the words
#: the refusal uses. The path is not among them: a judge folder moved elsewhere is the same judge.
JUDGE_IDENTITY = {
    "judge_fingerprint": "judge weights (fingerprint of the card and weight files)",
    "quantization": "quantization",
    "rubric_hash": "rubric hash",
    "target_format": "prompt format",
    "calibration": "calibration (fingerprint; None: uncalibrated scores)",
    "selective": "selective-evaluation thresholds (fingerprint; None: no trusted mark)",
}


def read_run(out_dir: str | Path) -> RunInfo | None:
    """The ``run.json`` of an out folder (None when it has none); an unreadable one is a JudgeError."""
    path = Path(out_dir) / RUN
    if not path.is_file():
        return None
    try:
        return RunInfo.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as e:
        why = format_validation_error(e) if isinstance(e, ValidationError) else str(e)
        raise JudgeError(
            f"{path}: cannot read the record of the earlier run ({why.strip()}); pass `overwrite` to start afresh"
        ) from None


def check_resume(out_dir: str | Path, identity: RunIdentity, inputs: list[RunInput]) -> RunInfo | None:
    """Refuse to add scores to a folder that another judge, rubric, prompt format or other inputs wrote.

    ``inputs``: this run's input files, compared by content (sha256) with the files of the earlier
    run: a changed, added or removed file is a refusal naming it (scores of edited predictions under
    the same ids would otherwise be kept). A metrics-only run (no judge) is compatible with any
    judge: it writes no judge scores, and a later judge run may add them. Returns the earlier
    ``run.json`` (None for a fresh folder).
    """
    prev = read_run(out_dir)
    if prev is None:
        return None
    changes = []
    before = prev.identity
    if before.judge is not None and identity.judge is not None:
        for key, words in JUDGE_IDENTITY.items():
            a, b = getattr(before, key), getattr(identity, key)
            if a != b:
                if key == "judge_fingerprint":
                    a = f"{str(a)[:12]} ({before.judge})" if a else f"not recorded ({before.judge})"
                    b = f"{str(b)[:12]} ({identity.judge})"
                changes.append(f"{words}: {a!r} then, {b!r} now")
    changes += input_changes(prev.inputs, inputs)
    if changes:
        raise JudgeError(
            f"{out_dir} holds scores of a different run; what changed:\n  - " + "\n  - ".join(changes) + "\n"
            "Resuming would mix them in one file: pass `overwrite` to start afresh, or choose another `out`"
        )
    return prev


def earlier_run(
    out_dir: str | Path, identity: RunIdentity, inputs: list[RunInput], overwrite: bool
) -> RunInfo | None:
    """The earlier run to resume in ``out_dir`` (None: start afresh): :func:`check_resume`'s refusals, and a
    folder holding scores without a ``run.json`` is refused too, unless ``overwrite``."""
    if overwrite:
        return None
    prev = check_resume(out_dir, identity, inputs)
    if prev is None and has_scores(out_dir):
        raise JudgeError(
            f"{out_dir} holds scores but no run.json telling what made them; pass `overwrite` to "
            "start afresh, or choose another `out`"
        )
    return prev


def start_run(
    out_dir: str | Path, run_info: RunInfo, prev: RunInfo | None, *, inputs: list[str], world_size: int = 1
) -> None:
    """Record a start in ``run.json`` (main process only): the earlier run's history when resuming
    (``prev``, from :func:`earlier_run`), this start's event, status ``running``."""
    event = RunEvent(
        started=timestamp(), host=platform.node(), argv=sys.argv, world_size=world_size, inputs=inputs
    )
    run_info.history, run_info.status = [*(prev.history if prev else []), event], "running"
    write_run(out_dir, run_info)


def finish_run(
    out_dir: str | Path,
    run_info: RunInfo,
    *,
    records: int,
    items: int,
    written: int,
    resumed_from: int | None = None,
) -> None:
    """Record the end of the start :func:`start_run` recorded: status ``finished``, the folder's record and
    item counts, and what this start wrote."""
    run_info.status, run_info.finished = "finished", timestamp()
    run_info.records, run_info.items = records, items
    last = run_info.history[-1]
    last.finished, last.written = run_info.finished, written
    if resumed_from is not None:  # left unset otherwise: run.json holds the fields that were set
        last.resumed_from = resumed_from
    write_run(out_dir, run_info)


def timestamp() -> str:
    """Local time with its UTC offset, as run.json records a start and a finish."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def input_changes(before: list[RunInput], now: list[RunInput]) -> list[str]:
    """How two runs' input files differ, by content (sha256); a file moved elsewhere is the same file."""
    old = {f.sha256: f.path for f in before}
    new = {f.sha256: f.path for f in now}
    old_paths = {f.path: f.sha256 for f in before}
    now_paths = {f.path for f in now}
    out = []
    for digest, p in new.items():
        if digest in old:
            continue
        if p in old_paths:
            out.append(
                f"input {p} changed since the earlier run (sha256 {old_paths[p][:12]} then, {digest[:12]} now)"
            )
        else:
            out.append(f"input {p} was not among the earlier run's inputs")
    for digest, p in old.items():
        if digest not in new and p not in now_paths:
            out.append(f"input {p} of the earlier run is not among this run's inputs")
    return out


def write_run(out_dir: str | Path, run: RunInfo) -> None:
    """Write ``run.json`` atomically: the fields that were set, in field order."""
    write_json(Path(out_dir) / RUN, run.model_dump(mode="json", exclude_unset=True))


def has_scores(out_dir: str | Path) -> bool:
    out_dir = Path(out_dir)
    return (out_dir / SCORES).exists() or bool(part_files(out_dir))
