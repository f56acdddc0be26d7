"""The judge behind ``judge-serve``: loading, readiness, request items to records, and the batcher.

:class:`JudgeService` is the part of the server that knows nothing of HTTP: ``judge.serve.app`` maps
routes onto it, and the Ray Serve deployment builds one per replica.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.core.errors import ConfigError, ImageError, JudgeError, RecordError
from judge.core.images import ImageLimits, is_url, resolve_image
from judge.core.io import InvalidRecordsError, parse_records
from judge.core.rubric import OVERALL
from judge.core.schema import PredictionRecord, ScoreRecord
from judge.serve.batcher import Batcher, BatcherStats
from judge.serve.config import ServeConfig
from judge.serve.metrics import ServiceMetrics

logger = logging.getLogger(__name__)

#: The content fields of an item whose image segments the service reads.
CONTENT_FIELDS = ("question", "response", "reference")
_DATA_URL_EXT = {"image/png": ".png", "image/jpeg": ".jpg", "image/jpg": ".jpg", "image/webp": ".webp",
                 "image/gif": ".gif", "image/bmp": ".bmp"}  # fmt: skip


class RequestError(JudgeError):
    """A request the service refuses; ``status`` is the HTTP status to answer with (4xx)."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


@dataclass
class RequestImages:
    """The folder a request's data-URL images were written to; removed once the request is answered."""

    folder: Path | None = None

    def add(self, data: bytes, ext: str) -> str:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="judge-serve-"))
        path = self.folder / (hashlib.sha256(data).hexdigest()[:24] + ext)
        if not path.exists():
            path.write_bytes(data)
        return str(path)

    def cleanup(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def decode_data_url(url: str, where: str, max_bytes: int) -> tuple[bytes, str]:
    """The bytes and file extension of a base64 ``data:image/...`` URL; a :class:`RequestError` naming
    ``where`` if it is not one or is over ``max_bytes``. Nothing is fetched: other URLs are refused."""
    if not url.startswith("data:"):
        raise RequestError(
            f"{where}: {url[:40]!r}... is a URL; the server fetches nothing from the network: send the image "
            "as a base64 data URL (data:image/png;base64,...) or as a path under the server's --image-root"
        )
    head, sep, payload = url.partition(",")
    mime = head[5:].split(";")[0].lower()
    if not sep or ";base64" not in head.lower():
        raise RequestError(f"{where}: a data URL must be base64 (data:image/png;base64,...)")
    if mime not in _DATA_URL_EXT:
        raise RequestError(
            f"{where}: {mime or 'no'} media type; send one of {', '.join(sorted(_DATA_URL_EXT))}"
        )
    if len(payload) * 3 // 4 > max_bytes:
        raise RequestError(
            f"{where}: the image is about {len(payload) * 3 // 4:,} bytes, over the limit of {max_bytes:,} "
            "(--max-image-bytes)",
            status=413,
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(f"{where}: the data URL's base64 payload does not decode") from None
    return data, _DATA_URL_EXT[mime]


class JudgeService:
    """A loaded judge with its batcher; see the module doc.

    Construction resolves the judge and its rubric (fast: bad options fail at once); :meth:`load` loads
    the weights and runs one warm-up batch, after which :attr:`ready` is true.
    """

    def __init__(self, cfg: ServeConfig):
        from judge.scoring.engine import resolve_judge

        self.cfg = cfg
        self.spec = resolve_judge(cfg.judge, cfg.rubric, force=cfg.force, quantization=cfg.quantization)
        self.rubric = self.spec.rubric
        self.metrics = ServiceMetrics()
        self.image_limits = ImageLimits(max_pixels=cfg.max_image_pixels, max_bytes=cfg.max_image_bytes)
        self.engine: Any = None
        self.batcher: Batcher | None = None
        self.model_lock = threading.Lock()  #: held by whoever runs the model (the batcher, chat generation)
        self.load_error: str | None = None
        self.draining = False
        self.loaded_at: float | None = None
        self._image_root = Path(cfg.image_root).resolve() if cfg.image_root else None
        if self._image_root is not None and not self._image_root.is_dir():
            raise ConfigError(f"`image_root` {cfg.image_root!r} is not a folder")
        self.model_name = cfg.served_name or Path(cfg.judge).name or cfg.judge

    # -- lifecycle
    @property
    def ready(self) -> bool:
        return self.batcher is not None and not self.draining

    def load(self) -> None:
        """Load the weights, build the engine and batcher, and score one warm-up item."""
        from judge.scoring.engine import JudgeEngine, load_judge_model, resolve_device

        t0 = time.perf_counter()
        device = resolve_device(self.cfg.device)
        model, processor = load_judge_model(self.spec, device=device, dtype=self.cfg.dtype)
        self.engine = JudgeEngine(
            model,
            processor,
            self.spec,
            batch_tokens=self.cfg.max_batch_tokens,
            batch_size=self.cfg.batch_size,
            max_tokens=self.cfg.max_tokens,
            image_limits=self.image_limits,
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
        m.ready.set(1)
        logger.info(f"judge loaded on {device} and warmed up in {time.perf_counter() - t0:.1f} s")

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
        }

    def limits(self) -> dict[str, Any]:
        c = self.cfg
        return {
            "max_body_mb": c.max_body_mb,
            "max_items": c.max_items,
            "max_images": c.max_images,
            "max_image_bytes": c.max_image_bytes,
            "max_image_pixels": c.max_image_pixels,
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
        self, items: Sequence[Any], criteria: str | Sequence[str], images: RequestImages
    ) -> list[tuple[PredictionRecord, list[str]]]:
        """Validate a request's items as the loaders validate file records (errors name ``items[i]``
        and the field), with their images made local, and settle the criteria of each."""
        if not isinstance(items, list) or not items:
            raise RequestError("`items` must be a non-empty list of items")
        if len(items) > self.cfg.max_items:
            raise RequestError(
                f"`items` has {len(items)} items, over the limit of {self.cfg.max_items} per request "
                "(--max-items); split the request",
                status=413,
            )
        local = [self._local_images(x, i, images) for i, x in enumerate(items)]
        try:
            # Every image reference is an absolute path by now, checked against its own root above.
            recs = parse_records(
                local, "prediction", root="/", source="items", defaults={"benchmark": self.rubric.name},
                positions=list(range(len(local))),
            )  # fmt: skip
        except InvalidRecordsError as e:
            shown = "; ".join(_item_error(x) for x in e.errors[:5])
            more = f" (and {len(e.errors) - 5} more)" if len(e.errors) > 5 else ""
            raise RequestError(shown + more) from None
        out = []
        for i, rec in enumerate(recs):
            assert isinstance(rec, PredictionRecord)
            out.append((rec, self._criteria(rec, criteria, i)))
        return out

    def _criteria(self, rec: PredictionRecord, wanted: str | Sequence[str], i: int) -> list[str]:
        fam = self.rubric.families.get(rec.task)
        if fam is None:  # the engine answers it as unscorable (unknown_family), as judge-score does
            return [OVERALL]
        if wanted == "all":
            return list(fam.criterion_ids)
        unknown = [c for c in wanted if c not in fam.criterion_ids]
        if unknown:
            raise RequestError(
                f"items[{i}]: criteria {unknown} are not criteria of task family {rec.task!r} "
                f"(its criteria: {', '.join(fam.criterion_ids)})"
            )
        return [c for c in fam.criterion_ids if c in wanted]  # the rubric's order, overall last

    def _local_images(self, item: Any, i: int, images: RequestImages) -> Any:
        """The item with each image made a local absolute path: data URLs are written to the request's
        folder, paths resolved under ``image_root`` (never outside it)."""
        if not isinstance(item, Mapping):
            return item  # parse_records names the problem
        item = dict(item)
        n_images = 0
        for fld in CONTENT_FIELDS:
            content = item.get(fld)
            if isinstance(content, dict):
                content = [content]
            if not isinstance(content, list):
                continue
            new = []
            for j, seg in enumerate(content):
                if isinstance(seg, Mapping) and isinstance(seg.get("image"), str) and seg["image"]:
                    n_images += 1
                    seg = {
                        **seg,
                        "image": self.local_image(seg["image"], f"items[{i}].{fld}[{j}].image", images),
                    }
                new.append(seg)
            item[fld] = new
        if n_images > self.cfg.max_images:
            raise RequestError(
                f"items[{i}] has {n_images} images, over the limit of {self.cfg.max_images} (--max-images)",
                status=413,
            )
        return item

    def local_image(self, ref: str, where: str, images: RequestImages) -> str:
        """A request's image reference as a local absolute path (see :meth:`_local_images`)."""
        if is_url(ref):
            data, ext = decode_data_url(ref, where, self.cfg.max_image_bytes)
            return images.add(data, ext)
        if self._image_root is None:
            raise RequestError(
                f"{where}: {ref[:80]!r} is a file path, but this server was started without --image-root; "
                "send the image as a base64 data URL"
            )
        try:
            return resolve_image(ref, self._image_root)
        except ImageError:
            raise RequestError(f"{where}: path {ref[:80]!r} leaves the server's --image-root") from None

    def deadline(self, timeout: float | None) -> float:
        """A request's deadline (``time.monotonic()``): its own ``timeout`` when shorter than the server's."""
        budget = min(timeout, self.cfg.timeout_s) if timeout and timeout > 0 else self.cfg.timeout_s
        return time.monotonic() + budget


def result_of(rec: PredictionRecord, records: list[ScoreRecord]) -> dict[str, Any]:
    """One item's answer: per criterion the expected score, argmax, distribution, status, reason and the
    details ``judge-score`` writes (``reason_code`` of an unscorable one; ``num_tokens``, ``scale_mass``)."""
    scores = {}
    for r in records:
        scores[r.criterion or ""] = {
            "score": r.score,
            "argmax": r.argmax,
            "distribution": r.distribution,
            **({"raw_score": r.raw_score, "interval": r.interval} if r.interval is not None else {}),
            "status": r.status,
            "reason": r.reason,
            "details": r.details,
        }
    return {"id": rec.id, "task": rec.task, "model": rec.model, "benchmark": rec.benchmark, "scores": scores}


def _item_error(e: RecordError) -> str:
    """A record error in the request's terms: ``items[2] (id 'q1'): field 'task': ...``."""
    loc = e.location
    rid = f" (id {loc.record_id!r})" if loc.record_id else ""
    fld = f"field '{e.field}': " if e.field else ""
    return f"items[{loc.line}]{rid}: {fld}{e.message}"
