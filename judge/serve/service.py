"""The judge behind ``judge-serve``: loading, readiness, request items to records, and the batcher.

:class:`JudgeService` is the part of the server that knows nothing of HTTP: ``judge.serve.app`` maps
routes onto it, and the Ray Serve deployment builds one per replica.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.core.errors import (
    ConfigError,
    ImageError,
    ImageTooLarge,
    JudgeError,
    PathRefused,
    RecordError,
    UnsupportedImage,
)
from judge.core.image_headers import ALLOWED_NAMES
from judge.core.images import (
    DEFAULT_MAX_PIXELS,
    ImageLimits,
    image_size,
    is_url,
    read_image_bytes,
    resolve_beneath,
)
from judge.core.io import InvalidRecordsError, parse_records
from judge.core.rubric import OVERALL
from judge.core.schema import PredictionRecord, ScoreRecord, content_fields, content_images
from judge.models import loader
from judge.serve.admission import ModelLock
from judge.serve.batcher import Batcher, BatcherStats
from judge.serve.body import default_string_limit
from judge.serve.config import ServeConfig
from judge.serve.metrics import ServiceMetrics

logger = logging.getLogger(__name__)

#: The default per-image pixel cap is this many times what the judge's tiling can use (an image at most
#: twice the width and height the judge looks at); see :func:`judge.models.processor.tiling_pixels`.
PIXELS_OVER_TILING = 4
#: The default per-request pixel budget, in full-size images (``max_image_pixels``).
REQUEST_IMAGES_AT_CAP = 32
_DATA_URL_EXT = {"image/png": ".png", "image/jpeg": ".jpg", "image/jpg": ".jpg", "image/webp": ".webp",
                 "image/gif": ".gif", "image/bmp": ".bmp"}  # fmt: skip


class RequestError(JudgeError):
    """A request the service refuses; ``status`` is the HTTP status to answer with (4xx), ``param`` the
    field it names (``items[0].response[1].image``) and ``code`` a short machine-readable reason."""

    def __init__(self, message: str, status: int = 422, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code


@dataclass
class RequestImages:
    """A request's images: the folder its data-URL images were written to (removed once the request is
    answered), and the client's own name of every file the intake handed on, so that no answer names a
    path of the server's disk (:meth:`scrub`)."""

    folder: Path | None = None
    #: resolved path -> the client's reference to it (its path under the root, or "a data URL image")
    names: dict[str, str] = field(default_factory=dict)

    def add(self, data: bytes, ext: str) -> str:
        if self.folder is None:
            # The real path: images are opened by their resolved path, with no symbolic link on the way.
            self.folder = Path(os.path.realpath(tempfile.mkdtemp(prefix="judge-serve-")))
        path = self.folder / (hashlib.sha256(data).hexdigest()[:24] + ext)
        if not path.exists():
            path.write_bytes(data)
        self.names[str(path)] = "a data URL image"
        return str(path)

    def scrub(self, text: str | None) -> str | None:
        """``text`` (a refusal, an unscorable reason) with every server path in it replaced by the client's
        own reference to it."""
        if not text:
            return text
        for path, shown in sorted(self.names.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(repr(path), repr(shown)).replace(path, shown)
        return text.replace(str(self.folder), "<request images>") if self.folder is not None else text

    def cleanup(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def decode_data_url(url: str, max_bytes: int) -> tuple[bytes, str]:
    """The bytes and file extension of a base64 ``data:image/...`` URL. Any other URL (``http://``,
    ``file://``, ...) is refused: nothing is fetched. Raises :class:`ImageError` (:class:`ImageTooLarge`
    over ``max_bytes``)."""
    if not url.startswith("data:"):
        raise ImageError(
            f"{url[:40]!r}... is a URL; the server fetches nothing from the network or the disk by URL: send "
            "the image as a base64 data URL (data:image/png;base64,...) or as a path under the server's "
            "--image-root"
        )
    head, sep, payload = url.partition(",")
    mime = head[5:].split(";")[0].lower()
    if not sep or ";base64" not in head.lower():
        raise ImageError("a data URL must be base64 (data:image/png;base64,...)")
    if mime not in _DATA_URL_EXT:
        raise ImageError(f"{mime or 'no'} media type; send one of {', '.join(sorted(_DATA_URL_EXT))}")
    if len(payload) * 3 // 4 > max_bytes:
        raise ImageTooLarge(
            f"the image is about {len(payload) * 3 // 4:,} bytes, over the limit of {max_bytes:,} "
            "(--max-image-bytes)"
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the data URL's base64 payload does not decode") from None
    return data, _DATA_URL_EXT[mime]


class ImageIntake:
    """A request's images on their way in: the one gate every image reference of a request passes, in
    ``/v1/score`` items of any record form and field (as the resolver of
    :func:`~judge.core.io.parse_records`, on the canonical record) and in chat ``image_url`` parts.

    * A data URL is decoded into the request's temporary folder; any other URL is refused.
    * A path is resolved beneath ``--image-root`` (:func:`~judge.core.images.resolve_beneath`) and refused,
      in one message, when it leaves the root, loops or cannot be followed: nothing outside the root is
      looked at, so the answer tells nothing about the disk there.
    * The file is read through :func:`~judge.core.images.read_image_bytes` (no symbolic link followed);
      a format a judge does not read is refused (:class:`UnsupportedImage`, a 415); every frame's size is
      read from the header (no decoding): over ``max_image_pixels``, or past the request's
      ``max_request_pixels`` in all, it is refused (:class:`ImageTooLarge`, a 413).

    A missing or corrupt file under the root, or an undecodable data URL, is left to the engine, which
    answers its item as unscorable, as ``judge-score`` does.
    """

    def __init__(
        self,
        files: RequestImages,
        root: Path | None,
        limits: ImageLimits,
        max_request_pixels: int,
        tiling: int | None = None,
    ):
        self.files = files
        self.root = root
        self.limits = limits
        self.max_request_pixels = max_request_pixels
        self.tiling = tiling  #: pixels of one image the judge can look at, when its processor says
        self.pixels = 0

    def __call__(self, ref: str) -> str:
        data: bytes | None = None
        if is_url(ref):
            data, ext = decode_data_url(ref, self.limits.max_bytes)
            path, shown = self.files.add(data, ext), "the data URL's image"
        elif self.root is None:
            raise ImageError(
                f"{ref[:80]!r} is a file path, but this server was started without --image-root; send the "
                "image as a base64 data URL"
            )
        else:
            try:
                path = resolve_beneath(str(self.root), ref)
            except PathRefused:  # one answer, whatever the path meets on the way out
                raise PathRefused(f"path {ref[:80]!r} is outside the server's --image-root") from None
            self.files.names[path] = ref[:80]
            shown = f"image {ref[:80]!r}"
            try:
                data = read_image_bytes(path, self.limits)
            except ImageTooLarge:
                raise ImageTooLarge(
                    f"{shown} is over the limit of {self.limits.max_bytes:,} bytes (--max-image-bytes)"
                ) from None
            except ImageError:  # missing, not a file: the engine answers the item as unscorable
                return path
        cap = self.limits.max_pixels
        try:  # every frame the file declares, against the cap, before anything is decoded
            width, height = image_size(path, ImageLimits(max_pixels=cap, max_bytes=sys.maxsize), data=data)
        except ImageTooLarge as e:
            seen = f"; the judge looks at no more than {self.tiling:,} of an image" if self.tiling else ""
            raise ImageTooLarge(
                f"{str(e).replace(f'image file {path!r}', shown)} (--max-image-pixels{seen}): scale it down "
                "before sending"
            ) from None
        except UnsupportedImage:
            raise UnsupportedImage(f"{shown} is not a {ALLOWED_NAMES} image") from None
        except ImageError:  # unreadable: the engine answers the item as unscorable
            return path
        self.pixels += width * height
        if self.pixels > self.max_request_pixels:
            raise ImageTooLarge(
                f"the request's images add up to more than {self.max_request_pixels:,} pixels "
                "(--max-request-pixels); send fewer or smaller images per request"
            )
        return path


class JudgeService:
    """A loaded judge with its batcher; see the module doc.

    Construction resolves the judge and its rubric (fast: bad options fail at once); :meth:`load` loads
    the weights and runs one warm-up batch, after which :attr:`ready` is true.
    """

    def __init__(self, cfg: ServeConfig):
        self.cfg = cfg
        self.spec = loader.resolve(cfg.judge, cfg.rubric, force=cfg.force, quantization=cfg.quantization)
        self.rubric = self.spec.rubric
        self.metrics = ServiceMetrics()
        #: set from the judge's processor once loaded, unless given (``max_image_pixels``)
        self.tiling: int | None = None
        self.image_limits = ImageLimits(
            max_pixels=cfg.max_image_pixels or DEFAULT_MAX_PIXELS, max_bytes=cfg.max_image_bytes
        )
        self.engine: Any = None
        self.batcher: Batcher | None = None
        #: held by whoever runs the model: the batcher's rounds first, then chat generation (see admission)
        self.model_lock = ModelLock()
        self.load_error: str | None = None
        self.draining = False
        self.loaded_at: float | None = None
        self._check_reward_target()
        from judge.serve.protocols.base import protocol_target

        protocol_target(cfg, self.rubric)  # a family or criterion the rubric lacks fails at start
        self._image_root = Path(cfg.image_root).resolve() if cfg.image_root else None
        if self._image_root is not None and not self._image_root.is_dir():
            raise ConfigError(f"`image_root` {cfg.image_root!r} is not a folder")
        #: the model ids chat requests may name; the first is the one the service calls itself
        self.served_names: list[str] = list(cfg.served_name or [Path(cfg.judge).name or cfg.judge])
        self.model_name = self.served_names[0]

    def _check_reward_target(self) -> None:
        """`reward_task` and `reward_criterion` name a family of the rubric and one of its criteria."""
        task, criterion, families = self.cfg.reward_task, self.cfg.reward_criterion, self.rubric.families
        if task is not None and task not in families:
            raise ConfigError(
                f"`reward_task` {task!r} is not a family of rubric {self.rubric.name!r} ({', '.join(families)})"
            )
        allowed = (
            families[task].criterion_ids
            if task is not None
            else [c for f in families.values() for c in f.criterion_ids]
        )
        if criterion not in allowed:
            where = f"family {task!r}" if task is not None else f"rubric {self.rubric.name!r}"
            raise ConfigError(
                f"`reward_criterion` {criterion!r} is not a criterion of {where} ({', '.join(dict.fromkeys(allowed))})"
            )

    # -- lifecycle
    @property
    def ready(self) -> bool:
        return self.batcher is not None and not self.draining

    def load(self) -> None:
        """Load the weights, build the engine and batcher, and score one warm-up item."""
        from judge.scoring.engine import JudgeEngine

        t0 = time.perf_counter()
        judge = loader.load(self.spec, device=self.cfg.device, dtype=self.cfg.dtype)
        device = judge.device
        self._set_pixel_limits(judge.processor)
        self.engine = JudgeEngine.for_judge(
            judge,
            batch_tokens=self.cfg.max_batch_tokens,
            batch_size=self.cfg.batch_size,
            max_tokens=self.cfg.max_tokens,
            image_limits=self.image_limits,
            reproducible=self.cfg.reproducible,
        )
        self.device = device
        warm = self._warmup_record()
        with self.model_lock:
            self.engine.score_records([warm])
        m = self.metrics
        stats = BatcherStats(
            on_batch=m.batch,
            on_queue_wait=m.queue_wait.observe,
            on_dropped=lambda why: m.dropped.labels(why=why).inc(),
            on_record=m.record,
        )
        self.batcher = Batcher(
            self.engine,
            max_queue=self.cfg.max_queue,
            max_wait_ms=self.cfg.max_wait_ms,
            max_padding=self.cfg.max_padding,
            stats=stats,
            lock=self.model_lock,
        )
        self.loaded_at = time.time()
        logger.info(
            f"images: at most {self.image_limits.max_pixels:,} pixels each and {self.max_request_pixels:,} "
            "per request"
        )
        m.ready.set(1)
        logger.info(f"judge loaded on {device} and warmed up in {time.perf_counter() - t0:.1f} s")

    def _set_pixel_limits(self, processor) -> None:
        """The per-image pixel cap follows from the judge's own processor unless given: a judge never looks
        at more than its tiling can use."""
        from judge.models.processor import tiling_pixels

        self.tiling = tiling_pixels(processor)
        if self.cfg.max_image_pixels is None and self.tiling is not None:
            self.image_limits = ImageLimits(
                max_pixels=PIXELS_OVER_TILING * self.tiling, max_bytes=self.cfg.max_image_bytes
            )

    @property
    def max_request_pixels(self) -> int:
        return self.cfg.max_request_pixels or REQUEST_IMAGES_AT_CAP * self.image_limits.max_pixels

    def intake(self, files: RequestImages) -> ImageIntake:
        """The gate a request's images pass (:class:`ImageIntake`), writing data URLs into ``files``."""
        return ImageIntake(
            files, self._image_root, self.image_limits, self.max_request_pixels, tiling=self.tiling
        )

    def _warmup_record(self) -> PredictionRecord:
        family = next(iter(self.rubric.families))
        return PredictionRecord(
            id="warmup", benchmark=self.rubric.name, task=family, question="Warm-up.", response="Warm-up."
        )

    def drain(self) -> None:
        """Stop answering ready and taking new requests (SIGTERM); queued work still finishes."""
        self.draining = True
        self.metrics.ready.set(0)

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.stop(timeout=self.cfg.grace_s)

    # -- what the service says about itself
    def provenance(self) -> dict[str, Any]:
        """Who scores: the judge, its base model, rubric name and hash, and the card's fingerprint."""
        card = self.spec.card
        return {
            "judge": self.spec.source,
            "base": card.base_model if card is not None else self.spec.source,
            "rubric": self.rubric.name,
            "rubric_hash": self.rubric.hash,
            "fingerprint": self.spec.fingerprint,
            "target_format": self.spec.target_format,
            "quantization": self.spec.quantization,
            "calibration": self.spec.calibration.producer() if self.spec.calibration is not None else None,
            **({"selective": self.spec.selective.producer()} if self.spec.selective is not None else {}),
        }

    def string_limit(self) -> int | None:
        """The longest string a body may hold (bytes as sent; :class:`judge.serve.body.StringRuns`): the
        option's, else from the context budget (None until the judge is loaded, when no work is taken)."""
        if self.cfg.max_string_bytes is not None:
            return self.cfg.max_string_bytes
        budget = self.engine.max_tokens if self.engine is not None else self.cfg.max_tokens
        return default_string_limit(budget) if budget else None

    def limits(self) -> dict[str, Any]:
        c = self.cfg
        return {
            "max_body_mb": c.max_body_mb,
            "max_string_bytes": self.string_limit(),
            "max_items": c.max_items,
            "max_images": c.max_images,
            "max_image_bytes": c.max_image_bytes,
            "max_image_pixels": self.image_limits.max_pixels,
            "max_request_pixels": self.max_request_pixels,
            "max_tokens": self.engine.max_tokens if self.engine is not None else c.max_tokens,
            "max_new_tokens": c.max_new_tokens,
            "max_batch_tokens": c.max_batch_tokens,
            "max_wait_ms": c.max_wait_ms,
            "max_padding": c.max_padding,
            "max_queue": c.max_queue,
            "timeout_s": c.timeout_s,
            "image_root": str(self._image_root) if self._image_root else None,
        }

    def describe_rubric(self) -> dict[str, Any]:
        r = self.rubric
        return {
            "name": r.name,
            "hash": r.hash,
            "scale": {"min": r.scale.min, "max": r.scale.max, "values": list(r.scale.values)},
            "families": {
                name: {
                    "name": f.name,
                    "uses_reference": f.uses_reference,
                    "criteria": [
                        {"id": c, "name": f.criterion(c).name, "measures": f.criterion(c).measures}
                        for c in f.criterion_ids
                    ],
                }
                for name, f in r.families.items()
            },
        }

    # -- requests
    def records(
        self,
        items: Sequence[Any],
        criteria: str | Sequence[str] | None,
        images: RequestImages,
        *,
        intake: ImageIntake | None = None,
    ) -> list[tuple[PredictionRecord, list[str]]]:
        """Validate a request's items as the loaders validate file records (errors name ``items[i]``
        and the field), each image through :meth:`intake` on the canonical record, whatever form or field
        carried it, and settle the criteria of each. ``intake``: one shared by several calls for one
        request (its pixel budget counts them all)."""
        if not isinstance(items, list) or not items:
            raise RequestError("`items` must be a non-empty list of items", param="items")
        if len(items) > self.cfg.max_items:
            raise RequestError(
                f"`items` has {len(items)} items, over the limit of {self.cfg.max_items} per request "
                "(--max-items); split the request",
                status=413,
                param="items",
                code="too_many_items",
            )
        try:
            recs = parse_records(
                items, "prediction", source="items", defaults={"benchmark": self.rubric.name},
                positions=list(range(len(items))), resolve=intake or self.intake(images),
            )  # fmt: skip
        except InvalidRecordsError as e:
            shown = "; ".join(_item_error(x) for x in e.errors[:5])
            more = f" (and {len(e.errors) - 5} more)" if len(e.errors) > 5 else ""
            codes = {x.code for x in e.errors}
            status, code = (
                (413, "image_too_large") if "too_large" in codes
                else (415, "unsupported_image") if "unsupported_image" in codes
                else (422, "invalid_item")
            )  # fmt: skip
            raise RequestError(
                images.scrub(shown + more) or "", status=status, param=_item_param(e.errors[0]), code=code
            ) from None
        out = []
        for i, rec in enumerate(recs):
            assert isinstance(rec, PredictionRecord)
            n_images = sum(
                len(content_images(getattr(rec, name))) for name in content_fields(PredictionRecord)
            )
            if n_images > self.cfg.max_images:
                raise RequestError(
                    f"items[{i}] has {n_images} images, over the limit of {self.cfg.max_images} (--max-images)",
                    status=413,
                    param=f"items[{i}]",
                    code="too_many_images",
                )
            out.append((rec, self._criteria(rec, criteria, i)))
        return out

    def _criteria(self, rec: PredictionRecord, wanted: str | Sequence[str] | None, i: int) -> list[str]:
        fam = self.rubric.families.get(rec.task)
        if fam is None:  # the engine answers it as unscorable (unknown_family), as judge-score does
            return [OVERALL]
        if wanted is None:  # not given: what the judge was trained on, as judge-score and Judge.score choose
            from judge.scoring.engine import default_family_criteria

            return default_family_criteria(fam.criterion_ids, getattr(self.engine, "trained", None))
        if wanted == "all":
            return list(fam.criterion_ids)
        unknown = [c for c in wanted if c not in fam.criterion_ids]
        if unknown:
            raise RequestError(
                f"items[{i}]: criteria {unknown} are not criteria of task family {rec.task!r} "
                f"(its criteria: {', '.join(fam.criterion_ids)})",
                param="criteria",
            )
        return [c for c in fam.criterion_ids if c in wanted]  # the rubric's order, overall last

    def deadline(self, timeout: float | None, since: float | None = None) -> float:
        """A request's deadline (``time.monotonic()``): its own ``timeout`` when shorter than the server's,
        counted from ``since``, when it arrived (:func:`judge.serve.admission.arrived`), else from now."""
        budget = min(timeout, self.cfg.timeout_s) if timeout and timeout > 0 else self.cfg.timeout_s
        return (time.monotonic() if since is None else since) + budget


#: A calibrated judge's fields of an answer, beside its calibrated view (``score``, ``argmax``, ``distribution``).
_CALIBRATED = ("interval", "raw_score", "raw_argmax", "raw_distribution")


def result_of(rec: PredictionRecord, records: list[ScoreRecord], images: RequestImages) -> dict[str, Any]:
    """One item's answer: per criterion the expected score, argmax, distribution (a calibrated judge's
    calibrated view, its read-out under ``raw_``-names, and the interval), the ``trusted`` mark of a judge with
    selective evaluation, status, reason (in the client's own terms: ``images`` names its files as the client
    did) and the details ``judge-score`` writes (``reason_code`` of an unscorable one; ``num_tokens``,
    ``scale_mass``)."""
    scores = {}
    for r in records:
        scores[r.criterion or ""] = {
            "score": r.score,
            "argmax": r.argmax,
            "distribution": r.distribution,
            **({k: getattr(r, k) for k in _CALIBRATED} if r.interval is not None else {}),
            **({"trusted": r.trusted} if r.trusted is not None else {}),
            **(
                {"trained": r.trained} if r.trained is not None else {}
            ),  # false: a criterion it never learned
            "status": r.status,
            "reason": images.scrub(r.reason),
            "details": r.details,
        }
    return {"id": rec.id, "task": rec.task, "model": rec.model, "benchmark": rec.benchmark, "scores": scores}


def _item_param(e: RecordError) -> str:
    """The field of a record error in the request's terms: ``items[2].response[1].image``."""
    head = f"items[{e.location.line}]"
    return f"{head}.{e.field}" if e.field and " " not in e.field else head


def _item_error(e: RecordError) -> str:
    """A record error in the request's terms: ``items[2] (id 'q1'): field 'task': ...``."""
    loc = e.location
    rid = f" (id {loc.record_id!r})" if loc.record_id else ""
    fld = f"field '{e.field}': " if e.field else ""
    return f"items[{loc.line}]{rid}: {fld}{e.message}"
