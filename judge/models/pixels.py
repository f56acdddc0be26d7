"""Pixel values of several samples in one forward pass (requests of a batch, criteria, training examples).

Most families' pixel values are (tiles or patches, C, H, W) per sample and concatenate along dim 0 as they
are. LLaVA-OneVision's anyres gives (images, patches, C, H, W), each image's patches padded with zeros to the
most of its own sample, so two samples can differ in the patch axis: they are padded to the most of all of
them, with zeros, which the model drops (it keeps the patches each image's ``image_sizes`` says it has).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def cat_pixel_values(pixels: Sequence[torch.Tensor]) -> torch.Tensor:
    """``pixels`` concatenated along dim 0; per-image patch stacks (5-D) first zero-padded in the patch axis
    (dim 1) to the longest one."""
    if pixels and all(p.dim() == 5 for p in pixels):
        most = max(p.shape[1] for p in pixels)
        pixels = [
            p if p.shape[1] == most else torch.nn.functional.pad(p, (0, 0, 0, 0, 0, 0, 0, most - p.shape[1]))
            for p in pixels
        ]
    return torch.cat(list(pixels))
