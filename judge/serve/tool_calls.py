"""``tools`` on ``/v1/chat/completions``: a forced call of one function, answered as OpenAI's ``tool_calls``.

A judge calls nothing; what a client that sends ``tools`` wants is the judge's reading in the function's
arguments (a classifier whose one function takes a label, a grader whose function takes a score). So a
request that **forces one function** is answered with one call of it: ``tool_choice``
``{"type": "function", "function": {"name": N}}`` naming one of the ``tools``, or ``"required"`` with exactly
one tool. The reply's message has ``content`` null and ``tool_calls: [{"id", "type": "function",
"function": {"name": N, "arguments": "<JSON text>"}}]``, its ``finish_reason`` is ``tool_calls``, and the
arguments are the function's ``parameters`` schema filled from the judge's reading as ``response_format``
``json_schema`` is (:mod:`judge.serve.structured`): only for a scored reply (the judge's own prompt or a
tool's grading prompt it recognises). ``parallel_tool_calls`` is accepted (one call is made).

Refused with a 422 naming the field, since the judge cannot choose whether or which tool to call: ``tools``
without a forcing ``tool_choice`` (absent, ``auto``, ``none``, ``required`` with several tools), a
``tool_choice`` without ``tools``, the legacy ``functions``/``function_call``, and a forced call on a
conversation that is not scored (generated text calls no tools).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from judge.serve.service import RequestError
from judge.serve.structured import check_schema, dumps, fill

_ACCEPTED = (
    "this server answers a forced call of one function with the judge's reading in its arguments: send "
    "`tools` with tool_choice {'type': 'function', 'function': {'name': ...}}, or tool_choice 'required' "
    "with exactly one tool"
)


@dataclass(frozen=True)
class ForcedCall:
    """The one function a request forces: its name, its ``parameters`` schema and where that sits."""

    name: str
    parameters: Mapping[str, Any]
    where: str

    def arguments(self, judge: Mapping[str, Any] | None) -> str:
        """The call's ``arguments`` (JSON text): the parameters schema filled from the reply's ``judge``."""
        return dumps(fill(self.parameters, judge, self.where), self.where)

    def refuse_generated(self) -> None:
        """A forced call on a conversation that is not scored: generated text calls no tools."""
        raise RequestError(
            f"`tool_choice` forces {self.name!r}, but this conversation is neither the judge's own prompt nor "
            "a tool's grading prompt it recognises, and generated text calls no tools: the arguments are "
            "filled only from a score",
            param="tool_choice",
            code="tools_not_supported",
        )

    def shape(self, reply: dict[str, Any], arguments: str) -> dict[str, Any]:
        """``reply`` (a ``chat.completion``) made the call: ``content`` null, ``tool_calls``, finish reason."""
        choice = reply["choices"][0]
        call = {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                "function": {"name": self.name, "arguments": arguments}}  # fmt: skip
        choice["message"] = {**choice["message"], "content": None, "tool_calls": [call]}
        choice["finish_reason"] = "tool_calls"
        choice["logprobs"] = None  # no content tokens to report
        return reply


def forced_call(body: Mapping[str, Any]) -> ForcedCall | None:
    """The function ``body`` forces, None when it sends no tools; a 422 naming the field for any other
    use of tools (see the module doc)."""
    for name in ("functions", "function_call"):
        if body.get(name) is not None:
            raise _refuse(
                name, f"`{name}` (the legacy function-calling fields) is not supported; {_ACCEPTED}"
            )
    tools, choice = body.get("tools"), body.get("tool_choice")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise _refuse(
            "parallel_tool_calls", f"`parallel_tool_calls` must be true or false (got {parallel!r})"
        )
    if tools is None:
        if choice is not None or parallel is not None:
            field = "tool_choice" if choice is not None else "parallel_tool_calls"
            raise _refuse(field, f"`{field}` needs `tools`; {_ACCEPTED}")
        return None
    if not isinstance(tools, list) or not tools:
        raise _refuse("tools", "`tools` must be a non-empty list of {'type': 'function', 'function': {...}}")
    names = [_function_name(t, k) for k, t in enumerate(tools)]
    if isinstance(choice, Mapping):
        fn = choice.get("function")
        wanted = fn.get("name") if isinstance(fn, Mapping) else None
        if choice.get("type") != "function" or not isinstance(wanted, str):
            raise _refuse(
                "tool_choice", "`tool_choice` must be {'type': 'function', 'function': {'name': ...}}"
            )
        if wanted not in names:
            raise _refuse("tool_choice", f"`tool_choice` names {wanted!r}, which is not in `tools` ({names})")
        k = names.index(wanted)
    elif choice == "required" and len(tools) == 1:
        k = 0
    else:
        what = f"tool_choice {choice!r}" if choice is not None else "no tool_choice (auto)"
        raise _refuse(
            "tool_choice",
            f"`tool_choice`: {what} with {len(tools)} tool(s) leaves the choice of a call to the model, and "
            f"a judge makes none of its own; {_ACCEPTED}",
        )
    where = f"tools[{k}].function.parameters"
    params = tools[k]["function"].get("parameters")
    check_schema(params, where)  # before anything is scored
    return ForcedCall(names[k], params, where)


def _function_name(tool: Any, k: int) -> str:
    fn = tool.get("function") if isinstance(tool, Mapping) else None
    name = fn.get("name") if isinstance(fn, Mapping) else None
    if (
        not isinstance(tool, Mapping)
        or tool.get("type") != "function"
        or not isinstance(name, str)
        or not name
    ):
        raise _refuse(
            "tools",
            f"`tools[{k}]` must be {{'type': 'function', 'function': {{'name': ..., 'parameters': ...}}}}",
        )
    return name


def _refuse(field: str, message: str) -> RequestError:
    return RequestError(message, param=field, code="tools_not_supported")


__all__ = ["ForcedCall", "forced_call"]
