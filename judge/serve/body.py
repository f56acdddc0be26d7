"""Request bodies on their way in: bounded while they are read, parsed off the event loop, and checked for
what JSON allows but no handler can use.

* :class:`StructureCount` counts, chunk by chunk as the body arrives, the bytes that can open a JSON value
  (``{``, ``[``, ``,`` and ``"``; inside strings too, so the count is an upper bound). Python objects
  cost far more than their JSON text (``[{},{},...]`` is 3 bytes a value and about 70 bytes once parsed),
  so a body over :func:`structure_budget` is refused with a 413 before it is parsed: the largest body the
  server parses holds at most that many values, and its parsed form stays a few times its size.
* :class:`StringRuns` finds, as the body arrives, a string longer than any text the judge's context can hold
  (data URLs aside): such a body is a 413 before it is parsed, so megabytes of text never reach the parser,
  the validators or the tokenizer, whose long C calls would hold up every other client.
* :func:`parse_json` parses a body (a worker thread calls it: a large body must not stop the event loop)
  and turns JSON nested past Python's recursion limit into a :class:`BodyError`, not a crash.
* :func:`find_lone_surrogate` finds, in a parsed body, the first string holding a lone UTF-16 surrogate
  (valid JSON, ``"\\ud800"``, but no Unicode character: it cannot be encoded, tokenised or echoed) and
  names where it is (``items[0].question``); :func:`may_hold_surrogates` tells from the raw bytes, at C
  speed, whether a body needs that walk at all.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: JSON values (upper bound, see :class:`StructureCount`) allowed per item a request may carry.
VALUES_PER_ITEM = 4096
#: ... and at least this many per request, whatever ``--max-items`` says.
MIN_VALUES = 65_536
_STRUCTURE = (b"{", b"[", b",", b'"')


class BodyError(Exception):
    """A body refused before any handler sees it: ``status`` (400, 413 or 422), the message, the field."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code


def structure_budget(max_items: int) -> int:
    """How many value-opening bytes a body may hold (see :class:`StructureCount`)."""
    return max(MIN_VALUES, VALUES_PER_ITEM * max_items)


class StructureCount:
    """A running upper bound on the JSON values of a body, fed its chunks as they arrive."""

    def __init__(self, budget: int):
        self.budget = budget
        self.seen = 0

    def add(self, chunk: bytes) -> bool:
        """Count ``chunk``; False once the body is past the budget."""
        self.seen += sum(chunk.count(b) for b in _STRUCTURE)
        return self.seen <= self.budget

    def refusal(self, max_items: int) -> str:
        return (
            f"the request body holds more than {self.budget:,} JSON values (counting each '{{', '[', ',' and "
            f"'\"', text included), more than {max_items:,} items (--max-items) can need: send fewer items "
            "or split the request"
        )


#: Bytes of JSON text a string may take per token of the judge's context budget, by default: 64 characters a
#: token (far more than any tokenizer averages over a text) times 6 bytes a character (a ``\\uXXXX`` escape,
#: the longest form JSON has), so a string over it holds more characters than could fit the context.
STRING_BYTES_PER_TOKEN = 64 * 6
_DATA_URL = b"data:"


def default_string_limit(max_tokens: int) -> int:
    """The longest string (its bytes as sent) a body may hold for a judge with this context budget."""
    return STRING_BYTES_PER_TOKEN * max_tokens


class StringRuns:
    """The length of the longest string of a body, fed its chunks as they arrive: a run of bytes between two
    ``"`` (so the JSON between two strings counts as a run too: megabytes of it belong in no request). A quote
    after a backslash does not end a run (an escaped quote, also across two chunks), so escaped quotes cannot
    cut a long string into short runs; a string that ends in an escaped backslash is then counted together
    with what follows it, which can only make a run longer. A run that starts as a data URL (``data:``, an
    image) is not bounded here: the image limits bound it once decoded.

    At C speed per chunk (``bytes.split``); the number of pieces is bounded by :class:`StructureCount`,
    which counts every ``"`` of the same body."""

    def __init__(self, limit: int):
        self.limit = limit
        self.run = 0  #: bytes of the run the last chunk ended in
        self.head = b""  #: its first bytes (up to 5: enough to tell a data URL)
        self.backslash = False  #: whether the last chunk ended in a backslash

    def _over(self, length: int, head: bytes) -> bool:
        return length > self.limit and not head.startswith(_DATA_URL)

    def add(self, chunk: bytes) -> bool:
        """Count ``chunk``; False once a string is over the limit."""
        escaped_first = self.backslash and chunk.startswith(b'"')
        self.backslash = chunk.endswith(b"\\")
        if escaped_first:  # the quote escaped at the end of the last chunk: the run goes on
            chunk = chunk[1:]
        pieces = chunk.replace(b'\\"', b"").split(b'"')
        first = pieces[0]
        self.run += len(first)
        if len(self.head) < len(_DATA_URL):
            self.head += first[: len(_DATA_URL) - len(self.head)]
        if self._over(self.run, self.head):
            return False
        if len(pieces) == 1:
            return True
        middle = pieces[1:-1]
        if middle and len(max(middle, key=len)) > self.limit:
            if any(self._over(len(p), p) for p in middle):
                return False
        last = pieces[-1]
        self.run, self.head = len(last), last[: len(_DATA_URL)]
        return not self._over(self.run, self.head)

    def refusal(self) -> str:
        return (
            f"the request body holds a string (or a stretch of JSON between two strings) of more than "
            f"{self.limit:,} bytes (--max-string-bytes), longer than any text that fits the judge's context: "
            "shorten it (images go as paths or data URLs, which this limit does not count)"
        )


NOT_JSON = "the request body is not JSON (send a JSON object with Content-Type: application/json)"


def parse_json(raw: bytes) -> Any:
    """The body's JSON value. Raises :class:`BodyError`: 400 when it is not JSON (or not UTF-8), or nested
    deeper than the parser can follow."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise BodyError(
            400, "the request body's JSON is nested too deeply to parse", code="too_deep"
        ) from None
    except ValueError:  # UnicodeDecodeError included
        raise BodyError(400, NOT_JSON, code="invalid_json") from None


def may_hold_surrogates(raw: bytes) -> bool:
    """Whether the JSON text ``raw`` has a surrogate escape at all (a lone surrogate can come from nowhere
    else: raw surrogate bytes are not UTF-8): the cheap test before :func:`find_lone_surrogate`."""
    return _SURROGATE_ESCAPE.search(raw) is not None


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def find_lone_surrogate(value: Any, where: str = "") -> str | None:
    """The field of the first string (or key) in ``value`` (a parsed body, or the part of one at ``where``)
    that holds a lone UTF-16 surrogate: valid JSON (``"\\ud800"``) but no Unicode character, so it can be
    neither encoded, tokenised nor echoed. None when there is none. Iterative: any depth is safe."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if not _encodable(node):
                return path or "body"
        elif isinstance(node, dict):
            for k, v in reversed(node.items()):  # reversed: the stack then pops them in the body's order
                here = f"{path}.{k}" if path else str(k)
                if not _encodable(k):
                    return path or "body"
                stack.append((v, here))
        elif isinstance(node, list):
            stack.extend((node[i], f"{path}[{i}]") for i in reversed(range(len(node))))
    return None


def lone_surrogate_message(field: str) -> str:
    return f"`{field}` {SURROGATE}"


SURROGATE = (
    "holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair), which is no Unicode "
    "character; send text as UTF-8 or as complete surrogate pairs"
)


def _encodable(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


__all__ = [
    "NOT_JSON",
    "SURROGATE",
    "BodyError",
    "StructureCount",
    "find_lone_surrogate",
    "lone_surrogate_message",
    "may_hold_surrogates",
    "parse_json",
    "structure_budget",
]
