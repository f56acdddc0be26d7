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


def _image_tag(
    head: bytes, sep: tuple[bytes, int, int | None] | None, key: tuple[bytes, int, int | None] | None
) -> int | None:
    """Where a string that starts with ``head`` sits, if it is an image's data URL: 0 the value of an image
    key, ``d >= 1`` an element of an array of images ``d`` deep; None for any other string. Told from ``sep``
    (the JSON between it and the string before it) and ``key`` (that string), each ``(first bytes, length,
    tag)``."""
    if not head.startswith(_DATA_URL) or sep is None or key is None or sep[1] > _KEEP:
        return None
    between = sep[0].translate(None, _BLANK)
    key_head, key_length, key_tag = key
    if between.startswith(b":"):  # the value of a key
        if key_length > len(key_head):
            return None
        if between == b":":
            return 0 if key_head in IMAGE_VALUE_KEYS else None
        if key_head not in IMAGE_ARRAY_KEYS:
            return None
        depth, between = 0, between[1:]
    elif key_tag and b"," in between:  # the next element of an array of images
        depth = key_tag
    else:
        return None
    for c in between:  # only brackets and commas, never leaving the array
        if c == 0x5B:  # [
            depth += 1
        elif c == 0x5D:  # ]
            depth -= 1
            if depth < 1:
                return None
        elif c != 0x2C or depth < 1:  # ,
            return None
    return depth if depth >= 1 else None


def default_string_limit(max_tokens: int) -> int:
    """The longest string (its bytes as sent) a body may hold for a judge with this context budget."""
    return STRING_BYTES_PER_TOKEN * max_tokens


#: Keys whose string value may be an image (a data URL): ``/v1/score``'s content segments and MMIE's items
#: (``image``), a chat ``image_url`` part (``{"url": ...}``, or the URL as the part's ``image_url`` itself).
IMAGE_VALUE_KEYS = frozenset({b"image", b"url", b"image_url"})
#: Keys whose value is an array (of arrays) of images: the reward routes' per-query ``images``.
IMAGE_ARRAY_KEYS = frozenset({b"images"})
_KEEP = 64  #: bytes kept of each run: the image keys above, ``data:``, and the JSON between key and value
_BLANK = b" \t\r\n"
_UNSET = -1


class StringRuns:
    """The length of the longest string of a body, fed its chunks as they arrive: a run of bytes between two
    ``"`` (so the JSON between two strings counts as a run too: megabytes of it belong in no request). A quote
    after a backslash does not end a run (an escaped quote, also across two chunks), so escaped quotes cannot
    cut a long string into short runs; a string that ends in an escaped backslash is then counted together
    with what follows it, which can only make a run longer (and merge runs, never make one up).

    A data URL in an image field is not bounded here (the image limits bound it once decoded): a string that
    starts with ``data:`` and is the value of an image key (:data:`IMAGE_VALUE_KEYS`: ``"url": "data:..."``)
    or an element of an array of images (:data:`IMAGE_ARRAY_KEYS`: ``"images": [["data:...", ...]]``), told
    from the JSON between it and the string before it. Anywhere else, a question or a query that starts with
    ``data:`` included, a string is text and the bound holds.

    At C speed per chunk (``bytes.split``); Python work only for the strings that start with ``data:`` (the
    first ``max_images`` of them: more images than a request may carry, and the later ones are text) and
    those over the limit. The number of pieces is bounded by :class:`StructureCount`, which counts every
    ``"`` of the same body."""

    def __init__(self, limit: int, max_images: int = 4096):
        self.limit = limit
        self.images_left = max_images  #: strings starting with ``data:`` that may still be told images
        self.inside = False  #: whether the run the last chunk ended in is inside a string
        self.run = 0  #: bytes of that run
        self.head = b""  #: its first bytes (up to :data:`_KEEP`)
        self.tag: int | None = _UNSET  #: its image tag (:func:`_image_tag`), once known
        self.before: list[tuple[bytes, int, int | None] | None] = [None, None]  #: the two runs before it
        self.backslash = False  #: whether the last chunk ended in a backslash
        #: whether a run over the limit was spared as a data URL: the parsed body then goes through
        #: :func:`misplaced_long_string`, which keeps the exemption to where the route reads an image
        self.spared = False

    def _over(self, length: int, tag: int | None) -> bool:
        """Whether a run of ``length`` bytes with image tag ``tag`` breaks the bound (noting a spared one)."""
        if length <= self.limit:
            return False
        self.spared = self.spared or tag is not None
        return tag is None

    def _ongoing_tag(self, complete: bool = False) -> int | None:
        if self.tag != _UNSET:
            return self.tag
        if not self.inside:
            return None
        if len(self.head) < len(_DATA_URL) and not complete:
            return None  # not known yet; asked again as the run grows
        if self.head.startswith(_DATA_URL):
            self.images_left -= 1
            if self.images_left < 0:
                self.tag = None
                return None
        self.tag = _image_tag(self.head, self.before[1], self.before[0])
        return self.tag

    def add(self, chunk: bytes) -> bool:
        """Count ``chunk``; False once a string (other than an image's data URL) is over the limit."""
        escaped_first = self.backslash and chunk.startswith(b'"')
        self.backslash = chunk.endswith(b"\\")
        if escaped_first:  # the quote escaped at the end of the last chunk: the run goes on
            chunk = chunk[1:]
        pieces = chunk.replace(b'\\"', b"").split(b'"')
        first = pieces[0]
        self.run += len(first)
        if len(self.head) < _KEEP:
            self.head += first[: _KEEP - len(self.head)]
        if self.run > self.limit and self._over(self.run, self._ongoing_tag()):
            return False
        if len(pieces) == 1:
            return True
        # Runs completed here: the ongoing one (index 0), then pieces[1:-1]; pieces[-1] is the next ongoing.
        tags: dict[int, int | None] = {0: self._ongoing_tag(complete=True)}
        info: dict[int, tuple[bytes, int, int | None] | None] = {
            -2: self.before[0], -1: self.before[1], 0: (self.head, self.run, tags[0])
        }  # fmt: skip

        def run_info(i: int) -> tuple[bytes, int, int | None] | None:
            if i not in info:
                info[i] = (pieces[i][:_KEEP], len(pieces[i]), tags.get(i))
            return info[i]

        if self.images_left > 0 and _DATA_URL in chunk:  # the image tags of data URLs, in order
            for j in [j for j in range(1, len(pieces)) if pieces[j][:5] == _DATA_URL]:
                if self.inside != bool(j & 1):  # inside a string (runs alternate)
                    self.images_left -= 1
                    if self.images_left < 0:
                        break
                    tags[j] = _image_tag(pieces[j], run_info(j - 1), run_info(j - 2))
        middle = pieces[1:-1]
        if middle and len(max(middle, key=len)) > self.limit:
            for j, piece in enumerate(middle, 1):
                if self._over(len(piece), tags.get(j)):
                    return False
        n = len(pieces) - 1
        self.before = [run_info(n - 2), run_info(n - 1)]
        self.inside = self.inside != bool(n & 1)
        last = pieces[-1]
        self.run, self.head = len(last), last[:_KEEP]
        self.tag = tags[n] if n in tags else _UNSET
        return not (self.run > self.limit and self._over(self.run, self._ongoing_tag()))

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
