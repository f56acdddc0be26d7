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

Test code calls :func:`command` for the argv to start, :func:`wrapper` for a shell script that stands for a
console script (``judge-score`` ...), :func:`python` / :func:`python_on_path` for a program that stands for
``python`` itself (``python SCRIPT``, ``python -m MODULE``: a shell script's steps, and what a forked command
starts with ``sys.executable``), and :func:`launcher` for ``accelerate launch`` with its worker processes
forked (through torchrun's ``PYTHON_EXEC``). Run as a script (``python tests/forkserver.py FOLDER``), this
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
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from forkclient import signature

    folder = _the_folder()
    key = signature(dict(env))
    _asked[key] = _asked.get(key, 0) + 1
    if key not in _servers and (now or _asked[key] > 1):
        log = open(os.path.join(folder, f"zygote-{key}.log"), "wb")
        _servers[key] = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), folder], env=dict(env), stdin=subprocess.PIPE,
            stdout=log, stderr=subprocess.STDOUT, cwd=str(HERE.parent),
        )  # fmt: skip
        log.close()
    return folder


def _the_folder() -> str:
    """This test process's folder of sockets, logs and shims (made on first use)."""
    global _folder
    if _folder is None:
        # A Unix socket's path has at most 107 bytes: a long TMPDIR gives way to /tmp.
        short = (
            tempfile.gettempdir() if len(tempfile.gettempdir()) <= 60 or not os.path.isdir("/tmp") else "/tmp"
        )
        _folder = tempfile.mkdtemp(prefix="judge-fork-", dir=short)
        atexit.register(stop)
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


#: what a launched worker imports beyond HEAVY: accelerate and the trainer (not the launcher itself: runpy
#: warns when the module it runs was imported before); DeepSpeed too for a DeepSpeed launch (importing it
#: sets a variable the processes of any other launch would not have)
LAUNCH_IMPORTS = ("accelerate", "transformers.trainer", "trl")


def launcher(
    env: Mapping[str, str], *args: str, cwd: str | os.PathLike[str], deepspeed: bool = False
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run ``accelerate launch ARGS`` from ``cwd`` with the launcher and the
    processes it starts forked: torchrun starts each worker as ``$PYTHON_EXEC -u -m MODULE ...``, and
    ``PYTHON_EXEC`` names a shim that runs that through the fork server (see :func:`python_shim`). The
    servers start now, and are waited for. With ``deepspeed``, accelerate's DeepSpeed launcher appends
    ``cwd`` to the workers' ``PYTHONPATH``: a server for that environment too. Forking off: a plain launch."""
    if not enabled():
        return [sys.executable, "-m", "accelerate.commands.launch", *args], dict(env)
    imports = [*LAUNCH_IMPORTS, "deepspeed"] if deepspeed else LAUNCH_IMPORTS
    env = {**env, "JUDGE_TEST_FORK_IMPORTS": ",".join(imports)}
    env["PYTHON_EXEC"] = python_shim()
    envs = [env]
    if deepspeed:  # as accelerate.utils.launch.env_var_path_add writes it
        paths = [p for p in env.get("PYTHONPATH", "").split(":") if p]
        envs.append({**env, "PYTHONPATH": ":".join([*paths, os.path.abspath(cwd)])})
    # Waited for: a worker that came before its server listens would import everything again, fresh.
    for e in envs:
        wait_ready(e)
    return command("accelerate.commands.launch", *args, env=env), env


def python_shim() -> str:
    """The path of a program that stands for ``python`` (torchrun's ``PYTHON_EXEC``; ``python3`` beside it,
    for a ``PATH``), ``forkclient.shim``: ``[-u] -m MODULE ARGS`` and ``[-u] SCRIPT ARGS`` (a file) run
    through the fork server for the environment they are started in (``-u`` unbuffers the command's streams,
    as Python's flag does, without setting a variable), or fresh where that server has not started; any other
    command line (``-c``, other options, a folder, a missing file) is Python's own. A command forked through
    it has the shim as its ``sys.executable``, as Python started by that name would."""
    folder = Path(_the_folder(), "bin")
    path = folder / "python"
    if not path.exists():
        folder.mkdir(exist_ok=True)
        # Python itself (no shell between: the environment, $PWD included, is passed on untouched).
        path.write_text(
            f"#!{sys.executable} -S\n"
            f"import sys\nsys.path.insert(0, {str(HERE)!r})\n"
            f"import forkclient\nforkclient.shim({_folder!r})\n"
        )
        path.chmod(0o755)
        (folder / "python3").symlink_to("python")
    return str(path)


def python(env: Mapping[str, str]) -> str:
    """A program to start instead of ``sys.executable`` for processes started with ``env``: the shim of
    :func:`python_shim`, with the server for ``env`` started and waited for (so a process it starts with
    ``sys.executable``, the shim for it, is forked too). Forking off: ``sys.executable``."""
    if not enabled():
        return sys.executable
    shim = python_shim()
    wait_ready(env)
    return shim


def python_on_path(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``python`` and ``python3`` on its ``PATH`` standing for this Python, as :func:`python`
    (a shell script's commands). Forking off: ``env`` itself."""
    if not enabled():
        return dict(env)
    bin_dir = Path(python(env)).parent
    return {**env, "PATH": os.pathsep.join([str(bin_dir), env.get("PATH", os.defpath)])}


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
    # More for the servers of some commands (accelerate launch's workers: accelerate, deepspeed ...).
    for name in (*HEAVY, *filter(None, os.environ.get("JUDGE_TEST_FORK_IMPORTS", "").split(","))):
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
    """In the forked child: take the client's streams, environment, folder and argv, and run the command."""
    import builtins
    import importlib.machinery
    import io
    import runpy
    import types

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    for key, value in set_by_imports.items():  # what the imports would have set, where the command has none
        os.environ.setdefault(key, value)
    os.chdir(request["cwd"])
    # The streams as a fresh Python makes them for these fds and this environment (not the server's): with
    # PYTHONUNBUFFERED (or -u) nothing is held in a buffer; else stdout is line-buffered on a terminal only,
    # stderr always.
    unbuffered = request.get("unbuffered") or bool(request["env"].get("PYTHONUNBUFFERED"))
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        new = io.TextIOWrapper(
            open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False),  # noqa: SIM115 (fds 1, 2 stay)
            encoding=old.encoding, errors=old.errors, write_through=unbuffered,
            line_buffering=not unbuffered and (name == "stderr" or os.isatty(fd)),
        )  # fmt: skip
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)
    if request.get("exe"):  # started as the shim that stands for python: what Python would say
        sys.executable = request["exe"]
    script = request.get("path")
    if script:  # as `python SCRIPT` has it: __file__ absolute (not normalized), sys.argv[0] as given
        path = script if os.path.isabs(script) else os.path.join(request["cwd"], script)
        first = os.path.dirname(os.path.realpath(script))
    else:
        first = request["cwd"]
    # The working folder first (`python SCRIPT`: the script's, links resolved), then PYTHONPATH and the
    # installation's folders.
    sys.path[:] = [first, *(p for p in sys.path[1:] if p != str(HERE))]
    sys.argv = [script or request["module"], *request["args"]]
    if "numpy" in sys.modules:  # seeded from the OS at import: every child would draw the same numbers
        sys.modules["numpy"].random.seed()
    # A __main__ of the command's own, as a fresh interpreter has (not this server's globals).
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    main.__annotations__ = {}
    sys.modules["__main__"] = main
    try:
        if script:
            main.__file__ = path
            main.__cached__ = None  # type: ignore[attr-defined]
            main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
            with open(path, "rb") as f:
                code = compile(f.read(), path, "exec")
            exec(code, main.__dict__)
        else:  # what `python -m` runs: its messages ("No module named ...") and exit status too
            runpy._run_module_as_main(request["module"])  # type: ignore[attr-defined]
    except Exception as exc:
        # As Python's top level reports it: the traceback from the command's first frame on (none for a
        # script's syntax error), exit status 1.
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == _become.__code__.co_filename:
            tb = tb.tb_next
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # the hook prints the exception's own
        raise SystemExit(1) from None


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    _become(*_serve(sys.argv[1]))
