"""The judge's score read-out: the expected scale value under the next-token distribution.

This is the one scoring function of the toolkit. ``judge-score`` (the engine in
``judge.scoring``) and ``judge-train``'s validation callback both call
:class:`ExpectedScorer`, so what training reports is what scoring will produce.

How a score is read. The prompt (``judge.core.template.build_judge_prompt``) is rendered
with the chat template and the assistant header; the logits of the next token,
restricted to the scale's tokens (``"0"`` .. ``"6"``) and renormalised, give a
distribution over the scale. The score is its expectation; the argmax and the
distribution are kept. One forward pass, nothing to parse, a continuous score.

Batching. Sequences are sorted by length and packed by a token budget; padding is on
the left, with explicit position ids, so a sequence's scores do not depend on what it
is batched with, to float round-off: other shapes of the same matrix products add their
terms in another order. In float32 on the CPU that moves a score by under 1e-6; in
bfloat16 the hidden states differ in their last bits, and the read-out is done in float32
(:class:`Float32Head`) so that those bits are not amplified by logits rounded to bfloat16.
Exact equality, whatever the batch, is the engine's reproducible mode
(``JudgeEngine(reproducible=True)``: each item in forward passes of its own).

Shared prefix. Every criterion of one response shares the prompt up to the criterion's
own question (all images included). With ``share_prefix=True`` that prefix (and its
images) runs once per response, and each criterion runs only its suffix: either on a copy
of the prefix's key-value cache (the KV-copy path, :meth:`ExpectedScorer._shared`), or in
one packed row with the prefix under a prefix-tree attention mask (:mod:`judge.models.packed`;
the ``packed`` setting chooses). The shared prefix is the longest common run of *token ids*
of the criterion prompts, so tokenisation is exactly that of the unshared path.

Batch planning and token costs are in :mod:`judge.models.batching`, the float32 read-out in
:mod:`judge.models.float32_head`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from judge.core.errors import JudgeError
from judge.core.template import SCORE_CUE
from judge.models import BATCH_TOKENS
from judge.models.batching import batch_cost, kept_prefix_len, pack, plan_batches, real_tokens
from judge.models.families import (
    forward_inputs,
    frames_first,
    generation_inputs,
    multi_axis_positions,
    of_processor,
)
from judge.models.family_gemma3 import prefix_cache, suffix_masks
from judge.models.float32_head import Float32Head
from judge.models.packed import PACKED_ENV, pack_row, packed_attention, prefix_tree_mask, resolve_packed
from judge.models.pixels import cat_pixel_values
from judge.models.requests import CriterionScore, Encoded, EncodedShape, ScoreRequest
from judge.models.score_tokens import score_token_ids

#: Names other modules import from here (batching, the float32 head and the request types live in their own
#: modules now).
__all__ = [
    "CriterionScore",
    "Encoded",
    "EncodedShape",
    "ExpectedScorer",
    "Float32Head",
    "ScoreRequest",
    "batch_cost",
    "encode_prompts",
    "encode_request",
    "plan_batches",
    "real_tokens",
    "render_prompt",
]

logger = logging.getLogger(__name__)


class ExpectedScorer:
    """Score requests with a judge model: expected score, argmax and distribution per criterion.

    ``model`` is any image-text-to-text model (a PEFT-wrapped one too) and ``processor``
    its processor; ``values`` the rubric's scale (each value must be a single token).
    ``packed``: how a shared prefix is scored, one of :data:`judge.models.packed.PACKED_MODES`
    (``auto``, ``flex``, ``off``; None: the ``JUDGE_PACKED`` environment variable, else ``auto``);
    :attr:`packed` is the resolved choice.
    """

    def __init__(
        self,
        model,
        processor,
        values: Sequence[int],
        device: str | torch.device | None = None,
        packed: str | None = None,
    ):
        self.model = model
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.values = list(values)
        self.score_ids = score_token_ids(self.tokenizer, self.values)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self._cache_kw = cache_keyword(model)
        self._head = Float32Head.find(model)
        #: whether a shared prefix runs in one packed pass (else on copies of its KV cache)
        self.packed = resolve_packed(packed, model, self.device)
        #: ``auto`` may still fall back to the KV copy if the first packed pass cannot run (compilation);
        #: ``flex`` asked for outright (here or in ``JUDGE_PACKED``) raises instead
        self._packed_tried = _packed_mode(packed) == "flex"

    # ----------------------------------------------------------------- encoding
    def encode(self, request: ScoreRequest) -> Encoded:
        """Tokenise every criterion prompt of ``request``; preprocess its images once."""
        return encode_request(self.processor, request)

    # ----------------------------------------------------------------- scoring
    @torch.inference_mode()
    def score(
        self,
        requests: Sequence[ScoreRequest],
        *,
        share_prefix: bool = True,
        batch_tokens: int = BATCH_TOKENS,
        max_batch_size: int = 64,
    ) -> Iterator[list[tuple[ScoreRequest, list[CriterionScore]]]]:
        """Score ``requests``; yields one list of ``(request, scores)`` per forward batch.

        Batches are formed longest first under ``batch_tokens`` (tokens processed,
        padding included) and ``max_batch_size`` sequences; a single request over the
        budget still runs, alone.
        """
        encoded = [self.encode(r) for r in requests]
        yield from self.score_encoded(
            encoded,
            share_prefix=share_prefix,
            batch_tokens=batch_tokens,
            max_batch_size=max_batch_size,
        )

    def score_encoded(
        self,
        encoded: Sequence[Encoded],
        *,
        share_prefix: bool = True,
        batch_tokens: int = BATCH_TOKENS,
        max_batch_size: int = 64,
        max_padding: float | None = None,
    ) -> Iterator[list[tuple[ScoreRequest, list[CriterionScore]]]]:
        """:meth:`score` for requests already encoded (the engine checks lengths in between).

        ``max_padding``: also close a forward batch before its padded cost would exceed
        ``1 + max_padding`` times its real tokens (``None``: only the budget and size bound it).
        """
        yield from self.score_batches(
            pack(encoded, share_prefix, batch_tokens, max_batch_size, max_padding, packed=self.packed),
            share_prefix=share_prefix,
        )

    def score_batches(
        self,
        batches: Iterable[Sequence[Encoded]],
        *,
        share_prefix: bool = True,
        grad_mode: str = "inference",
    ) -> Iterator[list[tuple[ScoreRequest, list[CriterionScore]]]]:
        """Score batches formed by the caller (e.g. from :func:`plan_batches`), one forward batch each, as given.

        The shared-prefix path runs one forward call per batch when packed (:attr:`packed`) and two
        on the KV copy (prefix, then suffixes), the unshared path one; a batch runs the vision tower
        exactly when one of its requests has images. ``grad_mode`` is ``"inference"`` (``torch.inference_mode``) or ``"no_grad"``: a
        sharded model (FSDP, DeepSpeed ZeRO-3) that goes on training afterwards must not be run in
        inference mode, whose tensors its parameter gathering would keep.
        """
        if grad_mode not in ("inference", "no_grad"):
            raise ValueError(f"grad_mode {grad_mode!r} is not 'inference' or 'no_grad'")
        was_training = self.model.training
        _eval_mode(self.model)
        try:
            for batch in batches:
                with torch.inference_mode() if grad_mode == "inference" else torch.no_grad():
                    if not share_prefix:
                        scores = self._unshared(batch)
                    elif self.packed:
                        scores = self._packed_or_fallback(batch)
                    else:
                        scores = self._shared(batch)
                yield [(e.request, s) for e, s in zip(batch, scores, strict=True)]
        finally:
            self.model.train(was_training)

    def _forward_logits(self, positions: torch.Tensor | None = None, **inputs) -> torch.Tensor:
        """The next-token logits in float32 at the last position of each row, or (one row) at
        ``positions``: from the model's own final norm and LM head re-run in float32 on the hidden state
        where that is possible (:class:`Float32Head`), else the model's logits upcast."""
        keep: int | torch.Tensor = 1 if positions is None else positions
        head = self._head
        if head is None or not head.usable:
            return _rows(self.model(**inputs, logits_to_keep=keep).logits, positions).float()
        with head.capture(positions) as captured:
            out = self.model(**inputs, logits_to_keep=keep)
        with _span("judge.readout_float32"):
            return head.logits(captured[0], _rows(out.logits, positions))

    def _readout(self, logits: torch.Tensor) -> list[tuple[list[float], float]]:
        logp = torch.log_softmax(logits.float(), dim=-1)
        scale = logp[:, self.score_ids]
        mass = scale.exp().sum(-1)
        probs = torch.softmax(scale.double(), dim=-1)
        return [(p.tolist(), float(m)) for p, m in zip(probs, mass, strict=True)]

    def _make(self, dist: list[float], mass: float, n_tokens: int) -> CriterionScore:
        expected = float(sum(p * v for p, v in zip(dist, self.values, strict=True)))
        best = max(range(len(dist)), key=lambda i: dist[i])
        return CriterionScore(expected, self.values[best], dist, mass, n_tokens)

    def _pixels(self, batch: Sequence[Encoded]) -> torch.Tensor | None:
        pv = [e.pixel_values for e in batch if e.pixel_values is not None]
        if not pv:
            return None
        return cat_pixel_values(pv).to(self.device, dtype=_float_dtype(self.model))

    def _vision(self, batch: Sequence[Encoded], per_criterion: bool = False) -> dict[str, Any]:
        """The forward's image inputs for ``batch`` (each request's once, or once per criterion sequence):
        ``pixel_values`` (None without images) and the family's other per-image inputs."""
        reps = [len(e.input_ids) if per_criterion else 1 for e in batch]
        pv = [
            e.pixel_values
            for e, n in zip(batch, reps, strict=True)
            for _ in range(n)
            if e.pixel_values is not None
        ]
        pixels = cat_pixel_values(pv).to(self.device, dtype=_float_dtype(self.model)) if pv else None
        out: dict[str, Any] = {"pixel_values": pixels}
        for k in {k for e in batch for k in e.vision_extra}:
            out[k] = torch.cat(
                [
                    e.vision_extra[k]
                    for e, n in zip(batch, reps, strict=True)
                    for _ in range(n)
                    if k in e.vision_extra
                ]
            ).to(self.device)
        return out

    def _unshared(self, batch: Sequence[Encoded]) -> list[list[CriterionScore]]:
        seqs = [ids for e in batch for ids in e.input_ids]
        input_ids, mask = _left_pad(seqs, self.pad_id)
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        if batch[0].positions is not None:
            position_ids = _left_pad_positions([x for e in batch for x in e.positions or []], mask.shape[1])
        else:
            position_ids = _positions(mask)
        with _span("judge.unshared_pass"):
            # Each criterion sequence carries its own copy of the images' pixels.
            logits = self._forward_logits(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=position_ids.to(self.device),
                use_cache=False,
                **self._vision(batch, per_criterion=True),
                **forward_inputs(self.processor, input_ids),
            )
        with _span("judge.readout"):
            reads = iter(self._readout(logits))
        return [[self._make(*next(reads), len(ids)) for ids in e.input_ids] for e in batch]

    def _shared(self, batch: Sequence[Encoded]) -> list[list[CriterionScore]]:
        # 1. Prefixes (with every image) once per response, left-padded; a criterion prompt equal to the
        #    prefix would leave no suffix token to run, so one is kept back (kept_prefix_len).
        prefixes = [e.input_ids[0][: kept_prefix_len(e)] for e in batch]
        p_ids, p_mask = _left_pad(prefixes, self.pad_id)
        p_ids, p_mask = p_ids.to(self.device), p_mask.to(self.device)
        cache = prefix_cache(self.model)
        cache_arg: dict[str, Any] = {self._cache_kw: cache}
        multi_axis = batch[0].positions is not None
        if multi_axis:
            p_pos = _left_pad_positions(
                [e.positions[0][:, : len(p)] for e, p in zip(batch, prefixes, strict=True) if e.positions],
                p_mask.shape[1],
            ).to(self.device)
        else:
            p_pos = _positions(p_mask)
        with _span("judge.prefix_pass"):
            self.model(
                input_ids=p_ids,
                attention_mask=p_mask,
                position_ids=p_pos,
                use_cache=True,
                **self._vision(batch),
                **forward_inputs(self.processor, p_ids),
                logits_to_keep=1,
                **cache_arg,
            )
        # 2. Each criterion's suffix on a copy of its response's cache; suffixes left-padded, so the
        #    padding sits between prefix and suffix, masked, and every last position is real.
        rows, suffixes = [], []
        for r, (e, p) in enumerate(zip(batch, prefixes, strict=True)):
            for ids in e.input_ids:
                rows.append(r)
                suffixes.append(ids[len(p) :])
        index = torch.tensor(rows, device=self.device)
        with _span("judge.kv_copy"):
            cache.batch_select_indices(index)
        s_ids, s_mask = _left_pad(suffixes, self.pad_id)
        s_ids, s_mask = s_ids.to(self.device), s_mask.to(self.device)
        if multi_axis:
            # The suffix's own positions in its full prompt (after an image they are not its token index).
            positions = _left_pad_positions(
                [x[:, len(p) :] for e, p in zip(batch, prefixes, strict=True) for x in e.positions or []],
                s_mask.shape[1],
            ).to(self.device)
        else:
            prefix_lens = p_mask.sum(-1)[index]
            positions = prefix_lens[:, None] + _positions(s_mask)
        mask = torch.cat([p_mask[index], s_mask], dim=1)
        mask = suffix_masks(self.model, mask, cache, p_pos, index, positions)
        with _span("judge.suffix_pass"):
            logits = self._forward_logits(
                input_ids=s_ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                **cache_arg,
            )
        with _span("judge.readout"):
            reads = iter(self._readout(logits))
        return [[self._make(*next(reads), len(ids)) for ids in e.input_ids] for e in batch]

    def _packed_or_fallback(self, batch: Sequence[Encoded]) -> list[list[CriterionScore]]:
        """:meth:`_packed`; with ``packed: auto``, a first packed pass that cannot run (FlexAttention's
        compilation failing on this machine) falls back to the KV copy for good, with a warning."""
        if self._packed_tried:
            return self._packed(batch)
        try:
            scores = self._packed(batch)
        except torch.OutOfMemoryError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure to compile or run the kernel, reported once
            logger.warning(
                f"the packed shared-prefix pass (FlexAttention) failed on {self.device} "
                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); scoring on copies of "
                "the prefix's KV cache instead (set packed: off, or JUDGE_PACKED=off, to skip the attempt)"
            )
            self.packed = False
            return self._shared(batch)
        self._packed_tried = True
        return scores

    def _packed(self, batch: Sequence[Encoded]) -> list[list[CriterionScore]]:
        """Every request of ``batch`` in one packed row, one forward pass (:mod:`judge.models.packed`)."""
        row = pack_row(batch)
        with _span("judge.block_mask"):
            mask = prefix_tree_mask(row, self.device)
        with _span("judge.packed_pass"), packed_attention(self.model):
            logits = self._forward_logits(
                positions=row.readout.to(self.device),
                input_ids=row.input_ids.to(self.device),
                attention_mask=mask,
                position_ids=row.position_ids.to(self.device),
                use_cache=False,
                **self._vision(batch),
            )
        with _span("judge.readout"):
            reads = iter(self._readout(logits))
        return [[self._make(*next(reads), len(ids)) for ids in e.input_ids] for e in batch]

    # ----------------------------------------------------------------- rationale first
    @torch.inference_mode()
    def score_with_rationale(self, request: ScoreRequest, max_new_tokens: int = 256) -> list[CriterionScore]:
        """Generate a rationale per criterion (greedy), then read the score at the score token.

        The prompt must ask for ``rationale_score`` (rationale, then ``"Score: "``). Whatever
        the model writes, the text is cut before any ``"Score:"`` it produced and
        ``"\\nScore: "`` is appended, so the score is read from the distribution at the
        score position, never parsed from text.
        """
        enc = self.encode(request)
        results = []
        was_training = self.model.training
        _eval_mode(self.model)
        try:
            # The images' inputs as the family's forward takes them (Qwen: the grid, and the token types its
            # generate places the images by); the read-out pass below leaves the positions to the model too.
            vision = {k: v.to(self.device) for k, v in enc.vision_extra.items()}
            if enc.pixel_values is not None:
                vision["pixel_values"] = enc.pixel_values.to(self.device, _float_dtype(self.model))
            for ids in enc.input_ids:
                input_ids = torch.tensor([ids], device=self.device)
                gen = self.model.generate(
                    input_ids=input_ids,
                    attention_mask=torch.ones_like(input_ids),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    **generation_inputs(self.processor, input_ids, vision),
                )
                text = self.tokenizer.decode(gen[0, len(ids) :], skip_special_tokens=True)
                rationale = text.split(SCORE_CUE.strip())[0].rstrip()
                cont = self.tokenizer(rationale + "\n" + SCORE_CUE, add_special_tokens=False)["input_ids"]
                full = torch.tensor([ids + cont], device=self.device)
                logits = self._forward_logits(
                    input_ids=full,
                    attention_mask=torch.ones_like(full),
                    use_cache=False,
                    **generation_inputs(self.processor, full, vision),
                )
                dist, mass = self._readout(logits)[0]
                s = self._make(dist, mass, len(ids))
                s.rationale = rationale
                results.append(s)
        finally:
            self.model.train(was_training)
        return results


# --------------------------------------------------------------------- encoding
def encode_request(processor, request: ScoreRequest) -> Encoded:
    """What :meth:`ExpectedScorer.encode` does, with the processor alone (no model: for worker processes)."""
    ids, vision = encode_vision(
        processor, request.prompts, request.images, request.max_patches, key=request.key
    )
    pixel_values = vision.pop("pixel_values", None)
    positions = None
    family = of_processor(processor)
    if family is not None and family.multi_axis_positions:
        grid = vision.get("image_grid_thw")
        merge = processor.image_processor.merge_size
        positions = [multi_axis_positions(x, grid, processor.image_token_id, merge) for x in ids]
    return Encoded(request, ids, pixel_values, _common_prefix_len(ids), vision, positions)


def render_prompt(processor, messages: list[dict]) -> str:
    """The prompt text up to and including the assistant header (where the score token goes)."""
    return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def encode_prompts(
    processor,
    prompts: Sequence[list[dict]],
    images: Sequence,
    max_patches: int | None = None,
    key: Any = None,
) -> tuple[list[list[int]], torch.Tensor | None]:
    """Token ids of each prompt (images expanded) and the images' pixel values, computed once.

    Used by the scorer and by training's collator alike, so both see the same tokens.
    Equal to calling the processor on each prompt (a test checks it). :func:`encode_vision` gives what else
    a family's forward takes of the images too.
    """
    ids, vision = encode_vision(processor, prompts, images, max_patches, key)
    return ids, vision.get("pixel_values")


def encode_vision(
    processor,
    prompts: Sequence[list[dict]],
    images: Sequence,
    max_patches: int | None = None,
    key: Any = None,
) -> tuple[list[list[int]], dict[str, torch.Tensor]]:
    """:func:`encode_prompts` with every image input the family's forward takes: ``pixel_values`` and, where
    the family has them (:attr:`~judge.models.families.Family.vision_inputs`), e.g. ``image_grid_thw``
    (no key at all without images)."""
    family = of_processor(processor)
    wanted = ("pixel_values", *(family.vision_inputs if family is not None else ()))
    tokenizer = getattr(processor, "tokenizer", processor)
    texts = [render_prompt(processor, m) for m in prompts]
    images = list(images)
    kwargs = {"max_patches": max_patches} if max_patches is not None else {}
    ip = getattr(processor, "image_processor", None)
    if images and ip is not None and hasattr(processor, "replace_image_token"):
        # The images are the same for every prompt: preprocess them once and expand each image
        # placeholder exactly as the processor does.
        nested = family is not None and family.nested_images  # one prompt's images: one sample
        image_inputs = ip([images] if nested else images, return_tensors="pt", **kwargs)
        token = processor.image_token
        ids = []
        for t in texts:
            pieces = t.split(token)
            if len(pieces) - 1 != len(images):
                raise JudgeError(
                    f"{key!r}: {len(pieces) - 1} image placeholders in the prompt for {len(images)} images"
                )
            out = pieces[0]
            for i, piece in enumerate(pieces[1:]):
                out += processor.replace_image_token(image_inputs, i) + piece
            ids.append(tokenizer(out, add_special_tokens=False)["input_ids"])
        return ids, frames_first(family, {k: image_inputs[k] for k in wanted if k in image_inputs})
    ids, vision = [], {}
    for t in texts:
        out = processor(
            text=[t], images=images or None, return_tensors="pt", add_special_tokens=False, **kwargs
        )
        ids.append(out["input_ids"][0].tolist())
        vision.update({k: out[k] for k in wanted if out.get(k) is not None})
    return ids, frames_first(family, vision)


# --------------------------------------------------------------------- helpers
def _common_prefix_len(seqs: list[list[int]]) -> int:
    first = seqs[0]
    n = len(first)
    for s in seqs[1:]:
        n = min(n, len(s))
        for i in range(n):
            if s[i] != first[i]:
                n = i
                break
    return n


def _left_pad(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s) :] = 1
    return ids, mask


def _left_pad_positions(positions: list[torch.Tensor], width: int) -> torch.Tensor:
    """Multi-axis positions (axes, length) of each row, left-padded to ``width``: (axes, rows, width)."""
    axes = positions[0].shape[0]
    out = torch.zeros((axes, len(positions), width), dtype=torch.long)
    for i, x in enumerate(positions):
        if x.shape[1]:
            out[:, i, width - x.shape[1] :] = x
    return out


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids counting real tokens only, so left padding does not shift a sequence."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def _rows(logits: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    """(rows, vocabulary) from a forward's logits: each row's last position, or the one row's kept positions."""
    return logits[:, -1, :] if positions is None else logits[0]


def _packed_mode(packed: str | None) -> str:
    """The ``packed`` setting as given, else as ``JUDGE_PACKED`` has it (lower case; ``auto`` when unset)."""
    import os

    if packed is not None:
        return packed
    return os.environ.get(PACKED_ENV, "auto").strip().lower() or "auto"


def _eval_mode(model) -> None:
    """``model.eval()``, except for bitsandbytes 4-bit layers on the CPU.

    In eval mode, bitsandbytes (0.50) repacks a CPU 4-bit weight for inference and never
    unpacks it, after which training the same model fails; those layers have no dropout,
    so leaving them in training mode changes no score.
    """
    model.eval()
    for m in model.modules():
        if (
            type(m).__module__.startswith("bitsandbytes")
            and getattr(m, "weight", None) is not None
            and m.weight.device.type == "cpu"
        ):
            m.training = True


def _float_dtype(model) -> torch.dtype:
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype if p.dtype in (torch.float32, torch.bfloat16, torch.float16) else torch.float32
    return torch.float32


def cache_keyword(model) -> str:
    """The keyword a model's forward takes its key-value cache by: ``cache`` from transformers 5.24 on
    (``past_key_values`` is deprecated there, to be removed in 5.40), ``past_key_values`` before.

    Read from the forward's signature, not the library's version, so a model with a forward of its own
    (remote code) gets the keyword it really has: a cache it silently ignored would score every
    criterion suffix without its prefix."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        params = inspect.signature(base.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover - a forward without a signature
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _span(name: str):
    """A named range in a ``torch.profiler`` trace (``scripts/bench_score.py --profile``); next to free
    when no profiler runs."""
    return torch.profiler.record_function(name)
