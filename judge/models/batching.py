"""How the read-out groups encoded requests into forward passes, and what each pass costs in tokens.

Three layouts (see :mod:`judge.models.readout` and :mod:`judge.models.packed`):

* unshared: every criterion prompt is a row, left-padded to the longest of the batch;
* shared, KV copy: the prefixes are rows padded to the longest prefix, then every criterion's suffix is a
  row padded to the longest suffix, on a copy of its prefix's cache;
* shared, packed: the requests' prefixes and suffixes laid end to end in one row, nothing padded.

Batches are formed longest first under a budget of tokens processed per forward pass (padding included)
and a number of sequences (criterion prompts); a single request over the budget still runs, alone.
Deterministic: the same shapes give the same batches in every process, so distributed validation can
plan once for all requests and hand the batches out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, TypeVar

from judge.models import BATCH_TOKENS


class Shaped(Protocol):
    """What batching reads of a request (:class:`~judge.models.readout.Encoded` or its ``EncodedShape``)."""

    @property
    def lengths(self) -> Sequence[int]: ...  #: token count of each criterion prompt

    @property
    def prefix_len(self) -> int: ...  #: the token prefix every criterion shares

    @property
    def max_len(self) -> int: ...


T = TypeVar("T", bound=Shaped)


def kept_prefix_len(e: Shaped) -> int:
    """The prefix a shared path runs once: the common token prefix, less one token when a criterion prompt
    is the prefix itself (that criterion would have no suffix token to read its score at)."""
    return e.prefix_len - 1 if any(n == e.prefix_len for n in e.lengths) else e.prefix_len


def packed_tokens(e: Shaped) -> int:
    """The tokens a request takes in a packed row: its prefix once, then each criterion's suffix."""
    p = kept_prefix_len(e)
    return p + sum(n - p for n in e.lengths)


def plan_batches(
    shapes: Sequence[Shaped],
    *,
    share_prefix: bool = True,
    batch_tokens: int = BATCH_TOKENS,
    max_batch_size: int = 64,
    packed: bool = False,
) -> list[list[int]]:
    """The forward batches :meth:`~judge.models.readout.ExpectedScorer.score` forms, as lists of indices
    into ``shapes`` (``packed``: the packed layout's rows, which only a shared prefix has)."""
    return list(pack_indices(shapes, share_prefix, batch_tokens, max_batch_size, packed=packed))


def pack(
    encoded: Sequence[T],
    share_prefix: bool,
    budget: int,
    max_size: int,
    max_padding: float | None = None,
    packed: bool = False,
) -> Iterator[list[T]]:
    """Longest first, under a budget of tokens processed per forward pass, padding included."""
    for idx in pack_indices(encoded, share_prefix, budget, max_size, max_padding, packed=packed):
        yield [encoded[i] for i in idx]


def pack_indices(
    items: Sequence[Shaped],
    share_prefix: bool,
    budget: int,
    max_size: int,
    max_padding: float | None = None,
    packed: bool = False,
) -> Iterator[list[int]]:
    """:func:`pack` as lists of indices into ``items``."""
    order = sorted(range(len(items)), key=lambda i: -items[i].max_len)
    batch: list[int] = []
    for i in order:
        cand = batch + [i]
        members = [items[j] for j in cand]
        cost = batch_cost(members, share_prefix, packed)
        if batch and (
            cost > budget
            or sum(len(x.lengths) for x in members) > max_size
            or (
                max_padding is not None
                and cost > (1 + max_padding) * real_tokens(members, share_prefix, packed)
            )
        ):
            yield batch
            cand = [i]
        batch = cand
    if batch:
        yield batch


def batch_cost(batch: Sequence[Shaped], share_prefix: bool, packed: bool = False) -> int:
    """Tokens one forward batch of these requests processes, padding included (what `batch_tokens` bounds)."""
    if share_prefix and packed:
        return sum(packed_tokens(e) for e in batch)
    n_seqs = sum(len(e.lengths) for e in batch)
    if not share_prefix:
        return n_seqs * max(e.max_len for e in batch)
    prefix = max(e.prefix_len for e in batch)
    suffix = max(n - e.prefix_len for e in batch for n in e.lengths)
    return len(batch) * prefix + n_seqs * (suffix + 1)


def real_tokens(batch: Sequence[Shaped], share_prefix: bool, packed: bool = False) -> int:
    """The tokens of :func:`batch_cost` that are not padding."""
    if share_prefix and packed:
        return batch_cost(batch, share_prefix, packed)
    if not share_prefix:
        return sum(sum(e.lengths) for e in batch)
    return sum(e.prefix_len + sum(n - e.prefix_len + 1 for n in e.lengths) for e in batch)
