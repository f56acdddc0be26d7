"""``judge-serve --ray --replicas N``: the same app served by N Ray Serve replicas.

Each replica is a Ray actor with its own :class:`~judge.serve.service.JudgeService` (weights, batcher,
metrics) serving :func:`~judge.serve.app.create_app`'s routes unchanged (auth, limits, errors); Ray
Serve's HTTP proxy, bound to ``host:port``, spreads requests over the replicas. A replica takes requests
only once its weights are loaded and warmed up, so ``/ready`` answers 200 as soon as one replica is up.
Every answer carries ``X-Judge-Replica``: the id of the replica that made it.

Ray runs on this machine only: a new local instance (never one found running), no dashboard, no usage
statistics. One GPU per replica when CUDA is available, else a fraction of a CPU each (so that several
fit on a small machine). SIGTERM or Ctrl-C shuts Ray Serve down (requests in flight get ``grace_s``)
and then Ray itself; the command exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.core.errors import ConfigError, JudgeError
from judge.serve.app import create_app
from judge.serve.config import ServeConfig
from judge.serve.server import banner
from judge.serve.service import JudgeService

if TYPE_CHECKING:
    from fastapi import FastAPI

logger = logging.getLogger(__name__)

APP_NAME = "judge"
REPLICA_HEADER = "x-judge-replica"
#: Ray resources of one CPU replica: a fraction, so that two replicas fit on a 2-core machine.
CPU_SHARE = 0.5


class JudgeReplica:
    """One replica: builds its own service and loads the weights, then serves the app. Ray Serve routes
    no request to it before ``__init__`` has returned (a failure there is retried, then reported)."""

    def __init__(self, cfg: ServeConfig, threads: int) -> None:
        import torch
        from ray import serve

        # Ray sets OMP_NUM_THREADS=1 in a replica with a fraction of a CPU; the driver decided the share.
        torch.set_num_threads(threads)
        self.service = JudgeService(cfg)
        self.service.load()
        self.replica_id = serve.get_replica_context().replica_id.unique_id
        logger.info(f"replica {self.replica_id} (pid {os.getpid()}) ready on {self.service.device}")

    def __serve_build_asgi_app__(self) -> FastAPI:
        # Called by Ray Serve after __init__: the weights are loaded, so the app must not load them again.
        app = create_app(self.service, load=False)
        app.add_middleware(_ReplicaHeader, replica=self.replica_id)
        return app


class _ReplicaHeader:
    """Pure ASGI middleware adding ``X-Judge-Replica`` to every response (which replica answered)."""

    def __init__(self, app: Any, replica: str) -> None:
        self.app = app
        self.header = (REPLICA_HEADER.encode(), replica.encode())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_tagged(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_tagged)


def serve_with_ray(cfg: ServeConfig) -> int:
    """Serve ``cfg`` with ``cfg.replicas`` Ray Serve replicas until SIGTERM/SIGINT; returns the exit code.

    Raises :class:`ConfigError` when Ray is not installed, the port is taken, or the replicas cannot have
    the GPUs they need; :class:`JudgeError` when the replicas fail to start (Ray is shut down first).
    """
    try:
        import ray
        from ray import serve
    except ImportError:
        raise ConfigError("`ray` needs Ray Serve, which is not installed: pip install 'judge[ray]'") from None

    cfg.check_exposure()
    cfg = _portable(cfg)
    port = _free_port(cfg.host, cfg.port)
    threads = int(os.environ.get("OMP_NUM_THREADS") or max(1, (os.cpu_count() or 1) // cfg.replicas))
    # A signal before the wait below interrupts the start-up, which then shuts down what it started.
    signal.signal(signal.SIGTERM, _interrupt)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # read by ray.init; inherited by Ray's processes
    # The service here only resolves the judge and rubric for the banner (and to refuse bad options);
    # its imports (torch, transformers) take seconds, which overlap Ray's start-up in a thread.
    with ThreadPoolExecutor(1, thread_name_prefix="judge-resolve") as pool:
        resolving = pool.submit(JudgeService, cfg)
        try:
            ray.init(
                address="local",  # a new instance of our own, never a cluster found on the machine
                _node_ip_address="127.0.0.1",  # the node advertises loopback: one machine, no network needed
                include_dashboard=False,
                logging_level=logging.WARNING,
                namespace="judge-serve",
            )
            signal.signal(signal.SIGTERM, _interrupt)  # ray.init sets its own (exit code 15)
            logging.getLogger("ray.serve").setLevel(logging.WARNING)  # not Serve's start-up chatter
            quiet = {"log_level": "WARNING", "enable_access_log": False}
            serve.start(http_options={"host": cfg.host, "port": port}, logging_config=quiet)
            service = resolving.result()
            num_gpus = _gpus_per_replica(cfg)
            url = f"http://{'[' + cfg.host + ']' if ':' in cfg.host else cfg.host}:{port}"
            per = "1 GPU each" if num_gpus else f"{CPU_SHARE:g} CPU and {threads} thread(s) each"
            print(banner(service, url), flush=True)
            print(f"  Ray Serve: {cfg.replicas} replica(s), {per}; /ready is 200 once one is up", flush=True)
            deployment = serve.deployment(
                name="JudgeReplica",
                num_replicas=cfg.replicas,
                ray_actor_options={"num_gpus": num_gpus, "num_cpus": 0 if num_gpus else CPU_SHARE},
                # The service answers 429 itself once its queue is full; Ray's default (5) would cap
                # the batches.
                max_ongoing_requests=cfg.max_queue,
                graceful_shutdown_timeout_s=cfg.grace_s,
                graceful_shutdown_wait_loop_s=0.5,
            )(serve.ingress()(JudgeReplica))
            t0 = time.perf_counter()
            try:
                serve.run(
                    deployment.bind(cfg, threads), name=APP_NAME, route_prefix="/", logging_config=quiet
                )
            except RuntimeError as e:  # Ray's report of a failed deployment (replica constructor errors)
                raise JudgeError(
                    f"the Ray Serve replicas failed to start: {_startup_error(serve, e)}"
                ) from None
            print(f"  {cfg.replicas} replica(s) running ({time.perf_counter() - t0:.1f} s)", flush=True)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            logger.info("shutting down Ray Serve")
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the shutdown short
            if ray.is_initialized():
                try:
                    _drain(ray, serve)
                finally:
                    ray.shutdown()
    return 0


def _drain(ray: Any, serve: Any) -> None:
    """Delete the app, which drains it: each replica finishes its requests (up to ``grace_s``) first.

    A signal sent to the whole process group (``kill -- -PGID``, systemd's default stop) reaches Ray's
    own processes too: they stop at once, and a delete waiting on them would hang until Ray's client
    gives up (60 s, exit 1). So the delete runs in a thread, and is abandoned as soon as one of Ray's
    processes has died: there is nothing left to drain then.
    """
    deleting = threading.Thread(target=serve.delete, args=(APP_NAME,), name="judge-drain", daemon=True)
    deleting.start()
    node = getattr(ray._private.worker, "_global_node", None)  # this driver's local Ray node
    while deleting.is_alive():
        deleting.join(0.1)
        if node is not None and node.dead_processes():
            logger.warning(
                "Ray's own processes were stopped by the same signal: shutting down without a drain"
            )
            return


def _interrupt(sig: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _portable(cfg: ServeConfig) -> ServeConfig:
    """``cfg`` as Ray's worker processes must see it: local paths absolute (a worker's working folder is
    not ours), and the API key resolved here (not from a worker's environment)."""
    update: dict[str, Any] = {"api_key": cfg.key()}
    for name in ("judge", "rubric", "image_root"):
        value = getattr(cfg, name)
        if value and Path(value).exists():
            update[name] = str(Path(value).resolve())
    return cfg.model_copy(update=update)


def _gpus_per_replica(cfg: ServeConfig) -> int:
    """1 when the replicas run on GPUs (``device`` auto with CUDA, or cuda), else 0."""
    device = cfg.device
    if device == "cpu":
        return 0
    if device.startswith("cuda:"):
        raise ConfigError(
            f"`device` {device!r} names one GPU, but with `ray` each replica gets its own GPU from Ray: "
            "use --device cuda (or auto)"
        )
    import torch

    if device == "auto" and not torch.cuda.is_available():
        return 0
    have = torch.cuda.device_count()
    if have < cfg.replicas:
        raise ConfigError(
            f"`replicas` ({cfg.replicas}) need one GPU each, and this machine has {have}; "
            "ask for fewer replicas or use --device cpu"
        )
    return 1


def _free_port(host: str, port: int) -> int:
    """``port``, checked free on ``host`` (0: a free one), so that a taken port is a clear error now
    rather than a Ray proxy failing later."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            raise ConfigError(f"cannot listen on {host}:{port} (`host`, `port`): {e.strerror}") from None
        return sock.getsockname()[1]


def _startup_error(serve: Any, e: BaseException) -> str:
    """The replicas' own error (the last line of the traceback Serve keeps in its status; the whole
    traceback is in Ray's log lines above), else the first line of Serve's report."""
    try:
        for dep in serve.status().applications[APP_NAME].deployments.values():
            lines = [x.strip() for x in (dep.message or "").splitlines() if x.strip()]
            if lines:
                return lines[-1][:500]
    except Exception:  # the status is a nicety; Serve's own report below still says what failed
        pass
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    return lines[0][:500] if lines else type(e).__name__


__all__ = ["REPLICA_HEADER", "JudgeReplica", "serve_with_ray"]
