"""The fork server the tests start their commands through (tests/forkserver.py) behaves as running the command
fresh does, in what the tests rely on: argv, working folder, environment, standard streams, exit status,
signals; a killed client takes its command with it; a command whose import-time environment differs from
every server's runs fresh; ``JUDGE_TEST_FORK=0`` runs it fresh.

The command is a probe module in the test's folder (``python -m probe``), so what it reports is the process
it ran in, not the judge."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import forkserver
import pytest

pytestmark = pytest.mark.slow  # the server imports torch and transformers once

PROBE = """
import json, os, signal, sys, time
mode = sys.argv[1]
if mode == "report":
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0], "var": os.environ.get("PROBE_VAR"),
                      "stdin": sys.stdin.read(), "torch_loaded": "torch" in sys.modules, "pid": os.getpid(),
                      "tests_on_path": any(p.endswith("/tests") for p in sys.path), "file": __file__,
                      "argv0": sys.argv[0], "exe": sys.executable, "ppid": os.getppid(), "rank": os.environ.get("RANK")}))
    print("to stderr", file=sys.stderr)
    sys.exit(int(os.environ.get("PROBE_EXIT", "3")))
if mode == "main":  # what the command's __main__ and environment hold
    import builtins
    print(json.dumps({"builtins": __builtins__ is builtins, "loader": type(__loader__).__name__,
                      "cached": globals().get("__cached__", "missing"), "annotations": globals().get("__annotations__"),
                      "file": __file__, "unbuffered": os.environ.get("PYTHONUNBUFFERED"),
                      "inductor": os.environ.get("TORCHINDUCTOR_CACHE_DIR"), "server_globals": "HEAVY" in globals()}))
    sys.exit(0)
if mode == "raise":
    raise ValueError("boom")
if mode == "unbuffered":  # no flush: only an unbuffered stdout shows it before the process ends
    print("ready")
    time.sleep(120)
if mode == "sigterm":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def probe(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "PROBE_VAR": "from the test"}
    forkserver.wait_ready(env)
    return tmp_path, env


def start(folder, env, *args, **kwargs) -> subprocess.Popen:
    cmd = forkserver.command("probe", *args, env=env)
    return subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)  # fmt: skip


def wait_line(proc: subprocess.Popen) -> None:
    assert proc.stdout.readline().strip() == "ready"


def test_a_forked_command_sees_what_a_fresh_one_sees(probe):
    folder, env = probe
    runs = {}
    for name, run_env in (("forked", env), ("fresh", {**env, "JUDGE_TEST_FORK": "0"})):
        proc = subprocess.Popen(forkserver.command("probe", "report", "x y", env=env), cwd=folder, env=run_env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        out, err = proc.communicate("given on stdin", timeout=120)
        got = json.loads(out)
        runs[name] = (proc.returncode, got, err, got["pid"] != proc.pid)
    (code, got, err, forked), (fresh_code, fresh, fresh_err, fresh_forked) = runs["forked"], runs["fresh"]
    assert forked and not fresh_forked  # the first was forked by the server, the second exec'd in place
    assert got["torch_loaded"] and not fresh["torch_loaded"]
    assert code == fresh_code == 3 and err == fresh_err == "to stderr\n"
    for key in ("argv", "cwd", "path0", "var", "stdin", "tests_on_path"):
        assert got[key] == fresh[key], key
    assert got["argv"] == ["report", "x y"] and got["path0"] == str(folder) and got["var"] == "from the test"
    assert not got["tests_on_path"]


def test_signals_reach_the_command_and_the_client_ends_as_it_did(probe):
    folder, env = probe
    handled = start(folder, env, "sigterm")
    wait_line(handled)
    assert forkserver.real_pid(handled.pid) != handled.pid
    handled.send_signal(signal.SIGTERM)
    assert handled.wait(timeout=30) == 7  # the command's own handler ran and chose the exit code
    plain = start(folder, env, "sleep")
    wait_line(plain)
    plain.send_signal(signal.SIGTERM)
    assert plain.wait(timeout=30) == -signal.SIGTERM  # killed by the signal, as a fresh process would be


def test_an_ignored_sigint_stays_ignored(probe):
    """A job started in the background ignores SIGINT, and so does the command it runs."""
    folder, env = probe
    proc = start(folder, env, "sleep", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    wait_line(proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(1)
    assert proc.poll() is None
    proc.terminate()
    assert proc.wait(timeout=30) == -signal.SIGTERM


def test_a_killed_client_takes_its_command_with_it(probe):
    folder, env = probe
    proc = start(folder, env, "sleep")
    wait_line(proc)
    command = forkserver.real_pid(proc.pid)
    assert command != proc.pid
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{command}") and "zombie" not in _state(command):
        assert time.monotonic() < deadline, "the command outlived its client"
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(line for line in f if line.startswith("State:")).lower()
    except (FileNotFoundError, StopIteration):
        return "zombie"


def test_another_import_time_environment_runs_fresh(probe):
    """A variable read while the libraries import (a thread count here) differs from every server's: the
    command is not forked from a parent that imported with another value."""
    folder, env = probe
    # A thread count; and DeepSpeed's accelerator, which a launch server reads when it imports deepspeed.
    for other in ({**env, "OMP_NUM_THREADS": "3" if env.get("OMP_NUM_THREADS") != "3" else "4"},
                  {**env, "DS_ACCELERATOR": "cpu"}):  # fmt: skip
        # The argv made for `env` (its server is listening), run with the other environment.
        proc = subprocess.Popen(forkserver.command("probe", "report", env=env), cwd=folder, env=other,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)  # fmt: skip
        out, _ = proc.communicate(timeout=120)
        got = json.loads(out)
        assert got["pid"] == proc.pid and not got["torch_loaded"]


def test_a_signal_while_the_command_is_forked_ends_the_command_not_the_server(probe):
    """A signal sent at once (before the server has answered with the command's pid) reaches the command,
    which ends by it; the server and the other commands it runs are untouched."""
    folder, env = probe
    bystander = start(folder, env, "sleep")
    wait_line(bystander)
    for _ in range(20):
        proc = start(folder, env, "sleep")
        time.sleep(0.005)  # the client is connecting or waiting for the fork
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    assert bystander.poll() is None  # the server did not stop (it would have killed every command)
    bystander.terminate()
    assert bystander.wait(timeout=30) == -signal.SIGTERM


def test_a_client_whose_server_goes_ends_as_killed(probe):
    folder, env = probe
    proc = start(folder, env, "sleep")
    wait_line(proc)
    forkserver.stop()  # the server ends, killing its commands
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert "Traceback" not in proc.stderr.read()


def test_killpg_of_a_new_session_reaches_what_the_command_started(probe):
    """A test that starts a command in a session of its own and stops it with killpg (the --help examples'
    servers) stops what the command started too, as with a fresh process."""
    folder, env = probe
    (folder / "spawner.py").write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    for fork in ("1", "0"):
        run_env = {**env, "JUDGE_TEST_FORK": fork} if fork == "0" else env
        proc = subprocess.Popen(forkserver.command("spawner", env=env), cwd=folder, env=run_env,
                                stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
        grandchild = int(proc.stdout.readline())
        assert (forkserver.real_pid(proc.pid) != proc.pid) == (fork == "1")
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
        deadline = time.monotonic() + 10
        while "zombie" not in _state(grandchild):
            assert time.monotonic() < deadline, f"fork={fork}: the command's child outlived the killpg"
            time.sleep(0.05)


def _report(cmd: str, folder, env) -> dict:
    out = subprocess.run(["bash", "-c", cmd], cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 3, out.stderr
    return json.loads(out.stdout)


def test_the_python_shim_runs_scripts_and_modules_as_python_does(probe, tmp_path):
    """``python3`` on a PATH (a shell script's steps) and torchrun's PYTHON_EXEC: ``SCRIPT ARGS``, ``-m MODULE``
    and ``-u`` forked, with what a fresh Python would have (argv, sys.path[0], __file__, the unbuffered
    streams), the shim as sys.executable; ``-c`` and a shim used with forking off run fresh."""
    folder, env = probe
    forked_env = forkserver.python_on_path(env)
    fresh_env = {**env, "JUDGE_TEST_FORK": "0"}
    shim = forkserver.python_shim()
    (tmp_path / "sub").mkdir()
    link = tmp_path / "sub" / "probe_link.py"  # sys.path[0] is the script's real folder, links resolved
    link.symlink_to(folder / "probe.py")
    for cmd in ("python3 sub/probe_link.py report 'x y'", "python3 -m probe report 'x y'",
                "python3 -u -m probe report 'x y'"):  # fmt: skip
        forked, fresh = (
            _report(cmd, folder, forked_env),
            _report(f"{sys.executable} {cmd[8:]}", folder, fresh_env),
        )
        assert forked["torch_loaded"] and not fresh["torch_loaded"], cmd
        for key in ("argv", "argv0", "cwd", "path0", "file", "var", "tests_on_path"):
            assert forked[key] == fresh[key], (cmd, key, forked[key], fresh[key])
        assert forked["exe"] == str(Path(shim).parent / "python3") and fresh["exe"] == sys.executable, cmd
    assert forked["argv"] == ["report", "x y"] and forked["path0"] == str(folder)
    c = subprocess.run([shim, "-c", "import sys; print('torch' in sys.modules, sys.executable)"], env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert c.stdout.split() == ["False", sys.executable]
    # -u: a line printed without a flush reaches the pipe while the command still runs; without it, not.
    buffered = {
        k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"
    }  # the same server: a run-time variable
    for flags in (["-u"], []):
        proc = subprocess.Popen([shim, *flags, "-m", "probe", "unbuffered"], cwd=folder, env=buffered,
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            if flags:
                assert proc.stdout.readline().strip() == "ready"
            else:
                time.sleep(2)
                assert not select.select([proc.stdout], [], [], 0)[0], "buffered stdout came before the end"
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_accelerate_launch_forks_the_launcher_and_its_workers(probe):
    """forkserver.launcher: accelerate launch's two processes (torchrun's ``$PYTHON_EXEC -u -m MODULE``) are
    forked from one server although the launcher gives each its own run-time variables (RANK, TORCHELASTIC_*,
    ACCELERATE_*); the launcher too."""
    folder, env = probe
    cmd, launch_env = forkserver.launcher(
        {**env, "OMP_NUM_THREADS": "1", "PROBE_EXIT": "0"}, "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
        "-m", "probe", "report", cwd=folder,
    )  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=folder, env=launch_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    launcher_forked = False
    while proc.poll() is None and not launcher_forked:  # its pid file lives as long as the command
        launcher_forked = forkserver.real_pid(proc.pid) != proc.pid
        time.sleep(0.05)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0 and launcher_forked, stderr[-3000:]
    reports = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in reports) == ["0", "1"], stdout + stderr[-3000:]
    for r in reports:
        assert r["torch_loaded"] and r["argv"] == ["report"] and r["path0"] == str(folder), r
    # A forked process's parent is its server, never the client that stands for it.
    servers = {p.pid for p in forkserver._servers.values()}
    assert {r["ppid"] for r in reports} <= servers, (reports, servers)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_forked_command_fails_and_reports_as_python_does(probe, tmp_path):
    """Through the shim, forked or not: a missing file, a folder to run, ``-m`` alone, a module that does not
    exist, a syntax error, an uncaught exception end with Python's own message and status (no traceback of
    the fork server's frames); the command's __main__ is its own (builtins module, loader, no server
    globals); ``-u`` does not leak into the environment; a variable the imports set keeps the command's
    value."""
    folder, env = probe
    env = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}  # the same server: a run-time variable
    forked_env = forkserver.python_on_path(env)
    shim = forkserver.python_shim()
    (folder / "bad_syntax.py").write_text("def (\n")
    (folder / "app").mkdir()
    (folder / "app" / "__main__.py").write_text("print('app main')\n")
    exes = (str(Path(shim).parent / "python3"), sys.executable)
    for args in (["missing.py"], ["app"], ["-m"], ["-m", "nosuchmod"], ["bad_syntax.py"], ["probe.py", "raise"],
                 ["-m", "probe", "raise"]):  # fmt: skip
        got = {}
        for how, cmd, run_env in (("forked", ["python3", *args], forked_env),
                                  ("fresh", [sys.executable, *args], {**env, "JUDGE_TEST_FORK": "0"})):  # fmt: skip
            out = subprocess.run(cmd, cwd=folder, env=run_env, capture_output=True, text=True, timeout=120)
            err = out.stderr
            for exe in exes:
                err = err.replace(exe, "PYTHON")
            got[how] = (out.returncode, out.stdout, err)
        assert got["forked"] == got["fresh"], (args, got)
        assert "forkserver.py" not in got["forked"][2] and "forkclient.py" not in got["forked"][2], args
    for cmd in (["python3", "probe.py", "main"], ["python3", "-u", "-m", "probe", "main"]):
        out = subprocess.run(cmd, cwd=folder, env={**forked_env, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind")},
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        main = json.loads(out.stdout)
        assert main["builtins"] and not main["server_globals"] and main["annotations"] == {}, (cmd, main)
        assert main["loader"] == "SourceFileLoader" and main["file"] == str(folder / "probe.py"), (cmd, main)
        assert (
            main["cached"] == (None if cmd[1] == "probe.py" else main["cached"])
            and main["unbuffered"] is None
        )
        assert cmd[1] == "probe.py" or main["cached"].endswith(".pyc"), (cmd, main)  # as `python -m` has it
        assert main["inductor"] == str(tmp_path / "ind"), (cmd, main)
