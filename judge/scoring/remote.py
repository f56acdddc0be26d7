"""Scoring through a running ``judge-serve``: :class:`JudgeClient`, over HTTP only.

The client speaks the service's protocol (``GET /v1/judge``, ``GET /ready``, ``POST /v1/score``) with
httpx; it never imports the service. It gives back what local scoring gives:
:meth:`JudgeClient.score` returns the :class:`~judge.core.schema.ScoreRecord` list
:meth:`judge.Judge.score <judge.api.Judge.score>` returns, and :meth:`JudgeClient.iter_batches` offers what
``judge-score`` uses of :class:`~judge.scoring.engine.JudgeEngine`, so ``judge-score --server URL`` is the
same run (inputs, rule-based metrics, resume, summaries) with the judge's part done by the server.

Requests. Items go in canonical form, their images read here and sent as base64 data URLs (a server reads
no client paths). Requests hold at most the server's ``max_items`` items (fewer when ``concurrency`` of
them would overflow its queue) and stay under its body limit; ``concurrency`` of them are in flight at
once, so several replicas behind a load balancer are kept busy. 429 (queue full), 502, 503 (loading,
draining) and connection errors are retried with exponential backoff, never sooner than the server's
``Retry-After``; any other error status is a :class:`~judge.core.errors.JudgeError` carrying the server's
message.

Items the server could not take are settled here as ``judge-score`` settles them, never dropped: an
image that is missing, unreadable or over the server's limits gives ``status: "unscorable"`` with
``details.reason_code: "image"`` and the reason the local engine writes.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError

from judge.core.errors import ConfigError, JudgeError
from judge.core.images import ImageLimits
from judge.core.rubric import Rubric, load_rubric
from judge.core.schema import (
    AnnotationRecord,
    ImageSegment,
    ItemScores,
    PredictionRecord,
    ScoreRecord,
    in_item_order,
    item_scores,
)
from judge.scoring.engine import (
    JUDGE_METRIC,
    Batch,
    JudgeSpec,
    judge_criteria,
    pending_criteria,
    select_criteria,
)
from judge.scoring.inputs import prediction_records
from judge.scoring.remote_items import _data_url, _Request, _Unscorable, _unscorable
from judge.scoring.remote_rubric import ServedRubric, served_rubric

logger = logging.getLogger(__name__)

#: The environment variable holding the server's API key (judge-serve reads the same one).
API_KEY_ENV = "JUDGE_API_KEY"
#: Statuses that mean "try again later": queue full, a gateway between us and a replica, loading/draining.
RETRY_STATUSES = frozenset({429, 502, 503})
#: Bytes kept free under the server's body limit (headers are not counted by it, but be safe).
_BODY_MARGIN = 4096
#: Items settled here (unscorable) are written in batches of at most this many.
_SETTLED_BATCH = 256
#: The limits of GET /v1/judge this client reads.
_LIMITS = (
    "max_items",
    "max_body_mb",
    "max_images",
    "max_image_bytes",
    "max_image_pixels",
    "max_request_pixels",
    "max_queue",
)


class JudgeClient:
    """A client of a running ``judge-serve`` (see the module doc).

    ``url``: the server's base URL (``http://host:8000``). ``api_key``: sent as ``Authorization: Bearer
    KEY`` (default: the ``JUDGE_API_KEY`` environment variable). ``timeout``: seconds per HTTP request.
    ``retries``: how many times a request is tried again after a 429/502/503 or a connection error, waiting
    ``backoff * 2**attempt`` seconds (at least the server's ``Retry-After``, with a little jitter) in
    between. ``concurrency``: requests in flight at once in :meth:`score` and :meth:`iter_batches`.
    The client is thread-safe; use it as a context manager or :meth:`close` it.
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 5,
        backoff: float = 0.5,
        *,
        concurrency: int = 4,
    ):
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"server URL {url!r} must start with http:// or https://")
        if retries < 0 or backoff < 0 or timeout <= 0 or concurrency < 1:
            raise ConfigError("timeout and concurrency must be positive, retries and backoff not negative")
        self.url = url.rstrip("/")
        self.retries, self.backoff, self.concurrency = retries, backoff, concurrency
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self._has_key = bool(key)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self._info: dict[str, Any] | None = None
        self._rubric: ServedRubric | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> JudgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the server says about itself
    def info(self, refresh: bool = False) -> dict[str, Any]:
        """``GET /v1/judge``: ``rubric`` (name, hash, scale, families), ``limits`` (max_items, max_body_mb,
        ...), ``provenance`` (judge, base, rubric, rubric_hash, fingerprint, target_format, quantization)
        and ``ready``. Read once and kept (``refresh`` reads it again)."""
        with self._lock:
            if self._info is None or refresh:
                resp = self._send("GET", "/v1/judge")
                try:
                    data = resp.json()
                    rubric = served_rubric(data["rubric"])
                    for k in _LIMITS:
                        int(data["limits"][k])
                    for k in ("judge", "fingerprint", "rubric_hash", "target_format"):
                        str(data["provenance"][k])
                except (ValueError, KeyError, TypeError, StopIteration, ValidationError, JudgeError):
                    raise JudgeError(
                        f"{self.url} does not look like judge-serve: GET /v1/judge answered "
                        f"{resp.text[:200]!r}"
                    ) from None
                self._info, self._rubric = data, rubric
            return self._info

    @property
    def rubric(self) -> ServedRubric:
        """The server's rubric (:class:`ServedRubric`)."""
        self.info()
        assert self._rubric is not None
        return self._rubric

    @property
    def provenance(self) -> dict[str, Any]:
        """Who scores on the server: judge, base, rubric, rubric_hash, fingerprint, target_format and
        quantization."""
        return dict(self.info()["provenance"])

    @property
    def producer(self) -> dict[str, Any]:
        """The ``producer`` of the records this client returns: as :attr:`JudgeEngine.producer
        <judge.scoring.engine.JudgeEngine.producer>` has it (judge, fingerprint, rubric, rubric_hash,
        target_format, quantization), plus ``server``."""
        return self._producer(self.provenance)

    def _producer(self, prov: Mapping[str, Any]) -> dict[str, Any]:
        out = {
            "judge": prov["judge"],
            "fingerprint": str(prov["fingerprint"])[:16],
            "rubric": prov["rubric"],
            "rubric_hash": prov["rubric_hash"],
            "target_format": prov["target_format"],
        }
        if prov.get("quantization"):
            out["quantization"] = prov["quantization"]
        if prov.get("calibration"):
            out["calibration"] = prov["calibration"]
        if prov.get("selective"):
            out["selective"] = prov["selective"]
        out["server"] = self.url
        return out

    def judge_spec(self, rubric: str | None = None) -> JudgeSpec:
        """The server's judge as a :class:`~judge.scoring.engine.JudgeSpec` (no weights here): its source,
        fingerprint, quantization, prompt format and rubric, so an out folder's run identity is the one a
        local run with the same judge has. ``rubric``: a rubric name or path the user expects; refused
        unless its hash is the server's (then it is the rubric used, with its level anchors)."""
        prov = self.provenance
        served: Rubric = self.rubric
        if rubric is not None:
            local = load_rubric(rubric)
            if local.hash != served.hash:
                raise ConfigError(
                    f"`rubric` {rubric!r} (hash {local.hash[:12]}) is not the rubric the server at "
                    f"{self.url} scores with ({served.name!r}, hash {served.hash[:12]}); leave `rubric` out "
                    "to use the server's"
                )
            served = local
        return JudgeSpec(
            source=str(prov["judge"]),
            rubric=served,
            target_format=prov["target_format"],
            quantization=prov.get("quantization"),
            fingerprint=str(prov["fingerprint"]),
        )

    def wait_ready(self, timeout: float = 600.0) -> None:
        """Wait until ``GET /ready`` answers 200 (the judge loaded and warmed up); a JudgeError when its
        loading failed, when it needs a key this client lacks, or after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        said = False
        while True:
            why = "no answer"
            try:
                resp = self._http.get("/ready")
                if resp.status_code == 200:
                    return
                if resp.status_code not in RETRY_STATUSES:
                    raise self._refusal(resp, "GET /ready")
                why = str(_json(resp).get("status") or resp.status_code)
                if why.startswith("failed"):
                    raise JudgeError(f"the server at {self.url} could not load its judge: {why}")
            except httpx.TransportError as e:
                why = f"cannot connect ({type(e).__name__})"
            if time.monotonic() > deadline:
                raise JudgeError(f"the server at {self.url} was not ready after {timeout:.0f} s ({why})")
            if not said:
                logger.info(f"waiting for the server at {self.url} to be ready ({why})")
                said = True
            time.sleep(0.5)

    # -- scoring
    def score(
        self,
        items: Iterable[PredictionRecord | AnnotationRecord | Mapping[str, Any]],
        *,
        criteria: str | Sequence[str] = "all",
        root: str | Path | None = None,
    ) -> list[ItemScores]:
        """Score items on the server: one :class:`~judge.core.schema.ItemScores` per item, in the items'
        order, as :meth:`judge.Judge.score` returns them (:meth:`score_records`: the flat records).

        ``items``: as :func:`prediction_records` takes them (``benchmark`` defaults to the server's rubric
        name; relative image paths resolve from ``root``, default the working directory). ``criteria``:
        ``"all"`` or criterion ids (each item gets those of its family). Unscorable items come back as
        records with ``status="unscorable"`` and a ``reason``, never as exceptions.
        """
        records = prediction_records(items, self.rubric.name, root)
        return item_scores(records, self._score(records, criteria))

    def score_records(
        self,
        items: Iterable[PredictionRecord | AnnotationRecord | Mapping[str, Any]],
        *,
        criteria: str | Sequence[str] = "all",
        root: str | Path | None = None,
    ) -> list[ScoreRecord]:
        """:meth:`score`'s records as one flat list: one per (item, criterion), in the items' order, each
        item's criteria in rubric order (``overall`` last)."""
        return self._score(prediction_records(items, self.rubric.name, root), criteria)

    def _score(self, records: list[PredictionRecord], criteria: str | Sequence[str]) -> list[ScoreRecord]:
        todo = [(r, self._criteria(r, criteria, i)) for i, r in enumerate(records)]
        out = [s for b in self._batches(todo) for s in b.records]
        return in_item_order(records, out)

    def iter_batches(
        self,
        records: Sequence[PredictionRecord],
        done: Iterable | None = None,
        criteria: Sequence[Sequence[str]] | None = None,
    ) -> Iterator[Batch]:
        """Score ``records`` (skipping criteria in ``done``, a set of
        :func:`~judge.scoring.output.record_key`; only ``criteria[i]`` of record ``i`` when given), as
        :meth:`JudgeEngine.iter_batches <judge.scoring.engine.JudgeEngine.iter_batches>` does: one
        :class:`Batch` per finished request (holding all the records of its items) or per group of items
        settled here, in the order they finish. Waits for the server to be ready first."""
        rubric = self.rubric
        todo = [
            (r, crits)
            for i, r in enumerate(records)
            if (
                crits := [
                    c for c in pending_criteria(rubric, r, done) if criteria is None or c in criteria[i]
                ]
            )
        ]
        return self._batches(todo)

    def _criteria(self, rec: PredictionRecord, wanted: str | Sequence[str], i: int) -> list[str]:
        return select_criteria(self.rubric, rec, wanted, i + 1)

    def _batches(self, todo: Sequence[tuple[PredictionRecord, list[str]]]) -> Iterator[Batch]:
        if not todo:
            return
        self.wait_ready()
        expected = self.provenance
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="judge-client")
        inflight: set[Future[Batch]] = set()
        finished = False
        try:
            for req in self._requests(todo):
                if isinstance(req, Batch):
                    yield req
                    continue
                inflight.add(pool.submit(self._post, req, expected))
                while len(inflight) >= self.concurrency:
                    done, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                    for f in done:
                        yield f.result()
            while inflight:
                done, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                for f in done:
                    yield f.result()
            finished = True
        finally:
            # On an error or an interrupted caller, drop what has not started; requests in flight end
            # with their own timeout (their results are lost, as a killed local batch is).
            pool.shutdown(wait=finished, cancel_futures=True)

    def _limits(self) -> tuple[int, int, int, ImageLimits, int]:
        """Items per request, body bytes per request, images per item, image limits and pixels per request
        of the server."""
        lim = self.info()["limits"]
        # `concurrency` requests of this size fit in the server's queue together: no self-inflicted 429.
        per_request = max(1, min(int(lim["max_items"]), int(lim["max_queue"]) // self.concurrency))
        body = int(float(lim["max_body_mb"]) * 1024 * 1024) - _BODY_MARGIN
        images = ImageLimits(max_pixels=int(lim["max_image_pixels"]), max_bytes=int(lim["max_image_bytes"]))
        return per_request, body, int(lim["max_images"]), images, int(lim["max_request_pixels"])

    def _requests(self, todo: Sequence[tuple[PredictionRecord, list[str]]]) -> Iterator[_Request | Batch]:
        """Pack items into requests (lazily: images are read only as requests are sent); items settled
        here come out as Batches of their unscorable records."""
        per_request, body_limit, max_images, limits, max_pixels = self._limits()
        producer = self.producer
        open_requests: dict[Any, _Request] = {}
        settled: list[ScoreRecord] = []
        n_settled = 0
        for rec, crits in todo:
            # One request asks one set of criteria; nearly always "all" (a resumed item may lack a few).
            key: Any = "all" if crits == judge_criteria(self.rubric, rec) else tuple(crits)
            try:
                item, pixels = self._item(rec, max_images, limits)
                blob = json.dumps(item, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
                if len(blob) + 64 > body_limit:
                    raise _Unscorable(
                        f"the item with its images as data URLs is {len(blob) / 2**20:.1f} MB, over the "
                        f"server's request body limit of {(body_limit + _BODY_MARGIN) / 2**20:.1f} MB "
                        "(--max-body-mb)"
                    )
                if pixels > max_pixels:
                    raise _Unscorable(
                        f"image cannot be used: the item's images have {pixels:,} pixels together, over the "
                        f"server's limit of {max_pixels:,} per request (--max-request-pixels)"
                    )
            except _Unscorable as e:
                settled += [_unscorable(rec, c, e.reason, e.code, producer) for c in crits]
                n_settled += 1
                if n_settled >= _SETTLED_BATCH:
                    yield Batch(settled, n_settled, 0)
                    settled, n_settled = [], 0
                continue
            req = open_requests.get(key)
            if req is not None and (
                len(req.recs) >= per_request
                or req.size + len(blob) + 64 > body_limit
                or req.pixels + pixels > max_pixels
            ):
                yield open_requests.pop(key)
                req = None
            if req is None:
                req = open_requests[key] = _Request("all" if key == "all" else list(key))
            req.recs.append(rec)
            req.crits.append(crits)
            req.blobs.append(blob)
            req.size += len(blob) + 1
            req.pixels += pixels
        if settled:
            yield Batch(settled, n_settled, 0)
        yield from open_requests.values()

    def _item(
        self, rec: PredictionRecord, max_images: int, limits: ImageLimits
    ) -> tuple[dict[str, Any], int]:
        """The canonical item the server gets, and the pixels of its images: images as data URLs, only the
        content the prompt shows (a family's reference only when it uses one; no images for a task the
        rubric lacks, which the server answers as ``unknown_family``). Raises :class:`_Unscorable` for an
        image the server could not take, with the local engine's reason."""
        fam = self.rubric.families.get(rec.task)
        item: dict[str, Any] = {
            "id": rec.id,
            "benchmark": rec.benchmark,
            "task": rec.task,
            "model": rec.model,
        }
        uses_reference = fam is not None and fam.uses_reference
        fields = ["question", "reference", "response"] if uses_reference else ["question", "response"]
        n_images = pixels = 0
        for name in fields:
            content = getattr(rec, name)
            if content is None:
                continue
            segs = []
            for seg in content:
                if isinstance(seg, ImageSegment):
                    if fam is None:
                        continue
                    n_images += 1
                    if n_images > max_images:
                        raise _Unscorable(
                            f"image cannot be used: the item has more than {max_images} images, the server's "
                            "limit (--max-images)"
                        )
                    url, (width, height) = _data_url(seg.image, limits)
                    pixels += width * height
                    segs.append({"type": "image", "image": url})
                else:
                    segs.append(seg.model_dump())
            item[name] = segs
        if not item["question"]:  # every image of the question dropped (unknown family): keep it valid
            item["question"] = [{"type": "text", "text": "(images)"}]
        return item, pixels

    def _post(self, req: _Request, expected: Mapping[str, Any]) -> Batch:
        ids = ", ".join(r.id for r in req.recs[:3]) + (", ..." if len(req.recs) > 3 else "")
        resp = self._send(
            "POST",
            "/v1/score",
            content=req.body(),
            headers={"content-type": "application/json"},
            what=f"{len(req.recs)} items: {ids}",
        )
        try:
            data = resp.json()
            results, prov = data["results"], data["provenance"]
            if len(results) != len(req.recs):
                raise ValueError(f"{len(results)} results for {len(req.recs)} items")
        except (ValueError, KeyError, TypeError) as e:
            raise JudgeError(
                f"the server at {self.url} gave an answer this client cannot read: {e}"
            ) from None
        for k in ("fingerprint", "rubric_hash"):
            if prov.get(k) != expected.get(k):
                raise JudgeError(
                    f"the server at {self.url} answered with judge {prov.get('judge')!r} ({k} "
                    f"{str(prov.get(k))[:12]}), not the judge it named first ({expected.get('judge')!r}, "
                    f"{str(expected.get(k))[:12]}): are replicas behind it serving different judges?"
                )
        producer = self._producer(prov)
        out: list[ScoreRecord] = []
        for rec, crits, res in zip(req.recs, req.crits, results, strict=True):
            scores = res.get("scores") or {}
            if res.get("id") != rec.id or not set(crits) <= set(scores):
                raise JudgeError(
                    f"the server at {self.url} answered item {res.get('id')!r} with criteria {list(scores)}; "
                    f"asked: item {rec.id!r}, criteria {crits}"
                )
            for c in crits:
                s = scores[c]
                try:
                    out.append(
                        ScoreRecord(
                            id=rec.id,
                            benchmark=rec.benchmark,
                            task=rec.task,
                            model=rec.model,
                            metric=JUDGE_METRIC,
                            criterion=c,
                            score=s["score"],
                            status=s["status"],
                            reason=s.get("reason"),
                            distribution=s.get("distribution"),
                            argmax=s.get("argmax"),
                            raw_score=s.get("raw_score"),
                            raw_distribution=s.get("raw_distribution"),
                            raw_argmax=s.get("raw_argmax"),
                            interval=s.get("interval"),
                            trusted=s.get("trusted"),
                            details=s.get("details"),
                            producer=dict(producer),
                        )
                    )
                except (ValidationError, KeyError, TypeError) as e:
                    raise JudgeError(
                        f"the server at {self.url} gave an unreadable score for item {rec.id!r}, criterion "
                        f"{c!r}: {e}"
                    ) from None
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        # Criterion prompts the model ran (unscorable items not counted), as the local Batch counts them.
        return Batch(out, len(req.recs), int(usage.get("forward_passes") or 0))

    # -- HTTP
    def _send(self, method: str, path: str, *, what: str = "", **kwargs: Any) -> httpx.Response:
        """One request, tried again on 429/502/503 and connection errors (see the class doc); another
        error status is a JudgeError with the server's message."""
        for attempt in range(self.retries + 1):
            delay = self.backoff * 2**attempt
            try:
                resp = self._http.request(method, path, **kwargs)
            except httpx.TransportError as e:
                problem = f"cannot reach the server at {self.url} ({type(e).__name__}: {e})"
                log = logger.warning
            else:
                if resp.status_code < 400:
                    return resp
                if resp.status_code not in RETRY_STATUSES:
                    raise self._refusal(resp, f"{method} {path}", what)
                problem = f"the server at {self.url} answered {resp.status_code}: {_message(resp)}"
                delay = max(delay, _retry_after(resp))
                log = logger.debug
            if attempt == self.retries:
                raise JudgeError(f"{problem}; gave up after {self.retries + 1} tries")
            delay *= random.uniform(1.0, 1.25)  # concurrent clients do not come back in lockstep
            log(f"{problem}; trying again in {delay:.1f} s")
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _refusal(self, resp: httpx.Response, route: str, what: str = "") -> JudgeError:
        msg = _message(resp)
        whose = f" [{what}]" if what else ""
        if resp.status_code == 401:
            hint = (
                f"no API key was sent: set the {API_KEY_ENV} environment variable (or JudgeClient's "
                "api_key) to the server's key"
                if not self._has_key
                else f"the API key sent (from {API_KEY_ENV} or api_key) is not the server's"
            )
            return JudgeError(f"the server at {self.url} refused {route}: {msg} ({hint})")
        if resp.status_code == 404:
            return JudgeError(f"{self.url} has no {route} ({resp.status_code}): is it judge-serve?")
        return JudgeError(f"the server at {self.url} refused {route} ({resp.status_code}): {msg}{whose}")


def _json(resp: httpx.Response) -> dict[str, Any]:
    try:
        data = resp.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _message(resp: httpx.Response) -> str:
    err = _json(resp).get("error")
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    return resp.text[:300] or resp.reason_phrase


def _retry_after(resp: httpx.Response) -> float:
    try:
        return max(0.0, float(resp.headers.get("retry-after", "")))
    except ValueError:  # absent, or an HTTP date (not sent by judge-serve): the backoff decides
        return 0.0


__all__ = ["API_KEY_ENV", "JudgeClient"]
