"""Judge protocols: the grading prompts of other evaluation tools, answered in each tool's own format and
on its scale by the learned judge (``/v1/chat/completions``).

One module per tool registers its protocols (:func:`~judge.serve.protocols.base.register_protocol`):
:mod:`.prometheus` (absolute and relative grading), :mod:`.inspect_graders` (``model_graded_qa``,
``model_graded_fact``), :mod:`.lmms` (lmms-eval's judge helpers), :mod:`.geval` (deepeval's G-Eval),
:mod:`.mt_bench` (MT-Bench single and pairwise, and the benchmarks using its format), :mod:`.ragas`
(AspectCritic, SimpleCriteriaScore), :mod:`.phoenix` (arize-phoenix-evals' classification templates). :mod:`.scales` maps the
judge's calibrated reading to each kind of scale; :mod:`.reply` scores and renders. A new tool is a new
module imported below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The built-in protocols: importing a module registers them, in this order (the first match answers).
from judge.serve.protocols import prometheus, inspect_graders, lmms, geval, mt_bench, ragas, phoenix  # noqa: F401  # isort: skip
from judge.serve.protocols.base import (
    REGISTRY,
    Prompt,
    Protocol,
    ProtocolError,
    Task,
    find_protocol,
    protocol_list,
    protocol_target,
    register_protocol,
)
from judge.serve.protocols.reply import respond


def unrecognised_message() -> str:
    """The protocols a ``--chat judge-only`` refusal lists."""
    return f"the tools' grading prompts it answers are: {protocol_list()}"


def json_reply(judge: Mapping[str, Any] | None) -> bool:
    """Whether a reply's content is a tool's JSON answer (its ``judge`` field names a JSON protocol)."""
    proto = REGISTRY.get(str((judge or {}).get("protocol")))
    return bool(proto and proto.json_reply)


__all__ = [
    "REGISTRY",
    "Prompt",
    "Protocol",
    "ProtocolError",
    "Task",
    "find_protocol",
    "json_reply",
    "protocol_list",
    "protocol_target",
    "register_protocol",
    "respond",
    "unrecognised_message",
]
