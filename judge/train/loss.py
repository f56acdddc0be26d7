"""The training loss on the label positions only.

A judge's completion is a few tokens (the score and the end of turn; a rationale at most a few
hundred), while its prompt, images expanded, runs to thousands. The stock causal-LM loss runs the
language-model head on every position: for a 150k-token vocabulary that is about 10% of a 4B
model's training FLOPs and, in float32 for the loss, several GB of logits per batch, for positions
whose labels are all ignored. Here the batch is right-aligned (left padding, explicit position ids,
so the model sees the same sequences), every completion ends in the last column, and the head runs
on the last ``k + 1`` positions only, ``k`` being the longest completion of the batch.

The value equals the stock loss (``model(**batch).loss``) on the same examples: the mean over the
label tokens, or their sum divided by ``num_items_in_batch`` when the trainer gives it (gradient
accumulation), as transformers' causal-LM loss does.

A packed batch (one row of examples end to end, ``position_ids`` restarting per example and no
``attention_mask``: :func:`judge.train.collator.pack_examples`) runs the head on exactly the positions
that predict a label, given to the model as a tensor of positions (``logits_to_keep``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def right_align(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Move each row's tokens to the right end (left padding) and add position ids that count real tokens."""
    mask = batch["attention_mask"]
    width = mask.shape[1]
    shift = width - mask.sum(1)
    idx = (torch.arange(width, device=mask.device)[None, :] - shift[:, None]) % width
    out = dict(batch)
    for key in ("input_ids", "attention_mask", "labels"):
        out[key] = batch[key].gather(1, idx)
    if batch.get("position_ids") is not None and batch["position_ids"].ndim == 3:
        # Multi-axis positions (a family's M-RoPE, one per token from the collator) move with their tokens.
        pos = batch["position_ids"]
        out["position_ids"] = pos.gather(2, idx[None].expand(pos.shape[0], -1, -1))
        return out
    out["position_ids"] = (out["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    return out


def labels_only_loss(
    model,
    batch: dict[str, torch.Tensor],
    num_items_in_batch: int | torch.Tensor | None = None,
    *,
    fused: bool = False,
):
    """Cross-entropy on the label positions of a right-aligned batch (:func:`right_align`), the LM head run
    on the last ``k + 1`` positions only. Returns ``(loss, outputs)``.

    ``fused``: liger-kernel's fused linear cross-entropy takes the LM head's input and weight and never holds
    the float32 logits of the label positions (``k`` of them per row: for a rationale target, hundreds of
    150k-wide rows); ``outputs.logits`` is then empty. Its Triton kernel needs a GPU (or Triton's
    interpreter). Not for a head whose weight a sharding engine holds (FSDP, ZeRO-3): read outside the
    head's forward, it is a shard."""
    labels = batch["labels"]
    inputs = {key: v for key, v in batch.items() if key != "labels"}
    if is_packed(batch):
        return _packed_loss(model, inputs, labels, num_items_in_batch, fused)
    has = (labels != IGNORE_INDEX).any(0).nonzero()
    k = int(labels.shape[1] - has[0, 0]) if len(has) else 1
    if fused:
        total, out = _fused_sum(model, inputs, labels[:, -k:], k)
        target = labels[:, -k:]
    else:
        out = model(**inputs, logits_to_keep=k + 1, use_cache=False)
        logits = out.logits[:, :-1, :].float()  # position t predicts token t + 1
        target = labels[:, -k:].to(logits.device)
        total = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            target.reshape(-1),
            ignore_index=IGNORE_INDEX,
            reduction="sum",
        )
    if num_items_in_batch is None:
        denom = (target != IGNORE_INDEX).sum().clamp(min=1)
    else:
        denom = torch.as_tensor(num_items_in_batch, device=total.device)
    return total / denom, out


def is_packed(batch: dict[str, torch.Tensor]) -> bool:
    """Whether ``batch`` is a packed row (:func:`judge.train.collator.pack_examples`)."""
    return "attention_mask" not in batch and "position_ids" in batch and batch["input_ids"].shape[0] == 1


def _packed_loss(model, inputs, labels, num_items_in_batch, fused: bool):
    """:func:`labels_only_loss` of a packed row: the head on the positions before each label token."""
    label_at = (labels[0] != IGNORE_INDEX).nonzero()[:, 0]
    if len(label_at) == 0:
        raise ValueError("a packed training row without a label token: nothing to learn from")
    keep = label_at - 1  # position t predicts token t + 1; a label never starts an example (its prompt does)
    target = labels[0, label_at]
    if fused:
        total, out = _fused_sum(model, inputs, target, keep)
    else:
        out = model(**inputs, logits_to_keep=keep, use_cache=False)
        logits = out.logits[0].float()
        total = F.cross_entropy(logits, target.to(logits.device), reduction="sum")
    denom = (
        torch.as_tensor(len(label_at), device=total.device)
        if num_items_in_batch is None
        else torch.as_tensor(num_items_in_batch, device=total.device)
    )
    return total / denom, out


def output_head(model) -> torch.nn.Module:
    """The LM head of a model, through the wrappers training puts around it (DDP, PEFT)."""
    base = getattr(model, "module", model)  # DistributedDataParallel
    base = base.get_base_model() if hasattr(base, "get_base_model") else base
    head = base.get_output_embeddings()
    if head is None:
        raise ValueError(f"{type(base).__name__} has no output embeddings (LM head) to fuse the loss with")
    return head


def _fused_sum(model, inputs: dict[str, torch.Tensor], target: torch.Tensor, k: int | torch.Tensor):
    """The summed cross-entropy of the last ``k`` positions (or, a packed row, of the positions ``k``, a
    tensor) through liger-kernel's fused linear cross-entropy.

    The model runs its own forward (so DDP and PEFT see an ordinary call); a hook on the LM head keeps the
    head's input and replaces its logits by an empty tensor."""
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    head = output_head(model)
    kept: list[torch.Tensor] = []

    def hook(_module, args, output):
        kept.append(args[0])
        return output[..., :0]

    handle = head.register_forward_hook(hook)
    packed = isinstance(k, torch.Tensor)
    try:
        out = model(**inputs, logits_to_keep=k if packed else k + 1, use_cache=False)
    finally:
        handle.remove()
    hidden = kept[-1] if packed else kept[-1][:, :-1, :]  # position t predicts token t + 1
    weight: torch.Tensor = head.weight  # type: ignore[assignment]
    bias = getattr(head, "bias", None)
    total = liger_fused_linear_cross_entropy(
        hidden.reshape(-1, hidden.shape[-1]).to(weight.dtype),
        weight,
        target.to(hidden.device).reshape(-1),
        bias=bias,
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )
    return total, out
