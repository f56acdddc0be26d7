"""Which token ids stand for the scale's values, checked so a score can always be read."""

from __future__ import annotations

from collections.abc import Sequence

from judge.core.errors import JudgeError
from judge.core.template import SCORE_CUE


class ScoreTokenError(JudgeError, ValueError):
    """A scale value is not exactly one token of the tokenizer (in some context the judge uses)."""


def score_token_ids(
    tokenizer, values: Sequence[int], contexts: Sequence[str] = ("\n", SCORE_CUE)
) -> list[int]:
    """Token id of each scale value, lowest first.

    Each value must encode to exactly one token on its own, and appending it to each
    of ``contexts`` (the text that precedes a score: the assistant header's newline,
    ``"Score: "``) must add exactly that token, so the score position is well defined.
    """
    ids = []
    for v in values:
        enc = tokenizer.encode(str(v), add_special_tokens=False)
        if len(enc) != 1:
            pieces = tokenizer.convert_ids_to_tokens(enc)
            raise ScoreTokenError(
                f"scale value {v} is {len(enc)} tokens {pieces} in this tokenizer, not one; the expected-score "
                "read-out needs every scale value to be a single token (use a scale of single digits, or a "
                "tokenizer that has them)"
            )
        ids.append(enc[0])
    if len(set(ids)) != len(ids):
        raise ScoreTokenError(f"scale values {list(values)} share token ids {ids}")
    for ctx in contexts:
        base = tokenizer.encode(ctx, add_special_tokens=False)
        for v, tid in zip(values, ids, strict=True):
            joined = tokenizer.encode(ctx + str(v), add_special_tokens=False)
            if joined != base + [tid]:
                raise ScoreTokenError(
                    f"after {ctx!r}, scale value {v} tokenizes as {tokenizer.convert_ids_to_tokens(joined)} "
                    f"instead of the context's tokens followed by {tokenizer.convert_ids_to_tokens([tid])}"
                )
    return ids
