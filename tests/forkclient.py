"""Run ``python -m MODULE ARGS`` (or ``python SCRIPT ARGS``) through a test run's fork server
(``tests/forkserver.py``), or exec it.

Usage: ``python -S tests/forkclient.py FOLDER MODULE [ARG ...]``; and through :func:`shim`, the program that
stands for ``python`` itself (``forkserver.python_shim``). This process stands in for the command:
it sends its argv, working folder, environment and standard streams (the file descriptors themselves) to the
fork server of FOLDER whose environment matches on every variable read while the heavy libraries import
(``signature``), forwards the signals it gets to the forked command (to its process group when this
process leads a session of its own, as after ``start_new_session``: a ``killpg`` reaches what the command
started), and exits as the command did (its exit code, or killed by the same signal). Killed itself
(SIGKILL), the server kills the command. With no such server (not started yet, another environment,
``JUDGE_TEST_FORK=0``) it execs ``python -m MODULE ARGS`` (``python SCRIPT ARGS``): a fresh interpreter in
this very process. Standard library only: it must start in milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import sys

#: environment variables read while torch, transformers, numpy, matplotlib ... import (thread pools, hub
#: folders and modes, encodings, Python's own flags): a command is forked only from a server whose
#: environment has the same values for every one of them.
IMPORT_TIME = ("HF_", "HUGGINGFACE", "TRANSFORMERS", "TORCH", "PYTORCH", "OMP_", "MKL", "KMP_", "OPENBLAS",
               "GOTO", "CUDA", "NCCL", "ACCELERATE", "TOKENIZERS", "PYTHON", "XDG_", "LANG", "LC_", "MPL",
               "MATPLOTLIB", "NUMPY", "SCIPY", "TQDM", "HOME", "TMPDIR", "TZ", "USE_TORCH", "USE_TF", "USE_JAX",
               "LD_", "GLIBC", "MALLOC", "DS_", "DEEPSPEED", "TRL_", "PEFT_", "WANDB_", "BNB_", "BITSANDBYTES",
               "TRITON", "JUDGE_TEST_FORK")  # fmt: skip
#: ... but these, which launchers (accelerate launch, torchrun) set for each run, or importing torch sets
#: (``TORCHINDUCTOR_CACHE_DIR``: every process a command starts has it), and only run-time code reads
#: (``PYTHONUNBUFFERED``, or ``-u``, the server applies to each command's streams): the processes of every
#: launch are forked from one server.
RUN_TIME = ("TORCHELASTIC_", "ACCELERATE_", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "PYTORCH_NVML_BASED_CUDA_CHECK",
            "TORCHINDUCTOR_CACHE_DIR", "PYTHONUNBUFFERED")  # fmt: skip
#: the signals a test sends a command (stop, interrupt, reload ...): passed on to the forked command
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def signature(env: dict[str, str]) -> str:
    """A short hash of the import-time variables of ``env`` (names and values)."""
    keys = sorted(k for k in env if k.startswith(IMPORT_TIME) and not k.startswith(RUN_TIME))
    return hashlib.sha256(json.dumps([[k, env[k]] for k in keys]).encode()).hexdigest()[:16]


def socket_path(folder: str, env: dict[str, str]) -> str:
    return os.path.join(folder, f"zygote-{signature(env)}.sock")


def main() -> None:
    """``forkclient.py FOLDER MODULE ARGS``: ``python -m MODULE ARGS`` through FOLDER's servers."""
    run(sys.argv[1], sys.argv[2], None, sys.argv[3:])


def shim(folder: str) -> None:
    """The program that stands for ``python`` (``forkserver.python_shim``): ``[-u] -m MODULE ARGS`` and
    ``[-u] SCRIPT ARGS`` (a file) are run through FOLDER's servers with this program as their
    ``sys.executable``; any other command line (``-c``, other options, a folder or zip to run, a missing
    file, nothing) is Python's own, exec'd as given."""
    argv = sys.argv[1:]
    unbuffered = bool(argv) and argv[0] == "-u"
    rest = argv[1:] if unbuffered else argv
    exe = os.path.abspath(sys.argv[0])
    if len(rest) >= 2 and rest[0] == "-m":
        run(folder, rest[1], None, rest[2:], exe=exe, unbuffered=unbuffered)
    elif rest and not rest[0].startswith("-") and os.path.isfile(rest[0]):
        run(folder, None, rest[0], rest[1:], exe=exe, unbuffered=unbuffered)
    os.execv(sys.executable, [sys.executable, *argv])


def run(
    folder: str, module: str | None, script: str | None, args: list[str], exe: str | None = None,
    unbuffered: bool = False,
) -> None:  # fmt: skip
    """Run ``python [-u] -m MODULE ARGS`` (or ``python [-u] SCRIPT ARGS``) through the server of FOLDER for
    this environment, and exit as it did; with none, exec it. ``exe``: the command's ``sys.executable``."""
    flags = ["-u"] if unbuffered else []
    fresh = [sys.executable, *flags, *(["-m", module] if module else [script]), *args]
    env = dict(os.environ)
    path = socket_path(folder, env)
    # A relative PYTHONPATH entry was resolved against the server's folder when it imported: run fresh.
    relative = any(p and not os.path.isabs(p) for p in env.get("PYTHONPATH", "").split(os.pathsep))
    if env.get("JUDGE_TEST_FORK") == "0" or relative or not os.path.exists(path):
        os.execv(sys.executable, fresh)
    # Started in a session of its own (start_new_session, to be stopped with killpg): the command gets a
    # session of its own too, and a signal goes to its whole process group, as the killpg would.
    session = os.getsid(0) == os.getpid()

    def send(pid: int, sig: int) -> None:
        try:
            if session:
                try:
                    os.killpg(pid, sig)
                    return
                except ProcessLookupError:  # its group not made yet (just forked): the command alone
                    pass
            os.kill(pid, sig)
        except ProcessLookupError:  # ended meanwhile: its status is on the way
            pass

    # Signals are read from a pipe (the wakeup fd) in the same select as the server's messages: a Python
    # handler may run too late to interrupt a blocking recv (a signal just before the call), a pipe can't.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    # A signal this process ignores (SIGINT in a job started in the background) the command ignores too, as
    # it inherits the disposition when exec'd; the others are passed on.
    ignored = [int(s) for s in FORWARDED if signal.getsignal(s) == signal.SIG_IGN]
    signal.set_wakeup_fd(wake_w)
    for s in FORWARDED:
        if s not in ignored:
            signal.signal(s, lambda *_: None)
    received: list[int] = []  # signals not yet passed on (the command not forked yet)
    child = 0

    def next_message(conn: socket.socket) -> dict:
        """The server's next message; signals that come meanwhile go to the command (or wait for it)."""
        while True:
            ready, _, _ = select.select([conn, wake_r], [], [])
            if wake_r in ready:
                received.extend(os.read(wake_r, 512))
                while child and received:
                    send(child, received.pop(0))
            if conn in ready:
                return json.loads(conn.recv(4096) or b"{}")

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
        request = json.dumps(
            {
                "module": module,
                "path": script,
                "exe": exe,
                "unbuffered": unbuffered,
                "args": args,
                "cwd": os.getcwd(),
                "env": env,
                "ignored": ignored,
                "client": os.getpid(),
                "session": session,
            }
        ).encode()
        socket.send_fds(conn, [request], [0, 1, 2])
        reply = next_message(conn)
    except OSError:
        reply = {}
    if "pid" not in reply:  # the server went away before forking: nothing has run yet
        conn.close()
        signal.set_wakeup_fd(-1)
        for s in FORWARDED:
            signal.signal(s, signal.SIG_IGN if s in ignored else signal.SIG_DFL)
        for s in received:  # a signal meant for the command: it would have had it before starting
            os.kill(os.getpid(), s)
        os.execv(sys.executable, fresh)
    child = reply["pid"]
    while received:
        send(child, received.pop(0))
    status = next_message(conn).get("status", 9)  # the server gone: as if killed
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.set_wakeup_fd(-1)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two can't be caught, nor need resetting
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
