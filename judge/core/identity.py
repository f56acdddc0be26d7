"""One identity of a scored response, and how a human label finds the response it labels.

A scored response is ``(model, id)``: the ``model`` and ``id`` of the record judge-score scored (a
prediction's id is its question's, shared by every model's response to it; an annotation file scored
directly keeps each response's own id). A score is ``(model, id, criterion)``.

A label record (an annotation record with human ``scores``) names its response in one of two styles:

* **prediction style**: ``id`` is the prediction's id and ``model`` its model (ids repeat across models;
  the annotation reader refuses a second ``(model, id)``, not a second id). The demo's path (an annotation
  file scored directly, every id unique) is this style too;
* **own ids**: a unique ``id`` per label record, with ``question_id`` (the prediction's id) and ``model``.

:class:`LabelMatcher` tries ``(model, id)`` first, then ``(model, question_id)``; a label whose ``model`` is
missing (``"unknown"``) matches an id scored for exactly one model, and a score that names no model matches
a label by id alone. A label that matches two different
responses (by id and by question_id) is an error, not a guess. judge-report, ``judge-score --labels``,
judge-view, judge-calibrate and the leaderboards all match through it, and say with :class:`LabelMatch` how
many labels matched and which did not.

Label files are read by :func:`load_labels_checked` (every invalid label refused, none skipped), and
:func:`key_questions_by_id` keys the questions of both styles alike, so that they resample the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from judge.core.errors import JudgeError

if TYPE_CHECKING:
    from pathlib import Path

    from judge.core.rubric import Rubric
    from judge.core.schema import AnnotationRecord

#: ``(model, id)`` of a scored record.
ResponseKey = tuple[str, str]
#: What a label record is known by: ``(model, id, question_id)``.
LabelKey = tuple[str, str, str | None]

#: A label record's ``model`` when it names none (the schema's default).
NO_MODEL = "unknown"
#: How many unmatched labels a message shows.
N_EXAMPLES = 5
#: How the rule reads in a message.
RULE = "by model and id, or model and question_id"


def label_name(label: LabelKey) -> str:
    """A label as a message shows it: ``model/id``, with ``(question q)`` when it names another question id."""
    model, rid, qid = label
    return f"{model}/{rid}" + (f" (question {qid})" if qid and qid != rid else "")


class LabelMatcher:
    """Resolves label records to the scored responses ``scored`` (see the module doc)."""

    def __init__(self, scored: Iterable[ResponseKey]):
        self.scored = {(str(m), str(i)) for m, i in scored}
        self._models_of = defaultdict(set)
        for m, i in self.scored:
            self._models_of[i].add(m)

    def resolve(self, model: str, id: str, question_id: str | None = None) -> ResponseKey | None:
        """The scored response the label ``(model, id, question_id)`` labels, or None."""
        found = []
        for rid in dict.fromkeys(x for x in (id, question_id) if x):
            key = self._find(model, rid)
            if key is not None and key not in found:
                found.append(key)
        if len(found) > 1:
            raise JudgeError(
                f"the label {label_name((model, id, question_id))} matches two scored responses: "
                f"{found[0][0]}/{found[0][1]} by its id and {found[1][0]}/{found[1][1]} by its question_id; "
                "give the label an id of its own (prediction style: id = the prediction's id, or own ids: "
                "question_id = the prediction's id)"
            )
        return found[0] if found else None

    def _find(self, model: str, rid: str) -> ResponseKey | None:
        if (model, rid) in self.scored:
            return (model, rid)
        if model == NO_MODEL and len(models := self._models_of.get(rid, ())) == 1:
            return (next(iter(models)), rid)
        if (NO_MODEL, rid) in self.scored:
            # A score file that names no model (hand-made, or another tool's) is matched by id alone; two
            # labels of one id (two models) on such a score are refused as two labels for one response.
            return (NO_MODEL, rid)
        return None

    def match(self, labels: Iterable[LabelKey]) -> LabelMatch:
        """Every label resolved: which response each labels, and the count (a response labelled twice is an
        error naming both labels)."""
        out = LabelMatch()
        by_response: dict[ResponseKey, LabelKey] = {}
        for lab in dict.fromkeys(labels):
            key = self.resolve(*lab)
            if key is None:
                out.unmatched.append(lab)
                continue
            if key in by_response:
                raise JudgeError(
                    f"the labels {label_name(by_response[key])} and {label_name(lab)} both label the scored "
                    f"response {key[0]}/{key[1]}; label each response once"
                )
            by_response[key] = lab
            out.matched[lab] = key
        return out


@dataclass
class LabelMatch:
    """Labels matched to scored responses: ``matched`` label -> response, and the labels that matched none."""

    matched: dict[LabelKey, ResponseKey] = field(default_factory=dict)
    unmatched: list[LabelKey] = field(default_factory=list)

    @property
    def n_labels(self) -> int:
        return len(self.matched) + len(self.unmatched)

    def describe(self) -> dict[str, Any]:
        """``{"labels", "matched", "unmatched", "unmatched_examples"}`` (labelled responses, not criteria)."""
        return {
            "labels": self.n_labels,
            "matched": len(self.matched),
            "unmatched": len(self.unmatched),
            "unmatched_examples": [label_name(k) for k in self.unmatched[:N_EXAMPLES]],
        }

    def sentence(self, what: str = "a scored response") -> str:
        """``"12 of 14 labels matched a scored response (by ...); 2 did not (e.g. ...)"``."""
        d = self.describe()
        text = f"{d['matched']} of {d['labels']} labelled responses matched {what} ({RULE})"
        if d["unmatched"]:
            text += f"; {d['unmatched']} did not (e.g. {', '.join(d['unmatched_examples'])})"
        return text


def load_labels_checked(
    path: str | Path, *, rubric: Rubric | None, root: str | Path | None = None, check_images: bool = False
) -> list[AnnotationRecord]:
    """The human labels of one file, every invalid record refused together. No reader of labels has a skip
    setting (a label dropped in silence would change every number it enters), so the advice is to fix them."""
    from judge.core.io import InvalidRecordsError, load_annotations

    res = load_annotations(path, rubric=rubric, root=root, check_images=check_images, collect=True)
    if res.errors:
        raise InvalidRecordsError(
            res.errors,
            "label records",
            can_skip=False,
            fix="fix them in the file: every label counts, none is left out",
        )
    return res.records


def key_questions_by_id(records: Sequence[AnnotationRecord]) -> int:
    """Key the questions of prediction-style labels as own-id labels key them: by the prediction's id.

    Labels in which an id is labelled for two or more models are in prediction style over predictions (an id
    shared across models is its question's); each of them whose ``question_id`` is the default (a hash of
    the question) gets its ``id`` as ``question_id``, the value an own-id label gives it. The two documented
    styles then resample the same questions under the same names, so give the same intervals. An explicit
    ``question_id``, and labels whose ids are unique (an annotation file scored directly), are left as they
    are. Returns how many records were re-keyed."""
    models_of: dict[str, set[str]] = defaultdict(set)
    for r in records:
        models_of[r.id].add(r.model)
    if not any(len(m) > 1 for m in models_of.values()):
        return 0
    n = 0
    for r in records:
        if r._question_id_default:  # the hash the schema filled in (of the question as written)
            r.question_id = r.id
            n += 1
    return n


__all__ = [
    "LabelKey",
    "LabelMatch",
    "LabelMatcher",
    "ResponseKey",
    "key_questions_by_id",
    "label_name",
    "load_labels_checked",
]
