"""What every command shares: the argument parser, options generated from a settings model, checked
number options, and how an expected error (or warning) names the command's flags.

The library names a setting by its field, in backticks (`no_judge`); a command shows the flag that sets
it (``--no-judge``). The mapping is read from the command's own parser (:func:`flag_names`), so each
command translates the settings it has, in the spelling it has.
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import sys
import textwrap
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, NoReturn, TypeVar, Union, get_args, get_origin

from annotated_types import Ge
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from judge.core.errors import JudgeError

#: the widest line of a command's help (its description wrapped to it, its options' help too)
HELP_WIDTH = 100


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` within :data:`HELP_WIDTH` columns (or the terminal's, if narrower): the description is
    wrapped by :class:`Parser`, the epilog (examples) is shown as written, and an option's help is wrapped
    between words, never inside a flag (``--allow-unauthenticated`` stays whole)."""

    def __init__(self, prog: str, **kwargs: Any):
        width = min(shutil.get_terminal_size().columns, HELP_WIDTH) - 2
        super().__init__(prog, width=width, max_help_position=min(30, width // 3), **kwargs)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False) or [""]


def wrap_paragraphs(text: str, width: int = HELP_WIDTH - 2) -> str:
    """``text`` wrapped to ``width``, paragraph by paragraph (paragraphs are separated by blank lines)."""
    paras = [" ".join(p.split()) for p in text.split("\n\n")]
    return "\n\n".join(textwrap.fill(p, width, break_on_hyphens=False) for p in paras)


class Parser(argparse.ArgumentParser):
    """The commands' ArgumentParser: usage errors are one line (``error: ... (see prog --help)``, the prefix
    of every error a command prints), exit 2; ``--help`` fits in :data:`HELP_WIDTH` columns, its
    description wrapped and its examples (``epilog``) shown as written."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("formatter_class", HelpFormatter)
        if kwargs.get("description"):
            kwargs["description"] = wrap_paragraphs(kwargs["description"])
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number ``>= low``; anything else is a usage error naming the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    parse.__name__ = f"int>={low}"
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


# ----------------------------------------------------------------------------- options from a settings model


def add_settings(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    *,
    positional: Sequence[str] = (),
    groups: Mapping[str, Sequence[str]] | None = None,
    choices: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Add one option per field of ``model``, in the order given (``groups``: title -> field names, each
    group an argparse option group; without groups, every field in the model's order). ``choices``: of
    a field whose values are known only at run time (the model checks them too).

    A field ``batch_tokens`` is ``--batch-tokens``; its description is the help (with `field` shown as
    that field's flag), a ``Literal`` gives the choices, an ``int`` with ``ge`` a checked number, a
    ``bool`` a switch, a ``list`` a repeatable option, a required field a required option. A field's
    ``json_schema_extra`` may set ``flag`` (another spelling, e.g. ``--no-progress`` for a setting on by
    default, with ``flag_help`` for the switch; None: not on the command line) and ``metavar``. Parsed
    values are the model's defaults unless given, so :func:`settings_from` is the whole configuration.
    """
    fields = model.model_fields
    flags = {name: flag for name, info in fields.items() if (flag := _flag(name, info))}
    on_line = {*positional, *(n for names in (groups or {}).values() for n in names)}
    missing = [n for n in flags if n not in on_line] if groups is not None else []
    if missing:
        raise ValueError(f"{model.__name__}: no option group for {', '.join(missing)}")
    for name in positional:
        many = get_origin(_without_none(fields[name].annotation)) is list  # a list: one or more values
        parser.add_argument(
            name, nargs="+" if many else None, help=with_flags(fields[name].description or "", flags)
        )
    if groups is None:
        for name in flags:
            if name not in positional:
                _add_option(parser, name, fields[name], flags, (choices or {}).get(name))
        return
    for title, names in groups.items():
        group = parser.add_argument_group(title)
        for name in names:
            _add_option(group, name, fields[name], flags, (choices or {}).get(name))


def _flag(name: str, info: FieldInfo) -> str | None:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if "flag" in extra:
        flag = extra["flag"]
        return str(flag) if flag is not None else None
    return "--" + name.replace("_", "-")


def _add_option(
    target: argparse.ArgumentParser | argparse._ArgumentGroup,
    name: str,
    info: FieldInfo,
    flags: Mapping[str, str],
    choices: Sequence[str] | None = None,
) -> None:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    kwargs: dict[str, Any] = {"dest": name}
    if "metavar" in extra:
        kwargs["metavar"] = extra["metavar"]
    if info.is_required():
        kwargs["required"] = True
    else:
        kwargs["default"] = info.get_default(call_default_factory=True)
    tp = _without_none(info.annotation)
    if tp is bool:
        # A switch; a setting on by default is switched off by its (negated) flag.
        kwargs["action"] = "store_false" if kwargs.get("default") else "store_true"
    elif get_origin(tp) is list:
        kwargs["action"] = _Repeat
        tp = get_args(tp)[0]
    if choices is not None or get_origin(tp) is Literal:
        kwargs["choices"] = list(choices if choices is not None else get_args(tp))
    elif tp is int:
        low = next((m.ge for m in info.metadata if isinstance(m, Ge) and isinstance(m.ge, int)), None)
        kwargs["type"] = int_at_least(low) if low is not None else int
    kwargs["help"] = with_flags(str(extra.get("flag_help") or info.description or ""), flags)
    target.add_argument(flags[name], **kwargs)


class _Repeat(argparse.Action):
    """A repeatable option whose values replace the default list (argparse's ``append`` adds to it, so
    ``--perturb off-topic`` would keep every default perturbation)."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = getattr(namespace, self.dest, None)
        items = [] if items is None or items is self.default else list(items)
        items.append(values)
        setattr(namespace, self.dest, items)


def _without_none(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def settings_from(args: argparse.Namespace, model: type[M]) -> M:
    """The settings the parsed options describe (validated by the model: a cross-field problem is a
    ConfigError naming fields)."""
    return model(**{k: v for k, v in vars(args).items() if k in model.model_fields})


# ----------------------------------------------------------------------------- messages in the command's words

_FIELD = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


def flag_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each setting's flag in ``parser`` and its subcommands: ``{"no_judge": "--no-judge", "overrides": "--set"}``.

    Read from the parser's actions (argparse keeps them in ``_actions``), so a command translates
    exactly the settings it has, whether its options were generated or written by hand.
    """
    names: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                names = flag_names(sub) | names
        elif action.option_strings and action.dest != "help":
            names.setdefault(action.dest, max(action.option_strings, key=len))
    return names


def with_flags(text: str, flags: Mapping[str, str]) -> str:
    """``text`` with each `field` a command has written as its flag (other backticked names kept)."""
    return _FIELD.sub(lambda m: flags.get(m.group(1), m.group(0)), text)


def fail(
    e: Exception, parser: argparse.ArgumentParser | None = None, also: Mapping[str, str] | None = None
) -> int:
    """Print ``error: ...`` to stderr, settings named by ``parser``'s flags (and ``also``: how the command
    sets a setting it has no flag for), and return the exit code of a user error (2)."""
    flags = (flag_names(parser) if parser is not None else {}) | dict(also or {})
    print(f"error: {with_flags(str(e), flags)}", file=sys.stderr)
    return 2


class _FlagsInMessages(logging.Filter):
    def __init__(self, flags: Mapping[str, str]):
        super().__init__()
        self.flags = flags

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = with_flags(record.getMessage(), self.flags), None
        return True


@contextmanager
def flags_in_warnings(
    parser: argparse.ArgumentParser, also: Mapping[str, str] | None = None
) -> Iterator[None]:
    """While a command runs, the library's log lines (warnings) name settings by the command's flags too.

    Applies to the handlers of the ``judge`` logger that the command installed
    (:func:`judge.cli._logging.setup_logging`); a logger's own filters would miss its children's records.
    """
    handlers = list(logging.getLogger("judge").handlers)
    translate = _FlagsInMessages(flag_names(parser) | dict(also or {}))
    for h in handlers:
        h.addFilter(translate)
    try:
        yield
    finally:
        for h in handlers:
            h.removeFilter(translate)


def print_written(written: int, seconds: float, files: Mapping[str, str], note: str = "") -> None:
    """The closing lines of a command that scores: the records it wrote, in how long, and each file it wrote
    (judge-score, judge-audit and judge-bench print the same)."""
    print(f"wrote {written} new score records in {seconds:.1f} s{f' ({note})' if note else ''}")
    width = max([8, *(len(name) for name in files)])
    for name, path in files.items():
        print(f"  {name:{width}s} {path}")


def run_job(
    build_parser: Callable[[], argparse.ArgumentParser],
    argv: list[str] | None,
    job: Callable[[argparse.Namespace], T],
    show: Callable[[T], None],
    also: Mapping[str, str] | None = None,
) -> int:
    """The life of a command that runs one job; returns its exit code (0, or 2 for a user error).

    Logging is set up; the parser is built (a benchmark plugin that fails to import is one error line);
    the arguments are parsed; ``job`` runs with the library's warnings and errors naming settings by their
    flags (and ``also``: the command's positionals); ``show`` prints its result."""
    from judge.cli._logging import setup_logging

    setup_logging()
    try:
        parser = build_parser()
    except JudgeError as e:
        return fail(e)
    args = parser.parse_args(argv)
    try:
        with flags_in_warnings(parser, also):
            result = job(args)
    except JudgeError as e:
        return fail(e, parser, also)
    show(result)
    return 0
