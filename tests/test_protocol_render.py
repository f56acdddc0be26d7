"""The numbers the protocols write are read back by each tool's own parser as the value meant (issue 37):
MT-Bench single writes an offered value as the prompt wrote it and an integer with ``str``, never ``:g``'s
rounding or exponent form (before: "with either 1.2345678 or 2.3456789" gave ``[[2.34568]]``, not offered;
0.00002 gave ``[[2e-05]]`` and 1000000 ``[[1e+06]]``, which FastChat's pattern cannot read)."""

from __future__ import annotations

import json
import re

import pytest
from tool_templates import MT_SINGLE, build

from judge.core.rubric import load_rubric
from judge.serve.protocols import REGISTRY, find_protocol, stated
from judge.serve.protocols.base import Outcome, Prompt, Reading, Task

#: FastChat llm_judge's ``one_score_pattern`` (fastchat/llm_judge/common.py; its module needs anthropic).
FASTCHAT = re.compile(r"\[\[(\d+\.?\d*)\]\]")
RUBRIC = load_rubric("mmie")
UNITS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)  # the judge's reading, as a fraction of its scale


def _prompt(messages: list[dict]) -> Prompt:
    parts = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in messages]
    prompt = Prompt.of(parts, [])
    assert prompt is not None
    return prompt


def _reading(unit: float) -> Reading:
    return Reading(6 * unit, 0, 6)


def _single(said: str) -> Task:
    messages = build("mt-bench-single", "What is 3+5?", "8")
    messages[0]["content"] = MT_SINGLE.replace("on a scale of 1 to 10", said)
    prompt = _prompt(messages)
    assert find_protocol(prompt) is REGISTRY["mt-bench-single"]
    return REGISTRY["mt-bench-single"].extract(prompt, RUBRIC)


@pytest.mark.parametrize(
    ("said", "tokens"),
    [
        ("with either 1.2345678 or 2.3456789", ["1.2345678", "2.3456789"]),
        ("with either 0.00001 or 0.00002", ["0.00001", "0.00002"]),
        ("with either 0, 0.5 or 1", ["0", "0.5", "1"]),
        ("with either 1.0 or 2.50", ["1.0", "2.50"]),
        ("on a scale of 999999 to 1000000", ["999999", "1000000"]),
        ("on a scale of 0 to 1000000", [str(k) for k in range(0, 1_000_001)]),
        ("on a scale of 1 to 10", [str(k) for k in range(1, 11)]),
    ],
)
def test_mt_bench_single_writes_what_fastchat_reads_as_offered(said, tokens):
    """Every reading is written as an offered token (or an integer of the range) that FastChat's pattern reads
    whole, and the value it reads is the answer's ``value``."""
    task = _single(said)
    proto = REGISTRY["mt-bench-single"]
    offered = set(tokens)
    for unit in UNITS:
        outcome = Outcome(readings=[_reading(unit)])
        content = proto.render(task, outcome, "note")
        m = FASTCHAT.search(content)
        assert m is not None and m.group(0) == content.rsplit("Rating: ", 1)[1], content
        assert m.group(1) in offered, (said, unit, m.group(1))
        assert float(m.group(1)) == proto.value(task, outcome)


@pytest.mark.parametrize("said", ["on a scale of -5 to 5", "with either -1, 0 or 1"])
def test_mt_bench_single_refuses_a_scale_fastchat_cannot_read(said):
    """FastChat's pattern has no sign: a negative scale or offered value is a 422 naming it, not an answer
    the tool reads as nothing."""
    with pytest.raises(stated.ScaleError, match="negative values"):
        _single(said)


def test_the_other_numeric_answers_are_read_back_by_their_tools():
    """prometheus-eval's parse_output, lmms-eval's parse_comparative_response and JSON (deepeval's G-Eval,
    lmms-eval's rubric) read each number the protocols write, on large scales too."""
    from lmms_eval.llm_judge.utils import ResponseParser
    from prometheus_eval.parser import parse_output

    absolute, comparative = REGISTRY["prometheus-absolute"], REGISTRY["lmms-eval-comparative"]
    geval, rubric = REGISTRY["deepeval-geval"], REGISTRY["lmms-eval-rubric"]
    for unit in UNITS:
        one = Outcome(readings=[_reading(unit)])
        task = Task("point", [], [], options={"range": (1, 5)})
        assert parse_output(absolute.render(task, one, "note"), "absolute")[1] == absolute.value(task, one)
        for lo, hi in ((1, 10), (999_999, 1_000_000), (-5, 5)):
            two = Outcome(readings=[_reading(unit), _reading(1 - unit)])
            got = ResponseParser.parse_comparative_response(
                comparative.render(Task("pair", [], [], options={"range": (lo, hi)}), two, "note")
            )
            assert all(lo <= g <= hi and g == int(g) for g in got), (lo, hi, got)
            task = Task("point", [], [], options={"range": (lo, hi), "strict": False})
            assert json.loads(geval.render(task, one, "note"))["score"] == geval.value(task, one)
        task = Task("criteria", [], [], options={"ranges": {"a": (0, 1_000_000), "b": None}})
        got = json.loads(rubric.render(task, Outcome(by_key={"a": _reading(unit), "b": _reading(unit)}), ""))
        assert 0 <= got["a"] <= 1_000_000 and isinstance(got["a"], int) and 0 <= got["b"] <= 6
