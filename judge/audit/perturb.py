"""The audit's controlled changes to a response, one at a time, and what a human would expect of each.

Each :class:`Perturbation` turns one prediction record into a copy whose *response* differs in one
way (the question and reference are never touched), or says it does not apply (``None``: a response
without images cannot have its images blanked). Every choice is seeded by the item and the audit's
seed, so an audit is reproducible and resumable.

Perturbations (``--perturb`` names):

* ``blank-images``: every response image replaced by a white image of the same size (image-blind);
* ``swapped-images``: the response images replaced, in order, by those of another question's response
  of the same task family (image-blind);
* ``off-topic``: the whole response replaced by the response to another question of the same family;
* ``shuffled-words``: the response's words shuffled across its text (the images stay in place);
* ``unrelated-text``: each text part replaced by fluent sentences unrelated to any question, about as
  many words as it had (the images stay);
* ``truncated``: the response cut to its first half, counting each word and each image as one unit;
* ``padded``: fluent, irrelevant filler (three sentences) appended as a last text part;
* ``reordered``: the response's images in reverse order (needs two different images).

What is expected (:meth:`Perturbation.expect`) is per criterion: ``"fall"`` (a human would score it
lower), ``"not_rise"`` (it may stay or fall; a rise is a reward for the change) or ``None`` (no
expectation: the change is reported, not judged). Criteria are matched by their ids, so any rubric
works: ids naming images or coherence are the image criteria, ids naming context, understanding,
accuracy, correctness, relevance, method or consistency with the task are the relevance criteria;
``overall`` is always expected to fall, except for ``padded`` and ``reordered`` (``not_rise``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from judge.core.errors import ImageError
from judge.core.images import image_size
from judge.core.rubric import OVERALL
from judge.core.schema import ImageSegment, PredictionRecord, TextSegment

Expectation = Literal["fall", "not_rise"] | None

#: Fluent English with no bearing on any benchmark question: the unrelated text and the padding.
FILLER = (
    "The weather report for the coming week promises mild mornings and a light breeze after lunch.",
    "Many town libraries now lend out tools, board games and musical instruments as well as books.",
    "A good pot of tea wants water that has only just stopped boiling and a few minutes of patience.",
    "The old railway line has been turned into a cycle path that follows the river for twelve miles.",
    "Some people keep a notebook beside the bed to write down their dreams as soon as they wake up.",
    "The museum stays open late on Thursdays, when the entrance hall hosts small evening concerts.",
    "Fresh paint should be left to dry overnight before the furniture is moved back into the room.",
    "The ferry timetable changes in October, with fewer crossings on weekday afternoons.",
    "A well-kept garden shed has a place for every tool and a hook for every length of hose.",
    "The annual book fair drew a large crowd this year, mostly families with young children.",
    "Good walking boots are worth breaking in slowly, a short stroll at a time.",
    "The bakery on the corner sells out of rye bread before nine on most Saturday mornings.",
)

_IMAGE_WORDS = ("image", "visual", "picture", "coherence", "illustrat")
_RELEVANCE_WORDS = (
    "context",
    "understanding",
    "accuracy",
    "correct",
    "relevan",
    "method",
    "task",
    "answer",
)
_QUALITY_ONLY = re.compile(r"^(image|visual)_quality$")


def is_image_criterion(criterion: str) -> bool:
    """A criterion about the images or how text and images fit (by its id)."""
    return any(w in criterion.lower() for w in _IMAGE_WORDS)


def is_relevance_criterion(criterion: str) -> bool:
    """A criterion about answering *this* question (by its id)."""
    return any(w in criterion.lower() for w in _RELEVANCE_WORDS)


@dataclass(frozen=True)
class Context:
    """What a perturbation may draw on besides the record: the other records, and where to write images."""

    records: Sequence[PredictionRecord]
    question_of: Callable[[PredictionRecord], str]
    image_dir: Path
    seed: int = 0
    _pools: dict = field(default_factory=dict, repr=False, compare=False)

    def rng(self, rec: PredictionRecord, name: str) -> random.Random:
        return random.Random(f"judge-audit:{self.seed}:{name}:{rec.benchmark}:{rec.model}:{rec.id}")

    def other_response(
        self, rec: PredictionRecord, name: str, need_images: bool = False
    ) -> PredictionRecord | None:
        """A response to another question of the same benchmark and family (seeded choice), or None."""
        key = (rec.benchmark, rec.task, need_images)
        if key not in self._pools:  # built once per family, so an audit of many items stays linear
            self._pools[key] = [
                (self.question_of(r), r)
                for r in self.records
                if r.benchmark == rec.benchmark and r.task == rec.task and r.response
                if not need_images or _images(r.response)
            ]
        pool = self._pools[key]
        mine = self.question_of(rec)
        if all(q == mine for q, _ in pool):
            return None
        rng = self.rng(rec, name)
        while True:  # draws until another question's response; at least one exists
            q, other = rng.choice(pool)
            if q != mine:
                return other

    def blank_image(self, ref: str) -> str | None:
        """A white PNG of the size of image ``ref`` (written once per size), or None if ``ref`` is unreadable."""
        from PIL import Image

        try:
            size = image_size(ref)
        except ImageError:  # the original is unscorable for the same reason; nothing to compare
            return None
        path = self.image_dir / f"blank-{size[0]}x{size[1]}.png"
        if not path.exists():
            from judge.core.atomic import atomic_write

            self.image_dir.mkdir(parents=True, exist_ok=True)
            buf = _png(Image.new("RGB", size, (255, 255, 255)))
            with atomic_write(path, "wb") as f:
                f.write(buf)
        return str(path)


def _png(img) -> bytes:
    import io

    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _images(content) -> list[str]:
    return [s.image for s in content if isinstance(s, ImageSegment)]


def _with_response(rec: PredictionRecord, response: list) -> PredictionRecord:
    copy = rec.model_copy(update={"response": response})
    copy._source = rec._source
    return copy


@dataclass(frozen=True)
class Perturbation:
    """One controlled change: ``apply(record, context)`` gives the changed copy or None (not applicable)."""

    name: str
    group: str  #: what it tests: image-blind, off-topic, nonsense, truncated, padded, reordered
    description: str
    apply: Callable[[PredictionRecord, Context], PredictionRecord | None]
    overall: Expectation = "fall"
    #: criterion id -> expectation, for the criteria other than overall
    criterion_rule: Callable[[str], Expectation] = lambda c: None

    def expect(self, criterion: str) -> Expectation:
        """What a human would expect of ``criterion`` under this change (see the module doc)."""
        return self.overall if criterion == OVERALL else self.criterion_rule(criterion)


# ----------------------------------------------------------------------------- the changes


def _blank_images(rec: PredictionRecord, ctx: Context) -> PredictionRecord | None:
    if not _images(rec.response):
        return None
    out: list[TextSegment | ImageSegment] = []
    for s in rec.response:
        if isinstance(s, ImageSegment):
            blank = ctx.blank_image(s.image)
            if blank is None:
                return None
            out.append(ImageSegment(image=blank))
        else:
            out.append(s)
    return _with_response(rec, out)


def _swapped_images(rec: PredictionRecord, ctx: Context) -> PredictionRecord | None:
    mine = _images(rec.response)
    other = ctx.other_response(rec, "swapped-images", need_images=True)
    if not mine or other is None:
        return None
    theirs = _images(other.response)
    it = iter(range(len(mine)))
    out = [
        ImageSegment(image=theirs[next(it) % len(theirs)]) if isinstance(s, ImageSegment) else s
        for s in rec.response
    ]
    return _with_response(rec, out)


def _off_topic(rec: PredictionRecord, ctx: Context) -> PredictionRecord | None:
    other = ctx.other_response(rec, "off-topic")
    return None if other is None else _with_response(rec, list(other.response))


def _words(text: str) -> list[str]:
    return text.split()


def _shuffled_words(rec: PredictionRecord, ctx: Context) -> PredictionRecord | None:
    texts = [s for s in rec.response if isinstance(s, TextSegment)]
    words = [w for s in texts for w in _words(s.text)]
    if len(set(words)) < 2:
        return None
    rng = ctx.rng(rec, "shuffled-words")
    shuffled = list(words)
    for _ in range(10):  # a shuffle that happens to keep the order is no change
        rng.shuffle(shuffled)
        if shuffled != words:
            break
    it = iter(shuffled)
    out: list[TextSegment | ImageSegment] = []
    for s in rec.response:
        if isinstance(s, TextSegment):
            n = len(_words(s.text))
            out.append(TextSegment(text=" ".join(next(it) for _ in range(n))) if n else s)
        else:
            out.append(s)
    return _with_response(rec, out)


def _filler(rng: random.Random, n_words: int) -> str:
    """Filler sentences, whole, until about ``n_words`` words (at least one sentence)."""
    pool = list(FILLER)
    rng.shuffle(pool)
    out: list[str] = []
    count = 0
    for sentence in pool * (1 + n_words // 150):
        if out and count >= n_words:
            break
        out.append(sentence)
        count += len(sentence.split())
    return " ".join(out)


def _unrelated_text(rec: PredictionRecord, ctx: Context) -> PredictionRecord | None:
    if not any(isinstance(s, TextSegment) and s.text.strip() for s in rec.response):
        return None
    rng = ctx.rng(rec, "unrelated-text")
    out = [
        TextSegment(text=_filler(rng, len(_words(s.text))))
        if isinstance(s, TextSegment) and s.text.strip()
        else s
        for s in rec.response
    ]
    return _with_response(rec, out)


def _truncated(rec: PredictionRecord, ctx: Context) -> PredictionRecord | None:
    # Units in reading order: each word and each image; keep the first half (rounded down, at least one).
    units = sum(len(_words(s.text)) if isinstance(s, TextSegment) else 1 for s in rec.response)
    if units < 2:
        return None
    keep = units // 2
    out: list = []
    for s in rec.response:
        if keep <= 0:
            break
        if isinstance(s, ImageSegment):
            out.append(s)
            keep -= 1
            continue
        words = _words(s.text)
        if words:
            out.append(TextSegment(text=" ".join(words[:keep])))
            keep -= min(keep, len(words))
    return _with_response(rec, out)


def _padded(rec: PredictionRecord, ctx: Context) -> PredictionRecord | None:
    rng = ctx.rng(rec, "padded")
    pool = list(FILLER)
    rng.shuffle(pool)
    return _with_response(rec, [*rec.response, TextSegment(text=" " + " ".join(pool[:3]))])


def _reordered(rec: PredictionRecord, ctx: Context) -> PredictionRecord | None:
    images = _images(rec.response)
    if len(set(images)) < 2:
        return None
    it = iter(reversed(images))
    return _with_response(
        rec, [ImageSegment(image=next(it)) if isinstance(s, ImageSegment) else s for s in rec.response]
    )


def _image_rule(c: str) -> Expectation:
    return "fall" if is_image_criterion(c) else "not_rise"


def _relevance_rule(c: str) -> Expectation:
    # Answering another question: relevance falls, and so does how text and images fit the question.
    return (
        "fall"
        if is_relevance_criterion(c) or (is_image_criterion(c) and not _QUALITY_ONLY.match(c))
        else None
    )


def _nonsense_rule(c: str) -> Expectation:
    return None if _QUALITY_ONLY.match(c) else "fall"


PERTURBATIONS: dict[str, Perturbation] = {
    p.name: p
    for p in (
        Perturbation(
            "blank-images",
            "image-blind",
            "response images replaced by white images of the same size",
            _blank_images,
            criterion_rule=_image_rule,
        ),
        Perturbation(
            "swapped-images",
            "image-blind",
            "response images replaced by those of another question's response",
            _swapped_images,
            criterion_rule=_image_rule,
        ),
        Perturbation(
            "off-topic",
            "off-topic",
            "the response to another question of the same family",
            _off_topic,
            criterion_rule=_relevance_rule,
        ),
        Perturbation(
            "shuffled-words",
            "nonsense",
            "the response's words shuffled (images in place)",
            _shuffled_words,
            criterion_rule=_nonsense_rule,
        ),
        Perturbation(
            "unrelated-text",
            "nonsense",
            "the response's text replaced by fluent, unrelated sentences of about the same length",
            _unrelated_text,
            criterion_rule=_relevance_rule,
        ),
        Perturbation(
            "truncated",
            "truncated",
            "the response cut to its first half (words and images)",
            _truncated,
        ),
        Perturbation(
            "padded",
            "padded",
            "three fluent, irrelevant sentences appended",
            _padded,
            overall="not_rise",
            criterion_rule=lambda c: "not_rise",
        ),
        Perturbation(
            "reordered",
            "reordered",
            "the response's images in reverse order",
            _reordered,
            overall="not_rise",
            criterion_rule=lambda c: "fall" if "coheren" in c.lower() else None,
        ),
    )
}
