"""A fork server for the commands the tests start: a parent process with torch, transformers and the other
heavy libraries already imported forks each ``python -m judge.cli.X ...`` a test runs through
``tests/forkclient.py``.

Why: on the tiny judges most of a command's CPU went to importing torch and transformers' model code, not to
its own work, and the suite starts a few hundred such commands on a 2-core machine.

What a forked command is: a real process of its own, with its argv, working folder, environment, standard
streams, signals and exit status, running the command's module as ``python -m`` does (``runpy``, as
``__main__``); ``judge`` itself is imported fresh in it. What it is not: a fresh interpreter (it shares the
parent's warnings filters, hash seed and loaded libraries; its /proc environ and cmdline are the parent's).
So a test about starting (what a command imports, how long it takes, a variable read at import time) uses a
plain ``[sys.executable, "-m", ...]``; and a command is only forked from a server whose environment has the
same value for every variable the libraries read while importing (``forkclient.signature``); any other runs
fresh. ``JUDGE_TEST_FORK=0`` runs every command fresh.

Test code calls :func:`command` for the argv to start, and :func:`wrapper` for a shell script that stands
for a console script (``judge-score`` ...). Run as a script (``python tests/forkserver.py FOLDER``), this
file is the server: it imports, listens on ``FOLDER/zygote-<signature>.sock``, and ends when its standard
input closes (the test process that started it has ended) or on SIGTERM, SIGINT (Ctrl-C) or SIGHUP, killing
the commands still running and removing its socket (and the folder, once no other server is in it).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "forkclient.py"
#: what the commands import before their own work (a module missing here is imported by the command)
HEAVY = (
    "numpy",
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "transformers.processing_utils",
    "transformers.models.internvl.modeling_internvl",
    "transformers.models.internvl.processing_internvl",
    "transformers.models.qwen2.modeling_qwen2",
    "peft",
    "scipy.stats",
    "PIL.Image",
    "pydantic",
    "httpx",
    "fastapi",
    "uvicorn",
    "matplotlib.pyplot",
)

_folder: str | None = None
_servers: dict[str, subprocess.Popen] = {}
_asked: dict[str, int] = {}  # environment signature -> commands asked for


def enabled() -> bool:
    return os.environ.get("JUDGE_TEST_FORK", "1") != "0"


def _start(env: Mapping[str, str], now: bool = False) -> str:
    """The folder of this test process's servers; the server for ``env`` is started (in the background: the
    commands that come before it listens run fresh) the second time a command asks for it, or at once with
    ``now``: a server costs the imports it saves, so an environment used once gets none."""
    global _folder
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from forkclient import signature

    if _folder is None:
        # A Unix socket's path has at most 107 bytes: a long TMPDIR gives way to /tmp.
        short = (
            tempfile.gettempdir() if len(tempfile.gettempdir()) <= 60 or not os.path.isdir("/tmp") else "/tmp"
        )
        _folder = tempfile.mkdtemp(prefix="judge-fork-", dir=short)
        atexit.register(stop)
    key = signature(dict(env))
    _asked[key] = _asked.get(key, 0) + 1
    if key not in _servers and (now or _asked[key] > 1):
        log = open(os.path.join(_folder, f"zygote-{key}.log"), "wb")
        _servers[key] = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), _folder], env=dict(env), stdin=subprocess.PIPE,
            stdout=log, stderr=subprocess.STDOUT, cwd=str(HERE.parent),
        )  # fmt: skip
        log.close()
    return _folder


def stop() -> None:
    """End this test process's servers (and the commands they still run)."""
    global _folder
    for proc in _servers.values():
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    _servers.clear()
    _asked.clear()
    if _folder:
        shutil.rmtree(_folder, ignore_errors=True)
        _folder = None


def command(
    module: str, *args: str, env: Mapping[str, str] | None = None, start_now: bool = False
) -> list[str]:
    """The argv that runs ``python -m module args`` with ``env`` (default: this process's): through the fork
    server for that environment, or ``[sys.executable, "-m", module, *args]`` when forking is off.
    ``start_now``: start that server now, not at the environment's second command (argv run many times)."""
    if not enabled():
        return [sys.executable, "-m", module, *args]
    folder = _start(os.environ if env is None else env, now=start_now)
    return [sys.executable, "-S", str(CLIENT), folder, module, *args]


def wait_ready(env: Mapping[str, str], timeout: float = 300) -> None:
    """Start the server for ``env`` if need be and wait until it listens (a test of the server itself)."""
    import time

    from forkclient import socket_path

    path = socket_path(_start(env, now=True), dict(env))
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        proc = _servers[Path(path).stem.removeprefix("zygote-")]
        assert proc.poll() is None, f"the fork server exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"the fork server did not listen within {timeout} s"
        time.sleep(0.1)


def wrapper(path: Path, module: str, env: Mapping[str, str]) -> None:
    """Write an executable shell script at ``path`` that runs ``python -m module "$@"`` as :func:`command`
    does, for commands started with ``env``."""
    argv = command(module, env=env, start_now=True)
    path.write_text("#!/bin/sh\nexec " + " ".join(f'"{a}"' for a in argv) + ' "$@"\n')
    path.chmod(0o755)


def real_pid(pid: int) -> int:
    """The process id of the command that the process ``pid`` (what :func:`command` started) runs: the
    forked command's, or ``pid`` itself when it ran fresh."""
    if _folder:
        file = Path(_folder, f"pid-{pid}")
        if file.is_file():
            return int(file.read_text())
    return pid


# ---- the server -------------------------------------------------------------------------------------------


def _serve(folder: str):
    """Listen, fork a command per request, report each command's exit status; return (in the forked child
    only) the request, its standard streams and what the imports set. The loop is single-threaded: forking
    is safe."""
    import json
    import select
    import signal
    import socket

    from forkclient import FORWARDED, socket_path

    before = dict(os.environ)
    path = socket_path(folder, before)  # before importing: an import may set a variable
    for name in HEAVY:
        __import__(name)
    # What the imports set (torch: TORCHINDUCTOR_CACHE_DIR), a fresh command would have set too.
    set_by_imports = {k: v for k, v in os.environ.items() if before.get(k) != v}
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)  # ready: clients only see the socket once it listens
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    for s in (signal.SIGCHLD, *stops):  # handlers, so that the wakeup fd is written
        signal.signal(s, lambda *_: None)
    # Held back while forking: a signal the child gets before it has let go of this loop's handlers and
    # wakeup fd would be written into this process's pipe (and read as this server's own SIGTERM).
    held = {signal.SIGCHLD, *stops, *FORWARDED}
    children: dict[int, socket.socket] = {}  # command pid -> its client's connection
    clients: dict[int, int] = {}  # command pid -> its client's pid
    stopping = False
    while not stopping:
        conns = list(children.values())
        ready, _, _ = select.select([listener, wake_r, sys.stdin, *conns], [], [])
        if wake_r in ready:
            got = os.read(wake_r, 512)
            stopping = any(s in got for s in stops)
            while children:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                conn = children.pop(pid, None)
                # Its pid file goes with it: the client's process id may be another's later.
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, f"pid-{clients.pop(pid, 0)}"))
                if conn is not None:
                    try:
                        conn.send(json.dumps({"status": status}).encode())
                    except OSError:
                        pass
                    conn.close()
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 512):
            stopping = True
        for pid, conn in list(children.items()):
            if conn in ready:  # the client is gone (killed): so goes its command
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if listener in ready and not stopping:
            conn, _ = listener.accept()
            try:
                raw, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                request = json.loads(raw)
            except (OSError, ValueError):
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, held)
            pid = os.fork()
            if pid == 0:  # the command
                signal.set_wakeup_fd(-1)
                for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(s, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                for sock in (listener, conn, *children.values()):
                    sock.close()
                os.close(wake_r)
                os.close(wake_w)
                for s in request["ignored"]:  # as the client has them: ignored before any can come
                    signal.signal(s, signal.SIG_IGN)
                if request["session"]:
                    os.setsid()
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # what came meanwhile: delivered now
                # The command's process id under the client's, for a test that reads the command's /proc
                # entry (memory): written before the command runs, so before anything it prints.
                pid_file = os.path.join(folder, f"pid-{request['client']}")
                with open(pid_file + ".new", "w") as f:
                    f.write(str(os.getpid()))
                os.rename(pid_file + ".new", pid_file)
                return request, fds, set_by_imports
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for fd in fds:
                os.close(fd)
            children[pid] = conn
            clients[pid] = request["client"]
            try:
                conn.send(json.dumps({"pid": pid}).encode())
            except OSError:  # the client is gone: the next turn of the loop kills the command
                pass
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # Leave nothing behind: this server's socket, and the folder once no server is left in it.
    os.unlink(path)
    if not any(f.endswith(".sock") for f in os.listdir(folder)):
        shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)


def _become(request: dict, fds: list[int], set_by_imports: dict[str, str]) -> None:
    """In the forked child: take the client's streams, environment, folder and argv."""
    import runpy

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update(set_by_imports)
    os.chdir(request["cwd"])
    # As `python -m` sets it: the working folder first, then PYTHONPATH and the installation's folders.
    sys.path[:] = [request["cwd"], *(p for p in sys.path[1:] if p != str(HERE))]
    sys.argv = [request["module"], *request["args"]]
    if "numpy" in sys.modules:  # seeded from the OS at import: every child would draw the same numbers
        sys.modules["numpy"].random.seed()
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    _become(*_serve(sys.argv[1]))
