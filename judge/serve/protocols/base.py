"""What a judge protocol is, the registry, and the pieces every protocol uses to read a tool's prompt.

A **protocol** is one tool's grading prompt: how to recognise it (:meth:`Protocol.match`, from the
template's stable markers), what a judge needs from it (:meth:`Protocol.extract`: the question, the
response or responses under evaluation, the reference answer, the tool's own criterion text, the images)
and the answer the tool's parser expects (:meth:`Protocol.render`, on the tool's scale, from the
:mod:`~judge.serve.protocols.scales` mappings). Each protocol module registers its protocols where they
are defined (:func:`register_protocol`), as the benchmarks do; :mod:`judge.serve.protocols.reply`
scores what was extracted with the engine the chat route uses.

A request is read as a :class:`Prompt`: its system messages' text, and its one user message flattened to
one string in which each image part is :data:`IMAGE` (clients split or merge text parts freely). A
conversation with an assistant turn or several user messages is no tool's grading prompt.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from judge.core.errors import JudgeError
from judge.core.rubric import Rubric
from judge.serve.judge_prompt import IMAGE, flatten

Content = list[dict[str, Any]]  #: text and image parts, as a prediction record holds them


class ProtocolError(JudgeError):
    """A prompt that carries a tool's markers but not the structure its template gives (a 422)."""


@dataclass(frozen=True)
class Prompt:
    """A chat request as the protocols read it: ``system`` (the system messages' text), ``text`` (the one
    user message, each image part as :data:`IMAGE`) and ``images`` (local files, in order)."""

    system: str
    text: str
    images: tuple[str, ...]

    @classmethod
    def of(cls, messages: Sequence[Mapping[str, Any]], images: Sequence[str]) -> Prompt | None:
        """The prompt of chat-template messages (``{"role", "content": [{"type": "text"|"image"}]}``);
        None for a conversation that is not one user message after any system messages."""
        system = [m for m in messages if m["role"] == "system"]
        rest = [m for m in messages if m["role"] != "system"]
        if len(rest) != 1 or rest[0]["role"] != "user" or messages[-1]["role"] != "user":
            return None
        flat = flatten(rest[:1])
        sys_text = "\n".join(p.get("text", "") for m in system for p in m["content"])
        if flat.count(IMAGE) != len(images):
            return None
        return cls(sys_text, flat, tuple(images))

    @property
    def whole(self) -> str:
        """System and user text together: where a tool's instructions may sit."""
        return f"{self.system}\n{self.text}" if self.system else self.text

    def content(self, start: int, end: int) -> Content:
        """The user text between ``start`` and ``end`` as content parts, each image in its place; the
        text is stripped at both ends (templates pad their fields with blank lines)."""
        out: Content = []
        numbers = _image_numbers(self.text)
        piece = self.text[start:end]
        offset = start
        for k, chunk in enumerate(piece.split(IMAGE)):
            if k:
                out.append({"type": "image", "image": self.images[numbers[offset - 1]]})
            if chunk:
                out.append({"type": "text", "text": chunk})
            offset += len(chunk) + 1
        return _strip(out)

    def images_outside(self, spans: Sequence[tuple[int, int]]) -> Content:
        """The images outside every span (before a template's text or appended after it, as lmms-eval's
        ``Request.images`` are): they go with the question."""
        numbers = _image_numbers(self.text)
        return [
            {"type": "image", "image": self.images[k]}
            for pos, k in numbers.items()
            if not any(a <= pos < b for a, b in spans)
        ]


def _image_numbers(text: str) -> dict[int, int]:
    """Position of each image marker -> its index among the images (``str.find``: C speed on long text)."""
    out: dict[int, int] = {}
    pos = text.find(IMAGE)
    while pos >= 0:
        out[pos] = len(out)
        pos = text.find(IMAGE, pos + 1)
    return out


def _strip(parts: Content) -> Content:
    if parts and parts[0]["type"] == "text":
        parts[0] = {"type": "text", "text": parts[0]["text"].lstrip()}
    if parts and parts[-1]["type"] == "text":
        parts[-1] = {"type": "text", "text": parts[-1]["text"].rstrip()}
    return [p for p in parts if p["type"] != "text" or p["text"]]


def text_of(parts: Content) -> str:
    """The text of content parts (images left out)."""
    return "".join(p["text"] for p in parts if p["type"] == "text")


@dataclass(frozen=True)
class Fields:
    """Where a template's slots lie in the user text: ``spans`` (one per marker, the text after it up to
    the next marker), ``head`` (the text before the first marker) and ``tail`` (from the end marker on):
    head and tail are the template's fixed parts, where its instructions and scale are read."""

    spans: list[tuple[int, int]]
    head: str
    tail: str


def fields(
    prompt: Prompt,
    forward: Sequence[str],
    backward: Sequence[str] = (),
    *,
    end: str | None = None,
    free_response: bool = False,
) -> Fields:
    """Split the user text at a template's fixed markers (plain strings; linear time, no pattern).

    The markers, ``forward`` then ``backward`` (in template order; the names say where the evaluated
    response's slot lies: after the last forward marker), must split the text one way only. The first
    marker is the first in the text (only the template's fixed head precedes it) and ``end`` (the
    template's closing marker, after which no slot follows) the last; each marker between them is placed
    both as early as the text allows (``find`` from the start) and as late (``rfind`` from the end). Where
    the two placements differ, a slot quotes its own template's separators (a response A that writes
    "end A, start B" and text after it, a question quoting the next field's heading) and the fields could
    be read more than one way: that is refused, naming the marker, rather than guessed. So no slot can
    shift another slot's boundary. Raises :class:`ProtocolError` naming a missing or repeated marker.

    ``free_response`` (the single-response templates): the evaluated response, the slot after the last
    forward marker, may hold any text, its own template's markers included, and is never refused for it,
    so a model under evaluation cannot make its own grading fail. Its opening marker is taken at its first
    placement and the markers after it (``backward``, ``end``) at their last, so the response stays whole;
    the markers before it must still split the text before that opening one way only."""
    text = prompt.text
    marks = [*forward, *backward]
    first = text.find(marks[0])
    if first < 0:
        raise ProtocolError(f"the prompt has no {_shown(marks[0])} where its template puts one")
    low = first + len(marks[0])
    stop = len(text)
    if end is not None:
        stop = text.rfind(end, low)
        if stop < 0:
            raise ProtocolError(f"the prompt has no {_shown(end)} where its template puts one")
    early = [first]
    for prev, marker in zip(marks, marks[1:], strict=False):
        i = text.find(marker, early[-1] + len(prev), stop)
        if i < 0:
            raise ProtocolError(f"the prompt has no {_shown(marker)} where its template puts one")
        early.append(i)
    late: list[int] = []
    limit = stop
    for marker in reversed(marks[1:]):
        limit = text.rfind(marker, low, limit)  # exists: the early placement is one
        late.append(limit)
    late = [first, *late[::-1]]
    checked = len(marks)
    if free_response:
        opening = len(forward) - 1  # the response's opening marker: its first placement
        checked = opening
        limit = early[opening]
        late_before: list[int] = []
        for marker in reversed(marks[1:opening]):
            limit = text.rfind(marker, low, limit)
            late_before.append(limit)
        late[:opening] = [first, *late_before[::-1]]
        # After the response: the last placements, in order, none inside the text before its opening.
        for k in range(opening + 1, len(marks)):
            early[k] = late[k]
            if early[k] < early[k - 1] + len(marks[k - 1]):
                raise ProtocolError(f"the prompt has no {_shown(marks[k])} where its template puts one")
    for k, (a, b) in enumerate(zip(early[:checked], late[:checked], strict=True)):
        if a != b:
            raise ProtocolError(
                f"its {_shown(marks[k])} appears more than once where its template puts one, so its fields "
                "could be read more than one way (a slot quotes the template's own markers)"
            )
    ends = [i + len(m) for i, m in zip(early, marks, strict=True)]
    spans = [(ends[k], early[k + 1]) for k in range(len(marks) - 1)]
    spans.append((ends[-1], stop))
    return Fields(spans, text[:first], text[stop:])


def _shown(marker: str) -> str:
    return repr(marker.strip()[:60])


def trim_rule(text: str, span: tuple[int, int], char: str, least: int = 3) -> tuple[int, int]:
    """``span`` without a trailing rule of ``char`` (``least`` or more, as ``***`` or a line of dashes that
    templates put between fields) and the whitespace around it; linear (plain ``rstrip``)."""
    a, b = span
    piece = text[a:b].rstrip()
    ruled = piece.rstrip(char)
    if len(piece) - len(ruled) >= least:
        piece = ruled.rstrip()
    return a, a + len(piece)


# ----------------------------------------------------------------------------- what a protocol gives


Mode = Literal["point", "pair", "criteria", "none"]


@dataclass
class Task:
    """What a protocol extracted: the item to score and what its answer needs.

    ``mode``: ``point`` (one response, scored), ``pair`` (two responses, compared), ``criteria`` (one
    response scored on several of the judge's criteria, ``criteria`` naming them per key of the tool's
    rubric), ``none`` (nothing to score: the answer is rendered from the prompt alone). ``criterion_text``:
    the tool's own rubric or criterion, reported (the judge scores its own criteria). ``options``: what the
    render needs (the tool's scale, the tokens it asks for)."""

    mode: Mode
    question: Content
    responses: list[Content]
    reference: Content | None = None
    criterion_text: str | None = None
    criteria: dict[str, str | None] = field(
        default_factory=dict
    )  #: tool key -> judge criterion (None: default)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reading:
    """The judge's calibrated reading of one response on one criterion: its expected score (the mean of the
    calibrated distribution; the calibrated score) on the rubric's scale ``lo``..``hi``."""

    expected: float
    lo: int
    hi: int

    @property
    def unit(self) -> float:
        """The expected score scaled to [0, 1]."""
        return (self.expected - self.lo) / (self.hi - self.lo)


@dataclass
class Outcome:
    """The judge's readings for a task: per response (``point``, ``pair``) or per tool key (``criteria``),
    and for a pair, the preference (:class:`~judge.models.preference.Preference`)."""

    readings: list[Reading] = field(default_factory=list)
    by_key: dict[str, Reading] = field(default_factory=dict)
    preference: Any = None


class Protocol(ABC):
    """One tool's grading prompt (see the module doc). Subclasses set ``name`` (``prometheus-absolute``),
    ``tool`` (the package, as pip names it), ``answer`` (what the reply holds, for the docs and the 422 that
    lists protocols) and ``scale`` (the kind of scale, a name in :mod:`~judge.serve.protocols.scales`)."""

    name: str
    tool: str
    answer: str
    scale: str
    json_reply: bool = False  #: the rendered answer is a JSON object (honours response_format json_object)

    @abstractmethod
    def anchor(self, prompt: Prompt) -> tuple[int, int] | None:
        """Where this tool's template lies in the user text, from its fixed parts: (the position of its
        opening marker, the end of its closing one), or None when ``prompt`` is not its grading prompt.
        Markers are looked up with ``str.find``/``rfind`` only (linear time)."""

    def match(self, prompt: Prompt) -> bool:
        """Whether ``prompt`` is this tool's grading prompt."""
        return self.anchor(prompt) is not None

    @abstractmethod
    def extract(self, prompt: Prompt, rubric: Rubric) -> Task:
        """What the judge needs; raises :class:`ProtocolError` when the prompt has the markers but not the
        template's structure."""

    @abstractmethod
    def render(self, task: Task, outcome: Outcome, note: str) -> str:
        """The reply's content: the answer the tool's parser reads, on its scale; ``note`` says what the
        judge scored (its family and criterion), for the free-text part of the answer where there is one."""

    def value(self, task: Task, outcome: Outcome) -> float | None:
        """The answer's one number on the tool's scale, where it has one (a JSON schema's number gets it)."""
        return None


#: name -> protocol, in registration order (the first that matches a prompt answers it).
REGISTRY: dict[str, Protocol] = {}


def register_protocol(protocol: Protocol) -> Protocol:
    """Add a protocol to the registry; a second one of the same name is an error."""
    if protocol.name in REGISTRY:
        raise ValueError(f"a protocol named {protocol.name!r} is registered already")
    REGISTRY[protocol.name] = protocol
    return protocol


def find_protocol(prompt: Prompt) -> Protocol | None:
    """The protocol whose template frames ``prompt``: of those that recognise it, the one whose opening
    marker comes first, then whose closing marker ends last, then the first registered. A tool's markers
    quoted inside another tool's slot lie within that template's frame, so they never win."""
    best: tuple[int, int, int] | None = None
    found = None
    for k, proto in enumerate(REGISTRY.values()):
        where = proto.anchor(prompt)
        if where is not None and (best is None or (where[0], -where[1], k) < best):
            best, found = (where[0], -where[1], k), proto
    return found


def protocol_target(cfg: Any, rubric: Rubric) -> tuple[str, str] | str:
    """The (task family, criterion) tool prompts are scored on, from the server's settings
    (``protocol_task``, else ``reward_task``, else the rubric's only family; ``protocol_criterion``), or,
    when the rubric has several families and none is set, why there is none. Raises ConfigError for a
    family or criterion the rubric does not have."""
    from judge.core.errors import ConfigError

    task = cfg.protocol_task or cfg.reward_task
    families = rubric.families
    if task is None:
        if len(families) != 1:
            return (
                f"the server was not told which task family of rubric {rubric.name!r} "
                f"({', '.join(families)}) to score tools' prompts on: start judge-serve with --protocol-task "
                "FAMILY (or --reward-task FAMILY)"
            )
        task = next(iter(families))
    if task not in families:
        raise ConfigError(
            f"`protocol_task` {task!r} is not a family of rubric {rubric.name!r} ({', '.join(families)})"
        )
    if cfg.protocol_criterion not in families[task].criterion_ids:
        raise ConfigError(
            f"`protocol_criterion` {cfg.protocol_criterion!r} is not a criterion of family {task!r} "
            f"({', '.join(families[task].criterion_ids)})"
        )
    return task, cfg.protocol_criterion


def protocol_list() -> str:
    """The registered protocols, one per line, for errors and the startup banner."""
    return "; ".join(f"{p.name} ({p.tool}: {p.answer})" for p in REGISTRY.values())


__all__ = [
    "IMAGE",
    "REGISTRY",
    "Content",
    "Outcome",
    "Prompt",
    "Protocol",
    "ProtocolError",
    "Reading",
    "Task",
    "Fields",
    "fields",
    "find_protocol",
    "protocol_list",
    "protocol_target",
    "register_protocol",
    "text_of",
    "trim_rule",
]
