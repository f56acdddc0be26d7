"""The settings of ``judge-view``: :class:`ViewConfig`.

As for :class:`judge.scoring.config.ScoreConfig`, the command's options are generated from these fields
(``judge/cli/view.py``): one name, one default and one description per setting.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from judge.core.hosts import ALLOWED_HOST_HELP, AllowedHosts
from judge.core.settings import PathText, Settings
from judge.serve.config import is_loopback

#: the largest side of an image as the viewer shows it (thumbnails of larger images)
THUMBNAIL_SIDE = 512


class ViewConfig(Settings):
    """Every setting of ``judge-view``: ``ViewConfig(run="runs/demo/score", audit="runs/demo/audit")``."""

    run: PathText = Field(description="a judge-score output folder (its scores.jsonl and run.json)")
    human: list[PathText] = Field(
        default_factory=list,
        description="annotation files with the human scores of the run's items (repeatable; an annotation "
        "file the run scored, and the run's `labels`, are read without it)",
        json_schema_extra={"metavar": "FILE"},
    )
    report: PathText | None = Field(
        None, description="a judge-report folder whose summary and plots go on the first page"
    )
    audit: PathText | None = Field(
        None, description="a judge-audit folder: each item's perturbed versions and their scores"
    )
    export: PathText | None = Field(
        None,
        description="write a static site into this folder (it opens from disk or any static host) instead "
        "of serving",
        json_schema_extra={"metavar": "DIR"},
    )
    host: str = Field(
        "127.0.0.1",
        description="address to serve on: loopback only (127.0.0.1, ::1 or localhost); the viewer has no "
        "authentication, so it never listens beyond this machine (default 127.0.0.1)",
    )
    allowed_host: AllowedHosts = Field(
        default_factory=list, description=ALLOWED_HOST_HELP, json_schema_extra={"metavar": "NAME"}
    )
    port: int = Field(8765, ge=0, le=65535, description="port to serve on; 0 picks a free one (default 8765)")
    thumbnail: int = Field(
        THUMBNAIL_SIDE,
        ge=16,
        description=f"largest side of the images shown, in pixels (default {THUMBNAIL_SIDE})",
        json_schema_extra={"metavar": "PX"},
    )
    overwrite: bool = Field(
        False, description="write into a non-empty `export` folder (its files are replaced)"
    )

    @field_validator("host")
    @classmethod
    def _loopback(cls, v: str) -> str:
        if not is_loopback(v):
            raise ValueError(
                f"`host` {v!r} is not a loopback address: judge-view serves on this machine only "
                "(127.0.0.1, ::1 or localhost); to share the view, write it with `export` and put the folder "
                "on a static host"
            )
        return v
