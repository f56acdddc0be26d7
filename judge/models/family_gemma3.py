"""Gemma 3's attention rules on the scorer's KV-copy path: sliding windows counted in positions.

Gemma 3 (:data:`judge.models.families.GEMMA3`) has five sliding-window layers to each global one. transformers
builds a sliding layer's mask from token *indices* (a key is seen when ``q_idx - kv_idx < window``), and
caches only the last window of a sliding layer's keys. Both are right for one unpadded row, and for a row
left-padded at its start. On the KV-copy path (:meth:`judge.models.readout.ExpectedScorer._shared`) the
suffixes are left-padded after their prefix's cache, so the padding sits between prefix and suffix: counted in
indices, a suffix token's window would end that many tokens early, and the scores would depend on the other
suffixes of the batch. Here the prefix's cache keeps every key in every layer, and the suffix pass gets its
masks (one per layer type, as the model's forward takes them) with the window counted in *positions*: what
the model's own forward on the whole unpadded prompt sees.

The images' two-way attention (Gemma 3's soft tokens of one image see each other) needs nothing here: the
images are in the prefix, whose pass takes the token types (:func:`judge.models.families.forward_inputs`);
a suffix holds no image token, and a text token sees every earlier image token either way.

Any model whose text config has ``sliding_attention`` layers gets the same treatment; the others keep the
cache and mask they had.
"""

from __future__ import annotations

from typing import Any

import torch

from judge.models.packed import text_config


def sliding_window(model) -> int | None:
    """The window of ``model``'s sliding-window layers; None when it has none."""
    cfg = text_config(model)
    window = getattr(cfg, "sliding_window", None)
    return window if window and "sliding_attention" in (getattr(cfg, "layer_types", None) or ()) else None


def prefix_cache(model):
    """An empty key-value cache for a shared prefix: the model's own, except that with sliding-window layers
    every layer keeps all its keys (a suffix reads its window by positions, :func:`suffix_masks`)."""
    from transformers import DynamicCache

    return DynamicCache() if sliding_window(model) is not None else DynamicCache(config=text_config(model))


def suffix_masks(
    model,
    mask: torch.Tensor,
    cache,
    prefix_positions: torch.Tensor,
    index: torch.Tensor,
    suffix_positions: torch.Tensor,
) -> Any:
    """The suffix pass's attention mask: ``mask`` (the 2-D padding mask of the prefix's cache then the
    suffixes) unchanged for a model without sliding-window layers; with them, the masks per layer type,
    the sliding one seeing a key when the query's position is less than the window past the key's.

    ``cache`` holds the prefixes (one copy per suffix row, from :func:`prefix_cache`), ``prefix_positions`` (prefixes x prefix length) are the prefixes' positions, ``index`` the prefix of each
    suffix row, ``suffix_positions`` (rows x suffix length) the suffixes' positions in their prompts."""
    window = sliding_window(model)
    if window is None:
        return mask
    from transformers.masking_utils import create_causal_mask

    cfg = text_config(model)
    positions = torch.cat([prefix_positions[index], suffix_positions], dim=1)
    queries = torch.empty(
        (*suffix_positions.shape, 1), dtype=next(model.parameters()).dtype, device=suffix_positions.device
    )

    def within_window(batch_idx, head_idx, q_idx, kv_idx):
        return positions[batch_idx, q_idx] - positions[batch_idx, kv_idx] < window

    kw = {"config": cfg, "inputs_embeds": queries, "attention_mask": mask, "cache": cache}
    return {
        "full_attention": create_causal_mask(**kw),
        "sliding_attention": create_causal_mask(**kw, and_mask_function=within_window),
    }
