"""Human items, score files, and how the two are matched: by (model, id, criterion), every item counted.

A **human item** is one (annotation record, criterion) pair; its value is the mean over the
annotators who scored that criterion (:func:`judge.data.aggregate.aggregate_record`). A **score
record** with ``criterion: null`` (one score per response, e.g. CLIPScore) is compared with the
human ``"overall"`` score. A label finds its scored response by :class:`judge.core.identity.LabelMatcher`
(its ``(model, id)``, else its ``(model, question_id)``), the rule every command shares.

For each scorer, the report counts (nothing is dropped silently):

* ``expected``: human items of the criteria and task families the scorer scores at all (a
  CLIPScore file scores only ``overall``; RefCLIPScore only families with reference answers);
  criteria and families it never scores are listed in ``criteria_not_scored`` and
  ``families_not_scored``, and shown in the report, but not counted as missing;
* ``scored``: matched and with a number; ``unscorable``: matched with ``score: null`` (reasons
  counted); ``missing``: expected but absent from the file;
* ``unknown_ids``: records of responses no label names (warned about, with examples);
  ``unknown_criterion``: records of a labelled response with a criterion the humans did not score (left
  out; the warning says how to score the labelled criteria only), of which ``criterion_not_in_rubric``
  name a criterion the rubric does not have for the item's family (a rubric mismatch);
* ``labels``: how many labelled responses matched a scored response, and examples of those that did not;
  ``filtered``: records of criteria left out by ``--criterion``.

**On the rubric scale or not.** A scorer is compared on the rubric scale (MAE, kappa, within
one point, confusion matrix, calibration) when its metric is ``"judge"``, when its records carry a
``distribution``, when its ``producer.scale`` equals the rubric scale, or when the user says so
(``--on-scale NAME``). Such a scorer's values must lie on the scale; one that does not is an error.
Any other scorer (CLIPScore, 0 to 2.5) gets correlations and ranking accuracy only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from judge.core.errors import JudgeError, Location, RecordError
from judge.core.identity import NO_MODEL, LabelMatcher, ResponseKey
from judge.core.io import iter_json_records, pydantic_errors
from judge.core.rubric import OVERALL, Rubric
from judge.core.schema import AnnotationRecord, ScoreRecord
from judge.data.aggregate import aggregate_record

#: How many example ids a warning shows.
N_EXAMPLES = 5


class ScoreFileError(JudgeError, ValueError):
    """Bad records in a score file; ``errors`` lists each with its file, line and field."""

    def __init__(self, errors: list[RecordError], path: str | Path, hint: str):
        self.errors = errors
        shown = "\n".join(f"  {e}" for e in errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"{len(errors)} bad score record(s) in {path}:\n{shown}{more}\n{hint}")


_SHAPE_HINT = (
    "A score file holds one ScoreRecord per line (judge-score output): id, benchmark, task, metric, "
    "criterion, score (or null with status and reason); see judge/core/schema.py."
)


@dataclass(frozen=True)
class HumanItem:
    """One human-scored (response, criterion): the mean over annotators and what the breakdowns need."""

    id: str
    criterion: str
    question_id: str
    task: str
    model: str
    value: float
    ratings: tuple[tuple[str, int], ...]  #: (annotator, score), sorted by annotator

    @property
    def key(self) -> tuple[str, str, str]:
        """The item's identity: (model, id, criterion) of its label."""
        return (self.model, self.id, self.criterion)

    @property
    def label(self) -> tuple[str, str, str]:
        """The label record it comes from, as :class:`~judge.core.identity.LabelMatcher` takes it."""
        return (self.model, self.id, self.question_id)


def human_items(
    records: Iterable[AnnotationRecord], criteria: Sequence[str] | None = None
) -> list[HumanItem]:
    """Every (record, criterion) the annotators scored, in file order; ``criteria`` keeps only those."""
    keep = set(criteria) if criteria else None
    out = []
    for rec in records:
        agg = aggregate_record(rec, "mean")
        for crit, a in agg.items():
            if keep is not None and crit not in keep:
                continue
            ratings = tuple(sorted((ann, s[crit]) for ann, s in rec.scores.items() if crit in s))
            out.append(HumanItem(rec.id, crit, str(rec.question_id), rec.task, rec.model, a.value, ratings))
    return out


# ----------------------------------------------------------------------------- score files


@dataclass
class ScoreFile:
    """The records of one score file, each with the line it was read from."""

    name: str
    path: str
    records: list[tuple[int, ScoreRecord]]


def load_score_file(path: str | Path, name: str) -> ScoreFile:
    """Read a JSONL (or JSON array) file of :class:`ScoreRecord`; every bad record is reported.

    Raises :class:`ScoreFileError` naming file, line and field of each bad record (and
    duplicate (metric, mode, model, id, criterion) keys), or :class:`JudgeError` for an empty file.
    """
    path = Path(path)
    records: list[tuple[int, ScoreRecord]] = []
    errors: list[RecordError] = []
    seen: dict[tuple, int] = {}
    for line, obj in iter_json_records(path):
        if isinstance(obj, RecordError):
            errors.append(obj)
            continue
        if not isinstance(obj, dict):
            errors.append(
                RecordError(
                    f"expected a JSON object (a score record), got {type(obj).__name__}", file=path, line=line
                )
            )
            continue
        rid = obj.get("id") if isinstance(obj.get("id"), str) else None
        if "scores" in obj and "response" in obj:
            errors.append(
                RecordError(
                    "this is an annotation record, not a score record; pass annotation files "
                    "with `human` and score files (judge-score output) with `scores`",
                    file=path,
                    line=line,
                    record_id=rid,
                )
            )
            continue
        try:
            rec = ScoreRecord.model_validate(obj)
        except ValidationError as e:
            errors.extend(pydantic_errors(e, Location(str(path), line, rid)))
            continue
        key = (metric_of(rec), rec.model, rec.id, rec.criterion)
        if key in seen:
            errors.append(
                RecordError(
                    f"second score for metric {key[0]!r}, model {rec.model!r}, criterion {rec.criterion!r} (first "
                    f"at line {seen[key]}); one record per (model, id, criterion) and metric",
                    file=path,
                    line=line,
                    field="id",
                    record_id=rec.id,
                )
            )
            continue
        seen[key] = line
        records.append((line, rec))
    if errors:
        raise ScoreFileError(errors, path, _SHAPE_HINT)
    if not records:
        raise JudgeError(
            f"{path}: no score records; is it the right file? (expected JSON Lines of judge-score output)"
        )
    return ScoreFile(name, str(path), records)


def metric_of(rec: ScoreRecord) -> str:
    """What a record measures: its metric, with the rule-based metric's ``producer.mode`` when it has one
    (judge-score writes ``official`` and ``strict`` variants of the same metric side by side)."""
    mode = (rec.producer or {}).get("mode")
    return f"{rec.metric}/{mode}" if mode else rec.metric


def split_by_metric(sf: ScoreFile) -> list[ScoreFile]:
    """One scorer per metric (and mode) of a file: ``NAME`` for a single one (or the metric named like the
    file), ``NAME:metric`` for the others (judge-score's file holds judge, clipscore, refclipscore, ...)."""
    metrics = list(dict.fromkeys(metric_of(r) for _, r in sf.records))
    if len(metrics) == 1:
        return [sf]
    # The file's own metric (a judge's file: "judge") first, then the others in file order.
    metrics.sort(key=lambda m: (m not in (sf.name, "judge"),))
    return [
        ScoreFile(
            sf.name if m == sf.name else f"{sf.name}:{m}",
            sf.path,
            [(ln, r) for ln, r in sf.records if metric_of(r) == m],
        )
        for m in metrics
    ]


# ----------------------------------------------------------------------------- matching


@dataclass
class Match:
    """One matched item: the human item and the scorer's value (``None`` if unscorable)."""

    item: HumanItem
    score: float | None
    record: ScoreRecord


@dataclass
class Scorer:
    """A scorer's records matched onto the human items, with every count of the matching."""

    name: str
    path: str
    metric: str
    on_scale: bool
    scale_reason: str
    matches: list[Match] = field(default_factory=list)
    coverage: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def scored(self) -> list[Match]:
        return [m for m in self.matches if m.score is not None]


def _decide_scale(sf: ScoreFile, metric: str, rubric: Rubric, force: bool) -> tuple[bool, str]:
    scale = [rubric.scale.min, rubric.scale.max]
    recs = [r for _, r in sf.records]
    if force:
        return True, "on the rubric scale (--on-scale)"
    if metric == "judge":  # judge-score's learned judge: expected scores on the rubric scale
        return True, "on the rubric scale (a judge)"
    scored = [r for r in recs if r.score is not None]
    if scored and all(r.distribution is not None for r in scored):
        return True, "on the rubric scale (records carry score distributions)"
    producer_scales = {tuple(r.producer["scale"]) for r in recs if isinstance(r.producer.get("scale"), list)}
    if producer_scales == {tuple(scale)}:
        return True, "on the rubric scale (producer.scale)"
    why = f"not on the rubric scale (metric {metric!r}): correlations and ranking accuracy only"
    if metric not in ("clipscore", "refclipscore"):
        why += f"; pass --on-scale {sf.name} if its values are rubric scores"
    return False, why


def _check_scale(sf: ScoreFile, rubric: Rubric) -> None:
    lo, hi = rubric.scale.min, rubric.scale.max
    n_values = hi - lo + 1
    errors = []
    for line, r in sf.records:
        if r.score is not None and not lo - 1e-6 <= r.score <= hi + 1e-6:
            errors.append(
                RecordError(
                    f"score {r.score:g} is outside the rubric scale {lo}..{hi}; was it produced with another rubric? "
                    f"Pass the rubric it was made with (`rubric`), or leave out `on_scale` for a metric on its own scale",
                    field="score",
                    file=sf.path,
                    line=line,
                    record_id=r.id,
                )
            )
        if r.distribution is not None and len(r.distribution) != n_values:
            errors.append(
                RecordError(
                    f"distribution has {len(r.distribution)} values, the rubric scale {lo}..{hi} has {n_values}; "
                    "was it produced with another rubric? (`rubric`)",
                    field="distribution",
                    file=sf.path,
                    line=line,
                    record_id=r.id,
                )
            )
    if errors:
        raise ScoreFileError(errors, sf.path, "Scores of a judge must lie on the rubric's scale.")


def _rubric_hashes(rec: ScoreRecord) -> set[str]:
    out = set()
    for k, v in rec.producer.items():
        if "rubric" in k and isinstance(v, str) and len(v) == 64:
            out.add(v)
    return out


def _in_rubric(rubric: Rubric, family: str, criterion: str) -> bool:
    fam = rubric.families.get(family)
    return fam is not None and criterion in fam.criterion_ids


def _shown(model: str, rid: str) -> str:
    """A response in a message: ``model/id``, or the id alone when no model is named."""
    return rid if model == NO_MODEL else f"{model}/{rid}"


def match_scorer(
    sf: ScoreFile,
    items: Sequence[HumanItem],
    rubric: Rubric,
    *,
    criteria: Sequence[str] | None = None,
    force_on_scale: bool = False,
) -> Scorer:
    """Match one scorer's records onto the human items by (model, id, criterion) and count everything."""
    metric = metric_of(sf.records[0][1])
    on_scale, why = _decide_scale(sf, metric, rubric, force_on_scale)
    if on_scale:
        _check_scale(sf, rubric)
    sc = Scorer(sf.name, sf.path, metric, on_scale, why)
    keep = set(criteria) if criteria else None
    n_filtered = 0
    # The scored responses, (model, id) -> criterion -> (line, record).
    index: dict[ResponseKey, dict[str, tuple[int, ScoreRecord]]] = {}
    for line, r in sf.records:
        crit = r.criterion if r.criterion is not None else OVERALL
        if keep is not None and crit not in keep:
            n_filtered += 1
            continue
        slot = index.setdefault((r.model, r.id), {})
        if crit in slot:
            # criterion null and criterion "overall" for one response: the same human item twice.
            raise RecordError(
                f"a second score for the response {r.model}/{r.id}, criterion {crit!r} (criterion null means "
                "'overall'); keep one",
                file=sf.path,
                line=line,
                field="criterion",
                record_id=r.id,
            )
        slot[crit] = (line, r)
    labels = LabelMatcher(index).match(it.label for it in items)
    labelled_crits: dict[ResponseKey, set[str]] = {}
    family_of: dict[ResponseKey, str] = {}
    seen: set[tuple[str, str, str]] = set()
    for it in items:
        response = labels.matched.get(it.label)
        if response is None:
            continue
        labelled_crits.setdefault(response, set()).add(it.criterion)
        family_of.setdefault(response, it.task)
        got = index[response].get(it.criterion)
        if got is not None:
            seen.add(it.key)
            sc.matches.append(Match(it, got[1].score, got[1]))
    unknown_ids = [
        _shown(m, i) for (m, i), slot in index.items() if (m, i) not in labelled_crits for _ in slot
    ]
    unknown_crit = [
        f"{_shown(m, i)}/{c}"
        for (m, i), crits in labelled_crits.items()
        for c in index[(m, i)]
        if c not in crits
    ]
    # Of those, the criteria the rubric does not have for the item's family: a true mismatch (another rubric);
    # the others are criteria the humans did not label (a labelled subset, e.g. overall only).
    off_rubric = [
        f"{_shown(m, i)}/{c}"
        for (m, i), crits in labelled_crits.items()
        for c in index[(m, i)]
        if c not in crits and not _in_rubric(rubric, family_of[(m, i)], c)
    ]

    scored_criteria = {m.item.criterion for m in sc.matches}
    scored_families = {m.item.task for m in sc.matches}
    human_criteria = list(dict.fromkeys(it.criterion for it in items))
    human_families = list(dict.fromkeys(it.task for it in items))
    expected = [it for it in items if it.criterion in scored_criteria and it.task in scored_families]
    missing = [it for it in expected if it.key not in seen]
    null = [m for m in sc.matches if m.score is None]
    reasons = Counter(f"{m.record.status}: {m.record.reason}" for m in null)
    n_scored = len(sc.matches) - len(null)
    sc.coverage = {
        "records": len(sf.records),
        "expected": len(expected),
        "scored": n_scored,
        "unscorable": len(null),
        "missing": len(missing),
        "coverage": n_scored / len(expected) if expected else None,
        "responses_scored": len({(m.item.model, m.item.id) for m in sc.matches if m.score is not None}),
        "criteria_scored": [c for c in human_criteria if c in scored_criteria],
        "criteria_not_scored": [c for c in human_criteria if c not in scored_criteria],
        "families_scored": [f for f in human_families if f in scored_families],
        "families_not_scored": [f for f in human_families if f not in scored_families],
        "unknown_ids": len(unknown_ids),
        "unknown_id_examples": list(dict.fromkeys(unknown_ids))[:N_EXAMPLES],
        "unknown_criterion": len(unknown_crit),
        "unknown_criterion_examples": unknown_crit[:N_EXAMPLES],
        "criterion_not_in_rubric": len(off_rubric),
        "filtered": n_filtered,
        "missing_examples": [f"{_shown(it.model, it.id)}/{it.criterion}" for it in missing[:N_EXAMPLES]],
        "labels": labels.describe(),
        "unscorable_reasons": [{"reason": k, "count": v} for k, v in reasons.most_common(N_EXAMPLES)],
    }
    cov = sc.coverage
    if unknown_ids:
        sc.warnings.append(
            f"{len(unknown_ids)} record(s) of {sf.path} score responses no label names (e.g. "
            f"{', '.join(cov['unknown_id_examples'])}); they are not compared"
            + (
                ". Check that --human and --scores refer to the same items (the same split)."
                if labels.unmatched or not labels.matched
                else " (every label matched: scores of unlabelled responses are expected when a sample is labelled)."
            )
        )
    if labels.unmatched:
        sc.warnings.append(f"{sf.name}: {labels.sentence(f'a record of {sf.path}')}")
    if len(unknown_crit) > len(off_rubric):
        unlabelled = [u for u in unknown_crit if u not in set(off_rubric)]
        labelled = list(dict.fromkeys(c for crits in labelled_crits.values() for c in sorted(crits)))
        only = " ".join(f"--criteria {c}" for c in labelled)
        sc.warnings.append(
            f"{len(unlabelled)} record(s) of {sf.path} score a criterion the humans did not label for that "
            f"response (e.g. {', '.join(unlabelled[:N_EXAMPLES])}); they are left out of the comparison, which "
            f"uses the labelled criteria ({', '.join(labelled)}). To score only those: judge-score {only}."
        )
    if off_rubric:
        sc.warnings.append(
            f"{len(off_rubric)} record(s) of {sf.path} score a criterion rubric {rubric.name!r} does not have for "
            f"the item's family (e.g. {', '.join(off_rubric[:N_EXAMPLES])}); they are not compared. Check that "
            "the scores and the labels use the same rubric (--rubric)."
        )
    if missing:
        sc.warnings.append(
            f"{len(missing)} of {len(expected)} human item(s) have no record in {sf.path} (e.g. "
            f"{', '.join(cov['missing_examples'])}); coverage is counted over all of them."
        )
    if null:
        sc.warnings.append(
            f"{len(null)} item(s) unscorable for {sf.name} (most common: {reasons.most_common(1)[0][0]})"
        )
    if not sc.matches:
        sc.warnings.append(
            f"no record of {sf.path} matches a human item: nothing to compare for {sf.name}. "
            "Check that the labels name the scored responses: model and id (the prediction's), or model and "
            "question_id (the prediction's id) beside an id of their own; and the criteria."
        )
    elif n_scored < 2:
        sc.warnings.append(
            f"{sf.name} scored only {n_scored} item(s): correlations are undefined; "
            "score more items (at least 30 for a meaningful interval)"
        )
    hashes = set().union(*(_rubric_hashes(r) for _, r in sf.records))
    if hashes and hashes != {rubric.hash}:
        sc.warnings.append(
            f"{sf.name} was produced with rubric hash {sorted(hashes)[0][:12]}, the report uses "
            f"{rubric.name!r} ({rubric.hash[:12]}); pass the matching --rubric"
        )
    return sc


__all__ = [
    "HumanItem",
    "Match",
    "ScoreFile",
    "ScoreFileError",
    "Scorer",
    "human_items",
    "load_score_file",
    "match_scorer",
    "metric_of",
    "split_by_metric",
]
