"""CLIPScore and RefCLIPScore (Hessel et al., 2021) for interleaved text-image responses.

**Definition.** For an image ``v`` and a text ``c``::

    CLIP-S(c, v)        = 2.5 * max(cos(E_v, E_c), 0)
    RefCLIP-S(c, R, v)  = H-Mean(CLIP-S(c, v), max(max_{r in R} cos(E_c, E_r), 0))

with ``E`` the CLIP embeddings, every text prefixed with ``"A photo depicts "`` and truncated
to the text encoder's length (77 tokens for OpenAI's CLIP; the end token is kept), as in the
authors' code. The harmonic mean of two numbers of which one is 0 is 0.

**Pairs in an interleaved response.** Consecutive text segments form one text block; empty text
is ignored. Two pairings (``producer.pairing`` in each record):

* ``"neighbour"`` (default): each image is paired with the text block just before it (MMIE writes
  a step's text, then its picture); an image that no text precedes is paired with the first text
  block after it.
* ``"whole"``: each image is paired with the whole response text (all blocks joined by a space),
  which truncation then cuts to the encoder's length.

A response's score is the **mean over its pairs** of the pair's score (each pair clamped at 0
before averaging). A response without images, or with images but no text, gets ``score: null``
with ``status: "unscorable"`` and the reason; so does a response with an image that cannot be
opened (the reason names it). RefCLIPScore is written, as a second record with
``metric: "refclipscore"``, for items that carry a ``reference``: its references are the text
blocks of the reference, and the candidate text is each pair's own text.

torchmetrics' ``CLIPScore`` differs in scale and order: it reports ``max(100 * mean(cos), 0)``
(mean first, then clamp). With ``cos`` the per-pair cosines kept in each record's ``details``,
``torchmetrics / 100 * 2.5 == clipscore`` for one pair, and ``max(mean(cos), 0)`` over a batch.

**Models.** Any checkpoint ``CLIPModel`` loads, from a folder or a hub id; the image processor is
the PIL-backed ``CLIPImageProcessorPil`` (no torchvision). ``"tiny"`` (or ``"tiny:seed=N"``) is
the seeded random tiny CLIP of :mod:`judge.testing.tiny_clip`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import torch

from judge.core.errors import ConfigError, JudgeError
from judge.core.images import open_image
from judge.core.schema import AnnotationRecord, ImageSegment, PredictionRecord, ScoreRecord, TextSegment

if TYPE_CHECKING:  # transformers is imported only when a model is loaded
    from transformers import BaseImageProcessor, CLIPModel, CLIPTextConfig, PreTrainedTokenizerBase

PREFIX = "A photo depicts"
WEIGHT = 2.5
Pairing = Literal["neighbour", "whole"]
PAIRINGS: tuple[str, ...] = ("neighbour", "whole")
_TINY = re.compile(r"^tiny(?::seed=(\d+))?$")


# ----------------------------------------------------------------------------- the model


@dataclass
class ClipEncoder:
    """A CLIP model with its tokenizer and image processor; embeds texts and images, L2-normalised."""

    model: CLIPModel
    tokenizer: PreTrainedTokenizerBase
    image_processor: BaseImageProcessor
    name: str
    device: str = "cpu"

    @property
    def max_length(self) -> int:
        """Tokens the text encoder takes (its position embeddings), the limit texts are truncated to."""
        # CLIPConfig turns a dict (or None) text_config into a CLIPTextConfig; its annotation keeps all three.
        text_config = cast("CLIPTextConfig", self.model.config.text_config)
        n = int(text_config.max_position_embeddings)
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        return min(n, int(tok_max)) if isinstance(tok_max, int) and tok_max > 0 else n

    @torch.inference_mode()
    def embed_texts(self, texts: Sequence[str], batch_size: int = 32) -> torch.Tensor:
        """Normalised text embeddings of ``texts`` exactly as given (no prefix added here)."""
        out = []
        for i in range(0, len(texts), batch_size):
            enc = self.tokenizer(
                list(texts[i : i + batch_size]),
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            enc = {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
            out.append(_features(self.model.get_text_features(**enc)).float().cpu())
        return _normalise(torch.cat(out)) if out else torch.empty(0)

    @torch.inference_mode()
    def embed_images(self, images: Sequence, batch_size: int = 32) -> torch.Tensor:
        """Normalised image embeddings of PIL images."""
        out = []
        for i in range(0, len(images), batch_size):
            pix = self.image_processor(images=list(images[i : i + batch_size]), return_tensors="pt")[
                "pixel_values"
            ]
            pix = pix.to(self.device, dtype=next(self.model.parameters()).dtype)
            out.append(_features(self.model.get_image_features(pixel_values=pix)).float().cpu())
        return _normalise(torch.cat(out)) if out else torch.empty(0)


def _features(out) -> torch.Tensor:
    # transformers 5 returns a ModelOutput whose pooler_output is the projected embedding; 4.x a tensor.
    return out.pooler_output if hasattr(out, "pooler_output") else out


def _normalise(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(p=2, dim=-1, keepdim=True)


def load_clip(path_or_id: str, device: str = "cpu") -> ClipEncoder:
    """Load a CLIP checkpoint (folder or hub id) through ``CLIPModel``, or build the tiny one for ``"tiny"``.

    Weights load from safetensors only. Raises :class:`ConfigError` for a missing folder or a
    checkpoint that is not a CLIP model.
    """
    m = _TINY.match(path_or_id)
    if m:
        from judge.testing.tiny_clip import build_tiny_clip

        model, processor = build_tiny_clip(seed=int(m.group(1) or 0))
        return ClipEncoder(
            model.to(device), processor.tokenizer, processor.image_processor, path_or_id, device
        )
    from transformers import AutoConfig, AutoTokenizer, CLIPImageProcessorPil, CLIPModel

    from judge.models.sources import check_model_source

    check_model_source(path_or_id)
    try:
        config = AutoConfig.from_pretrained(path_or_id)
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the CLIP model config of {path_or_id!r}: {e}") from None
    if config.model_type != "clip":
        raise ConfigError(
            f"{path_or_id!r} is a {config.model_type!r} model; CLIPScore needs a CLIP checkpoint "
            "(model_type 'clip', e.g. openai/clip-vit-base-patch32), or 'tiny'"
        )
    model = CLIPModel.from_pretrained(path_or_id, use_safetensors=True)
    tokenizer = AutoTokenizer.from_pretrained(path_or_id)
    image_processor = CLIPImageProcessorPil.from_pretrained(path_or_id)
    # transformers wraps `.to` with functools.wraps, whose stub leaves `self` unbound.
    model = model.to(device).eval()  # type: ignore[arg-type]
    return ClipEncoder(model, tokenizer, image_processor, str(path_or_id), device)


# ----------------------------------------------------------------------------- pairs


@dataclass(frozen=True)
class Pair:
    """One image of a response and the text it is compared with."""

    image: str  #: resolved image path
    image_segment: int  #: index of the image in the response's segments
    text: str  #: the text without the prefix
    text_segments: tuple[int, ...]  #: indices of the text segments it comes from


def _text_blocks(content) -> list[tuple[tuple[int, ...], str]]:
    """Runs of consecutive non-empty text segments: (segment indices, joined text)."""
    blocks: list[tuple[list[int], list[str]]] = []
    prev_text = False
    for i, seg in enumerate(content or []):
        if isinstance(seg, TextSegment):
            t = " ".join(seg.text.split())
            if not t:
                continue
            if prev_text:
                blocks[-1][0].append(i)
                blocks[-1][1].append(t)
            else:
                blocks.append(([i], [t]))
            prev_text = True
        else:
            prev_text = False
    return [(tuple(idx), " ".join(parts)) for idx, parts in blocks]


def image_text_pairs(content, pairing: Pairing = "neighbour") -> tuple[list[Pair], str | None]:
    """The image-text pairs of a response under ``pairing``, or no pairs and the reason why.

    See the module docstring for the rules.
    """
    if pairing not in PAIRINGS:
        raise ValueError(f"unknown pairing {pairing!r}; choose {' or '.join(PAIRINGS)}")
    images = [(i, s.image) for i, s in enumerate(content or []) if isinstance(s, ImageSegment)]
    if not images:
        return [], "the response has no images; CLIPScore compares images with text"
    blocks = _text_blocks(content)
    if not blocks:
        return [], f"the response has {len(images)} image(s) but no text to compare them with"
    if pairing == "whole":
        idx = tuple(i for b in blocks for i in b[0])
        text = " ".join(b[1] for b in blocks)
        return [Pair(path, i, text, idx) for i, path in images], None
    pairs = []
    for i, path in images:
        before = [b for b in blocks if b[0][-1] < i]
        block = before[-1] if before else next(b for b in blocks if b[0][0] > i)
        pairs.append(Pair(path, i, block[1], block[0]))
    return pairs, None


def reference_texts(reference) -> list[str]:
    """The references of RefCLIPScore: the text blocks of a reference answer (none for no reference)."""
    return [t for _, t in _text_blocks(reference)]


def with_prefix(text: str) -> str:
    """The text as CLIPScore encodes it: ``"A photo depicts " + text``."""
    return f"{PREFIX} {text}"


def clip_s(cosine: float) -> float:
    """CLIP-S of one pair: ``2.5 * max(cos, 0)``."""
    return WEIGHT * max(float(cosine), 0.0)


def harmonic_mean(a: float, b: float) -> float:
    """Harmonic mean of two non-negative numbers; 0 when either is 0."""
    return 0.0 if a <= 0 or b <= 0 else 2.0 * a * b / (a + b)


def ref_clip_s(cosine: float, ref_cosines: Sequence[float]) -> float:
    """RefCLIP-S of one pair: harmonic mean of CLIP-S and the best text-reference cosine clamped at 0."""
    return harmonic_mean(clip_s(cosine), max(max(ref_cosines), 0.0))


# ----------------------------------------------------------------------------- records


@dataclass
class _Plan:
    rec: AnnotationRecord | PredictionRecord
    pairs: list[Pair] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    reason: str | None = None


def clipscore_records(
    records: Sequence[AnnotationRecord | PredictionRecord],
    clip_model: str | ClipEncoder,
    pairing: Pairing = "neighbour",
    device: str = "cpu",
    batch_size: int = 32,
) -> list[ScoreRecord]:
    """CLIPScore of every record's response (one ``metric="clipscore"`` record each, in input order),
    each record with a reference followed by its ``metric="refclipscore"`` record (RefCLIPScore does not
    apply without one; the report counts RefCLIPScore over the task families it applies to).

    ``clip_model`` is a folder, a hub id, ``"tiny"``, or an already loaded :class:`ClipEncoder`.
    Image paths must be resolved (as the loaders leave them). Each record's ``details`` lists its
    pairs with their cosines; ``producer`` names the metric, model, pairing and prefix.
    """
    if pairing not in PAIRINGS:
        raise JudgeError(f"unknown CLIPScore pairing {pairing!r}; choose {' or '.join(PAIRINGS)}")
    enc = clip_model if isinstance(clip_model, ClipEncoder) else load_clip(clip_model, device)
    plans = []
    for rec in records:
        pairs, reason = image_text_pairs(rec.response, pairing)
        plans.append(_Plan(rec, pairs, reference_texts(rec.reference), reason))

    # Open every image once; an image that cannot be used makes its response unscorable, with the reason.
    paths = list(dict.fromkeys(p.image for pl in plans for p in pl.pairs))
    images, bad = {}, {}
    for path in paths:
        try:
            images[path] = open_image(path)
        except JudgeError as e:
            bad[path] = str(e)
    for pl in plans:
        broken = [p.image for p in pl.pairs if p.image in bad]
        if broken:
            pl.reason = f"image cannot be used: {bad[broken[0]]}"
            pl.pairs = []
    good_paths = [p for p in paths if p in images]
    img_emb = dict(
        zip(good_paths, enc.embed_images([images[p] for p in good_paths], batch_size), strict=True)
    )
    for im in images.values():
        im.close()
    texts = list(
        dict.fromkeys(
            t for pl in plans for t in [*(p.text for p in pl.pairs), *(pl.refs if pl.pairs else [])]
        )
    )
    txt_emb = dict(zip(texts, enc.embed_texts([with_prefix(t) for t in texts], batch_size), strict=True))

    producer = {
        "clip_model": enc.name,
        "pairing": pairing,
        "prefix": PREFIX,
        "weight": WEIGHT,
        "aggregation": "mean over image-text pairs",
        "max_text_tokens": enc.max_length,
    }
    out: list[ScoreRecord] = []
    for pl in plans:
        rec = pl.rec
        base = dict(
            id=rec.id,
            benchmark=getattr(rec, "benchmark", None) or rec.meta.get("benchmark") or "annotations",
            task=rec.task,
            model=rec.model,
            criterion=None,
        )
        if not pl.pairs:
            out.append(
                ScoreRecord(
                    **base,
                    metric="clipscore",
                    score=None,
                    status="unscorable",
                    reason=pl.reason,
                    producer={"metric": "clipscore", **producer},
                )
            )
            if pl.refs:
                out.append(
                    ScoreRecord(
                        **base,
                        metric="refclipscore",
                        score=None,
                        status="unscorable",
                        reason=pl.reason,
                        producer={"metric": "refclipscore", **producer},
                    )
                )
            continue
        details = []
        for p in pl.pairs:
            cos = float(img_emb[p.image] @ txt_emb[p.text])
            d: dict[str, Any] = {
                "image": p.image,
                "image_segment": p.image_segment,
                "text_segments": list(p.text_segments),
                "text": p.text if len(p.text) <= 300 else p.text[:297] + "...",
                "cosine": cos,
                "score": clip_s(cos),
            }
            if pl.refs:
                d["ref_cosines"] = [float(txt_emb[p.text] @ txt_emb[r]) for r in pl.refs]
                d["refclipscore"] = ref_clip_s(cos, d["ref_cosines"])
            details.append(d)
        score = sum(d["score"] for d in details) / len(details)
        out.append(
            ScoreRecord(
                **base,
                metric="clipscore",
                score=score,
                producer={"metric": "clipscore", **producer},
                details={"n_pairs": len(details), "pairs": details},
            )
        )
        if pl.refs:
            ref_score = sum(d["refclipscore"] for d in details) / len(details)
            out.append(
                ScoreRecord(
                    **base,
                    metric="refclipscore",
                    score=ref_score,
                    producer={"metric": "refclipscore", **producer},
                    details={"n_pairs": len(details), "references": pl.refs, "pairs": details},
                )
            )
    return out


__all__ = [
    "PAIRINGS",
    "PREFIX",
    "WEIGHT",
    "ClipEncoder",
    "Pair",
    "clip_s",
    "clipscore_records",
    "harmonic_mean",
    "image_text_pairs",
    "load_clip",
    "ref_clip_s",
    "reference_texts",
    "with_prefix",
]
