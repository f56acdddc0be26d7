"""Settings: the options of one job (a command's, or a library call's keywords) as a validated model.

``judge.scoring.config.ScoreConfig`` and ``judge.eval.config.ReportConfig`` build on :class:`Settings`;
the command-line front end generates its options from their fields (``judge.cli._common``).
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from judge.core.errors import ConfigError
from judge.core.schema import StrictModel


def settings_error(e: ValidationError, model: type[BaseModel] | None = None) -> ConfigError:
    """A ConfigError for a pydantic ``ValidationError`` of a settings model (:class:`Settings`): each
    problem names its field in backticks (`limit`), which a command-line front end turns into its flag.

    A check of our own (a validator's ``ValueError``) names its fields itself and reads as written.
    """
    lines = []
    for err in e.errors():
        loc = err["loc"]
        name = f"`{loc[0]}`" + "".join(f"[{x}]" for x in loc[1:]) if loc else ""
        if err["type"] == "value_error":
            lines.append(err["msg"].removeprefix("Value error, "))
        elif err["type"] == "missing":
            lines.append(f"{name} is required")
        elif err["type"] == "extra_forbidden":
            allowed = f"; settings: {', '.join(model.model_fields)}" if model is not None else ""
            lines.append(f"{name} is not a setting{allowed}")
        else:
            lines.append(f"{name}: {err['msg']} (got {err.get('input')!r})"[:500])
    if len(lines) == 1:
        return ConfigError(lines[0])
    return ConfigError(f"{len(lines)} invalid settings:\n" + "\n".join(f"  {x}" for x in lines))


def _as_text(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


#: A file or folder setting: text, as the command line gives it; a ``Path`` is accepted too.
PathText = Annotated[str, BeforeValidator(_as_text)]


class Settings(StrictModel):
    """The options of one job (a command's options, a library call's keywords) as a validated model.

    Construction and assignment are checked; a bad value is a :class:`ConfigError` that names the
    field, not a ``ValidationError`` (see :func:`settings_error`).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise settings_error(e, type(self)) from None

    def __setattr__(self, name: str, value: Any) -> None:
        before = dict(self.__dict__)
        try:
            super().__setattr__(name, value)
        except ValidationError as e:
            # pydantic has stored the value when a check across fields refuses it: put the old one back.
            self.__dict__.update(before)
            raise settings_error(e, type(self)) from None
