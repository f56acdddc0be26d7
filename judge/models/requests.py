"""What the read-out takes and gives: a score request, its encoded form, the score of one criterion.

Plain data, in a module of its own so that the read-out (:mod:`judge.models.readout`) and the packed
forward pass (:mod:`judge.models.packed`) can both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


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
    #: what the family's forward takes beside the pixels, per image, concatenated as they are
    #: (Qwen2.5-VL: ``image_grid_thw``); empty for InternVL
    vision_extra: dict[str, torch.Tensor] = field(default_factory=dict)
    #: per criterion, its tokens' multi-axis rotary positions (axes, tokens), where the family has them
    #: (Qwen2.5-VL's M-RoPE); None: a token's position is its index
    positions: list[torch.Tensor] | None = None

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
