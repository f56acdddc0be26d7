"""The pairwise training term: a Bradley-Terry loss on the difference of two responses' expected scores.

A pair (:mod:`judge.data.pairs`) is two readings of one prompt: the judge is asked the same rubric question
about response A and about response B, and each reading is the read-out's expected score (the softmax over
the scale's tokens at the score position, :mod:`judge.models.readout`: the same prompts, the same tokens, the
same position). Nothing new is read, so a judge trained on pairs scores single responses as any judge does.

With ``d = beta * (s_A - s_B)``, ties are taken by Davidson's extension of Bradley-Terry (Davidson 1970)::

    P(A) = e^{d/2} / Z      P(B) = e^{-d/2} / Z      P(tie) = nu / Z      Z = e^{d/2} + e^{-d/2} + nu

and the loss is the negative log-likelihood of the humans' verdict, averaged over the pairs. Davidson rather
than a margin: a tie is a likelihood like the other two outcomes, largest at ``d = 0``, with one parameter
(``nu``, ``train.pairs.tie_strength``) instead of a margin in scale points that would have to suit every
scale; without ties it is Bradley-Terry's ``-log sigmoid(d)`` up to ``nu``'s share of ``Z``, and ``nu = 0``
is Bradley-Terry exactly (a tie is then refused). The loss reads three logits ``(d/2, -d/2, log nu)``
through a log-softmax, so it is stable for any ``d``.

A batch of pairs (:func:`collate_pairs`) holds the A prompts then the B prompts, left-padded with explicit
positions as the scorer pads them, so the last column is every row's score position.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from judge.models.readout import ScoreRequest, encode_request

#: The humans' verdict as the loss reads it: the index of its logit.
PREFERRED_CODE = {"a": 0, "b": 1, "tie": 2}


def davidson_nll(
    score_a: torch.Tensor,
    score_b: torch.Tensor,
    preferred: torch.Tensor,
    *,
    beta: float = 1.0,
    tie_strength: float = 1.0,
) -> torch.Tensor:
    """Per pair, ``-log P(verdict)`` under Davidson's model (see the module doc); ``preferred`` holds the
    codes of :data:`PREFERRED_CODE`. ``tie_strength`` 0: Bradley-Terry (a tie's loss is then infinite)."""
    d = beta * (score_a - score_b)
    log_nu = math.log(tie_strength) if tie_strength > 0 else -math.inf
    logits = torch.stack([d / 2, -d / 2, torch.full_like(d, log_nu)], dim=-1)
    return -torch.log_softmax(logits, dim=-1).gather(-1, preferred[:, None].to(d.device))[:, 0]


def expected_scores(logits: torch.Tensor, score_ids: Sequence[int], values: Sequence[float]) -> torch.Tensor:
    """The read-out's expected score of each row of next-token ``logits`` (rows, vocabulary): the softmax over
    the scale's tokens (the vocabulary's softmax restricted and renormalised is the same), times the values."""
    scale = logits.float()[:, list(score_ids)]
    probs = torch.softmax(scale, dim=-1)
    return probs @ torch.tensor(list(values), dtype=probs.dtype, device=probs.device)


def pair_loss(
    model,
    batch: dict[str, Any],
    score_ids: Sequence[int],
    values: Sequence[float],
    *,
    beta: float = 1.0,
    tie_strength: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The mean Davidson loss of a batch of pairs (:func:`collate_pairs`), and the expected scores of the A
    and B responses. One forward pass over both sides, the LM head on the last position only."""
    inputs = {k: v for k, v in batch.items() if k != "preferred"}
    out = model(**inputs, logits_to_keep=1, use_cache=False)
    scores = expected_scores(out.logits[:, -1, :], score_ids, values)
    n = batch["preferred"].shape[0]
    score_a, score_b = scores[:n], scores[n:]
    nll = davidson_nll(score_a, score_b, batch["preferred"], beta=beta, tie_strength=tie_strength)
    return nll.mean(), score_a, score_b


def collate_pairs(processor, rows: Sequence[dict[str, Any]], max_length: int | None = None) -> dict[str, Any]:
    """Pair rows (``prompt_a``, ``prompt_b``, ``images_a``, ``images_b``, ``preferred``) as one model batch:
    the A prompts, then the B prompts, each encoded as the scorer encodes a request
    (:func:`~judge.models.readout.encode_request`), left-padded with positions that count real tokens."""
    from judge.models.readout import _left_pad, _left_pad_positions, _positions
    from judge.train.collator import LengthError

    encoded = []
    for side in ("a", "b"):
        for r in rows:
            request = ScoreRequest(
                key=r.get("id"),
                criteria=[r.get("criterion", "overall")],
                prompts=[r[f"prompt_{side}"]],
                images=list(r.get(f"images_{side}") or []),
                max_patches=r.get("max_patches"),
            )
            e = encode_request(processor, request)
            if max_length is not None and e.max_len > max_length:
                raise LengthError(
                    f"pair {r.get('id', '?')} response {side.upper()} is {e.max_len} tokens (images expanded), over "
                    f"the maximum {max_length} (train.max_length, else data.max_tokens); raise it: image tokens "
                    "are never truncated"
                )
            encoded.append(e)
    tokenizer = getattr(processor, "tokenizer", processor)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids, mask = _left_pad([e.input_ids[0] for e in encoded], pad)
    if encoded[0].positions is not None:
        position_ids = _left_pad_positions([e.positions[0] for e in encoded if e.positions], mask.shape[1])
    else:
        position_ids = _positions(mask)
    batch: dict[str, Any] = {"input_ids": input_ids, "attention_mask": mask, "position_ids": position_ids}
    pixels = [e.pixel_values for e in encoded if e.pixel_values is not None]
    if pixels:
        batch["pixel_values"] = torch.cat(pixels)
    for key in {k for e in encoded for k in e.vision_extra}:  # the family's per-image inputs
        batch[key] = torch.cat([e.vision_extra[key] for e in encoded if key in e.vision_extra])
    batch["preferred"] = torch.tensor([PREFERRED_CODE[r["preferred"]] for r in rows], dtype=torch.long)
    return batch


def is_pair_row(row: dict[str, Any]) -> bool:
    """Whether a training row is a pair (else an SFT example), in a set :func:`mixed_rows` made."""
    return row.get("preferred") is not None


def mixed_rows(sft, pairs):
    """One ``datasets.Dataset`` of the SFT examples then the pair examples (the Trainer takes one dataset and
    shuffles it): each side's columns widened to both sides' (the other side's left empty)."""
    import datasets

    features = datasets.Features({**sft.features, **pairs.features})

    def widen(ds):
        for name, feature in features.items():
            if name not in ds.features:
                ds = ds.add_column(name, [None] * len(ds), feature=feature)
        return ds.select_columns(list(features))

    return datasets.concatenate_datasets([widen(sft), widen(pairs)])


class MixedCollator:
    """Collate a batch of SFT and pair rows: ``{"sft": <the SFT collator's batch>, "pairs": <collate_pairs>}``,
    each part present when the batch has rows of its kind (the loss adds the parts: :class:`PairObjective`)."""

    def __init__(self, sft_collator, processor, max_length: int | None = None):
        self.sft, self.processor, self.max_length = sft_collator, processor, max_length

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        sft = [r for r in rows if not is_pair_row(r)]
        pairs = [r for r in rows if is_pair_row(r)]
        if sft:
            out["sft"] = self.sft(sft)
        if pairs:
            out["pairs"] = collate_pairs(self.processor, pairs, self.max_length)
        return out


class PairObjective:
    """The loss of a mixed batch: the SFT loss (``sft_loss(model, batch)``, the trainer's labels-only loss)
    plus ``weight`` times the pairs' Davidson loss; either alone when the batch holds one kind only."""

    def __init__(self, processor, values: Sequence[int], *, weight: float, beta: float, tie_strength: float):
        from judge.models.score_tokens import score_token_ids

        self.values = list(values)
        self.score_ids = score_token_ids(getattr(processor, "tokenizer", processor), self.values)
        self.weight, self.beta, self.tie_strength = weight, beta, tie_strength

    def __call__(self, model, inputs: dict[str, Any], sft_loss) -> tuple[torch.Tensor, Any]:
        total, outputs = None, None
        if "sft" in inputs:
            total, outputs = sft_loss(model, inputs["sft"])
        if "pairs" in inputs:
            loss, _, _ = pair_loss(
                model,
                inputs["pairs"],
                self.score_ids,
                self.values,
                beta=self.beta,
                tie_strength=self.tie_strength,
            )
            total = self.weight * loss if total is None else total + self.weight * loss
        if total is None:
            raise ValueError("an empty training batch: neither SFT examples nor pairs")
        return total, outputs


__all__ = [
    "PREFERRED_CODE",
    "MixedCollator",
    "PairObjective",
    "collate_pairs",
    "davidson_nll",
    "expected_scores",
    "is_pair_row",
    "mixed_rows",
    "pair_loss",
]


def with_pairs(cfg, pairs, train_split, collator, processor, values: Sequence[int]):
    """A run's training set, collator and pair objective: as given (objective None) without training pairs
    (``pairs``: the build's pair DatasetDict, or None); else the SFT and pair examples mixed (:func:`mixed_rows`,
    :class:`MixedCollator`)."""
    from judge.core.errors import ConfigError

    if pairs is None or len(pairs["train"]) == 0:
        return train_split, collator, None
    p = cfg.train.pairs
    if p.tie_strength == 0 and any(x == "tie" for x in pairs["train"]["preferred"]):
        raise ConfigError(
            "train.pairs.tie_strength 0 is Bradley-Terry without ties, but the training pairs have ties; "
            "give it a positive value (Davidson's nu, e.g. 1.0)"
        )
    objective = PairObjective(processor, values, weight=p.weight, beta=p.beta, tie_strength=p.tie_strength)
    mixed = mixed_rows(train_split, pairs["train"])
    return mixed, MixedCollator(collator, processor, cfg.max_length), objective
