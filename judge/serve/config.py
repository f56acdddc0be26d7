"""The settings of ``judge-serve``: :class:`ServeConfig`.

As with ``judge-score``, the command's options are generated from these fields (``judge/cli/serve.py``):
a field ``max_wait_ms`` is the flag ``--max-wait-ms``, its description the help text. Every limit has a
stated default; a request over one gets a 4xx naming it.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from judge.core.errors import ConfigError
from judge.core.hosts import ALLOWED_HOST_HELP, AllowedHosts
from judge.core.images import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS
from judge.core.settings import PathText, Settings
from judge.models import BATCH_TOKENS
from judge.scoring.remote import API_KEY_ENV


class ServeConfig(Settings):
    """Every setting of ``judge-serve``: ``ServeConfig(judge="runs/demo/judge", port=8001)``."""

    judge: PathText = Field(
        description="a judge folder (with judge_card.json), or a plain model folder / hub id / 'tiny' "
        "together with `rubric`"
    )
    rubric: PathText | None = Field(
        None, description="rubric name or YAML path (default: the one the judge card names)"
    )
    force: bool = Field(False, description="serve even when the rubric's hash differs from the judge card's")
    served_name: list[str] | None = Field(
        None,
        description="the model id(s) /v1/models lists and chat requests may name; repeat it to answer to "
        "several, e.g. a harness's default model (default: the judge folder's name, or the model id as given)",
        json_schema_extra={"metavar": "NAME"},
    )
    chat: Literal["judge-only", "generate", "any"] = Field(
        "judge-only",
        description="judge-only (the default): /v1/chat/completions answers the judge's own prompt and the "
        "tools' grading prompts it recognises with scores, and any other conversation gets a 422 listing the "
        "prompts it answers (a client that parses numbers from text would otherwise turn generated text into "
        "NaN without an error); generate: other conversations are answered with greedy generation, marked "
        "X-Judge-Scored: false (any: the old name of generate)",
    )
    sampling: Literal["refuse", "greedy"] = Field(
        "refuse",
        description="refuse: a chat request asking to sample (temperature above 0, top_p below 1) for "
        "generated text gets a 422 (a scored reply is read, not sampled: accepted either way); greedy: it is "
        "accepted and decoded greedily; the X-Judge-Sampling header says so",
    )
    protocol_task: str | None = Field(
        None,
        description="the task family a tool's own grading prompt (prometheus-eval, inspect-ai, lmms-eval, "
        "G-Eval, MT-Bench) is scored on at /v1/chat/completions (default: reward_task, else the rubric's only "
        "family)",
    )
    protocol_criterion: str = Field(
        "overall", description="the criterion a tool's own grading prompt is scored on (default overall)"
    )
    reward_task: str | None = Field(
        None,
        description="the task family /get_reward scores queries on when the request does not say (default: "
        "the rubric's only family)",
    )
    reward_criterion: str = Field(
        "overall", description="the criterion /get_reward scores, unless the request says (default overall)"
    )
    reward_scale: Literal["raw", "unit"] = Field(
        "raw",
        description="a /get_reward reward: the expected score on the rubric's scale (raw), or scaled to [0, 1] "
        "(unit)",
    )
    reward_fallback: float = Field(
        0.0, description="the reward of a query that cannot be scored (flagged in extra_logs; default 0)"
    )
    host: str = Field(
        "127.0.0.1",
        description="address to bind (default 127.0.0.1: this machine only; 0.0.0.0 for all, which needs an "
        "API key or `allow_unauthenticated`)",
    )
    allow_unauthenticated: bool = Field(
        False,
        description="serve on an address other than loopback without an API key (anyone who reaches the "
        "port can then use the judge)",
    )
    port: int = Field(8000, ge=0, le=65535, description="port (default 8000; 0: any free port)")
    allowed_host: AllowedHosts = Field(
        default_factory=list, description=ALLOWED_HOST_HELP, json_schema_extra={"metavar": "NAME"}
    )
    api_key: str | None = Field(
        None,
        description=f"require `Authorization: Bearer KEY` on every route but /health (default: the "
        f"{API_KEY_ENV} environment variable; unset: no key)",
        json_schema_extra={"metavar": "KEY"},
    )
    device: str = Field("auto", description="cpu, cuda, cuda:1, ... (default auto: CUDA when available)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights' dtype (auto: bfloat16 on GPU, float32 on CPU)"
    )
    quantization: Literal["card", "none", "4bit", "8bit"] = Field(
        "card", description="how to load the judge's base (default card: as it was trained)"
    )
    max_batch_tokens: int = Field(
        BATCH_TOKENS,
        ge=1,
        description=f"tokens per forward pass, padding included (default {BATCH_TOKENS}); the batcher "
        "also stops gathering once this many are waiting",
    )
    batch_size: int = Field(
        16, ge=1, description="responses (each with all its criterion prompts) per forward pass (default 16)"
    )
    max_wait_ms: float = Field(
        10.0,
        ge=0,
        description="how long the first item of a batch waits for others to join it (default 10 ms)",
    )
    max_padding: float = Field(
        0.10,
        ge=0,
        description="a forward batch closes before its padding passes this fraction of its real tokens "
        "(default 0.10; measured on the CPU, where a padding token costs what a real one does)",
    )
    reproducible: bool = Field(
        False,
        description="make each item's scores depend on that item alone, bit for bit, whatever else is "
        "queued with it (equal to judge-score --reproducible): each item runs in forward passes of its own; "
        "lower throughput under load",
    )
    max_queue: int = Field(
        1024, ge=1, description="items waiting at most; a request that does not fit gets 429 (default 1024)"
    )
    image_root: PathText | None = Field(
        None,
        description="folder image paths in requests resolve from (never outside it); without it, "
        "requests must send images as data URLs",
    )
    max_body_mb: float = Field(64.0, gt=0, description="request body size limit in MB (default 64)")
    max_string_bytes: int | None = Field(
        None,
        ge=1024,
        description="longest string a request body may hold, in bytes as sent, data URLs aside; a body with a "
        "longer one is refused (413) while it is read (default: 384 times the context budget, 64 characters "
        "a token of 6 bytes each: longer text cannot fit)",
    )
    max_items: int = Field(256, ge=1, description="items per /v1/score request (default 256)")
    max_images: int = Field(16, ge=1, description="images per item or chat message list (default 16)")
    max_image_bytes: int = Field(
        DEFAULT_MAX_BYTES, ge=1, description=f"bytes per image (default {DEFAULT_MAX_BYTES:,})"
    )
    max_image_pixels: int | None = Field(
        None,
        ge=1,
        description="pixels per image, read from the image's header before decoding (default: 4 times "
        "what the judge's tiling can use, max tiles x tile size^2 of its processor; "
        f"{DEFAULT_MAX_PIXELS:,} when the processor does not say)",
    )
    max_request_pixels: int | None = Field(
        None,
        ge=1,
        description="pixels of all the images of one request together, read from their headers before "
        "decoding (default: 32 times max_image_pixels)",
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="context budget of one prompt; longer items get fewer image tiles, then are unscorable "
        "(default: the model's max positions)",
    )
    max_new_tokens: int = Field(
        512, ge=1, description="most tokens /v1/chat/completions generates (default 512)"
    )
    timeout_s: float = Field(
        60.0,
        gt=0,
        description="default request deadline in seconds (a request's own `timeout` field or "
        "X-Request-Timeout header may shorten it); past it: 504 (default 60)",
    )
    max_chat_concurrency: int = Field(
        2,
        ge=1,
        le=32,
        description="chat completions in progress at once, each holding a worker thread while it is read, "
        "waits for the model (one at a time, scoring first) and generates; at most 32, so scoring and the "
        "reward routes keep worker threads (default 2)",
    )
    max_chat_queue: int = Field(
        64,
        ge=0,
        description="chat completions waiting for a place among max_chat_concurrency, holding nothing; one "
        "more gets 429 with Retry-After, and one whose deadline passes while it waits 504 (default 64)",
    )
    grace_s: float = Field(
        30.0, ge=0, description="on SIGTERM, how long in-flight requests get to finish (default 30)"
    )
    max_connections: int | None = Field(
        None,
        ge=16,
        description="open connections at most; past it a new one closes the oldest without a request in "
        "flight (default 4096, kept 128 below the open-file limit, which is raised to its hard limit)",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="seconds a connection may take to send a request's head, or leave its body stalled, "
        "before it is closed (default 10)",
    )
    ray: bool = Field(False, description="serve with Ray Serve replicas (needs the ray extra)")
    replicas: int = Field(1, ge=1, description="Ray Serve replicas, one GPU each when there are GPUs")

    @field_validator("served_name", mode="before")
    @classmethod
    def _one_name(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("served_name")
    @classmethod
    def _names(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not all(name.strip() for name in v)):
            raise ValueError("a served name must not be empty")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ServeConfig:
        if self.max_items > self.max_queue:
            raise ValueError(
                f"`max_items` ({self.max_items}) is over `max_queue` ({self.max_queue}): such a request "
                "could never be queued"
            )
        if self.replicas > 1 and not self.ray:
            raise ValueError(
                "`replicas` needs `ray` (or run one judge-serve per port behind a load balancer)"
            )
        return self

    def key(self) -> str | None:
        """The API key in force: the setting, else the environment's ``JUDGE_API_KEY``. It is compared
        byte for byte with what follows ``Bearer `` (HTTP trims the spaces around a header's value, so a key
        with spaces around it could never match): such a key is refused with a :class:`ConfigError`."""
        key, where = (
            (self.api_key, "--api-key") if self.api_key else (os.environ.get(API_KEY_ENV), API_KEY_ENV)
        )
        if key and key != key.strip():
            raise ConfigError(
                f"the API key ({where}) begins or ends with whitespace, which no client can send after "
                "`Authorization: Bearer ` (HTTP trims it): remove the spaces, tabs or newlines around it"
            )
        return key or None

    def check_exposure(self) -> None:
        """Refuse to serve an address other than loopback without an API key, unless the operator says so
        (``allow_unauthenticated``): on a shared network anyone could otherwise use the judge."""
        if self.key() or self.allow_unauthenticated or is_loopback(self.host):
            return
        raise ConfigError(
            f"`host` {self.host!r} lets other machines reach the server, and it has no API key: set one "
            f"(--api-key KEY or the {API_KEY_ENV} environment variable), bind 127.0.0.1, or pass "
            "--allow-unauthenticated if anyone who reaches the port may use the judge"
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["API_KEY_ENV", "ServeConfig"]
