"""A real ``judge-serve`` process on loopback for the service's tests (not a fixture module: import it)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import forkserver
import httpx

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JUDGE_API_KEY"}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1", **extra)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def pid(self) -> int:
        """The server's own process id (``proc`` may be the fork client that stands for it)."""
        return forkserver.real_pid(self.proc.pid)


@contextmanager
def running_server(
    args: Sequence[str],
    tmp_path: Path,
    *,
    env: dict[str, str] | None = None,
    ready_timeout: float = 120.0,
    wait_ready: bool = True,
    open_files: int | None = None,
    fork: bool = True,
) -> Iterator[Server]:
    """Start ``judge-serve ARGS --port <free>`` and wait until ``/ready`` answers 200; stopped (SIGTERM,
    then SIGKILL) on exit. Its stdout and stderr go to a log file (``Server.output()``). ``open_files``:
    the server's soft and hard limit on open files. ``fork``: started through the fork server
    (``tests/forkserver.py``); False for a test that reads the server's command line or environment in
    ``/proc`` (a forked server shows its parent's)."""
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    env = env or server_env()
    # Forked from a parent with the libraries imported (tests/forkserver.py), unless the caller asks for a
    # fresh process or a limit is to be set (the server's own, before it starts).
    serve = [*args, "--port", str(port)]
    cmd = (
        [sys.executable, "-m", "judge.cli.serve", *serve]
        if open_files or not fork
        else forkserver.command("judge.cli.serve", *serve, env=env)
    )

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=limit if open_files else None,
        )  # fmt: skip
    server = Server(f"http://127.0.0.1:{port}", proc, log)
    # /ready needs the key when the server has one (only /health does not).
    headers = (
        {"Authorization": f"Bearer {args[list(args).index('--api-key') + 1]}"} if "--api-key" in args else {}
    )
    try:
        if wait_ready:
            deadline = time.monotonic() + ready_timeout
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"judge-serve exited with {proc.returncode}:\n{server.output()}")
                try:
                    if httpx.get(server.url + "/ready", headers=headers, timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"judge-serve not ready after {ready_timeout} s:\n{server.output()}")
                time.sleep(0.2)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def serving_in_process(service) -> Iterator[str]:
    """A loaded :class:`~judge.serve.service.JudgeService` behind the real app and uvicorn, in a thread of
    this process, on a loopback port: for tests that must reach into the running service (a fault injected
    into its engine). Yields the base URL; the server is stopped on exit."""
    import threading

    import uvicorn

    from judge.serve.app import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(service, load=False), log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise AssertionError("the in-process server did not start")
        time.sleep(0.02)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
