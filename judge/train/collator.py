"""The training collator: prompt + completion, loss on the completion only, nothing truncated.

TRL's vision collator tokenises with the processor's defaults, ignores the SFT
builder's per-example ``max_patches`` and truncates long sequences from the right
(which can cut image tokens). This one encodes prompts with
:func:`judge.models.readout.encode_prompts`, the function the scorer uses, so the
tokens the judge is trained on are the tokens it is scored on; an example longer than
``max_length`` is an error naming it.
"""

from __future__ import annotations

from typing import Any

import torch

from judge.core.errors import JudgeError
from judge.models.families import forward_inputs, multi_axis_positions, of_processor
from judge.models.pixels import cat_pixel_values
from judge.models.readout import encode_vision, render_prompt
from judge.train.loss import IGNORE_INDEX, right_align


class LengthError(JudgeError, ValueError):
    """A training example longer than the configured maximum (images are never truncated)."""


class JudgeCollator:
    """Collate SFT examples (``prompt``, ``completion``, ``images``, ``max_patches``) into a model batch.

    Labels are ``-100`` on the prompt (instructions, rubric, question, response, image
    tokens) and on padding; only the completion (the score, its rationale, the end of
    turn) carries loss. Padding is on the right; with ``labels_last`` the rows are
    right-aligned instead (left padding, explicit ``position_ids``), so every completion ends in
    the last column, as :func:`judge.train.loss.labels_only_loss` needs.

    ``packed``: the examples laid end to end in one row, nothing padded, ``position_ids`` restarting at 0
    for each example and no ``attention_mask``: transformers reads the restarts as document boundaries
    and masks attention across examples (sdpa and eager: a dense mask; ``flex_attention``: a block mask
    that skips the other examples; flash attention: its variable-length kernel). The loss is the same as
    on the padded batch (:func:`judge.train.loss.labels_only_loss` reads the label positions of a packed
    row).
    """

    def __init__(
        self, processor, max_length: int | None = None, labels_last: bool = False, packed: bool = False
    ):
        self.processor = processor
        self.labels_last = labels_last
        self.packed = packed
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.max_length = max_length
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else 0
        family = of_processor(processor)
        #: the family's rotary positions have several axes (Qwen2.5-VL): the collator gives them per token
        self.multi_axis = family is not None and family.multi_axis_positions
        if family is not None and (self.multi_axis or family.image_blocks) and packed:
            what = "multi-axis positions" if self.multi_axis else "image-block attention mask"
            raise JudgeError(
                f"train.packing does not run for the {family.name} family yet (its {what} in a "
                "packed row); set train.packing: false"
            )
        self._extra: list[dict[str, torch.Tensor]] = []

    def completion_ids(self, prompt: list[dict], completion: list[dict]) -> list[int]:
        full = self.processor.apply_chat_template(prompt + completion, tokenize=False)
        head = render_prompt(self.processor, prompt)
        if not full.startswith(head):
            raise JudgeError(
                "the chat template renders the prompt differently with and without the answer; "
                "the score position would be ambiguous"
            )
        return self.tokenizer(full[len(head) :], add_special_tokens=False)["input_ids"]

    def encode(self, ex: dict[str, Any]) -> tuple[list[int], list[int], torch.Tensor | None]:
        (prompt_ids,), vision = encode_vision(
            self.processor, [ex["prompt"]], ex.get("images") or [], ex.get("max_patches"), key=ex.get("id")
        )
        pixel_values = vision.pop("pixel_values", None)
        self._extra.append(vision)
        completion = self.completion_ids(ex["prompt"], ex["completion"])
        n = len(prompt_ids) + len(completion)
        if self.max_length is not None and n > self.max_length:
            raise LengthError(
                f"example {ex.get('id', '?')} is {n} tokens (images expanded), over the maximum {self.max_length} "
                "(train.max_length, else data.max_tokens); raise it: image tokens are never truncated"
            )
        return prompt_ids, completion, pixel_values

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        self._extra = []
        encoded = [self.encode(ex) for ex in examples]
        if self.packed:
            return self._with_extra(pack_examples(encoded))
        width = max(len(p) + len(c) for p, c, _ in encoded)
        input_ids = torch.full((len(encoded), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(encoded), width), dtype=torch.long)
        labels = torch.full((len(encoded), width), IGNORE_INDEX, dtype=torch.long)
        pixels = []
        for i, (p, c, pv) in enumerate(encoded):
            seq = torch.tensor(p + c, dtype=torch.long)
            input_ids[i, : len(seq)] = seq
            attention_mask[i, : len(seq)] = 1
            labels[i, len(p) : len(seq)] = torch.tensor(c, dtype=torch.long)
            if pv is not None:
                pixels.append(pv)
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
        if pixels:
            batch["pixel_values"] = cat_pixel_values(pixels)
        self._with_extra(batch)
        if self.multi_axis:
            batch["position_ids"] = self._positions(encoded, width)
        batch = right_align(batch) if self.labels_last else batch
        # Gemma 3's token types (its images' two-way attention), from the ids where they end up: as scored.
        return {**batch, **forward_inputs(self.processor, batch["input_ids"])}

    def _with_extra(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` with the family's other image inputs of its examples, concatenated in their order (Qwen's
        ``image_grid_thw``; LLaVA-OneVision's ``image_sizes`` and ``batch_num_images``, a packed row's too)."""
        for key in {k for extra in self._extra for k in extra}:
            batch[key] = torch.cat([extra[key] for extra in self._extra if key in extra])
        return batch

    def _positions(self, encoded, width: int) -> torch.Tensor:
        """(axes, rows, width) multi-axis positions of each row's tokens (prompt and completion), 0 on padding."""
        grids = iter(extra.get("image_grid_thw") for extra in self._extra)
        merge = self.processor.image_processor.merge_size
        rows = [
            multi_axis_positions(p + c, next(grids), self.processor.image_token_id, merge)
            for p, c, _ in encoded
        ]
        out = torch.zeros((rows[0].shape[0], len(rows), width), dtype=torch.long)
        for i, x in enumerate(rows):
            out[:, i, : x.shape[1]] = x
        return out


def pack_examples(encoded: list[tuple[list[int], list[int], torch.Tensor | None]]) -> dict[str, torch.Tensor]:
    """Encoded examples (prompt ids, completion ids, pixels) as one packed row: ``input_ids``, ``labels``
    (the completions only) and ``position_ids`` restarting at 0 per example, shape (1, total tokens)."""
    ids: list[int] = []
    labels: list[int] = []
    positions: list[int] = []
    pixels = []
    for p, c, pv in encoded:
        ids += p + c
        labels += [IGNORE_INDEX] * len(p) + c
        positions += range(len(p) + len(c))
        if pv is not None:
            pixels.append(pv)
    batch = {
        "input_ids": torch.tensor([ids], dtype=torch.long),
        "labels": torch.tensor([labels], dtype=torch.long),
        "position_ids": torch.tensor([positions], dtype=torch.long),
    }
    if pixels:
        batch["pixel_values"] = cat_pixel_values(pixels)
    return batch
