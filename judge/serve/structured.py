"""A client's JSON schema filled from the judge's reading: what ``response_format`` ``json_schema`` and a
forced tool call (:mod:`judge.serve.tool_calls`) answer for a scored reply.

The judge reads one score; a schema names where it goes and in which form. **The score property** is the
one top-level property that can hold a score: a number or integer, a boolean, or a label set (a string
``enum``, or ``oneOf``/``anyOf`` of ``const``). None, or several, is a 422 naming them. Its value:

* ``number``/``integer`` with ``minimum`` and ``maximum``: the reading's point on that range
  (:func:`~judge.serve.protocols.scales.point`; for an integer, the nearest integer, halves up); without
  both bounds, the value on the tool's scale for a tool's prompt with one, else the calibrated expected
  score on the rubric's scale (an integer: the nearest one); a numeric ``enum``: the nearest offered value;
* ``boolean``: the judge's verdict, ``true`` when the response passes (unit score at least 0.5, as the tools'
  binary answers, :func:`~judge.serve.protocols.scales.binary`);
* labels: a known binary pair (correct/incorrect, yes/no, Y/N, pass/fail, true/false, ... see
  :data:`BINARY`) from the same verdict; labels of one known ordered ladder (poor < fair < good, low <
  medium < high, incorrect < partially correct < correct, ... see :data:`LADDERS`) or numbers written as
  text, in their order onto the reading's point; any other labels are categories without an order and
  are refused (422 naming the property and the labels).

Every string property is the judge's statement of its reading (the tool's note for a tool's prompt; else
the expected score, the scale, the most likely score and its probability, the probability of a pass);
``const`` properties get their constant, ``null`` ones null, arrays ``[]`` and objects are filled the same
way. Properties that are not required and not strings or the score are left out. What cannot be met
(a string ``pattern``, which is not run, a second number, bounds the value falls outside) is a
422 naming the property. A schema is bounded (:data:`MAX_NODES`, :data:`MAX_DEPTH`) as written and as
filled: each ``$ref`` followed and each node filled counts against one budget of :data:`MAX_NODES` per fill
(a few KB of nested ``$defs`` could otherwise expand to millions of nodes), checked once before anything is
scored; local ``$ref``s (``#/$defs/...``, ``#/definitions/...``) are followed, anything else is a 422.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from judge.serve import schema_valid
from judge.serve.protocols.base import Reading
from judge.serve.protocols.scales import PASS, binary, integer_scale, nearest_choice, point
from judge.serve.service import RequestError

#: Most nodes (objects, arrays, values) a client's schema may have, and how deep it may nest; MAX_NODES
#: also bounds one fill (each ``$ref`` followed and each node filled counts once).
MAX_NODES = 2000
MAX_DEPTH = 32

#: Binary label pairs, the passing label first (compared lower-case, with ``-``/space read as ``_``).
BINARY: tuple[tuple[str, str], ...] = (
    ("correct", "incorrect"), ("yes", "no"), ("y", "n"), ("pass", "fail"), ("passed", "failed"),
    ("true", "false"), ("right", "wrong"), ("good", "bad"), ("accurate", "inaccurate"),
    ("relevant", "irrelevant"), ("relevant", "unrelated"), ("factual", "hallucinated"), ("grounded", "hallucinated"),
    ("helpful", "not_helpful"), ("helpful", "unhelpful"), ("acceptable", "unacceptable"),
    ("valid", "invalid"), ("consistent", "inconsistent"), ("faithful", "unfaithful"),
)  # fmt: skip

#: Ordered label ladders, worst first: a label set drawn from one ladder is ordinal.
LADDERS: tuple[tuple[str, ...], ...] = (
    ("terrible", "very_poor", "poor", "fair", "good", "very_good", "excellent"),
    ("very_bad", "bad", "ok", "good", "great"),
    ("bad", "average", "good", "excellent"),
    ("very_low", "low", "medium", "high", "very_high"),
    ("incorrect", "partially_correct", "correct"),
    ("incorrect", "partial", "correct"),
    ("irrelevant", "partially_relevant", "relevant"),
    ("i", "p", "c"),  # inspect-ai's grades
    ("no", "partially", "yes"),
    ("fail", "partial", "pass"),
)


def _norm(label: str) -> str:
    return re.sub(r"[\s\-]+", "_", label.strip().lower())


# ----------------------------------------------------------------------------- checking a schema


def check_schema(schema: Any, where: str) -> None:
    """A 422 naming ``where`` for a schema that is not an object schema with ``properties``, or is over
    the bounds; called before anything is scored."""
    if not isinstance(schema, Mapping):
        raise _error(where, f"must be a JSON schema object (got {type(schema).__name__})")
    _bounded(schema, where)
    top = _resolve(schema, schema, where)
    if top.get("type", "object") != "object" or not isinstance(top.get("properties"), Mapping):
        raise _error(where, "must be an object schema (`type: object`) with `properties`")
    required = top.get("required")
    if isinstance(required, list):
        absent = [r for r in required if r not in top["properties"]]
        if absent:
            raise _error(
                where, f"has `required` {absent!r} absent from `properties`: no answer can hold them"
            )
    _expansion(schema, top, where)
    schema_valid.check(schema, where)


class _Budget:
    """The nodes one fill may still visit: each ``$ref`` followed and each node filled counts once."""

    def __init__(self, where: str) -> None:
        self.left, self.where = MAX_NODES, where

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _error(
                self.where,
                f"expands past {MAX_NODES} nodes once its `$ref`s are followed: at most {MAX_NODES} nodes "
                "after expansion",
                code="schema_too_large",
            )


def _expansion(schema: Mapping[str, Any], top: Mapping[str, Any], where: str) -> None:
    """Walk what :func:`fill` would fill, with a statement of no text, so that a schema expanding past the
    budget is refused before anything is scored; what else the walk finds is :func:`fill`'s to say."""
    budget = _Budget(where)
    required = top["required"] if isinstance(top.get("required"), list) else []
    for key, sub in top["properties"].items():
        at = f"{where}.properties.{key}"
        try:
            node = _resolve(sub, schema, at, budget)
            if _kind(node)[0] in ("number", "integer", "boolean", "labels"):
                continue
            if key in required or _kind(node)[0] == "string":
                _plain(node, "", schema, at, 0, budget)
        except RequestError as e:
            if e.code == "schema_too_large":
                raise


def _bounded(schema: Any, where: str) -> None:
    nodes, stack = 0, [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES or depth > MAX_DEPTH:
            raise _error(where, f"is too large: at most {MAX_NODES} nodes, nested at most {MAX_DEPTH} deep")
        if isinstance(node, Mapping):
            for name in _BOUNDS:  # checked before anything is scored
                if isinstance(node.get(name), (int, float)) and not isinstance(node[name], bool):
                    _finite(node[name], where, name)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


#: Numeric keywords a schema's bounds are written with: each must be a finite number.
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def dumps(filled: Any, where: str) -> str:
    """A filled object as JSON text, strict (RFC 8259: no ``Infinity`` or ``NaN``, which strict parsers
    refuse); a 422 naming ``where`` for a non-finite number (a ``const`` written ``1e400``)."""
    try:
        return json.dumps(filled, allow_nan=False)
    except ValueError:
        raise _error(
            where, "asks for a number that is not finite (a value written 1e400 is infinity)"
        ) from None


def _resolve(
    node: Any, root: Mapping[str, Any], where: str, budget: _Budget | None = None
) -> Mapping[str, Any]:
    """``node`` with local ``$ref``s followed (a chain at most :data:`MAX_DEPTH` long) and a one-branch
    ``allOf`` opened (what pydantic writes for a described model field); each step spends ``budget``."""
    for _ in range(MAX_DEPTH):
        if budget is not None:
            budget.spend()
        if not isinstance(node, Mapping):
            raise _error(where, f"is not a schema object (got {type(node).__name__})")
        ref = node.get("$ref")
        if ref is not None:
            if not isinstance(ref, str) or not ref.startswith("#/"):
                raise _error(where, f"`$ref` {ref!r} cannot be resolved: only local references (#/$defs/...)")
            target: Any = root
            for key in ref[2:].split("/"):
                key = key.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or key not in target:
                    raise _error(
                        where, f"`$ref` {ref!r} cannot be resolved: no such definition in the schema"
                    )
                target = target[key]
            if not isinstance(target, Mapping):
                raise _error(
                    where, f"`$ref` {ref!r} points at a {type(target).__name__}, not a schema object"
                )
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            continue
        all_of = node.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            node = {**all_of[0], **{k: v for k, v in node.items() if k != "allOf"}}
            continue
        return node
    raise _error(where, f"`$ref`s nest more than {MAX_DEPTH} deep (a recursive schema)")


def _kind(node: Mapping[str, Any]) -> tuple[str, list[Any] | None]:
    """The node's kind (``number``, ``integer``, ``boolean``, ``string``, ``labels``, ``const``, ``null``,
    ``object``, ``array``, or ``?``) and, for labels, the offered values."""
    if "const" in node:
        return "const", [node["const"]]
    branches = node.get("oneOf", node.get("anyOf"))
    if isinstance(branches, list) and branches:
        real = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
        if real and all(isinstance(b, Mapping) and "const" in b for b in real):
            return "labels", [b["const"] for b in real]
        if len(real) == 1 and isinstance(real[0], Mapping):
            return _kind({**real[0], **{k: v for k, v in node.items() if k not in ("oneOf", "anyOf")}})
        return "?", None
    enum = node.get("enum")
    if isinstance(enum, list):
        values = [v for v in enum if v is not None]
        return ("labels", values) if len(values) > 1 else ("const", values or [None])
    typ = node.get("type")
    if isinstance(typ, list):  # ["string", "null"]: an optional value, as strict schemas write one
        real_types = [t for t in typ if t != "null"]
        typ = real_types[0] if len(real_types) == 1 else "null" if not real_types else "?"
    return (typ if isinstance(typ, str) else "?"), None


# ----------------------------------------------------------------------------- filling it


def fill(schema: Mapping[str, Any], judge: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """The object the client's ``schema`` asks for, filled from the reply's ``judge`` field (see the module
    doc); a 422 naming ``where`` (and the property) for what cannot be filled."""
    check_schema(schema, where)
    top = _resolve(schema, schema, where)
    if judge is None or not judge.get("scored", True):
        raise _error(where, "can be filled only for a scored reply, and this reply scored nothing")
    if not isinstance(judge.get("expected"), (int, float)):
        raise _error(
            where,
            "can be filled from one score, and this tool's prompt gives several (a comparison of two "
            "responses, or several criteria): leave response_format out and read the tool's own answer",
        )
    props: Mapping[str, Any] = top["properties"]
    required: list[Any] = top["required"] if isinstance(top.get("required"), list) else []
    budget = _Budget(where)
    nodes = {str(k): _resolve(v, schema, f"{where}.properties.{k}", budget) for k, v in props.items()}
    candidates = [k for k, n in nodes.items() if _kind(n)[0] in ("number", "integer", "boolean", "labels")]
    if len(candidates) != 1:
        named = ", ".join(repr(k) for k in candidates) or "none"
        raise _error(
            where,
            f"needs exactly one property for the score (a number, integer, boolean or label enum); it has "
            f"{len(candidates)} ({named}): a judge reads one score",
            code="schema_not_fillable",
        )
    reading = _reading(judge)
    statement = _statement(judge, reading)
    out: dict[str, Any] = {}
    for key, node in nodes.items():
        at = f"{where}.properties.{key}"
        if key == candidates[0]:
            out[key] = _score(node, judge, reading, at)
        elif key in required or _kind(node)[0] == "string":
            out[key] = _plain(node, statement, schema, at, 0, budget)
    schema_valid.validate(out, schema, where)  # what the keywords filled here do not cover
    return out


def _reading(judge: Mapping[str, Any]) -> Reading:
    scale = judge.get("scale") or [0, 1]
    return Reading(float(judge["expected"]), int(min(scale)), int(max(scale)))


def _statement(judge: Mapping[str, Any], reading: Reading) -> str:
    """What a string property says: the tool's note, or the judge's reading in words."""
    if judge.get("note"):
        return str(judge["note"])
    scale, dist = judge.get("scale") or [], judge.get("distribution") or []
    text = (
        f"Learned judge's reading of criterion {judge.get('criterion')!r}: expected score "
        f"{reading.expected:.3f} on the scale {reading.lo}-{reading.hi}"
    )
    if scale and len(dist) == len(scale):
        best = max(range(len(dist)), key=lambda i: dist[i])
        p_pass = math.fsum(
            p for v, p in zip(scale, dist, strict=True) if Reading(v, reading.lo, reading.hi).unit >= PASS
        )
        text += (
            f", most likely {scale[best]} (probability {dist[best]:.3f}), probability of a pass {p_pass:.3f}"
        )
    return text + "."


def _score(node: Mapping[str, Any], judge: Mapping[str, Any], reading: Reading, at: str) -> Any:
    kind, labels = _kind(node)
    if kind == "boolean":
        return binary(reading)
    if kind == "labels":
        return _label(labels or [], reading, at)
    for name in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if name in node:
            _finite(node[name], at, name)
    lo, hi = node.get("minimum"), node.get("maximum")
    bounded = all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in (lo, hi))
    if bounded and lo > hi:  # type: ignore[operator]
        raise _error(at, f"has `minimum` {lo} above `maximum` {hi}: the range is reversed and holds no score")
    if bounded and lo < hi:  # type: ignore[operator]
        if not math.isfinite(float(hi) - float(lo)):  # type: ignore[arg-type]
            raise _error(at, f"has bounds {lo} and {hi} too far apart to place a score between them")
        if kind == "integer":
            value: float = integer_scale(reading, math.ceil(lo), math.floor(hi))  # type: ignore[arg-type]
        else:
            value = point(reading, float(lo), float(hi))  # type: ignore[arg-type]
    else:
        tool = judge.get("value")
        value = tool if isinstance(tool, (int, float)) and not isinstance(tool, bool) else reading.expected
        if kind == "integer":
            value = math.floor(value + 0.5)
    for name, ok in (("minimum", lambda b: value >= b), ("maximum", lambda b: value <= b),
                     ("exclusiveMinimum", lambda b: value > b), ("exclusiveMaximum", lambda b: value < b)):  # fmt: skip
        bound = node.get(name)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and not ok(bound):
            raise _error(at, f"has `{name}` {bound}, which the judge's score {value} does not meet")
    return value


def _label(labels: Sequence[Any], reading: Reading, at: str) -> Any:
    """The label the reading maps to (see the module doc), or a 422 naming the labels."""
    numbers = [_number(v) for v in labels]
    if all(n is not None for n in numbers):  # numbers, or numbers written as text
        chosen = nearest_choice(reading, [float(n) for n in numbers])  # type: ignore[arg-type]
        return labels[[float(n) for n in numbers].index(chosen)]  # type: ignore[arg-type]
    if all(isinstance(v, str) for v in labels):
        norm = [_norm(v) for v in labels]
        if len(norm) == 2:
            for good, bad in BINARY:
                if set(norm) == {good, bad}:
                    return labels[norm.index(good if binary(reading) else bad)]
        for ladder in LADDERS:
            if len(set(norm)) == len(norm) and set(norm) <= set(ladder):
                ordered = sorted(range(len(norm)), key=lambda i: ladder.index(norm[i]))
                return labels[ordered[integer_scale(reading, 0, len(ordered) - 1)]]
    raise _error(
        at,
        f"offers the labels {list(labels)!r}, which cannot be mapped to the judge's scale "
        f"({reading.lo}-{reading.hi}): they are categories without an order this server knows. It fills "
        "a number, a boolean, a binary pair (correct/incorrect, yes/no, pass/fail, Y/N, true/false, ...), "
        "ordered labels (poor/fair/good, low/medium/high, incorrect/partially correct/correct, ...) or "
        "numbers as labels",
        code="labels_not_ordered",
    )


def _number(v: Any) -> float | None:
    """``v`` as a finite float (a number or a number written as text), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        x = float(v)
    except (ValueError, OverflowError):  # not a number; an integer past a float's range
        return None
    return x if math.isfinite(x) else None


def _finite(v: Any, at: str, name: str) -> float:
    """A schema's bound as a finite float, else a 422 (``1e400`` is read as infinity, ``10**400`` is past a
    float's range: a score placed against either is no JSON number)."""
    x = _number(v) if not isinstance(v, str) else None
    if x is None:
        raise _error(at, f"has `{name}` {str(v)[:40]!r}, which must be a finite number")
    return x


def _plain(
    node: Mapping[str, Any], statement: str, root: Mapping[str, Any], at: str, depth: int, budget: _Budget
) -> Any:
    """A property that is not the score: a string says the statement, the rest their emptiest valid value."""
    budget.spend()
    kind, values = _kind(node)
    if kind == "const":
        return (values or [None])[0]
    if kind == "string":
        text = statement
        if isinstance(node.get("maxLength"), int):
            text = text[: node["maxLength"]]
        if isinstance(node.get("minLength"), int) and len(text) < node["minLength"]:
            raise _error(at, f"has `minLength` {node['minLength']}, longer than the judge's statement")
        if "pattern" in node:  # a client's regular expression is not run here (it could take forever)
            raise _error(at, "has a `pattern`, which the judge's statement is not held to: leave it out")
        return text
    if kind == "null":
        return None
    if kind == "array" and not node.get("minItems"):
        return []
    if kind == "object" and depth < MAX_DEPTH:
        props: Mapping[str, Any] = node["properties"] if isinstance(node.get("properties"), Mapping) else {}
        required: list[Any] = node["required"] if isinstance(node.get("required"), list) else []
        out = {}
        for key, sub in props.items():
            sub_at = f"{at}.properties.{key}"
            resolved = _resolve(sub, root, sub_at, budget)
            if key in required or _kind(resolved)[0] == "string":
                out[str(key)] = _plain(resolved, statement, root, sub_at, depth + 1, budget)
        return out
    raise _error(
        at,
        f"is a required property of kind {kind!r} that a judge's one score cannot fill (it fills the score "
        "property, strings, constants, nulls, empty arrays and objects of those)",
        code="schema_not_fillable",
    )


def _error(where: str, why: str, code: str = "invalid_schema") -> RequestError:
    field, _, rest = where.partition(".")
    return RequestError(f"`{where}` {why}", param=field or where, code=code)


# ----------------------------------------------------------------------------- a schema in the prompt

#: Names a field list may give the score under (``json_object`` with the keys described in words).
SCORE_NAMES = ("score", "rating", "grade", "verdict", "label", "result", "value", "judgement", "judgment")
#: How many ``{`` of the system text are tried as the start of a quoted schema (each try is linear).
MAX_SCHEMA_TRIES = 64
_FIELDS = re.compile(
    r"\b(?:keys|fields|properties)\b[^\n.:]{0,40}?:?\s*((?:[`\"']\w{1,64}[`\"'](?:\s*(?:,|and|or)\s*)?){2,16})",
    re.IGNORECASE,
)


def prompt_schema(system: str) -> dict[str, Any] | None:
    """The schema a ``json_object`` request's system text describes, or None: the first JSON object quoted
    in it that is an object schema with ``properties`` (a prompt quoting a JSON Schema), else the keys
    it lists in words ("with the keys "score" and "reason"": the one named like a score, see
    :data:`SCORE_NAMES`, is a number, the others strings). Only the system messages are read: the user
    message carries the item, whose text is never taken for instructions."""
    decoder = json.JSONDecoder()
    start = system.find("{")
    for _ in range(MAX_SCHEMA_TRIES):
        if start < 0:
            break
        try:
            obj, _end = decoder.raw_decode(system, start)
        except (ValueError, RecursionError):  # not JSON, or nested past the decoder's stack: no schema
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("properties"), dict):
            return obj
        start = system.find("{", start + 1)
    m = _FIELDS.search(system[:20000])
    if m is None:
        return None
    names = list(dict.fromkeys(re.findall(r"[`\"'](\w+)[`\"']", m.group(1))))
    scores = [n for n in names if n.lower() in SCORE_NAMES]
    if len(scores) != 1:
        return None
    props = {n: {"type": "number"} if n == scores[0] else {"type": "string"} for n in names}
    return {"type": "object", "properties": props, "required": names}


__all__ = [
    "BINARY",
    "LADDERS",
    "MAX_DEPTH",
    "MAX_NODES",
    "SCORE_NAMES",
    "check_schema",
    "dumps",
    "fill",
    "prompt_schema",
]
