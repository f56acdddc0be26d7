"""The last check of a filled reply: the object is valid against the client's JSON schema (Draft 2020-12,
with ``jsonschema``), else a 422 naming the keyword it fails, so that a 200 is always valid against the
schema the client sent. :mod:`judge.serve.structured` fills only the keywords it knows; this catches the
rest (``multipleOf``, ``minProperties``, ``not``, an ``enum`` of the wrong type, ...).

A client's schema is untrusted: its regular expressions (``pattern``, ``patternProperties``) are refused
(a crafted one can backtrack for ever on the judge's statement), and one validation may take at most
:data:`MAX_STEPS` keyword evaluations (nested ``allOf`` of ``$ref``s multiply them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, best_match

from judge.serve.service import RequestError

#: Most keyword evaluations one validation may take.
MAX_STEPS = 20000

_LEFT: ContextVar[list[int]] = ContextVar("_LEFT")


class _Exhausted(Exception):
    pass


def _counted(fn: Callable[..., Any]) -> Callable[..., Iterator[Any]]:
    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        left = _LEFT.get()
        left[0] -= 1
        if left[0] < 0:
            raise _Exhausted
        errors = fn(validator, value, instance, schema)
        if errors:
            yield from errors

    return run


_Validator = validators.extend(
    Draft202012Validator, {k: _counted(f) for k, f in Draft202012Validator.VALIDATORS.items()}
)


def check(schema: Mapping[str, Any], where: str) -> None:
    """A 422 naming ``where`` for a schema that is not a valid Draft 2020-12 schema, or carries a regular
    expression; called before anything is scored."""
    stack: list[Any] = [schema]
    while stack:  # the schema is bounded already (structured.MAX_NODES)
        node = stack.pop()
        if isinstance(node, Mapping):
            if isinstance(node.get("pattern"), str) or isinstance(node.get("patternProperties"), Mapping):
                raise _error(
                    where,
                    "has a `pattern` (or `patternProperties`): a client's regular expression is not run "
                    "here (it could take for ever); leave it out",
                )
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        raise _error(
            where, f"is not a valid JSON schema: `{e.validator}` at {_path(e.path)}: {e.message[:160]}"
        ) from None
    except Exception as e:  # a reference the meta-schema check cannot follow, ...
        raise _error(where, f"cannot be checked: {type(e).__name__}") from None


def validate(filled: Any, schema: Mapping[str, Any], where: str) -> None:
    """A 422 naming ``where`` and the failing keyword when ``filled`` is not valid against ``schema``."""
    token = _LEFT.set([MAX_STEPS])
    try:
        error = best_match(_Validator(schema).iter_errors(filled))
    except _Exhausted:
        raise _error(where, f"takes more than {MAX_STEPS} steps to check an answer against") from None
    except Exception as e:  # an unresolvable reference, ...
        raise _error(where, f"cannot be checked: {type(e).__name__}") from None
    finally:
        _LEFT.reset(token)
    if error is not None:
        raise _error(
            where,
            f"is not met by the judge's answer: its `{error.validator}` at {_path(error.absolute_schema_path)} "
            f"fails ({error.message[:160]}); a judge fills one score and its statement, and cannot meet it",
            code="schema_not_fillable",
        )


def _path(path: Any) -> str:
    return "/" + "/".join(str(p) for p in path)


def _error(where: str, why: str, code: str = "invalid_schema") -> RequestError:
    return RequestError(f"`{where}` {why}", param=where.partition(".")[0] or where, code=code)


__all__ = ["MAX_STEPS", "check", "validate"]
