"""A policy's chat-templated text back into the judge's question and response.

RL trainers send rewards servers what the policy saw and wrote as one decoded string: OpenRLHF's remote
reward model gets ``query`` (the prompt and the response in the policy's chat template, special tokens
kept) and ``prompts`` (the templated prompt). The judge wants the question as a person wrote it and the
response alone. :func:`split_query` does that for the common templates:

* ChatML (Qwen, Qwen2/2.5/3, many others): ``<|im_start|>user\\n...<|im_end|>``;
* Llama 3: ``<|start_header_id|>user<|end_header_id|>\\n\\n...<|eot_id|>``;
* Gemma: ``<start_of_turn>user\\n...<end_of_turn>``;
* plain text (no markup): taken as it is.

The question is the text of the user turns (system turns are the trainer's instructions to the policy,
not part of the question); image placeholders (``<image>``, Qwen-VL's ``<|vision_start|>...<|vision_end|>``)
become image positions. The response is the query after its prompt, without end-of-turn and padding
tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Every parser here runs on client text (a reward request's queries, up to --max-string-bytes each), so each
# is linear in its input: fixed markers found with str.find, and the only patterns are anchored runs of one
# character class (nothing after them to backtrack into) or alternations of literal tokens.

#: A template's user turns: (opening, whether a newline must end the whitespace after it, closing).
_USER_TURNS = (
    ("<|im_start|>user", True, "<|im_end|>"),
    ("<|start_header_id|>user<|end_header_id|>", False, "<|eot_id|>"),
    ("<start_of_turn>user", True, "<end_of_turn>"),
)
#: Where the assistant's turn starts, in each template (the response follows the last one).
_ASSISTANT_OPENINGS = (
    ("<|im_start|>assistant", True),
    ("<|start_header_id|>assistant<|end_header_id|>", False),
    ("<start_of_turn>model", True),
)
#: Any chat markup token of the templates above (and begin/end-of-text tokens). ``\\w*`` and ``\\s*`` each
#: run over one character class that the literal after it cannot start with: no backtracking.
_MARKUP = re.compile(
    r"<\|im_start\|>(?:system|user|assistant)?\s*|<\|im_end\|>|<\|endoftext\|>|<\|begin_of_text\|>"
    r"|<\|end_of_text\|>|<\|start_header_id\|>\w*<\|end_header_id\|>\s*|<\|eot_id\|>|<\|eom_id\|>"
    r"|<start_of_turn>(?:user|model|system)?\s*|<end_of_turn>|<bos>|<eos>|<s>|</s>|<pad>|<\|pad\|>"
)
#: What ends a response: end-of-turn and end-of-text tokens, and padding after them (literals only).
_RESPONSE_END = re.compile(
    r"(?:<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|<\|eom_id\|>|<\|end_of_text\|>|<end_of_turn>|<eos>|</s>"
    r"|<pad>|<\|pad\|>)"
)
#: An image's place in a prompt: a Qwen-VL span, or ``<image>``.
_VISION_START, _VISION_END, _IMAGE = "<|vision_start|>", "<|vision_end|>", "<image>"
_SPACE = re.compile(r"\s*")  # anchored at a position, nothing after it: one pass over the run


#: Characters of text one regular-expression call scans at most (see :func:`_slices`).
_SLICE = 1 << 16


def _slices(text: str) -> list[tuple[int, int]]:
    """``text`` cut into slices of about :data:`_SLICE` characters, each cut just before a ``<`` that does not
    open ``<|end_header_id|>``. No markup token spans such a cut (each has one ``<``, at its start, but the
    Llama header, whose second is ``<|end_header_id|>``'s), so :data:`_MARKUP` and :data:`_RESPONSE_END`
    find the same tokens slice by slice as in the whole text; and each call holds the interpreter for one
    slice only (a pattern's C loop does not let other threads, the event loop included, run meanwhile)."""
    cuts, pos = [0], 0
    while (cut := text.find("<", pos + _SLICE)) >= 0:
        while text.startswith("<|end_header_id|>", cut):
            cut = text.find("<", cut + 1)
        if cut < 0:
            break
        cuts.append(cut)
        pos = cut
    cuts.append(len(text))
    return list(zip(cuts, cuts[1:], strict=False))


def _unmarked(text: str) -> str:
    """``text`` without its markup tokens, slice by slice (:func:`_slices`)."""
    return "".join(_MARKUP.sub("", text[a:b]) for a, b in _slices(text))


def _after_opening(text: str, end: int, newline: bool) -> int | None:
    """Where a turn's text starts after an opening that ends at ``end``: past the whitespace that follows,
    up to and including its last newline when the template puts one there (None when there is none)."""
    stop = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    if not newline:
        return stop
    at = text.rfind("\n", end, stop)
    return at + 1 if at >= 0 else None


def _openings(text: str, opening: str, newline: bool):
    """Each place a turn's text starts after ``opening`` (occurrences are disjoint, so is the whitespace
    after each: one pass)."""
    pos = 0
    while (at := text.find(opening, pos)) >= 0:
        pos = at + len(opening)
        start = _after_opening(text, pos, newline)
        if start is not None:
            yield start


def _user_turns(prompt: str, opening: str, newline: bool, closing: str) -> list[str]:
    turns, pos = [], 0
    while (at := prompt.find(opening, pos)) >= 0:
        pos = at + len(opening)
        start = _after_opening(prompt, pos, newline)
        if start is None:
            continue
        end = prompt.find(closing, start)
        if end < 0:  # an unclosed turn runs to the end
            turns.append(prompt[start:])
            break
        turns.append(prompt[start:end])
        pos = end + len(closing)
    return turns


def _split_images(text: str) -> list[str]:
    """``text`` split at its image places: a ``<|vision_start|>...<|vision_end|>`` span (the first end after
    the start) or ``<image>``, whichever comes first. Each search resumes where the last stopped."""
    pieces: list[str] = []
    start = pos = 0
    span = text.find(_VISION_START)
    tag = text.find(_IMAGE)
    while span >= 0 or tag >= 0:
        if span >= 0 and (tag < 0 or span < tag):
            end = text.find(_VISION_END, span + len(_VISION_START))
            if end < 0:  # no end after this start, so none after any later one: only <image> is left
                span = -1
                continue
            pieces.append(text[start:span])
            start = pos = end + len(_VISION_END)
        else:
            pieces.append(text[start:tag])
            start = pos = tag + len(_IMAGE)
        if span >= 0 and span < pos:
            span = text.find(_VISION_START, pos)
        if tag >= 0 and tag < pos:
            tag = text.find(_IMAGE, pos)
    pieces.append(text[start:])
    return pieces


@dataclass
class Exchange:
    """The question (text pieces with an image between each two) and the response of a query."""

    question: list[str] = field(default_factory=list)  #: text before, between and after the images
    response: str = ""

    @property
    def n_images(self) -> int:
        return len(self.question) - 1


def question_of(prompt: str) -> list[str]:
    """The user's text of a templated prompt, split at its image placeholders (see the module doc)."""
    turns: list[str] = []
    for opening, newline, closing in _USER_TURNS:
        turns = _user_turns(prompt, opening, newline, closing)
        if turns:
            break
    text = "\n\n".join(t.strip() for t in turns) if turns else _unmarked(prompt).strip()
    return _split_images(text)


def response_of(query: str, prompt: str) -> str:
    """The response in a query: what follows its prompt (or, when the decoded query does not repeat the
    prompt exactly, what follows the last assistant opening), up to the first end-of-turn token."""
    if prompt and query.startswith(prompt):
        rest = query[len(prompt) :]
    else:
        at = _rfind(query, prompt) if prompt else -1
        if at >= 0:
            rest = query[at + len(prompt) :]
        else:
            ends = [
                at for opening, newline in _ASSISTANT_OPENINGS for at in _openings(query, opening, newline)
            ]
            rest = query[max(ends) :] if ends else query
    for a, b in _slices(rest):
        end = _RESPONSE_END.search(rest, a, b)
        if end:
            return rest[: end.start()].strip()
    return rest.strip()


def _rfind(text: str, sub: str) -> int:
    """``text.rfind(sub)`` in linear time: CPython's rfind compares naively (``"a" * n`` against
    ``"ab" + "a" * (n // 2)`` is quadratic), its find does not, so the last occurrence is found forwards in the
    reversed strings."""
    at = text[::-1].find(sub[::-1])
    return -1 if at < 0 else len(text) - at - len(sub)


def split_query(query: str, prompt: str | None = None) -> Exchange:
    """The judge's question and response of an RL trainer's ``query`` and its templated ``prompt``; without
    the prompt, the question is the query's user turns and the response follows its last assistant
    opening."""
    return Exchange(question_of(prompt or query), response_of(query, prompt or ""))


__all__ = ["Exchange", "question_of", "response_of", "split_query"]
