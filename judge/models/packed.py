"""Shared-prefix scoring in one packed forward pass: a prefix-tree attention mask (FlexAttention).

The KV-copy path (:meth:`judge.models.readout.ExpectedScorer._shared`) runs a batch's prefixes, copies
each prefix's key-value cache once per criterion and runs the suffixes on the copies, every stage padded
to its longest row. Here the requests of a forward batch are laid end to end in one row, nothing padded::

    [prefix 1][suffix 1.1][suffix 1.2]...[prefix 2][suffix 2.1]...

Position ids restart after the prefix for every suffix (suffix ``i`` of a prefix of ``p`` tokens runs at
positions ``p, p + 1, ...``, as on top of the prefix's cache), and a block mask lets a token see the
tokens before it in its own segment and, in a suffix, its own request's prefix: a prefix tree of depth
two per request, the requests side by side (document masking). The score of each criterion is read at
its suffix's last token. One forward pass per row: no cache to copy, no padding, the images of every
request run once, in the same pass.

The mask is a FlexAttention ``BlockMask`` (``torch.nn.attention.flex_attention``), and attention runs in
``flex_attention`` compiled once with dynamic shapes (:func:`flex_attention_compiled`), so that it skips
the blocks no token of a row sees (other requests, other suffixes) instead of computing and masking them.
The language model is switched to it for the packed pass only (:func:`packed_attention`): the vision
tower and every other forward pass keep the model's own attention.

Which path scores is one setting, ``packed`` (:data:`PACKED_MODES`): ``flex`` asks for this one (an
error where it cannot run), ``off`` for the KV-copy path, ``auto`` (the default) takes this one on a CUDA
GPU when FlexAttention is there and the model is not sharded (FSDP, DeepSpeed ZeRO-3), else the KV copy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from judge.core.errors import ConfigError
from judge.models.batching import kept_prefix_len
from judge.models.families import of_model
from judge.models.float32_head import _is_dtensor
from judge.models.pixels import cat_pixel_values
from judge.models.requests import Encoded

logger = logging.getLogger(__name__)

#: Values of the ``packed`` setting.
PACKED_MODES = ("auto", "flex", "off")
#: The environment variable that sets ``packed`` where no caller passes it (judge-serve, training's validation).
PACKED_ENV = "JUDGE_PACKED"
#: The name the packed attention function is registered under in transformers' ``AttentionInterface``.
ATTENTION_NAME = "judge_prefix_tree"


@dataclass
class PackedRow:
    """Requests laid end to end in one row: token ids, positions, and what the mask and read-out need."""

    input_ids: torch.Tensor  #: (1, L)
    position_ids: torch.Tensor  #: (1, L), or (axes, 1, L) for multi-axis rotary positions
    segment: torch.Tensor  #: (L,) int32: one id per prefix and per suffix, unique in the row
    request: torch.Tensor  #: (L,) int32: which request of the row each token belongs to
    in_prefix: torch.Tensor  #: (L,) bool: whether each token is in its request's prefix
    readout: torch.Tensor  #: (criteria,) the last position of each suffix, request by request
    pixel_values: torch.Tensor | None

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[1])


def pack_row(batch: Sequence[Encoded]) -> PackedRow:
    """The packed row of ``batch`` (its requests in order, each its prefix then its criteria's suffixes)."""
    ids: list[int] = []
    pos: list[int] = []
    seg: list[int] = []
    req: list[int] = []
    pre: list[bool] = []
    readout: list[int] = []
    axes: list[torch.Tensor] = []  # multi-axis positions (Qwen's M-RoPE), where the requests have them
    n_seg = 0
    for r, e in enumerate(batch):
        p = kept_prefix_len(e)
        ids += e.input_ids[0][:p]
        pos += range(p)
        if e.positions is not None:
            axes.append(e.positions[0][:, :p])
            axes += [x[:, p:] for x in e.positions]
        seg += [n_seg] * p
        req += [r] * p
        pre += [True] * p
        n_seg += 1
        for x in e.input_ids:
            s = len(x) - p
            ids += x[p:]
            pos += range(p, p + s)
            seg += [n_seg] * s
            req += [r] * s
            pre += [False] * s
            readout.append(len(ids) - 1)
            n_seg += 1
    pv = [e.pixel_values for e in batch if e.pixel_values is not None]
    return PackedRow(
        input_ids=torch.tensor([ids], dtype=torch.long),
        # (1, L), or (axes, 1, L): a suffix's multi-axis positions are its own in its full prompt
        position_ids=torch.cat(axes, dim=1)[:, None, :] if axes else torch.tensor([pos], dtype=torch.long),
        segment=torch.tensor(seg, dtype=torch.int32),
        request=torch.tensor(req, dtype=torch.int32),
        in_prefix=torch.tensor(pre, dtype=torch.bool),
        readout=torch.tensor(readout, dtype=torch.long),
        pixel_values=cat_pixel_values(pv) if pv else None,
    )


def prefix_tree_mask_mod(segment: torch.Tensor, request: torch.Tensor, in_prefix: torch.Tensor):
    """The mask as a FlexAttention ``mask_mod``: a query sees the keys before it (causal) that are in its own
    segment or in its own request's prefix."""

    def mask_mod(b, h, q, kv):
        same_segment = segment[q] == segment[kv]
        own_prefix = in_prefix[kv] & (request[q] == request[kv])
        return (kv <= q) & (same_segment | own_prefix)

    return mask_mod


#: FlexAttention's block size (its default): the mask is kept per 128 x 128 block of query and key tokens.
BLOCK = 128


def prefix_tree_mask(row: PackedRow, device: torch.device):
    """The row's ``BlockMask`` on ``device``: for every 128 x 128 block of queries and keys, whether no query
    sees any key (skipped), every query sees every key (no mask to evaluate), or some do (the mask function
    decides per token).

    Built from the mask's structure rather than by evaluating the mask function on every (query, key) pair,
    as ``create_block_mask`` does (seconds for a row of a few thousand tokens on a CPU): what a query sees is
    two runs of keys, its own segment up to itself and its request's prefix, so a block's kind follows from
    the runs' ends, in ``rows x blocks`` operations."""
    from torch.nn.attention.flex_attention import BlockMask

    n = row.length
    seg = row.segment.to(device)
    req = row.request.to(device)
    pre = row.in_prefix.to(device)
    idx = torch.arange(n, device=device)
    starts = torch.ones(n, dtype=torch.bool, device=device)
    starts[1:] = seg[1:] != seg[:-1]
    # First token of each token's segment, and of its request (its prefix starts the request).
    seg_start = torch.cummax(torch.where(starts, idx, 0), 0).values
    req_starts = torch.ones(n, dtype=torch.bool, device=device)
    req_starts[1:] = req[1:] != req[:-1]
    req_start = torch.cummax(torch.where(req_starts, idx, 0), 0).values
    # The request's prefix ends where its first suffix starts: the first token not in the prefix.
    prefix_len = torch.zeros(n, dtype=torch.long, device=device).index_add_(0, req.long(), pre.long())
    prefix_end = req_start + prefix_len[req.long()]  # exclusive
    # Run 1: [seg_start, q]; run 2: [req_start, min(prefix_end - 1, q)] (a prefix token's lies in its run 1).
    n_blocks = (n + BLOCK - 1) // BLOCK
    k0 = torch.arange(n_blocks, device=device) * BLOCK
    k1 = torch.clamp(k0 + BLOCK, max=n) - 1  # last key of each block
    a1, b1 = seg_start[:, None], idx[:, None]
    a2, b2 = req_start[:, None], torch.minimum(prefix_end - 1, idx)[:, None]  # causal in the prefix too
    lo, hi = k0[None, :], k1[None, :]
    any_row = (torch.maximum(a1, lo) <= torch.minimum(b1, hi)) | (
        torch.maximum(a2, lo) <= torch.minimum(b2, hi)
    )
    full_row = ((a1 <= lo) & (hi <= b1)) | ((a2 <= lo) & (hi <= b2))
    # The last query block's missing rows see nothing (as create_block_mask has it).
    pad = n_blocks * BLOCK - n
    any_row = torch.nn.functional.pad(any_row, (0, 0, 0, pad), value=False)
    full_row = torch.nn.functional.pad(full_row, (0, 0, 0, pad), value=False)
    any_block = any_row.view(n_blocks, BLOCK, n_blocks).any(1)
    full_block = full_row.view(n_blocks, BLOCK, n_blocks).all(1)
    partial = any_block & ~full_block

    def sparse(flags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        order = torch.argsort(flags.to(torch.int8), dim=-1, descending=True, stable=True)
        return flags.sum(-1).to(torch.int32)[None, None], order.to(torch.int32)[None, None]

    kv_num, kv_idx = sparse(partial)
    full_num, full_idx = sparse(full_block)
    return BlockMask.from_kv_blocks(
        kv_num,
        kv_idx,
        full_num,
        full_idx,
        BLOCK_SIZE=BLOCK,
        mask_mod=prefix_tree_mask_mod(seg, req, pre),
        seq_lengths=(n, n),
    )


def dense_mask(row: PackedRow) -> torch.Tensor:
    """The same mask as an (L, L) boolean matrix (True: may attend): for tests and inspection."""
    q = torch.arange(row.length)[:, None]
    kv = torch.arange(row.length)[None, :]
    return prefix_tree_mask_mod(row.segment, row.request, row.in_prefix)(0, 0, q, kv)


# --------------------------------------------------------------------- attention
_COMPILED: Any = None


def flex_attention_compiled():
    """``flex_attention`` compiled once per process with dynamic shapes (rows of any length reuse it).

    Uncompiled, FlexAttention materialises every query-key score (slow, and the memory of a dense mask);
    compiled, it is a fused kernel that skips the masked blocks: Triton on a GPU, C++ on the CPU (the
    first call compiles, tens of seconds on a small CPU; later processes reuse inductor's on-disk cache)."""
    global _COMPILED
    if _COMPILED is None:
        from torch.nn.attention.flex_attention import flex_attention

        _COMPILED = torch.compile(flex_attention, dynamic=True)
    return _COMPILED


def _prefix_tree_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **_kwargs):
    """transformers' attention-function signature: ``query`` (B, H, L, D), ``key``/``value`` (B, H_kv, L, D),
    ``attention_mask`` the row's ``BlockMask``; returns (B, L, H, D) and no attention weights."""
    from torch.nn.attention.flex_attention import BlockMask

    if not isinstance(attention_mask, BlockMask):
        raise TypeError(f"the packed attention needs a BlockMask, got {type(attention_mask).__name__}")
    gqa = query.shape[1] != key.shape[1]
    if gqa and query.shape[1] & (query.shape[1] - 1):
        # As transformers' own flex path: a head count that is not a power of two gets its key-value heads
        # repeated instead of FlexAttention's grouped-query mode.
        rep = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(rep, dim=1)
        value = value.repeat_interleave(rep, dim=1)
        gqa = False
    out = flex_attention_compiled()(
        query, key, value, block_mask=attention_mask, scale=scaling, enable_gqa=gqa
    )
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    from transformers import AttentionInterface

    if ATTENTION_NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION_NAME, _prefix_tree_attention)


def text_config(model):
    """The language model's config (the one its attention layers read), through PEFT's wrapper."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = base.config
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


@contextlib.contextmanager
def packed_attention(model) -> Iterator[None]:
    """Within: the language model's attention layers run :func:`_prefix_tree_attention` (they read their
    config's implementation at each call); after, what they ran before. The vision tower keeps its own.

    Not for concurrent forward passes of one model: the scorer's callers run one at a time (judge-serve
    holds a lock while the model runs)."""
    _register()
    cfg = text_config(model)
    before = cfg._attn_implementation_internal
    cfg._attn_implementation_internal = ATTENTION_NAME
    try:
        yield
    finally:
        cfg._attn_implementation_internal = before


# --------------------------------------------------------------------- which path
def flex_unavailable(device: torch.device) -> str | None:
    """Why the packed path cannot run on ``device`` here, or None."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: F401
    except ImportError:
        return f"needs torch.nn.attention.flex_attention (torch >= 2.5; this is {torch.__version__})"
    if device.type == "cuda":
        try:
            import triton  # noqa: F401
        except ImportError:
            return "needs Triton on a CUDA GPU (torch's CUDA wheels bring it)"
        return None
    if device.type == "cpu":
        if not any(shutil.which(cc) for cc in ("c++", "g++", "clang++")):
            return "needs a C++ compiler on the CPU (torch.compile builds FlexAttention's kernel)"
        return None
    return f"runs on a CUDA GPU or the CPU, not {device.type}"


def _sharded(model) -> bool:
    return any(hasattr(p, "ds_id") or _is_dtensor(p) for p in model.parameters())


def resolve_packed(mode: str | None, model, device: torch.device) -> bool:
    """Whether the scorer of ``model`` on ``device`` uses the packed path for a shared prefix.

    ``mode``: one of :data:`PACKED_MODES`; None reads ``JUDGE_PACKED`` (default ``auto``). ``flex`` where
    the packed path cannot run is a :class:`ConfigError` saying why."""
    if mode is None:
        raw = os.environ.get(PACKED_ENV, "auto")
        mode = raw.strip().lower() or "auto"
        source = f"{PACKED_ENV}={raw}"
    else:
        source = f"packed={mode}"
    if mode not in PACKED_MODES:
        raise ConfigError(f"{source} is not one of {', '.join(PACKED_MODES)}")
    if mode == "off":
        return False
    why = flex_unavailable(device)
    family = of_model(model)
    if why is None and family is not None and family.packed_refusal is not None:
        why = family.packed_refusal
    if why is None and _sharded(model):
        why = "does not run on a sharded model (FSDP, DeepSpeed ZeRO-3)"
    if mode == "flex":
        if why is not None:
            raise ConfigError(f"{source}: the packed shared-prefix path {why}; use auto or off")
        return True
    # auto: on a GPU, where the KV copies and padding cost the most; the CPU keeps the KV-copy path.
    return why is None and device.type == "cuda"
