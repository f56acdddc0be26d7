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

#: A template's user turns: (opening, closing) of each.
_USER_TURNS = (
    re.compile(r"<\|im_start\|>user\s*\n(.*?)(?:<\|im_end\|>|$)", re.S),
    re.compile(r"<\|start_header_id\|>user<\|end_header_id\|>\s*(.*?)(?:<\|eot_id\|>|$)", re.S),
    re.compile(r"<start_of_turn>user\s*\n(.*?)(?:<end_of_turn>|$)", re.S),
)
#: Where the assistant's turn starts, in each template (the response follows the last one).
_ASSISTANT_OPENINGS = (
    re.compile(r"<\|im_start\|>assistant\s*\n"),
    re.compile(r"<\|start_header_id\|>assistant<\|end_header_id\|>\s*"),
    re.compile(r"<start_of_turn>model\s*\n"),
)
#: Any chat markup token of the templates above (and begin/end-of-text tokens).
_MARKUP = re.compile(
    r"<\|im_start\|>(?:system|user|assistant)?\s*|<\|im_end\|>|<\|endoftext\|>|<\|begin_of_text\|>"
    r"|<\|end_of_text\|>|<\|start_header_id\|>\w*<\|end_header_id\|>\s*|<\|eot_id\|>|<\|eom_id\|>"
    r"|<start_of_turn>(?:user|model|system)?\s*|<end_of_turn>|<bos>|<eos>|<s>|</s>|<pad>|<\|pad\|>"
)
#: What ends a response: end-of-turn and end-of-text tokens, and padding after them.
_RESPONSE_END = re.compile(
    r"(?:<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|<\|eom_id\|>|<\|end_of_text\|>|<end_of_turn>|<eos>|</s>"
    r"|<pad>|<\|pad\|>)"
)
#: An image's place in a prompt.
_IMAGE = re.compile(r"<\|vision_start\|>.*?<\|vision_end\|>|<image>", re.S)


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
    for pattern in _USER_TURNS:
        turns = [m.group(1) for m in pattern.finditer(prompt)]
        if turns:
            break
    text = "\n\n".join(t.strip() for t in turns) if turns else _MARKUP.sub("", prompt).strip()
    return _IMAGE.split(text)


def response_of(query: str, prompt: str) -> str:
    """The response in a query: what follows its prompt (or, when the decoded query does not repeat the
    prompt exactly, what follows the last assistant opening), up to the first end-of-turn token."""
    if prompt and query.startswith(prompt):
        rest = query[len(prompt) :]
    else:
        at = query.rfind(prompt) if prompt else -1
        if at >= 0:
            rest = query[at + len(prompt) :]
        else:
            ends = [m.end() for pattern in _ASSISTANT_OPENINGS for m in pattern.finditer(query)]
            rest = query[max(ends) :] if ends else query
    end = _RESPONSE_END.search(rest)
    return (rest[: end.start()] if end else rest).strip()


def split_query(query: str, prompt: str | None = None) -> Exchange:
    """The judge's question and response of an RL trainer's ``query`` and its templated ``prompt``; without
    the prompt, the question is the query's user turns and the response follows its last assistant
    opening."""
    return Exchange(question_of(prompt or query), response_of(query, prompt or ""))


__all__ = ["Exchange", "question_of", "response_of", "split_query"]
