"""The chat markup parser (what ``/get_reward`` runs on every query and prompt, and the verl and OpenRLHF
reward functions too) is linear in its input: adversarial texts at the server's string bound (runs of
whitespace and newlines, repeated and unterminated markers, every template's markers in every slot) parse
in time proportional to their length. Before, 4,000 unterminated ``<|vision_start|>`` (64 kB) took 8 s,
and a prompt that is not in its query took ``str.rfind``'s quadratic time.

The timings run in a child process with a time limit, so a quadratic parser fails the test instead of
hanging it."""

from __future__ import annotations

import json
import subprocess
import sys

from serving import REPO, server_env

from judge.serve.body import default_string_limit

#: The longest string a body may carry for the tiny judge (8,192 tokens of context), in bytes.
BOUND = default_string_limit(8192)

_TIMER = r"""
import json, sys, time
from judge.core.chat_markup import split_query

BOUND = int(sys.argv[1])
MARKERS = ["<|im_start|>user", "<|im_start|>assistant", "<|im_end|>", "<|start_header_id|>user<|end_header_id|>",
           "<|start_header_id|>assistant<|end_header_id|>", "<|eot_id|>", "<start_of_turn>user",
           "<start_of_turn>model", "<end_of_turn>", "<|vision_start|>", "<|vision_end|>", "<image>",
           "<|start_header_id|>", "<|endoftext|>"]


def fill(unit, n):
    return (unit * (n // len(unit) + 1))[:n]


CASES = {
    "unterminated vision starts": lambda n: (fill("<|vision_start|>", n), None),
    "vision starts, then one image": lambda n: (fill("<|vision_start|>", n - 7) + "<image>", None),
    "vision starts in a user turn": lambda n: ("<|im_start|>user\n" + fill("<|vision_start|>", n - 17), None),
    "spans and tags alternating": lambda n: (fill("<|vision_start|>x<image>", n), None),
    "user openings, no newline": lambda n: (fill("<|im_start|>user ", n), None),
    "user opening, whitespace run": lambda n: ("<|im_start|>user" + fill(" ", n - 16), None),
    "gemma opening, tab run": lambda n: ("<start_of_turn>user" + fill("\t", n - 19), None),
    "assistant openings, no newline": lambda n: (fill("<|im_start|>assistant ", n), "p"),
    "assistant opening, space run": lambda n: ("<|im_start|>assistant" + fill(" ", n - 21), "p"),
    "newline run": lambda n: (fill("\n", n), None),
    "header with a word run": lambda n: ("<|start_header_id|>" + fill("a", n - 19), None),
    "header starts": lambda n: (fill("<|start_header_id|>a", n), None),
    "every marker repeated": lambda n: (fill("".join(MARKERS), n), fill("".join(reversed(MARKERS)), n // 2)),
    "prompt not in its query": lambda n: (fill("a", n), "ab" + fill("a", n // 2)),
    "prompt nearly in its query": lambda n: (fill("a", n), fill("a", n // 2) + "b"),
}

out = {}
for name, make in CASES.items():
    times = []
    for n in (BOUND // 8, BOUND):
        query, prompt = make(n)
        t = time.perf_counter()
        split_query(query, prompt)
        times.append(time.perf_counter() - t)
    out[name] = times
print(json.dumps(out))
"""


def test_the_chat_markup_parses_adversarial_text_in_linear_time():
    try:
        done = subprocess.run(
            [sys.executable, "-c", _TIMER, str(BOUND)], cwd=REPO, env=server_env(), capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError(
            "the chat markup parser did not finish its adversarial inputs in 120 s"
        ) from None
    assert done.returncode == 0, done.stderr
    for name, (small, large) in json.loads(done.stdout).items():
        # 8x the length: linear is about 8x the time; allow noise on a shared machine, not a square.
        assert large < 2.0, f"{name}: {large:.2f} s at {BOUND:,} characters"
        assert large < 24 * small + 0.05, f"{name}: {small:.4f} s at 1/8 of the bound, {large:.4f} s at it"
