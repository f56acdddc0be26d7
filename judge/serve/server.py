"""Running the app under uvicorn: startup banner, and the SIGTERM drain.

On SIGTERM (or Ctrl-C) the service stops answering ``/ready`` and refuses new ``/v1/`` requests,
uvicorn stops accepting connections and waits up to ``grace_s`` for requests in flight (whose items
the batcher still scores), then the process exits 0.
"""

from __future__ import annotations

import logging
import signal
import socket
from types import FrameType

import uvicorn

from judge.serve.app import create_app
from judge.serve.config import ServeConfig
from judge.serve.connections import ConnectionGuard, connection_cap, guarded_protocol, raise_fd_limit
from judge.serve.service import JudgeService

logger = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, service: JudgeService):
        super().__init__(config)
        self.service = service

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            logger.info(f"{signal.Signals(sig).name}: draining (grace {self.service.cfg.grace_s:g} s)")
        self.service.drain()
        super().handle_exit(sig, frame)
        # uvicorn re-raises the signal after its graceful shutdown, which would end the process as killed;
        # a drain that completed is a clean exit.
        if sig == signal.SIGTERM and sig in self._captured_signals:
            self._captured_signals.remove(sig)


def banner(service: JudgeService, url: str) -> str:
    cfg, p = service.cfg, service.provenance()
    key = "API key required" if cfg.key() else "no API key"
    pixels = f"{cfg.max_image_pixels:,}" if cfg.max_image_pixels else "4x the judge's tiling"
    request_pixels = f"{cfg.max_request_pixels:,}" if cfg.max_request_pixels else "32x that"
    return "\n".join(
        [
            f"judge-serve: {service.model_name}  ({p['judge']})",
            f"  rubric {p['rubric']} (hash {p['rubric_hash'][:12]}), fingerprint {p['fingerprint'][:16]}",
            f"  listening on {url}  ({key}; /health, /ready, /metrics, /v1/score, /v1/chat/completions)",
            f"  limits: {cfg.max_items} items/request, {cfg.max_images} images/item, "
            f"{cfg.max_image_bytes:,} bytes and {pixels} pixels/image, {request_pixels} pixels/request, "
            f"body {cfg.max_body_mb:g} MB, "
            f"queue {cfg.max_queue} items, batch {cfg.max_batch_tokens} tokens, wait {cfg.max_wait_ms:g} ms, "
            f"padding {cfg.max_padding:.0%}, timeout {cfg.timeout_s:g} s",
            *targets(service),
        ]
    )


def targets(service: JudgeService) -> list[str]:
    """What the reward routes and the tools' grading prompts are scored on, or why they have no default: a
    client that sends no task (OpenRLHF) would otherwise see only 422s it does not print."""
    from judge.serve.protocols import REGISTRY, protocol_target

    cfg, rubric = service.cfg, service.rubric
    families = ", ".join(rubric.families)
    if cfg.reward_task or len(rubric.families) == 1:
        task = cfg.reward_task or next(iter(rubric.families))
        reward = (
            f"  reward routes (/get_reward, /v1/reward): task family {task}, criterion {cfg.reward_criterion}"
        )
    else:
        reward = (
            f"  reward routes (/get_reward, /v1/reward): NO default task family: rubric {rubric.name} has "
            f"{families}, so every request that does not name `task` (OpenRLHF's never do) is refused with a "
            "422; start with --reward-task FAMILY"
        )
    target = protocol_target(cfg, rubric)
    tools = ", ".join(dict.fromkeys(p.tool.split(" (")[0] for p in REGISTRY.values()))
    if isinstance(target, str):
        protocols = f"  tools' grading prompts ({tools}): refused with a 422: {target}"
    else:
        protocols = (
            f"  tools' grading prompts ({tools}): scored on task family {target[0]}, criterion {target[1]} "
            "(not on the tools' own rubric text)"
        )
    return [reward, protocols]


def serve(cfg: ServeConfig) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code. The weights load after the port is bound, so
    ``/health`` answers at once and ``/ready`` turns 200 once the judge is warm."""
    cfg.check_exposure()
    service = JudgeService(cfg)
    sock = socket.socket(socket.AF_INET6 if ":" in cfg.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((cfg.host, cfg.port))
    except OSError as e:
        from judge.core.errors import ConfigError

        raise ConfigError(f"cannot listen on {cfg.host}:{cfg.port} (`host`, `port`): {e.strerror}") from None
    host, port = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    print(banner(service, url), flush=True)
    fd_limit = raise_fd_limit()
    guard = ConnectionGuard(connection_cap(fd_limit, cfg.max_connections), cfg.header_timeout_s)
    logger.info(
        f"connections: at most {guard.max_connections:,} open (open files: {fd_limit:,}); a request head "
        f"or a stalled body gets {cfg.header_timeout_s:g} s"
    )
    config = uvicorn.Config(
        create_app(service),
        log_level="warning",
        timeout_graceful_shutdown=int(cfg.grace_s) or None,
        access_log=False,
        http=guarded_protocol(guard),
    )
    server = _Server(config, service)
    server.run(sockets=[sock])
    return 0
