"""The training benchmark's workload and counts (``scripts/bench_train.py``): SFT examples of the synthetic
workload, the length-bucketing batch sampler, judge-train's two losses, and the FLOPs of one step (the
formula is in bench_train.py's docstring)."""

from __future__ import annotations

import bench_score as bs  # the shared workload and FLOP helpers (scripts/ is on sys.path: bench_train puts it)


# ----------------------------------------------------------------------------- data
def sft_examples(items, rubric, target_format: str, rationale_words: int, seed: int) -> list[dict]:
    """One SFT example per (response, criterion), in the shape ``judge.data.build`` writes (images as PIL)."""
    import numpy as np

    from judge.core.template import build_target, completion_messages

    rng = np.random.default_rng(seed)
    out = []
    for it in items:
        crits, msgs = bs.prompts_for(it, rubric, target_format)
        for c, m in zip(crits, msgs, strict=True):
            rationale = bs._words(rng, rationale_words) if target_format != "score" else None
            score = int(rng.integers(rubric.scale.min, rubric.scale.max + 1))
            out.append(
                {
                    "id": f"{it.key}:{c}",
                    "prompt": m,
                    "completion": completion_messages(build_target(score, rationale, target_format)),
                    "images": list(it.images),
                    "max_patches": None,
                }
            )
    return out


class BatchSampler:
    """Batches of indices; with ``bucket``, each window of ``window`` batches is sorted by length first
    (so a batch holds similar lengths and pads little), then the batches are shuffled."""

    def __init__(self, lengths: list[int], batch_size: int, bucket: bool, seed: int, window: int = 16):
        import numpy as np

        rng = np.random.default_rng(seed)
        order = rng.permutation(len(lengths)).tolist()
        if bucket:
            size = batch_size * window
            order = [
                i
                for s in range(0, len(order), size)
                for i in sorted(order[s : s + size], key=lambda j: -lengths[j])
            ]
        batches = [order[s : s + batch_size] for s in range(0, len(order), batch_size)]
        batches = [b for b in batches if len(b) == batch_size] or batches
        self.batches = [batches[i] for i in rng.permutation(len(batches))] if bucket else batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


# ----------------------------------------------------------------------------- loss
def right_align(batch: dict) -> dict:
    """The batch re-aligned to the right, as judge-train's collator gives it (``judge.train.loss.right_align``)."""
    from judge.train.loss import right_align as align

    return align(batch)


def loss_labels_only(model, batch: dict, fused: bool = False):
    """judge-train's loss (``judge.train.loss.labels_only_loss``): the LM head on the label positions only;
    ``fused``: liger-kernel's fused linear cross-entropy."""
    from judge.train.loss import labels_only_loss

    loss, _ = labels_only_loss(model, batch, fused=fused)
    return loss


def loss_all(model, batch: dict):
    return model(**batch, use_cache=False).loss


# ----------------------------------------------------------------------------- FLOPs
def example_sizes(batch: dict) -> tuple[list[int], list[int]]:
    """(tokens, label tokens) of each example of a padded batch or a packed row (CPU tensors)."""
    labelled = batch["labels"] != -100
    if "attention_mask" in batch:
        return batch["attention_mask"].sum(1).tolist(), labelled.sum(1).tolist()
    starts = (batch["position_ids"][0] == 0).nonzero()[:, 0].tolist() + [batch["input_ids"].shape[1]]
    spans = list(zip(starts[:-1], starts[1:], strict=True))
    return [b - a for a, b in spans], [int(labelled[0, a:b].sum()) for a, b in spans]


def step_flops(batch: dict, fm: bs.FlopModel, lora_params: int) -> tuple[float, float, int, int]:
    """(FLOPs, FLOPs by the 6N convention, real tokens, label tokens) of one step on ``batch`` (CPU tensors)."""
    n_rows, k_rows = example_sizes(batch)
    flops = flops6 = fm.vision_input(batch.get("pixel_values"), batch)
    for n, k in zip(n_rows, k_rows, strict=True):
        dense = 2.0 * fm.lm_params * n
        attn = fm.lm_attention(n)
        head = 2.0 * fm.head_params * k
        flops += (dense + attn + head) + (dense + 2 * attn + head) + 6.0 * lora_params * n
        flops6 += 3 * (dense + attn + head) + 6.0 * lora_params * n
    return flops, flops6, sum(n_rows), sum(k_rows)
