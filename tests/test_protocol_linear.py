"""Every recogniser of the tools' grading prompts is linear in its input (issue 37): each template with a
slot holding adversarial text at the server's string bound, read without a server."""

from __future__ import annotations

import time

import pytest
from tool_templates import MARKERS, SCORED, build, markers

from judge.core.rubric import load_rubric
from judge.serve.protocols import find_protocol
from judge.serve.protocols.base import Prompt

Q, R, REF, R2 = "What is 3+5?", "3 + 5 = 8.", "8", "It is 9."
NO_REF = ("lmms-eval-comparative", "lmms-eval-rubric")
RUBRIC = load_rubric("mmie")


def _prompt(messages: list[dict]) -> Prompt:
    parts = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in messages]
    prompt = Prompt.of(parts, [])
    assert prompt is not None
    return prompt


# ----------------------------------------------------------------------------- linear time

#: Characters of the longest slot tried: about the default --max-string-bytes of a 2,048-token judge.
LONG = 400_000


def _fillers(name: str, n: int) -> dict[str, str]:
    every = markers()
    own = MARKERS[name]
    return {
        "newlines": "\n" * n + "x",
        "spaces": " " * n + "x",
        "stars": "*" * n,
        "digits": "from 1 to " + "9" * n,
        "own markers": (own * (n // len(own) + 1))[:n],
        "every marker": (every * (n // len(every) + 1))[:n],
        "unterminated": ("[[" + "###" + "\n```" + "(" + "between 1 and ") * (n // 30),
    }


def _cost(name: str, slot: str, text: str) -> float:
    """Seconds to recognise and read the prompt (the best of 3 runs: the machine is shared)."""
    slots = {"q": Q, "r": R, "ref": None if name in NO_REF else REF, "r2": R2, slot: text}
    prompt = _prompt(build(name, slots["q"], slots["r"], slots["ref"], slots["r2"]))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        proto = find_protocol(prompt)
        try:
            if proto is not None:
                proto.extract(prompt, RUBRIC)
        except Exception as e:  # a ProtocolError (its ScaleError too) is an answer, a 422; nothing else
            assert type(e).__name__ in ("ProtocolError", "ScaleError"), repr(e)[:200]
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("name", SCORED)
def test_every_recogniser_is_linear_in_its_input(name):
    """Each template with a slot (question, response) holding runs of newlines, spaces, rule characters and
    digits, its own and every tool's markers repeated or left open, at the server's string bound: twice the
    length costs under about three times the time, and none takes more than half a second."""
    worst = []
    for slot in ("q", "r"):
        for kind in _fillers(name, 8):
            small = _cost(name, slot, _fillers(name, LONG // 2)[kind])
            large = _cost(name, slot, _fillers(name, LONG)[kind])
            worst.append((large, small, slot, kind))
            assert large < 3 * small + 0.02, (slot, kind, small, large)
            assert large < 0.5, (slot, kind, large)
    assert worst


def _scale_fillers(n: int) -> dict[str, str]:
    """Texts where a scale reader could backtrack: whitespace runs around ranges and scale words (the red
    team's `"1-10" + spaces + "x"` took 25 s at 32,000 spaces and stalled /health)."""
    return {
        "range then spaces": "1-10" + " " * n + "x",
        "scale word then spaces": "scored" + " " * n + "x",
        "word, spaces, colon, spaces": "rate" + " " * n + ":" + " " * n,
        "scored then digits and spaces": "scored " + "1" * (n // 2) + " " * (n // 2),
        "split range": "1" + " " * (n // 2) + "-" + " " * (n // 2) + "x",
        "scale words repeated": "scored " * (n // 7),
        "range halves repeated": "1-" * (n // 2),
        "grade and score words": "GRADE SCORE: " * (n // 13),
    }


def _read_cost(read, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        try:
            read(text)
        except Exception as e:  # a ProtocolError (its ScaleError too) is an answer, a 422; nothing else
            assert type(e).__name__ in ("ProtocolError", "ScaleError"), repr(e)[:200]
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("reader", ["rubric item range", "inspect-ai instructions"])
def test_scale_readers_of_tool_instructions_are_linear(reader):
    """The readers of an lmms-eval rubric item's range and of inspect-ai's custom instructions (issue 41's
    bare ranges and SCORE format) take client text too: twice the length costs under about three times the
    time, none more than half a second at the string bound."""
    from judge.serve.protocols import inspect_graders, stated

    read = stated.item_range if reader == "rubric item range" else inspect_graders._answer_format
    for kind in _scale_fillers(8):
        small = _read_cost(read, _scale_fillers(LONG // 2)[kind])
        large = _read_cost(read, _scale_fillers(LONG)[kind])
        assert large < 3 * small + 0.02, (kind, small, large)
        assert large < 0.5, (kind, large)
