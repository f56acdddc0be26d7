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
images) runs once per response, and each criterion runs only its suffix on a copy of the
prefix's key-value cache. The shared prefix is the longest common run of *token ids*
of the criterion prompts, so tokenisation is exactly that of the unshared path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from judge.core.errors import JudgeError
from judge.core.template import SCORE_CUE
from judge.models import BATCH_TOKENS
from judge.models.score_tokens import score_token_ids


@dataclass
class ScoreRequest:
    """One response to score on one or more criteria; its prompts share the images.

    ``prompts[i]`` is the chat (``[{"role": "user", ...}]``) asking for ``criteria[i]``;
    ``images`` are PIL images in placeholder order; ``max_patches`` lowers the tiles per
    image (the SFT builder records it for examples over the token budget).
    """

    key: Any
    criteria: list[str]
    prompts: list[list[dict]]
    images: list = field(default_factory=list)
    max_patches: int | None = None


@dataclass
class CriterionScore:
    """The read-out of one (response, criterion)."""

    expected: float  #: expectation of the scale values
    argmax: int  #: most probable scale value
    distribution: list[float]  #: probability of each scale value, lowest first
    scale_mass: float  #: probability the unrestricted next-token distribution puts on the scale's tokens
    num_tokens: int  #: prompt length in tokens (images expanded)
    rationale: str | None = None


@dataclass
class Encoded:
    """A request tokenised: one id list per criterion, the images' pixels once."""

    request: ScoreRequest
    input_ids: list[list[int]]
    pixel_values: torch.Tensor | None
    prefix_len: int  #: length of the token prefix every criterion shares

    @property
    def max_len(self) -> int:
        return max(len(x) for x in self.input_ids)

    @property
    def lengths(self) -> list[int]:
        """Token count of each criterion prompt."""
        return [len(x) for x in self.input_ids]

    @property
    def shape(self) -> EncodedShape:
        """What batching needs to know of this request (small enough to send between processes)."""
        return EncodedShape(tuple(self.lengths), self.prefix_len, self.pixel_values is not None)


@dataclass(frozen=True)
class EncodedShape:
    """An :class:`Encoded` request without its tokens and pixels: what :func:`plan_batches` packs by."""

    lengths: tuple[int, ...]  #: token count of each criterion prompt
    prefix_len: int
    has_pixels: bool  #: whether its forward pass runs the vision tower

    @property
    def max_len(self) -> int:
        return max(self.lengths)


class ExpectedScorer:
    """Score requests with a judge model: expected score, argmax and distribution per criterion.

    ``model`` is any image-text-to-text model (a PEFT-wrapped one too) and ``processor``
    its processor; ``values`` the rubric's scale (each value must be a single token).
    """

    def __init__(self, model, processor, values: Sequence[int], device: str | torch.device | None = None):
        self.model = model
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.values = list(values)
        self.score_ids = score_token_ids(self.tokenizer, self.values)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self._cache_kw = cache_keyword(model)
        self._head = Float32Head.find(model)

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
            _pack(encoded, share_prefix, batch_tokens, max_batch_size, max_padding),
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

        The shared-prefix path runs two forward calls per batch (prefix, then suffixes), the
        unshared path one; a batch runs the vision tower exactly when one of its requests has
        images. ``grad_mode`` is ``"inference"`` (``torch.inference_mode``) or ``"no_grad"``: a
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
                    scores = self._shared(batch) if share_prefix else self._unshared(batch)
                yield [(e.request, s) for e, s in zip(batch, scores, strict=True)]
        finally:
            self.model.train(was_training)

    def _forward_logits(self, **inputs) -> torch.Tensor:
        """The next-token logits at the last position of each row, in float32: from the model's own
        final norm and LM head re-run in float32 on the last hidden state where that is possible
        (:class:`Float32Head`), else the model's logits upcast."""
        head = self._head
        if head is None or not head.usable:
            return self.model(**inputs, logits_to_keep=1).logits[:, -1, :].float()
        with head.capture() as captured:
            out = self.model(**inputs, logits_to_keep=1)
        with _span("judge.readout_float32"):
            return head.logits(captured[0], out.logits[:, -1, :])

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
        return torch.cat(pv).to(self.device, dtype=_float_dtype(self.model))

    def _unshared(self, batch: Sequence[Encoded]) -> list[list[CriterionScore]]:
        seqs = [ids for e in batch for ids in e.input_ids]
        # Each criterion sequence carries its own copy of the images' pixels.
        pv = [e.pixel_values for e in batch for _ in e.input_ids if e.pixel_values is not None]
        pixel_values = torch.cat(pv).to(self.device, dtype=_float_dtype(self.model)) if pv else None
        input_ids, mask = _left_pad(seqs, self.pad_id)
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        with _span("judge.unshared_pass"):
            logits = self._forward_logits(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=_positions(mask),
                pixel_values=pixel_values,
                use_cache=False,
            )
        with _span("judge.readout"):
            reads = iter(self._readout(logits))
        return [[self._make(*next(reads), len(ids)) for ids in e.input_ids] for e in batch]

    def _shared(self, batch: Sequence[Encoded]) -> list[list[CriterionScore]]:
        from transformers import DynamicCache

        # 1. Prefixes (with every image) once per response, left-padded.
        prefixes = [e.input_ids[0][: e.prefix_len] for e in batch]
        # A criterion prompt equal to the prefix would leave no suffix token to run: keep one back.
        prefixes = [
            p[:-1] if any(len(x) == e.prefix_len for x in e.input_ids) else p
            for p, e in zip(prefixes, batch, strict=True)
        ]
        p_ids, p_mask = _left_pad(prefixes, self.pad_id)
        p_ids, p_mask = p_ids.to(self.device), p_mask.to(self.device)
        cache = DynamicCache(config=_text_config(self.model))
        with _span("judge.prefix_pass"):
            self.model(
                input_ids=p_ids,
                attention_mask=p_mask,
                position_ids=_positions(p_mask),
                pixel_values=self._pixels(batch),
                use_cache=True,
                logits_to_keep=1,
                **{self._cache_kw: cache},
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
        prefix_lens = p_mask.sum(-1)[index]
        positions = prefix_lens[:, None] + _positions(s_mask)
        mask = torch.cat([p_mask[index], s_mask], dim=1)
        with _span("judge.suffix_pass"):
            logits = self._forward_logits(
                input_ids=s_ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                **{self._cache_kw: cache},
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
            for ids in enc.input_ids:
                input_ids = torch.tensor([ids], device=self.device)
                pv = (
                    enc.pixel_values.to(self.device, _float_dtype(self.model))
                    if enc.pixel_values is not None
                    else None
                )
                # No pixel_values key at all for a text-only prompt: InternVL's generate fails on None.
                vision = {"pixel_values": pv} if pv is not None else {}
                gen = self.model.generate(
                    input_ids=input_ids,
                    attention_mask=torch.ones_like(input_ids),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    **vision,
                )
                text = self.tokenizer.decode(gen[0, len(ids) :], skip_special_tokens=True)
                rationale = text.split(SCORE_CUE.strip())[0].rstrip()
                cont = self.tokenizer(rationale + "\n" + SCORE_CUE, add_special_tokens=False)["input_ids"]
                full = torch.tensor([ids + cont], device=self.device)
                logits = self._forward_logits(
                    input_ids=full, attention_mask=torch.ones_like(full), pixel_values=pv, use_cache=False
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
    ids, pixel_values = encode_prompts(
        processor, request.prompts, request.images, request.max_patches, key=request.key
    )
    return Encoded(request, ids, pixel_values, _common_prefix_len(ids))


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
    Equal to calling the processor on each prompt (a test checks it).
    """
    tokenizer = getattr(processor, "tokenizer", processor)
    texts = [render_prompt(processor, m) for m in prompts]
    images = list(images)
    kwargs = {"max_patches": max_patches} if max_patches is not None else {}
    ip = getattr(processor, "image_processor", None)
    if images and ip is not None and hasattr(processor, "replace_image_token"):
        # The images are the same for every prompt: preprocess them once and expand each image
        # placeholder exactly as the processor does.
        image_inputs = ip(images, return_tensors="pt", **kwargs)
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
        return ids, image_inputs["pixel_values"]
    ids, pixel_values = [], None
    for t in texts:
        out = processor(
            text=[t], images=images or None, return_tensors="pt", add_special_tokens=False, **kwargs
        )
        ids.append(out["input_ids"][0].tolist())
        pixel_values = out.get("pixel_values", pixel_values)
    return ids, pixel_values


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


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids counting real tokens only, so left padding does not shift a sequence."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def plan_batches(
    shapes: Sequence[Encoded | EncodedShape],
    *,
    share_prefix: bool = True,
    batch_tokens: int = BATCH_TOKENS,
    max_batch_size: int = 64,
) -> list[list[int]]:
    """The forward batches :meth:`ExpectedScorer.score` forms, as lists of indices into ``shapes``.

    Deterministic: the same shapes give the same batches in every process, so distributed
    validation can plan once for all requests and hand the batches out.
    """
    return list(_pack_indices(shapes, share_prefix, batch_tokens, max_batch_size))


def _pack(
    encoded: Sequence[Encoded],
    share_prefix: bool,
    budget: int,
    max_size: int,
    max_padding: float | None = None,
) -> Iterator[list[Encoded]]:
    """Longest first, under a budget of tokens processed per forward pass, padding included."""
    for idx in _pack_indices(encoded, share_prefix, budget, max_size, max_padding):
        yield [encoded[i] for i in idx]


def _pack_indices(
    items: Sequence[Encoded | EncodedShape],
    share_prefix: bool,
    budget: int,
    max_size: int,
    max_padding: float | None = None,
) -> Iterator[list[int]]:
    order = sorted(range(len(items)), key=lambda i: -items[i].max_len)
    batch: list[int] = []
    for i in order:
        cand = batch + [i]
        members = [items[j] for j in cand]
        cost = batch_cost(members, share_prefix)
        if batch and (
            cost > budget
            or sum(len(x.lengths) for x in members) > max_size
            or (max_padding is not None and cost > (1 + max_padding) * real_tokens(members, share_prefix))
        ):
            yield batch
            cand = [i]
        batch = cand
    if batch:
        yield batch


def batch_cost(batch: Sequence[Encoded | EncodedShape], share_prefix: bool) -> int:
    """Tokens one forward batch of these requests processes, padding included (what `batch_tokens` bounds)."""
    n_seqs = sum(len(e.lengths) for e in batch)
    if not share_prefix:
        return n_seqs * max(e.max_len for e in batch)
    prefix = max(e.prefix_len for e in batch)
    suffix = max(n - e.prefix_len for e in batch for n in e.lengths)
    return len(batch) * prefix + n_seqs * (suffix + 1)


def real_tokens(batch: Sequence[Encoded | EncodedShape], share_prefix: bool) -> int:
    """The tokens of :func:`batch_cost` that are not padding."""
    if not share_prefix:
        return sum(sum(e.lengths) for e in batch)
    return sum(e.prefix_len + sum(n - e.prefix_len + 1 for n in e.lengths) for e in batch)


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


def _text_config(model):
    base = model
    for attr in ("get_base_model",):
        if hasattr(base, attr):
            base = getattr(base, attr)()
    cfg = base.config
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


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


class Float32Head:
    """A model's final norm and LM head, re-run in float32 on the hidden state of the score position.

    Why: in bfloat16 the model's own logits are rounded to 8 significant bits, a step of 1/16 to 1/8 for
    logits of 16 to 32. Two ways of computing the same score (batched or alone, shared prefix or not)
    leave hidden states that differ in their last bits; that can move a logit by a whole step, and the
    expected score with it (up to 0.107 on the 0-6 scale in the H100 run). Read in float32, the same
    hidden states give logits that differ by their own small difference only.

    How: a forward hook on the language model's final norm keeps its input at the last position; a
    float32 copy of the norm (a vector of ``d_model``) and the LM head's weight, upcast a slice of the
    vocabulary at a time, give the logits. The first read-out is checked against the model's own
    logits; a model whose head is not a plain norm-then-linear (logit scaling, soft-capping) fails that
    check and keeps its own logits, with a warning. Not used for float32 weights (nothing to gain) nor
    for weights a sharding engine holds (FSDP, DeepSpeed ZeRO-3), nor a quantized head.
    """

    #: vocabulary rows upcast at a time (32768 x 2560 x 4 bytes = 335 MB for a 4B judge)
    CHUNK = 32768

    def __init__(self, norm: torch.nn.Module, head: torch.nn.Linear):
        import copy

        self.norm = norm
        self.norm32 = copy.deepcopy(norm).float()
        self.head = head
        self.usable = True
        self._checked = False

    @classmethod
    def find(cls, model) -> Float32Head | None:
        """The float32 read-out of ``model``, or None where it does not apply (see the class doc)."""
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
        if type(head) is not torch.nn.Linear:
            return None
        w = head.weight
        if w.dtype not in (torch.bfloat16, torch.float16) or hasattr(w, "ds_id") or _is_dtensor(w):
            return None
        cfg = base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config
        if getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logit_scale", None):
            return None
        norm = None
        for path in ("model.language_model", "language_model", "model"):
            lm = base
            for part in path.split("."):
                lm = getattr(lm, part, None)
            norm = getattr(lm, "norm", None) if lm is not None else None
            if isinstance(norm, torch.nn.Module):
                break
        if not isinstance(norm, torch.nn.Module) or any(_is_dtensor(p) for p in norm.parameters()):
            return None
        return cls(norm, head)

    def capture(self):
        """A context in which each forward keeps the final norm's input at the last position."""
        import contextlib

        captured: list[torch.Tensor] = []

        def hook(_module, args, _output):
            captured.append(args[0][:, -1, :].detach())

        @contextlib.contextmanager
        def ctx():
            handle = self.norm.register_forward_hook(hook)
            try:
                yield captured
            finally:
                handle.remove()

        return ctx()

    def logits(self, hidden: torch.Tensor, model_logits: torch.Tensor) -> torch.Tensor:
        """Float32 logits from the final norm's input ``hidden`` (rows x d_model); ``model_logits`` are the
        model's own (checked against once, and returned when the check fails)."""
        h = self.norm32(hidden.float())
        w = self.head.weight
        out = torch.empty(h.shape[0], w.shape[0], dtype=torch.float32, device=h.device)
        for i in range(0, w.shape[0], self.CHUNK):
            out[:, i : i + self.CHUNK] = h @ w[i : i + self.CHUNK].float().T
        if self.head.bias is not None:
            out += self.head.bias.float()
        if not self._checked:
            self._checked = True
            ref = model_logits.float()
            err = float((out - ref).abs().max())
            tol = 0.05 * (1.0 + float(ref.abs().max()))
            if not err <= tol:
                import logging

                logging.getLogger(__name__).warning(
                    f"the float32 read-out differs from the model's own logits by {err:.3g} (over {tol:.3g}): "
                    "this model's head is not a plain norm then linear layer; reading its own logits instead"
                )
                self.usable = False
                return ref
        return out


def _is_dtensor(t: torch.Tensor) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch without distributed
        return False
    return isinstance(t, DTensor) or isinstance(getattr(t, "data", None), DTensor)


def _span(name: str):
    """A named range in a ``torch.profiler`` trace (``scripts/bench_score.py --profile``); next to free
    when no profiler runs."""
    return torch.profiler.record_function(name)
