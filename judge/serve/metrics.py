"""The service's Prometheus metrics (``GET /metrics``), in a registry of its own per service."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from judge.core.schema import ScoreRecord

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServiceMetrics:
    """Requests by route and status, queue depth, batch tokens, queue wait and compute seconds, items and
    unscorable items by reason."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter(
            "judge_requests", "HTTP requests answered, by route and status", ["route", "status"], registry=r
        )
        self.queue_depth = Gauge("judge_queue_depth", "items waiting for the scorer", registry=r)
        self.batch_tokens = Histogram(
            "judge_batch_tokens",
            "tokens gathered for one scoring round (padding excluded)",
            buckets=(256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536),
            registry=r,
        )
        self.batch_items = Histogram(
            "judge_batch_items",
            "items scored in one round",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
            registry=r,
        )
        self.queue_wait = Histogram(
            "judge_queue_wait_seconds", "time an item waited before the worker took it", registry=r
        )
        self.compute = Histogram("judge_compute_seconds", "model time of one scoring round", registry=r)
        self.items = Counter("judge_items", "items answered (scored or unscorable)", registry=r)
        self.unscorable = Counter(
            "judge_unscorable", "criterion scores that could not be made, by reason", ["reason"], registry=r
        )
        self.dropped = Counter(
            "judge_dropped_items", "items dropped before scoring, by why", ["why"], registry=r
        )
        self.ready = Gauge("judge_ready", "1 once the weights are loaded and warmed up", registry=r)

    def batch(self, units: int, tokens: int, seconds: float) -> None:
        """One scoring round: its items, tokens and model time."""
        self.batch_items.observe(units)
        self.batch_tokens.observe(tokens)
        self.compute.observe(seconds)

    def record(self, rec: ScoreRecord) -> None:
        if rec.status != "ok":
            code = (rec.details or {}).get("reason_code") or rec.status
            self.unscorable.labels(reason=str(code)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
