"""What ``judge-view`` shows, read from a ``judge-score`` folder and, when given, the human scores, a
``judge-report`` folder and a ``judge-audit`` folder.

* The items: the run's inputs, read again as ``judge-score`` read them (``run.json`` names the files, the
  format, the ``root``), so each item's question, response and reference appear as the judge saw them.
* Their scores: ``scores.jsonl``, record by record, every field kept (a field this module does not know,
  such as a selective-evaluation ``trusted`` flag, is shown as it is).
* The human scores: of an annotation file the run scored, of its ``labels`` and of ``human`` files, matched
  by (model, id); the human score of a criterion is the annotators' mean (``judge.data.aggregate``).
* The audit: each perturbed version of an item, rebuilt as ``judge-audit`` built it (its copies are
  deterministic), beside its scores.

Images are never copied or opened here: each is named by an *image root* (a folder the run's images were
resolved inside: an input file's folder or ``root``, the audit's image folder) and its path relative to it.
Whoever shows an image resolves that pair with :func:`judge.core.images.resolve_image`, which refuses a path
that leaves its root, and opens it with :func:`judge.core.images.open_image`.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.core.errors import ConfigError, ImageError, JudgeError
from judge.core.images import is_url, resolve_image
from judge.core.schema import ImageSegment, PredictionRecord
from judge.view.config import ViewConfig

logger = logging.getLogger(__name__)

#: score record fields shown in their own columns or places; any other field is shown as it is
KNOWN_FIELDS = frozenset(
    {
        "id",
        "benchmark",
        "task",
        "model",
        "metric",
        "criterion",
        "score",
        "status",
        "reason",
        "criteria",
        "distribution",
        "argmax",
        "raw_score",
        "interval",
        "producer",
        "details",
    }
)

ItemKey = tuple[str, str, str]  #: (benchmark, model, id), as judge.scoring.output.item_key


@dataclass
class ImageRoots:
    """The folders the run's images lie in; an image is ``(root number, path inside it)``."""

    roots: list[Path] = field(default_factory=list)

    def add(self, folder: str | Path) -> int:
        path = Path(folder).resolve()
        if path not in self.roots:
            self.roots.append(path)
        return self.roots.index(path)

    def locate(self, resolved: str) -> tuple[int, str] | None:
        """The root and relative path of an image the readers resolved (absolute), or None if no root holds
        it (then it is not shown)."""
        path = Path(resolved)
        # The deepest root first: an image in the audit's folder inside an input's folder is the audit's.
        for i in sorted(range(len(self.roots)), key=lambda i: -len(self.roots[i].parts)):
            root = self.roots[i]
            if root in path.parents:
                return i, path.relative_to(root).as_posix()
        return None

    def resolve(self, index: int, rel: str) -> str:
        """The file of image ``rel`` in root ``index``, through the one containment check of the project
        (:func:`judge.core.images.resolve_image`); raises ``ImageError`` for a path that leaves its root."""
        if not 0 <= index < len(self.roots):
            raise ImageError(f"no image root {index}")
        if is_url(rel) or Path(rel).is_absolute():
            raise ImageError(f"image {rel!r} is not a path inside an image root")
        return resolve_image(rel, self.roots[index])


@dataclass
class ViewItem:
    """One scored item: its content, every score record, its human scores and its audit versions."""

    benchmark: str
    task: str
    model: str
    id: str
    question_id: str | None = None
    content: dict[str, list[dict[str, Any]]] | None = None  #: question, reference, response (None: not found)
    records: list[dict[str, Any]] = field(default_factory=list)
    human: dict[str, dict[str, int]] | None = None  #: annotator -> criterion -> score
    human_mean: dict[str, float] | None = None  #: criterion -> the annotators' mean
    rationale: dict[str, str] | None = None
    audit: list[dict[str, Any]] = field(default_factory=list)  #: perturbed versions and their scores

    @property
    def key(self) -> ItemKey:
        return (self.benchmark, self.model, self.id)


@dataclass
class ViewData:
    """Everything the viewer shows (see the module doc)."""

    run_dir: Path
    run: dict[str, Any]
    summary: dict[str, Any] | None
    items: list[ViewItem]
    roots: ImageRoots
    report: dict[str, Any] | None = None
    report_dir: Path | None = None
    audit: dict[str, Any] | None = None
    audit_dir: Path | None = None
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  #: the files read
    #: family -> its criteria in the rubric's order (overall last), when the run's rubric can be read
    criteria: dict[str, list[str]] = field(default_factory=dict)
    #: the human labels matched to the run's items (:meth:`judge.core.identity.LabelMatch.describe`)
    labels: dict[str, Any] | None = None


def load_view(cfg: ViewConfig) -> ViewData:
    """Read a run and what goes with it; raises :class:`JudgeError` naming the file or setting at fault."""
    from judge.scoring.output import read_records, read_run

    run_dir = Path(cfg.run)
    if not run_dir.is_dir():
        raise ConfigError(f"`run` {run_dir}: no such folder (expected a judge-score output folder)")
    scores_path = run_dir / "scores.jsonl"
    info = read_run(run_dir)
    if info is None or not scores_path.is_file():
        missing = "run.json" if info is None else "scores.jsonl"
        raise ConfigError(
            f"`run` {run_dir}: no {missing} in it; expected the folder judge-score wrote (its --out), "
            "holding scores.jsonl and run.json"
        )
    records = read_records(scores_path)
    if not records:
        raise JudgeError(f"{scores_path}: no score records to show")
    summary = _read_json(run_dir / "summary.json", optional=True)
    view = ViewData(
        run_dir, info.model_dump(mode="json"), summary, [], ImageRoots(), files=[str(scores_path)]
    )
    items = _items_from_records(records)
    view.items = list(items.values())
    view.criteria = _criteria(info.identity.rubric)
    inputs = _run_inputs(info)
    benchmark = info.identity.rubric
    _attach_content(view, items, inputs, info.options, benchmark)
    human_files = [p for p, fmt in inputs if fmt == "annotations"] + [
        *(info.options.get("labels") or []),
        *cfg.human,
    ]
    _attach_human(view, items, human_files, explicit=set(cfg.human))
    if cfg.report is not None:
        view.report_dir = Path(cfg.report)
        view.report = _read_json(view.report_dir / "report.json", setting="report")
    if cfg.audit is not None:
        view.audit_dir = Path(cfg.audit)
        view.audit = _read_json(view.audit_dir / "audit.json", setting="audit")
        _attach_audit(view, items, view.audit_dir)
    return view


# ----------------------------------------------------------------------------- pieces


def _read_json(path: Path, *, optional: bool = False, setting: str | None = None) -> dict[str, Any] | None:
    if not path.is_file():
        if optional:
            return None
        folder = f"`{setting}` {path.parent}" if setting else str(path.parent)
        raise ConfigError(f"{folder}: no {path.name} in it (expected the folder judge-{setting} wrote)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise JudgeError(f"{path}: cannot read it as JSON ({e})") from None
    if not isinstance(data, dict):
        raise JudgeError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def _criteria(rubric: str) -> dict[str, list[str]]:
    from judge.core.rubric import load_rubric

    try:
        rub = load_rubric(rubric)
    except JudgeError:
        return {}  # a rubric file moved since the run: records keep the order they were written in
    return {fam_id: list(fam.criterion_ids) for fam_id, fam in rub.families.items()}


def _items_from_records(records: list[dict[str, Any]]) -> dict[ItemKey, ViewItem]:
    items: dict[ItemKey, ViewItem] = {}
    for r in records:
        key = (str(r.get("benchmark") or ""), str(r.get("model") or "unknown"), str(r["id"]))
        item = items.get(key)
        if item is None:
            item = items[key] = ViewItem(key[0], str(r.get("task") or ""), key[1], key[2])
        item.records.append(r)
    return items


def _run_inputs(info) -> list[tuple[str, str | None]]:
    """The input files of the run's last start, as given (paths from the folder it ran in), with the
    format each was read as."""
    formats = {i.path: i.format for i in info.inputs}
    given = info.history[-1].inputs if info.history else [i.path for i in info.inputs]
    return [(p, formats.get(p)) for p in given]


def _attach_content(
    view: ViewData,
    items: dict[ItemKey, ViewItem],
    inputs: list[tuple[str, str | None]],
    options: dict[str, Any],
    benchmark: str,
) -> None:
    from judge.scoring.inputs import load_inputs, question_id

    present = [p for p, _ in inputs if Path(p).is_file()]
    for p, _ in inputs:
        if not Path(p).is_file():
            view.warnings.append(
                f"input file {p} (from the run's run.json) not found from this folder: its items are shown "
                "without their question and response; run judge-view from the folder judge-score ran in"
            )
    if not present:
        return
    root = options.get("root")
    try:
        loaded = load_inputs(
            [*present],
            format=options.get("format") or "auto",
            dataset_file=options.get("dataset_file"),
            skip_invalid=True,
            annotation_benchmark=benchmark,
            root=root,
        )
    except JudgeError as e:
        view.warnings.append(f"the run's inputs cannot be read again ({e}): items are shown without content")
        return
    view.files += [f.path for f in loaded.files]
    for f in loaded.files:
        view.roots.add(root if root is not None else Path(f.path).parent)
    for rec in loaded.records:
        item = items.get((rec.benchmark, rec.model, rec.id))
        if item is None:
            continue
        item.question_id = question_id(rec)
        item.content = content_of(rec, view.roots)


def content_of(rec: PredictionRecord, roots: ImageRoots) -> dict[str, list[dict[str, Any]]]:
    """The record's question, reference and response in reading order; each image as its root and path,
    or the reason it cannot be shown."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name in ("question", "reference", "response"):
        segs = getattr(rec, name) or []
        parts: list[dict[str, Any]] = []
        for seg in segs:
            if isinstance(seg, ImageSegment):
                where = None if is_url(seg.image) else roots.locate(seg.image)
                if where is None:
                    parts.append(
                        {"type": "image", "missing": f"{seg.image}: not inside the run's image folders"}
                    )
                else:
                    parts.append({"type": "image", "root": where[0], "path": where[1]})
            else:
                parts.append({"type": "text", "text": seg.text})
        if parts or name != "reference":
            out[name] = parts
    return out


def _attach_human(
    view: ViewData, items: dict[ItemKey, ViewItem], paths: list[str], explicit: set[str]
) -> None:
    from judge.core.identity import LabelMatch, LabelMatcher
    from judge.core.io import load_annotations
    from judge.data.aggregate import aggregate_record

    by_model_id: dict[tuple[str, str], list[ViewItem]] = defaultdict(list)
    for item in items.values():
        by_model_id[(item.model, item.id)].append(item)
    matcher = LabelMatcher(by_model_id)  # one rule for every command (judge.core.identity)
    total = LabelMatch()
    seen: set[str] = set()
    for p in paths:
        if p in seen:
            continue
        seen.add(p)
        if not Path(p).is_file():
            if p in explicit:
                raise ConfigError(f"`human` {p}: file not found (expected an annotation file)")
            view.warnings.append(f"human labels {p} (named by the run) not found: not shown")
            continue
        res = load_annotations(p, check_images=False, collect=True)
        if res.errors and p in explicit and not res.records:
            raise JudgeError(f"`human` {p}: no valid annotation records ({res.errors[0]})")
        view.files.append(p)
        found = matcher.match((rec.model, rec.id, rec.question_id) for rec in res.records)
        total.matched.update(found.matched)
        total.unmatched += found.unmatched
        for rec in res.records:
            response = found.matched.get((rec.model, rec.id, rec.question_id))
            for item in by_model_id.get(response, []) if response is not None else []:
                item.human = {a: dict(s) for a, s in rec.scores.items()}
                item.human_mean = {c: a.value for c, a in aggregate_record(rec, "mean").items()}
                item.rationale = dict(rec.rationale) if rec.rationale else None
    if total.n_labels:
        view.labels = total.describe()
        if total.unmatched:
            view.warnings.append(f"human labels: {total.sentence('an item of the run')}")


def _attach_audit(view: ViewData, items: dict[ItemKey, ViewItem], audit_dir: Path) -> None:
    """Each item's perturbed versions (rebuilt from the audit's inputs and seed) and their judge scores."""
    from judge.scoring.output import read_records, read_run

    info = read_run(audit_dir)
    if info is None:
        raise ConfigError(f"`audit` {audit_dir}: no run.json in it (expected the folder judge-audit wrote)")
    rows = read_records(audit_dir / "scores.jsonl")
    view.files.append(str(audit_dir / "scores.jsonl"))
    scores: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if r.get("metric") != "judge" or not r.get("criterion"):
            continue
        scores[(str(r.get("benchmark") or ""), str(r.get("model") or ""), str(r["id"]))][r["criterion"]] = {
            "score": r.get("score"),
            "reason": r.get("reason"),
        }
    inputs = [p for p, _ in _run_inputs(info)]
    if not all(Path(p).is_file() for p in inputs):
        view.warnings.append(
            f"the audit's inputs ({', '.join(inputs)}) are not all found from this folder: its versions are "
            "not shown"
        )
        return
    from judge.audit.perturb import PERTURBATIONS, Context
    from judge.audit.run import build_versions, question_of
    from judge.scoring.inputs import load_inputs

    opts = info.options
    root = opts.get("root")
    loaded = load_inputs(
        [*inputs],
        format=opts.get("format") or "auto",
        skip_invalid=True,
        annotation_benchmark=info.identity.rubric,
        root=root,
    )
    records = loaded.records[: opts["limit"]] if opts.get("limit") else loaded.records
    for f in loaded.files:
        view.roots.add(root if root is not None else Path(f.path).parent)
    image_dir = audit_dir / "images"
    view.roots.add(image_dir)
    names = [n for n in opts.get("perturb") or [] if n in PERTURBATIONS]
    ctx = Context(records, question_of, image_dir, int(opts.get("seed") or 0))
    versions, _ = build_versions(records, [PERTURBATIONS[n] for n in names], ctx)
    for v in versions:
        item = items.get((v.item.benchmark, v.item.model, v.item.id))
        if item is None:
            continue
        got = scores.get((v.rec.benchmark, v.rec.model, v.rec.id), {})
        entry: dict[str, Any] = {"version": v.name, "scores": got}
        if v.name != "original":
            entry["description"] = PERTURBATIONS[v.name].description
            entry["response"] = content_of(v.rec, view.roots)["response"]
        item.audit.append(entry)
