"""``judge-serve``: argument parsing only; the work is :func:`judge.serve.server.serve`."""

from __future__ import annotations

import argparse
import sys

from judge.cli._common import Parser, add_settings, fail, flags_in_warnings, settings_from
from judge.cli._logging import setup_logging
from judge.core.errors import JudgeError
from judge.serve.config import API_KEY_ENV, ServeConfig

EPILOG = f"""\
examples (from the repository root, after scripts/demo.sh):
  judge-serve --judge runs/demo/judge                         the demo judge on 127.0.0.1:8000
  judge-serve --judge tiny --rubric mmie --port 8001          the tiny (untrained) test model
  {API_KEY_ENV}=sk-local judge-serve --judge runs/demo/judge --host 0.0.0.0 --port 8002
                                                              all interfaces, with a key
  curl -s localhost:8000/v1/score -H 'Content-Type: application/json' -d '{{"items": [{{"id": "q1",
       "task": "SA", "question": "Continue the story.", "response": "Then it rained."}}]}}'
Two Ray Serve replicas: --ray --replicas 2 (pip install 'judge[ray]'; docs/serving.md).
"""

GROUPS = {
    "judge": ["judge", "rubric", "force", "served_name", "device", "dtype", "quantization", "reproducible"],
    "chat": [
        "chat",
        "sampling",
        "protocol_task",
        "protocol_criterion",
        "max_chat_concurrency",
        "max_chat_queue",
    ],
    "reward": ["reward_task", "reward_criterion", "reward_scale", "reward_fallback"],
    "server": [
        "host",
        "port",
        "allowed_host",
        "api_key",
        "allow_unauthenticated",
        "image_root",
        "grace_s",
        "max_connections",
        "header_timeout_s",
        "ray",
        "replicas",
    ],
    "batching and limits": [
        "max_batch_tokens",
        "batch_size",
        "max_wait_ms",
        "max_padding",
        "max_queue",
        "timeout_s",
        "max_body_mb",
        "max_string_bytes",
        "max_items",
        "max_images",
        "max_image_bytes",
        "max_image_pixels",
        "max_request_pixels",
        "max_tokens",
        "max_new_tokens",
    ],
}


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="judge-serve",
        description="Serve a judge over HTTP: /v1/score (rubric scores with distributions), an "
        "OpenAI-compatible /v1/chat/completions, /v1/models, /v1/judge, /health, /ready and /metrics. "
        "Requests are batched dynamically with the packing and scorer judge-score uses.",
        epilog=EPILOG,
    )
    add_settings(p, ServeConfig, groups=GROUPS)
    return p


def main(argv: list[str] | None = None) -> int:
    setup_logging()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with flags_in_warnings(parser):
            cfg = settings_from(args, ServeConfig)
            if cfg.ray:
                from judge.serve.ray import serve_with_ray

                return serve_with_ray(cfg)
            from judge.serve.server import serve

            return serve(cfg)
    except JudgeError as e:
        return fail(e, parser)


if __name__ == "__main__":
    sys.exit(main())
