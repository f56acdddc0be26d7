"""The judge side of ``judge-score``: load a judge, turn records into score requests, score them.

Loading is not done here: :func:`judge.models.load` gives the engine a
:class:`~judge.models.loader.LoadedJudge` (:meth:`JudgeEngine.for_judge`). ``--judge`` is a judge folder
written by ``judge-train`` (it has ``judge_card.json``: base model, rubric name and hash, target
format) or a plain model folder / hub id / ``tiny`` together with ``--rubric``. A rubric whose
hash differs from the card's is refused unless forced: the judge would be asked questions it
was not trained on.

Scoring (:class:`JudgeEngine`). Each record becomes one :class:`~judge.models.readout.ScoreRequest`
holding one prompt per criterion of its task family (the criteria, then ``overall``), built by
:func:`judge.core.template.build_judge_prompt`, the function training uses. The requests go to
:class:`~judge.models.readout.ExpectedScorer` (sorting by length, token-budget batches, left
padding, shared prefix): one forward pass per (response, criterion), reading the expected score,
argmax and distribution at the score token. ``rationale`` generates a rationale first and still
reads the score from the distribution (:meth:`ExpectedScorer.score_with_rationale`).

An item that cannot be scored is written, never dropped and never a 0: one record per criterion
with ``score: null``, ``status: "unscorable"``, a ``reason`` and ``details.reason_code``:

* ``image``: an image is missing, corrupt, too large or not a local file;
* ``too_long``: the prompt is over the context budget (``max_tokens``) even with one image tile;
* ``unknown_family``: the record's task is not a family of the rubric (one ``overall`` record);
* ``encode``: the processor could not encode the prompt;
* ``non_finite``: the model's scale distribution is NaN or inf (its weights or the dtype overflowed).
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from judge.core.errors import ConfigError, ImageError, JudgeError
from judge.core.images import DEFAULT_LIMITS, ImageLimits, open_image
from judge.core.rubric import OVERALL, Rubric
from judge.core.schema import PredictionRecord, ScoreRecord, record_texts
from judge.core.template import build_judge_prompt
from judge.models import BATCH_TOKENS, loader
from judge.models.calibration import calibrated_fields
from judge.models.card import JudgeCard
from judge.models.devices import resolve_device as resolve_device  # kept importable from here
from judge.models.loader import JudgeSpec, LoadedJudge
from judge.models.text_budget import text_tokens_over
from judge.scoring.output import item_key
from judge.scoring.prepared import Item, Prepared
from judge.scoring.workers import prepared_in_workers

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 32768
JUDGE_METRIC = "judge"


# ----------------------------------------------------------------------------- which judge

# A judge is resolved and loaded by judge.models.loader (its one loading path). These names stay here for the
# code and the users that import them from the engine.
resolve_judge = loader.resolve


def load_judge_model(spec: JudgeSpec, *, device: str = "cpu", dtype: str = "auto", progress: bool = True):
    """``(model, processor)`` of a resolved judge: :func:`judge.models.loader.load`, kept for its callers."""
    judge = loader.load(spec, device=device, dtype=dtype, progress=progress)
    return judge.model, judge.processor


def model_max_tokens(model) -> int:
    """The context the model was built for (its text config's max positions), else 32768."""
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "get_text_config"):
        cfg = cfg.get_text_config()
    n = getattr(cfg, "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and n > 0 else DEFAULT_MAX_TOKENS


# ----------------------------------------------------------------------------- the engine


def judge_criteria(rubric: Rubric, rec: PredictionRecord) -> list[str]:
    """The criteria a record is scored on: its family's, then ``overall`` (only ``overall`` for an unknown
    family, whose record is unscorable)."""
    fam = rubric.families.get(rec.task)
    return fam.criterion_ids if fam is not None else [OVERALL]


def default_family_criteria(family_criteria: Sequence[str], trained: Sequence[str] | None) -> list[str]:
    """What a caller who names no criteria gets for one family: the criteria the judge was trained on
    (``trained``, :func:`trained_criteria`; every one when its card does not say). A family none of whose
    criteria it learned keeps ``overall``, marked untrained. The one rule of judge-score, :meth:`judge.Judge.score`
    and ``/v1/score``; a criterion asked for by name is scored and its record says ``trained: false``."""
    if trained is None:
        return list(family_criteria)
    return [c for c in family_criteria if c in trained] or [OVERALL]


def select_criteria(
    rubric: Rubric,
    rec: PredictionRecord,
    wanted: str | Sequence[str] | None,
    position: int,
    trained: Sequence[str] | None = None,
) -> list[str]:
    """The criteria of ``rec`` a caller asked for: None (the judge's ``trained`` ones,
    :func:`default_family_criteria`), ``"all"``, one id or a list (in the rubric's order, ``overall`` last);
    a :class:`ConfigError` naming the item (1-based ``position``) for one its family lacks. An item of an
    unknown family keeps ``overall`` (its record is unscorable)."""
    crits = judge_criteria(rubric, rec)
    if rec.task not in rubric.families or wanted == "all":
        return crits
    if wanted is None:
        return default_family_criteria(crits, trained)
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    unknown = [c for c in wanted if c not in crits]
    if unknown:
        raise ConfigError(
            f"item {position}: criteria {unknown} are not criteria of task family {rec.task!r} "
            f"(its criteria: {', '.join(crits)})"
        )
    return [c for c in crits if c in wanted]


def rubric_criteria(rubric: Rubric) -> list[str]:
    """Every criterion of ``rubric``: ``overall`` first, then the families' criteria in the rubric's order."""
    return [
        OVERALL,
        *dict.fromkeys(c for fam in rubric.families.values() for c in fam.criterion_ids if c != OVERALL),
    ]


def chosen_criteria(
    rubric: Rubric, wanted: Sequence[str] | None, field: str = "criteria"
) -> list[str] | None:
    """The criteria a run scores when asked for ``wanted``: None (every criterion of each item's family) for
    None, else ``overall`` and the ones named, in the rubric's order (``overall`` always: leaderboards and
    audits read it). A :class:`ConfigError` names `field` and a criterion the rubric lacks."""
    if wanted is None:
        return None
    known = rubric_criteria(rubric)
    unknown = [c for c in wanted if c not in known]
    if unknown:
        raise ConfigError(
            f"`{field}`: {', '.join(map(repr, unknown))} is not a criterion of rubric {rubric.name!r}; its "
            f"criteria: {', '.join(known)}"
        )
    return [c for c in known if c == OVERALL or c in wanted]


def trained_criteria(rubric: Rubric, card: JudgeCard | None) -> list[str] | None:
    """The criteria a judge was trained to score, from its card's run config (``data.criteria``), in the form
    of :func:`chosen_criteria`: None when it was trained on every criterion or its card does not say (a model
    folder, ``tiny``, a card written by hand)."""
    crits = ((card.config or {}).get("data") or {}).get("criteria") if card is not None else None
    if crits == "overall":
        return [OVERALL]
    if isinstance(crits, list) and crits and all(isinstance(c, str) for c in crits):
        known = set(rubric_criteria(rubric))
        return chosen_criteria(rubric, [c for c in crits if c in known])
    return None  # "all", "criteria" (every criterion; overall is read as well), or nothing recorded


def default_criteria(
    rubric: Rubric, wanted: Sequence[str] | None, card: JudgeCard | None, field: str = "criteria"
) -> list[str] | None:
    """What a scoring run or an audit scores: the criteria asked for (``wanted``, checked), else those the
    judge was trained on (:func:`trained_criteria`), else every one (None). A criterion asked for that the
    judge was not trained on is scored, with a warning: its scores are the untrained model's reading."""
    chosen = chosen_criteria(rubric, wanted, field)
    trained = trained_criteria(rubric, card)
    if chosen is None:
        if trained is not None:
            logger.warning(
                f"scoring {', '.join(trained)} only: the criteria the judge was trained on (its card's "
                f"data.criteria); `{field}` asks for others"
            )
        return trained
    if trained is not None and (untrained := [c for c in chosen if c not in trained]):
        logger.warning(
            f"the judge was not trained on {', '.join(untrained)} (its card's data.criteria: "
            f"{', '.join(trained)}): those scores are the untrained model's reading"
        )
    return chosen


def pending_criteria(rubric: Rubric, rec: PredictionRecord, done: Iterable | None = None) -> list[str]:
    """The criteria of ``rec`` not yet in ``done`` (a set of :func:`~judge.scoring.output.record_key`)."""
    crits = judge_criteria(rubric, rec)
    if not done:
        return crits
    base = item_key(rec.benchmark, rec.model, rec.id)
    return [c for c in crits if (*base, JUDGE_METRIC, "", c) not in done]


@dataclass
class Batch:
    """What one step of scoring produced: the records to write and how many items they finish."""

    records: list[ScoreRecord]
    items: int
    scored: int = 0  #: criterion scores computed by the model (unscorable ones not counted)


class JudgeEngine:
    """Scores prediction records with a loaded judge; see the module doc.

    ``batch_tokens`` and ``batch_size`` bound one forward pass: tokens processed (padding
    included) and responses (each with all its criterion prompts). ``max_tokens`` is the
    context budget of one prompt (default: the model's max positions). ``chunk_size``
    records are encoded at a time (their images' pixels are held in memory until scored).

    ``reproducible``: an item's scores depend on that item alone, bit for bit, whatever it is batched
    with (``judge-score`` at any batch size or shard count, ``judge-serve`` under any load). Each item
    runs in forward passes of its own, never padded against another item: with ``share_prefix``, its
    prefix (and images) at batch size 1, then the suffixes of *every* criterion of its task family in
    one batch, whichever criteria were asked for (a subset, or the pending ones of a resumed run), so
    the shapes of every operation are fixed by the item; without, every criterion prompt of its family
    in one batch. The cost is the batching across items: see docs/design.md.

    ``workers``: processes that encode the next items while the model scores (:mod:`judge.scoring.workers`;
    0: encode in this process). The same chunks are scored either way, so the scores are equal bit for
    bit. They start for each call of :meth:`iter_batches` (``judge-score`` makes one), in about a second,
    so they pay off on long runs. Not used with ``rationale`` (its generation keeps the images).

    ``packed``: how a shared prefix runs (:mod:`judge.models.packed`): ``flex``, one packed forward pass per
    batch under a prefix-tree attention mask; ``off``, on copies of the prefix's KV cache; ``auto`` (None: the
    ``JUDGE_PACKED`` environment variable, else ``auto``), packed on a CUDA GPU, the KV copy elsewhere.
    """

    def __init__(
        self,
        model,
        processor,
        spec: JudgeSpec,
        *,
        share_prefix: bool = True,
        batch_tokens: int = BATCH_TOKENS,
        batch_size: int = 16,
        max_tokens: int | None = None,
        rationale: bool = False,
        max_new_tokens: int = 256,
        chunk_size: int = 256,
        image_limits: ImageLimits = DEFAULT_LIMITS,
        reproducible: bool = False,
        workers: int = 0,
        packed: str | None = None,
    ):
        from judge.models.readout import ExpectedScorer

        if batch_tokens < 1 or batch_size < 1 or chunk_size < 1:
            raise ConfigError("batch tokens, batch size and chunk size must be positive")
        if workers < 0:
            raise ConfigError(f"`workers` must be 0 or more, got {workers}")
        self.spec = spec
        self.rubric = spec.rubric
        #: the criteria the judge was trained on (None: every one, or its card does not say); the records of
        #: the others say ``trained: false``
        self.trained = trained_criteria(self.rubric, spec.card)
        self.processor = processor
        self.scorer = ExpectedScorer(model, processor, self.rubric.scale.values, packed=packed)
        self.share_prefix = share_prefix and not rationale
        #: whether forward batches are packed rows (what an item costs; kept by :meth:`without_model`)
        self.packed = self.share_prefix and self.scorer.packed
        self.batch_tokens, self.batch_size, self.chunk_size = batch_tokens, batch_size, chunk_size
        # The scorer counts sequences (criterion prompts); a response brings at most this many.
        self._seqs_per_response = max(len(f.criterion_ids) for f in self.rubric.families.values())
        self.max_tokens = max_tokens or model_max_tokens(model)
        self.rationale = rationale
        self.max_new_tokens = max_new_tokens
        self.image_limits = image_limits
        self.reproducible = reproducible
        self.workers = workers
        ip = getattr(processor, "image_processor", None)
        self._base_tiles = getattr(ip, "max_patches", None)
        self.producer = {
            "judge": spec.source,
            "fingerprint": spec.fingerprint[:16],
            "rubric": self.rubric.name,
            "rubric_hash": self.rubric.hash,
            "share_prefix": self.share_prefix,
            "target_format": spec.target_format,
        }
        if rationale:
            self.producer["rationale"] = True
        if reproducible:
            self.producer["reproducible"] = True
        if spec.quantization:
            self.producer["quantization"] = spec.quantization
        if spec.calibration is not None:
            self.producer["calibration"] = spec.calibration.producer()
        if spec.selective is not None:
            self.producer["selective"] = spec.selective.producer()

    @classmethod
    def for_judge(cls, judge: LoadedJudge, **options: Any) -> JudgeEngine:
        """The engine of a judge that :func:`judge.models.load` loaded; ``options`` as the constructor takes them."""
        return cls(judge.model, judge.processor, judge.spec, **options)

    # -- what to score
    def pending(self, rec: PredictionRecord, done: Iterable | None = None) -> list[str]:
        return pending_criteria(self.rubric, rec, done)

    # -- records
    def _record(
        self,
        rec: PredictionRecord,
        criterion: str,
        cs=None,
        *,
        reason: str | None = None,
        code: str | None = None,
        max_patches: int | None = None,
    ) -> ScoreRecord:
        common: dict[str, Any] = dict(
            id=rec.id,
            benchmark=rec.benchmark,
            task=rec.task,
            model=rec.model,
            metric=JUDGE_METRIC,
            criterion=criterion,
            producer=dict(self.producer),
        )
        if self.trained is not None and criterion not in self.trained:
            common["trained"] = False  # asked for by name: the untrained model's reading, and said so
        if cs is None:
            return ScoreRecord(
                **common, score=None, status="unscorable", reason=reason, details={"reason_code": code}
            )
        if not (math.isfinite(cs.expected) and all(math.isfinite(p) for p in cs.distribution)):
            # NaN or inf logits: weights that overflowed (a diverged training) or an overflow in this dtype.
            return ScoreRecord(
                **common,
                score=None,
                status="unscorable",
                reason="the judge's score distribution is not finite (NaN or inf logits): its weights or this "
                "dtype overflowed; check the judge's training (loss, grad_norm) or score in float32",
                details={"reason_code": "non_finite"},
            )
        details: dict[str, Any] = {"scale_mass": cs.scale_mass, "num_tokens": cs.num_tokens}
        if max_patches is not None:
            details["max_patches"] = max_patches
        if cs.rationale is not None:
            details["rationale"] = cs.rationale
        return ScoreRecord(
            **common,
            **calibrated_fields(self.spec.calibration, criterion, cs, self.spec.selective),
            details=details,
        )

    def _unscorable(self, item: Item, reason: str, code: str) -> list[ScoreRecord]:
        return [self._record(item.rec, c, reason=reason, code=code) for c in item.criteria]

    def _too_long(self, item: Item, what: str) -> list[ScoreRecord]:
        room = f" minus {self.max_new_tokens + 8} for the rationale" if self.rationale else ""
        reason = f"{what}, over the context budget of {self.max_tokens}{room} (--max-tokens)"
        return self._unscorable(item, reason, "too_long")

    # -- encoding
    def _request(self, item: Item, key: Any):
        from judge.models.readout import ScoreRequest

        rec = item.rec
        prompts = [
            build_judge_prompt(
                self.rubric, rec.task, c, rec.question, rec.response, rec.reference, self.spec.target_format
            )
            for c in item.compute
        ]
        return ScoreRequest(
            key=key,
            criteria=list(item.compute),
            prompts=[p.messages for p in prompts],
            images=item.images,
            max_patches=item.max_patches,
        ), prompts[0].images

    def _prepare(self, item: Item, key: Any):
        """An encoded request, or the item's unscorable records. Needs no model (workers run it)."""
        from judge.models.readout import encode_request

        rec = item.rec
        if rec.task not in self.rubric.families:
            return self._unscorable(
                item,
                f"task {rec.task!r} is not a family of rubric {self.rubric.name!r} "
                f"(families: {', '.join(sorted(self.rubric.families))})",
                "unknown_family",
            )
        budget = self.max_tokens - (self.max_new_tokens + 8 if self.rationale else 0)
        over = text_tokens_over(self.processor.tokenizer, record_texts(rec), budget)
        if over is not None:  # found from prefixes: a huge text costs no more than one that just fits
            return self._too_long(item, f"the item's text alone is more than {over} tokens")
        request, refs = self._request(item, key)
        try:
            for ref in refs:
                item.images.append(open_image(ref, self.image_limits))
        except ImageError as e:
            self._close(item)
            return self._unscorable(item, f"image cannot be used: {e}", "image")
        request.images = item.images
        try:
            enc = encode_request(self.processor, request)
            if enc.max_len > budget and request.images and self._base_tiles:
                # Fewer tiles per image, as the SFT builder does for training examples over the budget.
                for tiles in range(int(self._base_tiles) - 1, 0, -1):
                    request.max_patches = item.max_patches = tiles
                    enc = encode_request(self.processor, request)
                    if enc.max_len <= budget:
                        break
        except (JudgeError, ValueError) as e:
            self._close(item)
            return self._unscorable(item, f"the prompt cannot be encoded: {e}", "encode")
        if enc.max_len > budget:
            self._close(item)
            one_tile = " even with one tile per image" if request.images and self._base_tiles else ""
            return self._too_long(item, f"the prompt is {enc.max_len} tokens{one_tile}")
        if not self.rationale:
            # Pixels are computed; the decoded images are not needed any more.
            self._close(item)
        return enc

    @staticmethod
    def _close(item: Item) -> None:
        for im in item.images:
            im.close()
        item.images.clear()  # the request holds the same list

    # -- scoring
    def prepare(
        self, rec: PredictionRecord, criteria: Sequence[str] | None = None, key: Any = None
    ) -> Prepared:
        """Encode one item for scoring (its images opened and checked, its prompts tokenised), or settle it
        as unscorable. ``criteria``: default all of its family's; ``key``: the caller's handle, given back
        by :meth:`score_prepared`."""
        wanted = list(criteria) if criteria is not None else self.pending(rec)
        item = Item(rec, wanted)
        if self.reproducible and not self.rationale:
            # The whole family, always: which criteria run must not depend on which were asked for.
            family = judge_criteria(self.rubric, rec)
            item.compute = family + [c for c in wanted if c not in family]
        res = self._prepare(item, key)
        if isinstance(res, list):
            return Prepared(key, item, None, res, 0)
        from judge.models.readout import batch_cost

        return Prepared(key, item, res, None, batch_cost([res], self.share_prefix, self.packed))

    def score_prepared(
        self, prepared: Sequence[Prepared], *, max_padding: float | None = None
    ) -> Iterator[list[Prepared]]:
        """Score encoded items (unscorable ones are passed through first): packed by length into
        token-budget forward batches as ``judge-score`` packs them, so an item's scores do not depend on
        what it is batched with. Yields the items of each forward batch with ``records`` filled in.

        ``max_padding`` also closes a forward batch whose padding would pass that fraction of its real
        tokens (see :meth:`ExpectedScorer.score_encoded`); ``judge-score`` leaves it unset."""
        settled = [p for p in prepared if p.encoded is None]
        if settled:
            yield settled
        todo = [p for p in prepared if p.encoded is not None]
        if self.rationale:
            for p in todo:
                assert p.encoded is not None
                scores = self.scorer.score_with_rationale(p.encoded.request, self.max_new_tokens)
                self._close(p.item)
                p.records = self._records(p.item, scores)
                yield [p]
            return
        by_key = {id(p.encoded.request): p for p in todo if p.encoded is not None}
        encoded = [p.encoded for p in todo if p.encoded is not None]
        if self.reproducible:
            # Each item alone: nothing of another item enters its forward passes.
            batches = self.scorer.score_batches([[e] for e in encoded], share_prefix=self.share_prefix)
        else:
            batches = self.scorer.score_encoded(
                encoded,
                share_prefix=self.share_prefix,
                batch_tokens=self.batch_tokens,
                max_batch_size=self.batch_size * self._seqs_per_response,
                max_padding=max_padding,
            )
        for batch in batches:
            out = []
            for request, scores in batch:
                p = by_key[id(request)]
                p.records = self._records(p.item, scores)
                out.append(p)
            yield out

    def iter_batches(
        self,
        records: Sequence[PredictionRecord],
        done: Iterable | None = None,
        *,
        criteria: Sequence[Sequence[str]] | None = None,
    ) -> Iterator[Batch]:
        """Score ``records`` (skipping criteria in ``done``; only ``criteria[i]`` of record ``i`` when given);
        yields one :class:`Batch` per forward batch.

        Records are encoded ``chunk_size`` at a time; a chunk's unscorable items come first, then its
        forward batches; each item's records are in one batch, so a batch written is a set of finished
        items.
        """
        done = done if done is not None else set()
        todo = [
            (r, crits)
            for i, r in enumerate(records)
            if (crits := [c for c in self.pending(r, done) if criteria is None or c in criteria[i]])
        ]
        for chunk in self._prepared_chunks(todo):
            for group in self.score_prepared(chunk):
                recs = [r for p in group for r in p.records or []]
                scored = sum(len(p.records or []) for p in group if p.encoded is not None)
                yield Batch(recs, len(group), scored)

    def _prepared_chunks(
        self, todo: Sequence[tuple[PredictionRecord, list[str]]]
    ) -> Iterator[list[Prepared]]:
        """``todo`` prepared, ``chunk_size`` items at a time: in worker processes (``workers``), or here."""
        if self.workers and not self.rationale and len(todo) > 1:
            yield from prepared_in_workers(self, todo, self.workers, self.chunk_size)
            return
        for start in range(0, len(todo), self.chunk_size):
            yield [self.prepare(r, crits) for r, crits in todo[start : start + self.chunk_size]]

    def without_model(self) -> JudgeEngine:
        """A copy that can :meth:`prepare` but not score: what encoding workers get (no weights to copy)."""
        light = copy.copy(self)
        light.scorer = None  # type: ignore[assignment]
        return light

    def _records(self, item: Item, scores) -> list[ScoreRecord]:
        by_criterion = dict(zip(item.compute, scores, strict=True))
        return [
            self._record(item.rec, c, by_criterion[c], max_patches=item.max_patches) for c in item.criteria
        ]

    def score_records(
        self, records: Sequence[PredictionRecord], criteria: Sequence[Sequence[str]] | None = None
    ) -> list[ScoreRecord]:
        """Every judge record of ``records`` (only ``criteria[i]`` of record ``i`` when given), in scoring
        order."""
        return [r for b in self.iter_batches(records, criteria=criteria) for r in b.records]
