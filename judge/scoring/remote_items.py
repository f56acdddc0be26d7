"""What :class:`~judge.scoring.remote.JudgeClient` sends for an item, and what it settles itself: a local image as a
base64 data URL (checked first as the local engine checks it), the body of one ``POST /v1/score`` packed from
the items' JSON, and the ``unscorable`` record of an item the server could not take (:class:`_Unscorable`
carries the engine's reason)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.core.errors import ImageError
from judge.core.images import ImageLimits, check_image_file
from judge.core.schema import PredictionRecord, ScoreRecord
from judge.scoring.engine import JUDGE_METRIC

_MIME = {b"\x89PNG": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF8": "image/gif", b"BM": "image/bmp"}


class _Unscorable(Exception):
    def __init__(self, reason: str, code: str = "image"):
        super().__init__(reason)
        self.reason, self.code = reason, code


@dataclass
class _Request:
    """Items packed into one ``POST /v1/score``: their records, criteria, and JSON encodings."""

    criteria: Any  #: "all" or the list of criteria every item of the request is scored on
    recs: list[PredictionRecord] = field(default_factory=list)
    crits: list[list[str]] = field(default_factory=list)
    blobs: list[bytes] = field(default_factory=list)
    size: int = 0
    pixels: int = 0  #: of all its images (the server's max_request_pixels bounds it)

    def body(self) -> bytes:
        tail = json.dumps(self.criteria, separators=(",", ":")).encode()
        return b'{"items":[' + b",".join(self.blobs) + b'],"criteria":' + tail + b"}"


def _data_url(path: str, limits: ImageLimits) -> tuple[str, tuple[int, int]]:
    """A local image as a base64 data URL, and its (width, height), checked first as the local engine
    checks it (existence, size, pixels, full decoding): an :class:`_Unscorable` with the engine's reason
    otherwise."""
    try:
        size = check_image_file(path, limits)
        data = Path(path).read_bytes()
    except ImageError as e:
        raise _Unscorable(f"image cannot be used: {e}") from None
    except OSError as e:
        raise _Unscorable(f"image cannot be used: image file {path!r} cannot be read: {e}") from None
    mime = next((m for magic, m in _MIME.items() if data.startswith(magic)), None)
    if mime is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        mime = "image/webp"
    if mime is None:
        # A format the server does not take as a data URL (TIFF, ...): the same pixels as a PNG.
        import io

        from judge.core.images import open_image

        with open_image(path, limits) as im:
            buf = io.BytesIO()
            im.save(buf, format="PNG")
        data, mime = buf.getvalue(), "image/png"
    if len(data) > limits.max_bytes:
        raise _Unscorable(
            f"image cannot be used: image file {path!r} is {len(data):,} bytes as sent, over the server's "
            f"limit of {limits.max_bytes:,}"
        )
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii"), size


def _unscorable(
    rec: PredictionRecord, criterion: str, reason: str, code: str, producer: Mapping[str, Any]
) -> ScoreRecord:
    return ScoreRecord(
        id=rec.id,
        benchmark=rec.benchmark,
        task=rec.task,
        model=rec.model,
        metric=JUDGE_METRIC,
        criterion=criterion,
        score=None,
        status="unscorable",
        reason=reason,
        details={"reason_code": code},
        producer=dict(producer),
    )
